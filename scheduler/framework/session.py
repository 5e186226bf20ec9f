"""A scheduling session: the snapshot being planned over, the callbacks plugins registered, and
the decisions taken (Volcano's framework.Session).

Plugins register callbacks in tier order; the session combines them the way Volcano does:

- order functions (job, queue, task, victim order): the first enabled plugin, tier by tier, that
  does not answer 0 decides; ties fall back to creation time then key for jobs, the name for
  queues, the key for tasks; victims without a victim order function go in Volcano's
  BuildVictimsPriorityQueue order (``victim_order_key``): across queues the reverse of queue
  order (or a victim queue order function), within a queue the reverse of job order, then of
  task order;
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
- preemptive (may a queue take from others for these tasks at all): every plugin must agree;
- victim tasks (the shuffle action's): the union of what the plugins of the first tier that
  proposes any propose, as Volcano's; then every victim-tasks screen (pdb) keeps what it allows.
  Volcano has no screens: pdb's victim function is one of the union, which alone would propose
  every labelled pod its budgets allow (docs/compatibility.md).

Callbacks are registered by kind (``CallbackKind``, each with its Volcano switch) through the
typed ``add_*_fn`` methods; what makes them fast across sessions (sort keys, victim screens,
memos, settled jobs) is the incremental layer, ``self.incremental``
(scheduler.framework.incremental), which a plugin opts into with ``add_speedups``.

Everything a session decides lands in ``result`` (binds, evictions, PodGroup status, queue
allocation, events); the process around the session performs the I/O.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from caldera.api.gates import only_queue_gate, opted_in
from caldera.api.resources import Resources
from caldera.api.volcano import PodGroupCondition, PodGroupStatus
from caldera.api.why import WaitRecord
from scheduler.api.dra.view import ClaimPlan
from scheduler.api.feasible_nodes import FeasibleNodes, Rotation
from scheduler.api.types import (
    ClusterInfo,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
    generations_from_now,
)
from scheduler.framework.incremental import Incremental, JobScreenFn, Speedups, job_key_tuple
from scheduler.framework.plugin import CallbackKind, PluginOption
from scheduler.framework.statement import Statement
from scheduler.visibility.order import PendingEntry

if TYPE_CHECKING:
    from scheduler.framework.hypernodes import HyperNodeState

T = TypeVar("T")
# The kinds, bound once: an Enum member read off its class costs several dict lookups, and the
# session looks its callbacks up by kind per pod and node.
_JOB_ORDER = CallbackKind.JOB_ORDER
_QUEUE_ORDER = CallbackKind.QUEUE_ORDER
_TASK_ORDER = CallbackKind.TASK_ORDER
_VICTIM_ORDER = CallbackKind.VICTIM_ORDER
_VICTIM_QUEUE_ORDER = CallbackKind.VICTIM_QUEUE_ORDER
_PREDICATE = CallbackKind.PREDICATE
_NODE_ORDER = CallbackKind.NODE_ORDER
_BATCH_NODE_ORDER = CallbackKind.BATCH_NODE_ORDER
_CROSS_NODE = CallbackKind.CROSS_NODE
_JOB_READY = CallbackKind.JOB_READY
_JOB_VALID = CallbackKind.JOB_VALID
_JOB_PIPELINED = CallbackKind.JOB_PIPELINED
_JOB_ENQUEUEABLE = CallbackKind.JOB_ENQUEUEABLE
_JOB_ENQUEUED = CallbackKind.JOB_ENQUEUED
_JOB_STARVING = CallbackKind.JOB_STARVING
_PREEMPTABLE = CallbackKind.PREEMPTABLE
_RECLAIMABLE = CallbackKind.RECLAIMABLE
_PREEMPTIVE = CallbackKind.PREEMPTIVE
_OVERUSED = CallbackKind.OVERUSED
_ALLOCATABLE = CallbackKind.ALLOCATABLE
_ALLOCATE_HANDLER = CallbackKind.ALLOCATE_HANDLER
_VICTIM_TASKS = CallbackKind.VICTIM_TASKS
_VICTIM_TASKS_SCREEN = CallbackKind.VICTIM_TASKS_SCREEN


OrderFn = Callable[[T, T], int]  # <0: left first, >0: right first, 0: no opinion
# Which of two victims' queues loses first to the preemptor's queue (the third argument).
VictimQueueOrderFn = Callable[["QueueInfo", "QueueInfo", "QueueInfo"], int]
PredicateFn = Callable[[TaskInfo, NodeInfo], str | None]  # None: fits; else the reason
NodeOrderFn = Callable[[TaskInfo, NodeInfo], float]
# Scores (node name -> score) of a task on the nodes given, those that passed the predicates.
BatchNodeOrderFn = Callable[[TaskInfo, Sequence[NodeInfo]], Mapping[str, float]]
CrossNodeFn = Callable[[TaskInfo], bool]
JobPredicate = Callable[[JobInfo], bool]
VoteFn = Callable[[JobInfo], int]  # +1 permit, 0 abstain, -1 reject
VictimsFn = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]
QueuePredicate = Callable[[QueueInfo], bool]
AllocatableFn = Callable[[QueueInfo, TaskInfo], bool]
PreemptiveFn = Callable[[QueueInfo, Sequence[TaskInfo]], bool]
JobValidFn = Callable[[JobInfo], "ValidateResult | None"]
EventFn = Callable[[TaskInfo], None]
VictimTasksFn = Callable[[Sequence[TaskInfo]], list[TaskInfo]]


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


@dataclass(frozen=True)
class ReservationFigure:
    """A gang's reservation as the session left it, for the metrics and the simulator's
    report (``scheduler.plugins.reservation``)."""

    job: str  # the job's key
    queue: str
    nodes: int
    need: Resources  # what the gang's pods take on the reserved nodes
    held: Resources  # of that, what is idle there now, kept from other pods
    age_seconds: float  # since the gang first reserved
    start_seconds: float  # until its expected start


@dataclass
class SessionResult:
    """Every decision of one session; the process turns them into API calls."""

    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    podgroup_status: dict[str, PodGroupStatus] = field(default_factory=dict)  # by job key
    podgroup_phase_inqueue: list[str] = field(default_factory=list)  # job keys enqueued
    queue_allocated: dict[str, Resources] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)  # task key -> fit message
    # Pods whose queue admission gate is to be removed: their queue takes them
    # (SchedulingGatesQueueAdmission, caldera.api.gates).
    ungate: list[TaskInfo] = field(default_factory=list)
    # Why a job waits (caldera.api.why), by job key: written only when the finding changed,
    # and kept back (counted in why_deferred) while the last one is younger than its refresh.
    podgroup_why: dict[str, WaitRecord] = field(default_factory=dict)
    why_deferred: int = 0
    # The HyperNode each job placed under one now sits in, by job key, when it changed (the
    # PodGroup's volcano.sh/job-allocated-hypernode annotation).
    podgroup_hypernode: dict[str, str] = field(default_factory=dict)
    # Annotations written with a pod's bind, by task uid (deviceshare: the vGPU cards given).
    bind_annotations: dict[str, dict[str, str]] = field(default_factory=dict)
    # deviceshare's cards after the session, by (node, card uuid): (memory MiB, memory held,
    # cores held, pods holding it), for the per-card metrics.
    gpu_cards: dict[tuple[str, str], tuple[int, int, int, int]] = field(default_factory=dict)
    # Annotations plugins set (a value) or remove (None) on PodGroups, by job key (the
    # reservation plugin's record, caldera.api.reservation).
    podgroup_annotations: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # The reservations held after the session, and how many gangs started or let one go.
    reservations: list[ReservationFigure] = field(default_factory=list)
    reservations_started: int = 0
    reservations_expired: int = 0
    events: list[EventRecord] = field(default_factory=list)
    # The ResourceClaim writes to make before each bind, by task uid (the predicates plugin's
    # Dynamic Resource Allocation, scheduler.plugins.dynamic_resources).
    claim_plans: dict[str, tuple[ClaimPlan, ...]] = field(default_factory=dict)
    # Figures for the process's metrics (plugins fill theirs when the session closes).
    action_seconds: dict[str, float] = field(default_factory=dict)
    plugin_seconds: dict[tuple[str, str], float] = field(default_factory=dict)  # (plugin, phase)
    queue_deserved: dict[str, Resources] = field(default_factory=dict)
    queue_share: dict[str, float] = field(default_factory=dict)
    queue_figures: dict[str, QueueFigures] = field(default_factory=dict)
    job_share: dict[str, float] = field(default_factory=dict)
    job_figures: bool = True  # whether job_share was reported (Session.job_figures)
    namespace_share: dict[str, float] = field(default_factory=dict)
    # Jobs whose gang is not ready after the session (PodGroup Pending, Inqueue or Unknown),
    # every one of them, not only those whose status changed; and the jobs that got binds.
    unready_jobs: list[str] = field(default_factory=list)
    placed_jobs: dict[str, PlacedJob] = field(default_factory=dict)
    queue_capability: dict[str, Resources] = field(default_factory=dict)  # capacity
    queue_real_capability: dict[str, Resources] = field(default_factory=dict)  # capacity
    # The jobs whose gang is not placed, in the order the scheduler serves them
    # (scheduler.visibility.order), when the session explains itself.
    pending: tuple[PendingEntry, ...] = ()
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


class Session:
    """One scheduling cycle over a snapshot."""

    def __init__(
        self,
        cluster: ClusterInfo,
        tiers: Sequence[Sequence[PluginOption]],
        *,
        speedups: bool = True,
    ) -> None:
        """``speedups=False`` withholds the incremental layer (``Incremental``): the plugins'
        speed hooks are ignored and nothing is kept across sessions; decisions are the same."""
        self.cluster = cluster
        self.jobs = cluster.jobs
        self.nodes = cluster.nodes
        self.queues = cluster.queues
        self.now = cluster.now
        self.tiers = tiers
        self._options = {opt.name: (i, opt) for i, tier in enumerate(tiers) for opt in tier}
        self._fns: dict[CallbackKind, list[_Registered]] = {}
        # Each kind's functions grouped by tier, in tier order (``_vote``), kept until the next
        # registration.
        self._tiers: dict[CallbackKind, list[list[_Registered]]] = {}
        # The plugins' speed hooks each combination uses (their sort keys by kind, victim
        # screens by kind, allocatable states), resolved once and kept until the next
        # registration: asked per heap, per preemptor and per turn.
        self._hooks: dict[object, Any] = {}
        self.result = SessionResult()
        self.total_resource = cluster.total_allocatable()
        # The PodGroup condition a plugin (gang) set for a job in this session.
        self.job_conditions: dict[str, PodGroupCondition] = {}
        # What plugins and actions found about why a job waits: (stage, text) by job key,
        # stage a caldera.api.why.WaitStage or DETAIL (scheduler.why composes the record).
        self.wait_notes: dict[str, list[tuple[str, str]]] = {}
        # Whether the session explains itself: wait records (``scheduler.why``), the notes
        # they are made of, and Events. The simulator, which writes none, turns it off.
        self.explain = True
        # Whether Volcano's SchedulingGatesQueueAdmission is on (the process's --feature-gates):
        # a pod that opted in and waits behind the queue admission gate is ungated once its
        # queue takes it (``queue_admitted``), and capacity holds room for it until it is placed.
        self.queue_admission_gates = False
        # Whether the session reports per-job figures for the process's metrics (drf's job
        # shares, ``SessionResult.job_share``); the simulator, which exports none, turns it off,
        # and the process asks for them every few seconds (``JOB_FIGURES_PERIOD``).
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
        # What makes plugins fast across sessions: their speed hooks, memos, settled jobs.
        self.incremental = Incremental(cluster, tiers, speedups=speedups)
        # While set, the plugins of layered cross-node functions answer node-locally for the
        # tasks those claim (``add_layered_cross_node_fn``): the placer sets it to take such a
        # task's class verdicts.
        self.node_local = False
        self._layered: set[CrossNodeFn] = set()
        # Volcano's feasible-node sampling for the cross-node tasks (the process's flags), and
        # where the next search starts (scheduler.api.feasible_nodes).
        self.feasible_nodes = FeasibleNodes()
        self.node_rotation = Rotation()
        # Whether a cross-node function is registered: while none is, the placer asks no pod
        # whether it is cross-node (a cluster without inter-pod affinity or topology spread
        # pays nothing per pod).
        self.has_cross_node = False
        # Set by the network-topology-aware plugin when it opens: how HyperNodes are scored
        # (scheduler.framework.hypernodes); None leaves every job topology-blind.
        self.topology: HyperNodeState | None = None

    def job_condition(self, key: str) -> PodGroupCondition | None:
        """The PodGroup condition the session's plugins set for the job, None when none did."""
        condition = self.job_conditions.get(key)
        if condition is None:
            incremental = self.incremental
            settled = incremental.settled_condition
            if settled is not None and key in incremental.settled():
                return settled
        return condition

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
        self.has_cross_node = False
        self.incremental.close()

    def plugin_switch(self, plugin: str, switch: str, default: bool) -> bool:
        """A switch of ``plugin`` as the configuration sets it, ``default`` when it does not:
        for switches that are off unless set (Volcano's enableHierarchy)."""
        entry = self._options.get(plugin)
        return default if entry is None else entry[1].switches.get(switch, default)

    # ---- registration -----------------------------------------------------------------------

    def _add(self, kind: CallbackKind, plugin: str, fn: Any) -> None:
        # Lines count here: sessions register some forty callbacks each, and the simulator
        # opens a session per event. So a plugin's (tier, option) defaults only when it is not
        # configured (entries are non-empty tuples), and what registration invalidates is
        # cleared only once something was derived (plugins register before anything is).
        tier, option = self._options.get(plugin) or (len(self.tiers), PluginOption(plugin))
        if not kind.switch or option.enabled(kind.switch):
            self._fns.setdefault(kind, []).append(_Registered(tier, plugin, fn))
            if self._tiers or self._hooks:
                self._forget_derived()

    def _forget_derived(self) -> None:
        """Drop what was derived from the registrations (``_tiers``, ``_hooks``)."""
        self._tiers.clear()
        self._hooks.clear()

    def add_speedups(self, plugin: str, speedups: Speedups) -> None:
        """Opt ``plugin`` into the incremental layer: its speed hooks, each standing for its
        callback of that kind (scheduler.framework.incremental). Optional: without them the
        session calls the callbacks."""
        self.incremental.add(plugin, speedups)
        if self._hooks:
            self._hooks.clear()

    def add_job_order_fn(self, plugin: str, fn: OrderFn[JobInfo]) -> None:
        self._add(_JOB_ORDER, plugin, fn)

    def add_queue_order_fn(self, plugin: str, fn: OrderFn[QueueInfo]) -> None:
        self._add(_QUEUE_ORDER, plugin, fn)

    def add_task_order_fn(self, plugin: str, fn: OrderFn[TaskInfo]) -> None:
        self._add(_TASK_ORDER, plugin, fn)

    def add_victim_order_fn(self, plugin: str, fn: OrderFn[TaskInfo]) -> None:
        self._add(_VICTIM_ORDER, plugin, fn)

    def add_victim_queue_order_fn(self, plugin: str, fn: VictimQueueOrderFn) -> None:
        self._add(_VICTIM_QUEUE_ORDER, plugin, fn)

    def add_predicate_fn(self, plugin: str, fn: PredicateFn) -> None:
        self._add(_PREDICATE, plugin, fn)

    def add_node_order_fn(self, plugin: str, fn: NodeOrderFn) -> None:
        self._add(_NODE_ORDER, plugin, fn)

    def add_batch_node_order_fn(self, plugin: str, fn: BatchNodeOrderFn) -> None:
        """Scores over all the nodes that passed the predicates at once; asked only for the
        tasks a cross-node function claims (``add_cross_node_fn``)."""
        self._add(_BATCH_NODE_ORDER, plugin, fn)

    def add_cross_node_fn(self, plugin: str, fn: CrossNodeFn) -> None:
        """True for a task whose predicate or scores from ``plugin`` read more than the task
        and the node: the placer judges every node afresh for it and adds the batch scores."""
        self._add(_CROSS_NODE, plugin, fn)
        self.has_cross_node = bool(self._registered(_CROSS_NODE))

    def add_layered_cross_node_fn(self, plugin: str, fn: CrossNodeFn) -> None:
        """A cross-node function (``add_cross_node_fn``) whose plugin's predicates pass and
        whose node scores are 0 for the tasks it claims while ``node_local`` is set: the
        placer may then take such a task's node-local verdicts from its class, as for any
        pod, and judge only the nodes that fit afresh (``cross_node_layered``). A function
        registered again (by another plugin) is asked once: it answers the same."""
        if fn in self._layered:
            return
        self.add_cross_node_fn(plugin, fn)
        self._layered.add(fn)

    def add_job_ready_fn(self, plugin: str, fn: JobPredicate) -> None:
        self._add(_JOB_READY, plugin, fn)

    def add_job_pipelined_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add(_JOB_PIPELINED, plugin, fn)

    def add_job_valid_fn(self, plugin: str, fn: JobValidFn) -> None:
        self._add(_JOB_VALID, plugin, fn)

    def add_job_enqueueable_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add(_JOB_ENQUEUEABLE, plugin, fn)

    def add_job_enqueued_fn(self, plugin: str, fn: Callable[[JobInfo], None]) -> None:
        self._add(_JOB_ENQUEUED, plugin, fn)

    def add_job_starving_fn(self, plugin: str, fn: VoteFn) -> None:
        self._add(_JOB_STARVING, plugin, fn)

    def add_preemptable_fn(self, plugin: str, fn: VictimsFn) -> None:
        self._add(_PREEMPTABLE, plugin, fn)

    def add_reclaimable_fn(self, plugin: str, fn: VictimsFn) -> None:
        self._add(_RECLAIMABLE, plugin, fn)

    def add_preemptive_fn(self, plugin: str, fn: PreemptiveFn) -> None:
        self._add(_PREEMPTIVE, plugin, fn)

    def add_overused_fn(self, plugin: str, fn: QueuePredicate) -> None:
        self._add(_OVERUSED, plugin, fn)

    def add_allocatable_fn(self, plugin: str, fn: AllocatableFn) -> None:
        self._add(_ALLOCATABLE, plugin, fn)

    def add_allocate_handler(
        self, plugin: str, on_allocate: EventFn, on_deallocate: EventFn
    ) -> None:
        """Called as tasks are allocated or released in the session (drf and proportion keep
        their shares current this way)."""
        self._add(_ALLOCATE_HANDLER, plugin, (on_allocate, on_deallocate))

    def add_victim_tasks_fn(self, plugin: str, fn: VictimTasksFn) -> None:
        self._add(_VICTIM_TASKS, plugin, fn)

    def add_victim_tasks_screen(self, plugin: str, fn: VictimTasksFn) -> None:
        self._add(_VICTIM_TASKS_SCREEN, plugin, fn)

    def _registered(self, kind: CallbackKind) -> list[_Registered]:
        return self._fns.get(kind, [])

    def _plugins(self, kind: CallbackKind) -> list[str]:
        """The plugins whose ``kind`` callbacks are registered, in order."""
        return [reg.plugin for reg in self._registered(kind)]

    def _order_keys(self, kind: CallbackKind) -> list[Callable[[Any], Any]] | None:
        """The sort keys of ``kind``'s order functions, None unless each has one."""
        hooks = self._hooks
        if kind in hooks:
            keys: list[Callable[[Any], Any]] | None = hooks[kind]
            return keys
        keys = hooks[kind] = self.incremental.order_keys(kind, self._plugins(kind))
        return keys

    # ---- combination ------------------------------------------------------------------------

    def _order(self, kind: CallbackKind, left: T, right: T) -> int:
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
        keys = self._order_keys(_JOB_ORDER)
        if keys is not None:
            return job_key_tuple(keys)
        return self.job_order_compare_key()

    def job_order_compare_key(self) -> Callable[[JobInfo], Any]:
        """``job_order_key`` comparing with the job order functions at each comparison."""

        def compare(a: JobInfo, b: JobInfo) -> int:
            answer = self._order(_JOB_ORDER, a, b)
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
        funcs = self._order_keys(_QUEUE_ORDER)
        if funcs is not None:
            return lambda queue: (*[key(queue) for key in funcs], queue.name)

        def compare(a: QueueInfo, b: QueueInfo) -> int:
            return self._order(_QUEUE_ORDER, a, b) or ((a.name > b.name) - (a.name < b.name))

        return functools.cmp_to_key(compare)

    def task_order_signature(self) -> tuple[str, ...] | None:
        """What names the task order across sessions: the plugins whose task order functions
        give it, when each has a key (a function of the task alone); None otherwise."""
        if self._order_keys(_TASK_ORDER) is None:
            return None
        return tuple(self._plugins(_TASK_ORDER))

    def task_order_key(self) -> Callable[[TaskInfo], Any]:
        funcs = self._order_keys(_TASK_ORDER)
        if funcs is not None:
            # The first function that tells two tasks apart decides, then the task's key:
            # exactly the order of tuples.
            if len(funcs) == 1:
                only = funcs[0]
                return lambda task: (only(task), task.key)
            return lambda task: (*[key(task) for key in funcs], task.key)

        def compare(a: TaskInfo, b: TaskInfo) -> int:
            return self._order(_TASK_ORDER, a, b) or ((a.key > b.key) - (a.key < b.key))

        return functools.cmp_to_key(compare)

    def victim_order_key(self, preemptor: TaskInfo | None = None) -> Callable[[TaskInfo], Any]:
        """Victims in the order they should be evicted for ``preemptor`` (Volcano's
        BuildVictimsPriorityQueue), after any victim order function:

        - two tasks of one job: the reverse of task order;
        - a task whose job has left the session before one whose job is known;
        - tasks of jobs in different queues (when the preemptor's job is known): the victim
          queue order functions (capacity's hierarchy), else the reverse of queue order, so
          the lowest-priority queue loses first;
        - otherwise the reverse of the job order functions, then of task order.

        Without a preemptor (or its job), jobs are compared across queues as within one."""
        jobs, queues = self.jobs, self.queues
        preemptor_job = jobs.get(preemptor.job) if preemptor is not None else None
        preemptor_queue = queues.get(preemptor_job.queue) if preemptor_job is not None else None

        def reverse_task(a: TaskInfo, b: TaskInfo) -> int:
            return -self._order(_TASK_ORDER, a, b) or ((a.key > b.key) - (a.key < b.key))

        def compare(a: TaskInfo, b: TaskInfo) -> int:
            answer = self._order(_VICTIM_ORDER, a, b)
            if answer:
                return answer
            if a.job == b.job:
                return reverse_task(a, b)
            a_job, b_job = jobs.get(a.job), jobs.get(b.job)
            if a_job is None or b_job is None:
                if a_job is None and b_job is None:
                    return reverse_task(a, b)
                return -1 if a_job is None else 1  # its PodGroup is gone anyway
            if preemptor_queue is not None and a_job.queue != b_job.queue:
                a_queue, b_queue = queues.get(a_job.queue), queues.get(b_job.queue)
                if a_queue is not None and b_queue is not None:
                    return self.victim_queue_order(a_queue, b_queue, preemptor_queue)
            return -self._order(_JOB_ORDER, a_job, b_job) or reverse_task(a, b)

        return functools.cmp_to_key(compare)

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """Which of two queues loses victims first to a task of ``preemptor`` (<0: ``left``):
        the first victim queue order function with an opinion, else the reverse of queue
        order (names last), Volcano's VictimQueueOrderFn."""
        for reg in self._registered(_VICTIM_QUEUE_ORDER):
            answer = int(reg.fn(left, right, preemptor))
            if answer:
                return answer
        answer = self._order(_QUEUE_ORDER, left, right)
        return -answer or ((left.name < right.name) - (left.name > right.name))

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """None if ``task`` may run on ``node``, else the first reason it may not."""
        for reg in self._registered(_PREDICATE):
            reason: str | None = reg.fn(task, node)
            if reason:
                return reason
        return None

    def node_fns(self) -> tuple[list[tuple[str, PredicateFn]], list[tuple[str, NodeOrderFn]]]:
        """The predicates and node order functions, by plugin, in the order ``predicate`` and
        ``node_score`` ask them."""
        return (
            [(reg.plugin, reg.fn) for reg in self._registered(_PREDICATE)],
            [(reg.plugin, reg.fn) for reg in self._registered(_NODE_ORDER)],
        )

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """The plugins' scores summed in registration order (a loop, not sum() over a
        generator: asked per pod and node looked at)."""
        score = 0.0
        for reg in self._registered(_NODE_ORDER):
            score += float(reg.fn(task, node))
        return score

    def cross_node_layered(self, task: TaskInfo) -> bool:
        """Whether ``task`` is cross-node by layered functions alone (and by one at least)."""
        claimed = False
        for reg in self._registered(_CROSS_NODE):
            if reg.fn(task):
                if reg.fn not in self._layered:
                    return False
                claimed = True
        return claimed

    def cross_node(self, task: TaskInfo) -> bool:
        """Whether some plugin's verdict for ``task`` on a node reads other nodes too (never
        while ``has_cross_node`` is false: callers asking per pod look at that first)."""
        for reg in self._registered(_CROSS_NODE):  # noqa: SIM110 - a loop: asked per pod
            if reg.fn(task):
                return True
        return False

    def batch_node_scores(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> dict[str, float]:
        """The batch node order functions' scores of ``task`` on ``nodes``, summed per node
        (nodes no function scores are absent)."""
        total: dict[str, float] = {}
        for reg in self._registered(_BATCH_NODE_ORDER):
            for name, score in reg.fn(task, nodes).items():
                total[name] = total.get(name, 0.0) + float(score)
        return total

    def job_ready(self, job: JobInfo) -> bool:
        # Loops, not all()/any(), here and below: asked per pod placed, and a loop without a
        # generator takes a fifth of the time.
        for reg in self._registered(_JOB_READY):  # noqa: SIM110
            if not reg.fn(job):
                return False
        return True

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        for reg in self._registered(_JOB_VALID):
            result: ValidateResult | None = reg.fn(job)
            if result is not None and not result.ok:
                return result
        return None

    def _by_tier(self, kind: CallbackKind) -> list[list[_Registered]]:
        grouped = self._tiers.get(kind)
        if grouped is None:
            by_tier: dict[int, list[_Registered]] = {}
            for reg in self._registered(kind):
                by_tier.setdefault(reg.tier, []).append(reg)
            grouped = self._tiers[kind] = [by_tier[tier] for tier in sorted(by_tier)]
        return grouped

    def _vote(self, kind: CallbackKind, job: JobInfo, default: bool) -> bool:
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
        return self._vote(_JOB_PIPELINED, job, default=True)

    def job_enqueueable(self, job: JobInfo) -> bool:
        return self._vote(_JOB_ENQUEUEABLE, job, default=True)

    def job_starving(self, job: JobInfo) -> bool:
        return self._vote(_JOB_STARVING, job, default=False)

    def job_enqueued(self, job: JobInfo) -> None:
        for reg in self._registered(_JOB_ENQUEUED):
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

    def _deciding(self, kind: CallbackKind) -> list[_Registered]:
        """The victim functions whose answers are intersected: for preemptable the first tier
        that registered any (Volcano's), for reclaimable every tier."""
        registered = self._registered(kind)
        if kind is not _PREEMPTABLE or not registered:
            return registered
        first = min(reg.tier for reg in registered)
        return [reg for reg in registered if reg.tier == first]

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The victims the first tier with a preemptable function allows (Volcano's)."""
        deciding = self._deciding(_PREEMPTABLE)
        if not deciding:
            return []
        return self._intersect(deciding, preemptor, candidates, narrowing=False)

    def victim_jobs(self, kind: CallbackKind, preemptor: TaskInfo) -> Callable[[JobInfo], bool]:
        """For ``kind`` PREEMPTABLE or RECLAIMABLE: a test that is False for a job none of
        whose tasks can be a victim of ``preemptor``, because a deciding plugin's victim
        screen rules the job out (the intersection then cannot hold its tasks); True for
        every job when no deciding plugin has a screen. With no deciding function there are
        no victims at all."""
        deciding = self._deciding(kind)
        if not deciding:
            return lambda job: False
        screens = [screen for _, screen in self.victim_screens(kind)]

        def may_give(job: JobInfo) -> bool:
            return all(screen(preemptor, job) for screen in screens)

        return may_give

    def reclaimable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The victims every tier's reclaimable functions allow (see the module docstring)."""
        deciding = self._deciding(_RECLAIMABLE)
        if not deciding:
            return []
        return self._intersect(deciding, preemptor, candidates, narrowing=True)

    def victims_without(
        self,
        kind: CallbackKind,
        preemptor: TaskInfo,
        candidates: Sequence[TaskInfo],
        without: frozenset[str],
    ) -> list[TaskInfo]:
        """``preemptable`` or ``reclaimable`` (by ``kind``) with the plugins in ``without``
        permitting every candidate instead of voting (gangpreempt and gangreclaim: their
        whole-gang victim bundles replace gang's minAvailable vote, as gang's
        UnifiedEvictableFn permits every candidate in Volcano)."""
        deciding = self._deciding(kind)
        if not deciding:
            return []
        voting = [reg for reg in deciding if reg.plugin not in without]
        if not voting:
            return list(candidates)
        return self._intersect(voting, preemptor, candidates, narrowing=kind is not _PREEMPTABLE)

    def proposes_victim_tasks(self) -> bool:
        """Whether a plugin registered a victim-tasks function this session."""
        return bool(self._registered(_VICTIM_TASKS))

    def victim_tasks(self, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The pods among ``tasks`` the plugins would evict (module docstring), each once, in
        the order proposed."""
        chosen: dict[str, TaskInfo] = {}
        for tier in self._by_tier(_VICTIM_TASKS):
            for reg in tier:
                for task in reg.fn(tasks):
                    chosen.setdefault(task.uid, task)
            if chosen:
                break
        victims = list(chosen.values())
        for reg in self._registered(_VICTIM_TASKS_SCREEN):
            if victims:
                victims = reg.fn(victims)
        return victims

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        """Whether ``queue`` may take resources from other queues for ``tasks``."""
        return all(reg.fn(queue, tasks) for reg in self._registered(_PREEMPTIVE))

    def overused(self, queue: QueueInfo) -> bool:
        for reg in self._registered(_OVERUSED):  # noqa: SIM110
            if reg.fn(queue):
                return True
        return False

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for reg in self._registered(_ALLOCATABLE):  # noqa: SIM110
            if not reg.fn(queue, task):
                return False
        return True

    # ---- state changes ----------------------------------------------------------------------

    def statement(self) -> Statement:
        return Statement(self)

    def notify_allocate(self, task: TaskInfo) -> None:
        for reg in self._registered(_ALLOCATE_HANDLER):
            reg.fn[0](task)

    def notify_deallocate(self, task: TaskInfo) -> None:
        for reg in self._registered(_ALLOCATE_HANDLER):
            reg.fn[1](task)

    def allocatable_state(self, queue: QueueInfo) -> tuple[object, ...] | None:
        """What every allocatable function reads of the session for ``queue`` (their plugins'
        ``Speedups.allocatable_state``); None when one does not say."""
        key = _ALLOCATABLE
        hooks = self._hooks
        if key in hooks:
            states = hooks[key]
        else:
            states = hooks[key] = self.incremental.allocatable_states(self._plugins(key))
        if states is None:
            return None
        return tuple([state(queue) for state in states])

    def answering_handlers(self) -> list[tuple[Callable[[TaskInfo], None], ...]]:
        """The allocate handlers (allocate, deallocate) of the plugins that answer
        ``allocatable``: what to tell to ask them again as if pods were allocated, where each
        plugin's answers read only its own state."""
        answering = {reg.plugin for reg in self._registered(_ALLOCATABLE)}
        return [reg.fn for reg in self._registered(_ALLOCATE_HANDLER) if reg.plugin in answering]

    def queue_admitted(self, task: TaskInfo) -> None:
        """``task``'s queue takes it: remove its queue admission gate, when the feature is on,
        the pod opted in and no other gate holds it (Volcano's SchGateManager.Enqueue)."""
        pod = task.pod
        if not self.queue_admission_gates or pod is None:
            return
        if only_queue_gate(pod) and opted_in(pod):
            self.result.ungate.append(task)

    def note_wait(self, job: str, stage: str, text: str) -> None:
        """Note why ``job`` waits (see ``scheduler.why``); repeated notes are kept once."""
        if not self.explain:
            return
        notes = self.wait_notes.setdefault(job, [])
        if (stage, text) not in notes:
            notes.append((stage, text))

    def victim_screens(self, kind: CallbackKind) -> list[tuple[str, JobScreenFn]]:
        """The victim screens of the plugins of ``kind``'s deciding victim functions, by plugin
        (to tell a user which plugin rules a job out)."""
        key = ("screens", kind)
        hooks = self._hooks
        if key not in hooks:
            plugins = [reg.plugin for reg in self._deciding(kind)]
            hooks[key] = self.incremental.victim_screens(plugins)
        screens: list[tuple[str, JobScreenFn]] = hooks[key]
        return screens

    def record_event(
        self, kind: str, namespace: str, name: str, type_: str, reason: str, message: str
    ) -> None:
        if self.explain:
            self.result.events.append(EventRecord(kind, namespace, name, type_, reason, message))

    def sorted_jobs(self, jobs: Iterable[JobInfo]) -> list[JobInfo]:
        return sorted(jobs, key=self.job_order_key())
