"""A scheduling session: the snapshot being planned over, the callbacks plugins registered, and
the decisions taken (Volcano's framework.Session).

Plugins register callbacks in tier order; the session combines them the way Volcano does:

- order functions (job, queue, task, victim order): the first enabled plugin, tier by tier, that
  does not answer 0 decides; ties fall back to creation time then key for jobs, the name for
  queues, the key for tasks, and the reverse task order then the key for victims;
- predicates: every plugin must pass; node order: scores are summed;
- job ready / allocatable: every plugin must agree; overused: any plugin may say so;
- pipelined / enqueueable / starving: votes (+1 permit, 0 abstain, -1 reject) — a reject wins, a
  permit in a tier decides that tier, abstentions fall through to the next tier;
- preemptable: within a tier, the intersection of the victims every plugin allows; the first
  tier that registered any such function decides;
- reclaimable: the intersection over every tier. Volcano lets the first tier decide here too,
  so with gang in the first tier proportion is never asked whether a victim's queue may lose
  the task, and two queues below their deserved shares can reclaim from each other forever;
  requiring every tier's consent is what makes reclaim settle (docs/compatibility.md);
- preemptive (may a queue take from others for these tasks at all): every plugin must agree.

Everything a session decides lands in ``result`` (binds, evictions, PodGroup status, queue
allocation, events); the process around the session performs the I/O.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, TypeVar

from caldera.api.resources import Resources
from caldera.api.volcano import PodGroupCondition, PodGroupStatus
from caldera.api.why import WaitRecord
from scheduler.api.settled import SettledJobs
from scheduler.api.types import (
    ClusterInfo,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    generations_from_now,
)
from scheduler.framework.plugin import PluginOption
from scheduler.framework.statement import Statement

if TYPE_CHECKING:
    from scheduler.framework.hypernodes import HyperNodeState

T = TypeVar("T")
_NOTHING_SETTLED: Mapping[str, str] = {}


OrderFn = Callable[[T, T], int]  # <0: left first, >0: right first, 0: no opinion
PredicateFn = Callable[[TaskInfo, NodeInfo], str | None]  # None: fits; else the reason
NodeOrderFn = Callable[[TaskInfo, NodeInfo], float]
JobPredicate = Callable[[JobInfo], bool]
VoteFn = Callable[[JobInfo], int]  # +1 permit, 0 abstain, -1 reject
VictimsFn = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]
# A victim function's promise about whole jobs: False means the function never returns a task
# of that job for this preemptor, whatever the candidates (so preempt and reclaim may skip the
# job's nodes without asking); True promises nothing.
JobScreenFn = Callable[[TaskInfo, JobInfo], bool]
QueuePredicate = Callable[[QueueInfo], bool]
AllocatableFn = Callable[[QueueInfo, TaskInfo], bool]
PreemptiveFn = Callable[[QueueInfo, Sequence[TaskInfo]], bool]
JobValidFn = Callable[[JobInfo], "ValidateResult | None"]
EventFn = Callable[[TaskInfo], None]


@dataclass(frozen=True)
class ValidateResult:
    ok: bool
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Bind:
    task: TaskInfo
    node: str


@dataclass(frozen=True)
class Evict:
    task: TaskInfo
    reason: str


@dataclass(frozen=True)
class EventRecord:
    """A Kubernetes Event the process should record."""

    kind: str  # "PodGroup" or "Pod"
    namespace: str
    name: str
    type: str  # Normal / Warning
    reason: str
    message: str


@dataclass(frozen=True)
class QueueFigures:
    """What proportion knew of a queue when the session closed, for the metrics (Volcano's
    ``queue_request_*``, ``queue_inqueue_*``, ``queue_capacity_*``, ``queue_real_capacity_*``,
    ``queue_weight`` and ``queue_overused``)."""

    weight: int
    request: Resources
    inqueue: Resources
    real_capability: Resources
    capability: Resources | None  # None: unlimited
    overused: bool


@dataclass(frozen=True)
class PlacedJob:
    """A job whose tasks got binds in a session: what Volcano's per-job scheduling latency
    series are labelled with, and the PodGroup's creation they are measured from."""

    namespace: str
    name: str  # the PodGroup's
    queue: str
    created: dt.datetime


@dataclass
class SessionResult:
    """Every decision of one session; the process turns them into API calls."""

    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    podgroup_status: dict[str, PodGroupStatus] = field(default_factory=dict)  # by job key
    podgroup_phase_inqueue: list[str] = field(default_factory=list)  # job keys enqueued
    queue_allocated: dict[str, Resources] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)  # task key -> fit message
    # Why a job waits (caldera.api.why), by job key: written only when the finding changed,
    # and kept back (counted in why_deferred) while the last one is younger than its refresh.
    podgroup_why: dict[str, WaitRecord] = field(default_factory=dict)
    why_deferred: int = 0
    # The HyperNode each job placed under one now sits in, by job key, when it changed (the
    # PodGroup's volcano.sh/job-allocated-hypernode annotation).
    podgroup_hypernode: dict[str, str] = field(default_factory=dict)
    events: list[EventRecord] = field(default_factory=list)
    # Figures for the process's metrics (plugins fill theirs when the session closes).
    action_seconds: dict[str, float] = field(default_factory=dict)
    plugin_seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # (plugin, phase)
    queue_deserved: dict[str, Resources] = field(default_factory=dict)
    queue_share: dict[str, float] = field(default_factory=dict)
    queue_figures: dict[str, QueueFigures] = field(default_factory=dict)
    job_share: dict[str, float] = field(default_factory=dict)
    namespace_share: dict[str, float] = field(default_factory=dict)
    # Jobs whose gang is not ready after the session (PodGroup Pending, Inqueue or Unknown),
    # every one of them, not only those whose status changed; and the jobs that got binds.
    unready_jobs: list[str] = field(default_factory=list)
    placed_jobs: dict[str, PlacedJob] = field(default_factory=dict)
    queue_capability: dict[str, Resources] = field(default_factory=dict)  # capacity
    queue_real_capability: dict[str, Resources] = field(default_factory=dict)  # capacity
    # Seconds after the session's clock at which a plugin would decide differently with
    # nothing else changed (sla: a job's waiting time runs out); None: never.
    revisit_after: float | None = None

    def revisit(self, seconds: float) -> None:
        """Ask for a session ``seconds`` from now even if nothing changes (the earliest ask
        wins)."""
        if self.revisit_after is None or seconds < self.revisit_after:
            self.revisit_after = max(seconds, 0.0)

    def bind(self, task: TaskInfo, node: str) -> None:
        self.binds.append(Bind(task, node))

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.evictions.append(Evict(task, reason))


@dataclass(slots=True)
class _Registered:
    tier: int
    plugin: str
    fn: Any
    screen: JobScreenFn | None = None  # victim functions only
    key: Callable[[Any], Any] | None = None  # order functions: the same order as a sort key
    # Allocatable functions: what the answers read of the session beyond the task
    # (``Session.allocatable_state``).
    state: Callable[[Any], object] | None = None


def _job_key(funcs: list[Callable[[JobInfo], Any]]) -> Callable[[JobInfo], tuple[Any, ...]]:
    """The plugins' keys of a job, then its creation and key, as one tuple (spelled out for up
    to three plugins, Volcano's default configuration: taken for every waiting job each
    session)."""
    if len(funcs) == 1:
        (a,) = funcs
        return lambda job: (a(job), job.creation, job.key)
    if len(funcs) == 2:
        a, b = funcs
        return lambda job: (a(job), b(job), job.creation, job.key)
    if len(funcs) == 3:
        a, b, c = funcs
        return lambda job: (a(job), b(job), c(job), job.creation, job.key)
    return lambda job: (*[key(job) for key in funcs], job.creation, job.key)


class Session:
    """One scheduling cycle over a snapshot."""

    def __init__(self, cluster: ClusterInfo, tiers: Sequence[Sequence[PluginOption]]) -> None:
        self.cluster = cluster
        self.jobs = cluster.jobs
        self.nodes = cluster.nodes
        self.queues = cluster.queues
        self.now = cluster.now
        self.tiers = tiers
        self._options = {opt.name: (i, opt) for i, tier in enumerate(tiers) for opt in tier}
        self._fns: dict[str, list[_Registered]] = {}
        # Each kind's functions grouped by tier, in tier order (``_vote``), kept until the next
        # registration.
        self._tiers: dict[str, list[list[_Registered]]] = {}
        self.result = SessionResult()
        self.total_resource = cluster.total_allocatable()
        # The PodGroup condition a plugin (gang) set for a job in this session; and the one
        # every settled job has (gang's Scheduled), set once rather than per settled job.
        self.job_conditions: dict[str, PodGroupCondition] = {}
        self.settled_condition: PodGroupCondition | None = None
        # What plugins and actions found about why a job waits: (stage, text) by job key,
        # stage a caldera.api.why.WaitStage or DETAIL (scheduler.why composes the record).
        self.wait_notes: dict[str, list[tuple[str, str]]] = {}
        # Whether the session explains itself: wait records (``scheduler.why``), the notes
        # they are made of, and Events. The simulator, which writes none, turns it off.
        self.explain = True
        # Whether the session reports per-job figures for the process's metrics (drf's job
        # shares, ``SessionResult.job_share``); the simulator, which exports none, turns it off.
        self.job_figures = True
        # The actions of this session's configuration (allocate enqueues by itself when
        # "enqueue" is not among them).
        self.configured_actions: tuple[str, ...] = ()
        # Every node whose tasks change in this session, in order (see NodeInfo.changes), and
        # every job one of whose tasks changed status (see JobInfo.changes).
        self.node_changes: list[str] = []
        self.job_changes: set[str] = set()
        # Every state a node is in that is named by a smaller generation was there before the
        # session (``changed_nodes``).
        self.first_generation = generations_from_now()
        if not cluster.logs_attached:
            for node in cluster.nodes.values():
                node.changes = cluster.node_log
            for job in cluster.jobs.values():
                job.changes = cluster.job_log
        cluster.node_log.note = self.node_changes.append
        cluster.job_log.note = self.job_changes.add
        if cluster.verdicts is not None:  # verdicts carried over from earlier sessions
            cluster.verdicts.begin(tiers, len(cluster.nodes))
        # Settled jobs carried over (scheduler.api.settled): only with the live snapshot's
        # trail, and only under the configuration that settled them.
        trail = cluster.job_trail
        if trail is not None and (cluster.settled is None or cluster.settled.tiers != tiers):
            cluster.settled = SettledJobs(tiers, trail.end)
        # Jobs gang's close found ready, nothing waiting, their PodGroup already saying so:
        # the session's close settles those whose status and why record stay as they are.
        self.settling: set[str] = set()
        self._unsettled: tuple[tuple[int, int], list[JobInfo]] | None = None
        # Set by the network-topology-aware plugin when it opens: how HyperNodes are scored
        # (scheduler.framework.hypernodes); None leaves every job topology-blind.
        self.topology: HyperNodeState | None = None

    def job_condition(self, key: str) -> PodGroupCondition | None:
        """The PodGroup condition the session's plugins set for the job, None when none did."""
        condition = self.job_conditions.get(key)
        if condition is None and self.settled_condition is not None and key in self.settled():
            return self.settled_condition
        return condition

    def settled(self) -> Mapping[str, str]:
        """The settled jobs as of now (``scheduler.api.settled``), by key, with the phase their
        PodGroup keeps: none without the live snapshot's trail."""
        kept, trail = self.cluster.settled, self.cluster.job_trail
        if kept is None or trail is None:
            return _NOTHING_SETTLED
        return kept.refresh(trail)

    def unsettled_jobs(self) -> list[JobInfo]:
        """The jobs that are not settled (``settled``), in the snapshot's order: what each pass
        over every job looks at. Kept while no job settles or is unsettled (the jobs a session
        changes are unsettled already), so the passes of a session share one list; when jobs
        only settled since, the kept list is filtered rather than every job looked at."""
        settled = self.settled()
        kept_settled = self.cluster.settled
        version = (
            -1 if settled is _NOTHING_SETTLED or kept_settled is None else kept_settled.version
        )
        mark = (version, len(self.jobs))
        kept = self._unsettled
        if kept is not None and kept[0] == mark:
            return kept[1]
        if (
            kept is not None
            and kept_settled is not None
            and version != -1
            and kept[0][0] >= kept_settled.unsettled_version
            and kept[0][1] == mark[1]
        ):
            # Jobs only settled since, none came or went: the kept list less those, in its
            # order.
            jobs = [job for job in kept[1] if job.key not in settled]
        elif (
            kept_settled is not None
            and version != -1
            and (keys := kept_settled.unsettled_keys(self.jobs)) is not None
        ):
            # Kept across sessions: a handful, where the snapshot's jobs are mostly settled. In
            # the snapshot's order, which is the order its JobInfos were made in
            # (``JobInfo.serial``).
            jobs = sorted(map(self.jobs.__getitem__, keys), key=attrgetter("serial"))
        else:
            # Filtered and looked up in C: the snapshot's jobs are mostly settled.
            unsettled = itertools.filterfalse(settled.__contains__, self.jobs)
            jobs = list(map(self.jobs.__getitem__, unsettled))
            if kept_settled is not None and version != -1:
                kept_settled.track({job.key for job in jobs})
        self._unsettled = (mark, jobs)
        return jobs

    def changed_nodes(self) -> set[str]:
        """The nodes the session left changed: those it touched, but for those that every
        statement on them discarded gave their state back (``NodeInfo.restore``) and those
        gone."""
        nodes, first = self.nodes, self.first_generation
        changed = set()
        for name in self.node_changes:
            node = nodes.get(name)
            if node is None or node.generation >= first:
                changed.add(name)
        return changed

    def close(self) -> None:
        """Drop the plugins' callbacks once the session is over: they and the session refer to
        each other (bound methods, closures over the session), a cycle only the cyclic garbage
        collector would free, with everything the plugins derived for the session."""
        self._fns.clear()
        self._tiers.clear()

    def settle(self, key: str, phase: str) -> None:
        """The session's close found the job settled (``settled``), its PodGroup in ``phase``."""
        kept = self.cluster.settled
        if kept is not None and self.cluster.job_trail is not None:
            kept.refresh(self.cluster.job_trail)
            kept.settle(key, phase)

    def plugin_switch(self, plugin: str, switch: str, default: bool) -> bool:
        """A switch of ``plugin`` as the configuration sets it, ``default`` when it does not:
        for switches that are off unless set (Volcano's enableHierarchy)."""
        entry = self._options.get(plugin)
        return default if entry is None else entry[1].switches.get(switch, default)

    # ---- registration -----------------------------------------------------------------------

    def _add(
        self,
        kind: str,
        switch: str,
        plugin: str,
        fn: Any,
        screen: JobScreenFn | None = None,
        key: Callable[[Any], Any] | None = None,
        state: Callable[[Any], object] | None = None,
    ) -> None:
        entry = self._options.get(plugin)  # (a default built only when needed: sessions
        # register some forty callbacks each)
        tier, option = entry if entry is not None else (len(self.tiers), PluginOption(plugin))
        if option.enabled(switch):
            self._fns.setdefault(kind, []).append(_Registered(tier, plugin, fn, screen, key, state))
            self._tiers.pop(kind, None)

    def add_job_order_fn(
        self, plugin: str, fn: OrderFn[JobInfo], *, key: Callable[[JobInfo], Any] | None = None
    ) -> None:
        """``key``, when given, must sort as ``fn`` orders and read only what changes with the
        job itself (its tasks, its own share): ``job_order_key`` then takes each job's key once,
        when the job enters a sort or a heap, instead of calling ``fn`` per comparison."""
        self._add("job_order", "enableJobOrder", plugin, fn, key=key)

    def add_queue_order_fn(
        self,
        plugin: str,
        fn: OrderFn[QueueInfo],
        *,
        key: Callable[[QueueInfo], Any] | None = None,
    ) -> None:
        """``key``, when given, must sort as ``fn`` orders and read only what changes with the
        queue itself (its jobs' allocations): ``queue_order_key`` then takes a queue's key
        when it enters a sort or a heap (see ``job_order_key``)."""
        self._add("queue_order", "enableQueueOrder", plugin, fn, key=key)

    def add_task_order_fn(
        self, plugin: str, fn: OrderFn[TaskInfo], *, key: Callable[[TaskInfo], Any] | None = None
    ) -> None:
        """``key``, when given, must sort as ``fn`` orders (``fn(a, b)`` is the sign of
        ``key(a)`` against ``key(b)``) and read only the task, what stays fixed for a
        TaskInfo's life: with keys for every task order function, sorting tasks compares
        tuples instead of calling each function per comparison, and a job's tasks sorted in
        one session stay sorted in the next (``task_order_signature``)."""
        self._add("task_order", "enableTaskOrder", plugin, fn, key=key)

    def add_victim_order_fn(self, plugin: str, fn: OrderFn[TaskInfo]) -> None:
        self._add("victim_order", "enabledVictim", plugin, fn)

    def add_predicate_fn(self, plugin: str, fn: PredicateFn) -> None:
        self._add("predicate", "enablePredicate", plugin, fn)

    def add_node_order_fn(self, plugin: str, fn: NodeOrderFn) -> None:
        self._add("node_order", "enableNodeOrder", plugin, fn)

    def add_job_ready_fn(self, plugin: str, fn: JobPredicate) -> None:
        self._add("job_ready", "enableJobReady", plugin, fn)

    def add_job_pipelined_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add("job_pipelined", "enableJobPipelined", plugin, fn)

    def add_job_valid_fn(self, plugin: str, fn: JobValidFn) -> None:
        self._add("job_valid", "enableJobValid", plugin, fn)

    def add_job_enqueueable_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add("job_enqueueable", "enableJobEnqueued", plugin, fn)

    def add_job_enqueued_fn(self, plugin: str, fn: Callable[[JobInfo], None]) -> None:
        self._add("job_enqueued", "enableJobEnqueued", plugin, fn)

    def add_job_starving_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add("job_starving", "enableJobStarving", plugin, fn)

    def add_preemptable_fn(
        self, plugin: str, fn: VictimsFn, screen: JobScreenFn | None = None
    ) -> None:
        """``screen``, when given, must keep its promise (see ``JobScreenFn``)."""
        self._add("preemptable", "enablePreemptable", plugin, fn, screen)

    def add_reclaimable_fn(
        self, plugin: str, fn: VictimsFn, screen: JobScreenFn | None = None
    ) -> None:
        self._add("reclaimable", "enableReclaimable", plugin, fn, screen)

    def add_preemptive_fn(self, plugin: str, fn: PreemptiveFn) -> None:
        self._add("preemptive", "enablePreemptive", plugin, fn)

    def add_overused_fn(self, plugin: str, fn: QueuePredicate) -> None:
        self._add("overused", "enabledOverused", plugin, fn)

    def add_allocatable_fn(
        self, plugin: str, fn: AllocatableFn, *, state: Callable[[QueueInfo], object] | None = None
    ) -> None:
        """``state``, when given, names what ``fn`` reads of the session for a queue beyond the
        task, its allocate handler keeping it: equal states (``==``) give equal answers to
        equal pods, and after equal allocations (``allocatable_state``)."""
        self._add("allocatable", "enabledAllocatable", plugin, fn, state=state)

    def add_allocate_handler(
        self, plugin: str, on_allocate: EventFn, on_deallocate: EventFn
    ) -> None:
        """Called as tasks are allocated or released in the session (drf and proportion keep
        their shares current this way)."""
        self._fns.setdefault("allocate_handlers", []).append(
            _Registered(0, plugin, (on_allocate, on_deallocate))
        )

    def _registered(self, kind: str) -> list[_Registered]:
        return self._fns.get(kind, [])

    # ---- combination ------------------------------------------------------------------------

    def _order(self, kind: str, left: T, right: T) -> int:
        for reg in self._registered(kind):
            answer = int(reg.fn(left, right))
            if answer:
                return answer
        return 0

    def job_order_key(self) -> Callable[[JobInfo], Any]:
        """A sort key putting jobs in the session's job order.

        With keys for every job order function, a tuple (the plugins' keys, creation, key).
        It is taken when a job enters a heap, where comparing calls the functions at each
        comparison: the same order, since a job's key changes only when the job itself does,
        and the actions change only the job whose turn it is, out of the heap (allocate,
        enqueue). Otherwise, the functions compared at comparison time, as Volcano's
        priority queues do."""
        keys = [reg.key for reg in self._registered("job_order")]
        if all(key is not None for key in keys):
            return _job_key([key for key in keys if key is not None])
        return self.job_order_compare_key()

    def job_order_compare_key(self) -> Callable[[JobInfo], Any]:
        """``job_order_key`` comparing with the job order functions at each comparison."""

        def compare(a: JobInfo, b: JobInfo) -> int:
            answer = self._order("job_order", a, b)
            if answer:
                return answer
            if a.creation != b.creation:
                return -1 if a.creation < b.creation else 1
            return -1 if a.key < b.key else (1 if a.key > b.key else 0)

        return functools.cmp_to_key(compare)

    def queue_order_key(self) -> Callable[[QueueInfo], Any]:
        """A sort key putting queues in the session's queue order, then by name: with keys for
        every queue order function, a tuple taken once per queue (an action changes only the
        queue whose turn it is, out of its heap); otherwise the functions compared at each
        comparison."""
        keys = [reg.key for reg in self._registered("queue_order")]
        if all(key is not None for key in keys):
            funcs = [key for key in keys if key is not None]
            return lambda queue: (*[key(queue) for key in funcs], queue.name)

        def compare(a: QueueInfo, b: QueueInfo) -> int:
            return self._order("queue_order", a, b) or ((a.name > b.name) - (a.name < b.name))

        return functools.cmp_to_key(compare)

    def task_order_signature(self) -> tuple[str, ...] | None:
        """What names the task order across sessions: the plugins whose task order functions
        give it, when each has a key (a function of the task alone); None otherwise."""
        registered = self._registered("task_order")
        if any(reg.key is None for reg in registered):
            return None
        return tuple(reg.plugin for reg in registered)

    def task_order_key(self) -> Callable[[TaskInfo], Any]:
        keys = [reg.key for reg in self._registered("task_order")]
        if all(key is not None for key in keys):
            # The first function that tells two tasks apart decides, then the task's key:
            # exactly the order of tuples.
            funcs = [key for key in keys if key is not None]
            if len(funcs) == 1:
                only = funcs[0]
                return lambda task: (only(task), task.key)
            return lambda task: (*[key(task) for key in funcs], task.key)

        def compare(a: TaskInfo, b: TaskInfo) -> int:
            return self._order("task_order", a, b) or ((a.key > b.key) - (a.key < b.key))

        return functools.cmp_to_key(compare)

    def victim_order_key(self) -> Callable[[TaskInfo], Any]:
        """Victims in the order they should be evicted (the reverse of task order by default)."""

        def compare(a: TaskInfo, b: TaskInfo) -> int:
            answer = self._order("victim_order", a, b)
            if answer:
                return answer
            return -self._order("task_order", a, b) or ((a.key > b.key) - (a.key < b.key))

        return functools.cmp_to_key(compare)

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """None if ``task`` may run on ``node``, else the first reason it may not."""
        for reg in self._registered("predicate"):
            reason: str | None = reg.fn(task, node)
            if reason:
                return reason
        return None

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """The plugins' scores summed in registration order (a loop, not sum() over a
        generator: asked per pod and node looked at)."""
        score = 0.0
        for reg in self._registered("node_order"):
            score += float(reg.fn(task, node))
        return score

    def job_ready(self, job: JobInfo) -> bool:
        # Loops, not all()/any(), here and below: asked per pod placed, and a loop without a
        # generator takes a fifth of the time.
        for reg in self._registered("job_ready"):  # noqa: SIM110
            if not reg.fn(job):
                return False
        return True

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for reg in self._registered("job_valid"):
            result: ValidateResult | None = reg.fn(job)
            if result is not None and not result.ok:
                return result
        return None

    def _by_tier(self, kind: str) -> list[list[_Registered]]:
        grouped = self._tiers.get(kind)
        if grouped is None:
            by_tier: dict[int, list[_Registered]] = {}
            for reg in self._registered(kind):
                by_tier.setdefault(reg.tier, []).append(reg)
            grouped = self._tiers[kind] = [by_tier[tier] for tier in sorted(by_tier)]
        return grouped

    def _vote(self, kind: str, job: JobInfo, default: bool) -> bool:
        for tier in self._by_tier(kind):
            permitted = False
            for reg in tier:
                vote = int(reg.fn(job))
                if vote < 0:
                    return False
                permitted = permitted or vote > 0
            if permitted:
                return True
        return default

    def job_pipelined(self, job: JobInfo) -> bool:
        return self._vote("job_pipelined", job, default=True)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote("job_enqueueable", job, default=True)

    def job_starving(self, job: JobInfo) -> bool:
        return self._vote("job_starving", job, default=False)

    def job_enqueued(self, job: JobInfo) -> None:
        for reg in self._registered("job_enqueued"):
            reg.fn(job)

    @staticmethod
    def _intersect(
        registered: Iterable[_Registered],
        preemptor: TaskInfo,
        candidates: Sequence[TaskInfo],
        *,
        narrowing: bool,
    ) -> list[TaskInfo]:
        """The candidates every function allows. Each function is asked about all the
        candidates (Volcano's), or with ``narrowing`` only about those still allowed, so that
        plugins judging cumulatively (gang's spare pods, proportion's queue totals) count
        only tasks that may really go."""
        chosen = list(candidates)
        for reg in registered:
            if not chosen:
                break
            allowed: list[TaskInfo] = reg.fn(preemptor, chosen if narrowing else candidates)
            keep = {t.uid for t in allowed}
            chosen = [t for t in chosen if t.uid in keep]
        return chosen

    def _deciding(self, kind: str) -> list[_Registered]:
        """The victim functions whose answers are intersected: for preemptable the first tier
        that registered any (Volcano's), for reclaimable every tier."""
        registered = self._registered(kind)
        if kind != "preemptable" or not registered:
            return registered
        first = min(reg.tier for reg in registered)
        return [reg for reg in registered if reg.tier == first]

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The victims the first tier with a preemptable function allows (Volcano's)."""
        deciding = self._deciding("preemptable")
        if not deciding:
            return []
        return self._intersect(deciding, preemptor, candidates, narrowing=False)

    def victim_jobs(self, kind: str, preemptor: TaskInfo) -> Callable[[JobInfo], bool]:
        """For ``kind`` "preemptable" or "reclaimable": a test that is False for a job none
        of whose tasks can be a victim of ``preemptor``, because a deciding function's screen
        rules the job out (the intersection then cannot hold its tasks). With no deciding
        function there are no victims at all."""
        deciding = self._deciding(kind)
        if not deciding:
            return lambda job: False
        screens = [reg.screen for reg in deciding if reg.screen is not None]

        def may_give(job: JobInfo) -> bool:
            return all(screen(preemptor, job) for screen in screens)

        return may_give

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The victims every tier's reclaimable functions allow (see the module docstring)."""
        deciding = self._deciding("reclaimable")
        if not deciding:
            return []
        return self._intersect(deciding, preemptor, candidates, narrowing=True)

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        """Whether ``queue`` may take resources from other queues for ``tasks``."""
        return all(reg.fn(queue, tasks) for reg in self._registered("preemptive"))

    def overused(self, queue: QueueInfo) -> bool:
        for reg in self._registered("overused"):  # noqa: SIM110
            if reg.fn(queue):
                return True
        return False

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for reg in self._registered("allocatable"):  # noqa: SIM110
            if not reg.fn(queue, task):
                return False
        return True

    # ---- state changes ----------------------------------------------------------------------

    def statement(self) -> Statement:
        return Statement(self)

    def notify_allocate(self, task: TaskInfo) -> None:
        for reg in self._registered("allocate_handlers"):
            reg.fn[0](task)

    def notify_deallocate(self, task: TaskInfo) -> None:
        for reg in self._registered("allocate_handlers"):
            reg.fn[1](task)

    def allocatable_state(self, queue: QueueInfo) -> tuple[object, ...] | None:
        """What every allocatable function reads of the session for ``queue`` (see
        ``add_allocatable_fn``); None when one does not say."""
        states = []
        for reg in self._registered("allocatable"):
            if reg.state is None:
                return None
            states.append(reg.state(queue))
        return tuple(states)

    def answering_handlers(self) -> list[tuple[Callable[[TaskInfo], None], ...]]:
        """The allocate handlers (allocate, deallocate) of the plugins that answer
        ``allocatable``: what to tell to ask them again as if pods were allocated, where each
        plugin's answers read only its own state."""
        answering = {reg.plugin for reg in self._registered("allocatable")}
        return [reg.fn for reg in self._registered("allocate_handlers") if reg.plugin in answering]

    def note_wait(self, job: str, stage: str, text: str) -> None:
        """Note why ``job`` waits (see ``scheduler.why``); repeated notes are kept once."""
        if not self.explain:
            return
        notes = self.wait_notes.setdefault(job, [])
        if (stage, text) not in notes:
            notes.append((stage, text))

    def victim_screens(self, kind: str) -> list[tuple[str, JobScreenFn]]:
        """The job screens of ``kind``'s deciding victim functions, by plugin (to tell a
        user which plugin rules a job out)."""
        return [(reg.plugin, reg.screen) for reg in self._deciding(kind) if reg.screen is not None]

    def record_event(
        self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str
    ) -> None:
        if self.explain:
            self.result.events.append(EventRecord(kind, namespace, name, type_, reason, message))

    def sorted_jobs(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        return sorted(jobs, key=self.job_order_key())
