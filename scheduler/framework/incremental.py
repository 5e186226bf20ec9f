"""The incremental layer: what makes plugins fast across sessions, behind one interface.

A plugin decides through its callbacks alone (``Session.add_*_fn``). Everything here is
optional and must not change a decision; a plugin that never touches it is correct, only
slower. It has four parts, each kept by ``Incremental`` (one per session, ``ssn.incremental``):

- Speed hooks (``Speedups``), offered once per plugin with ``Session.add_speedups``: sort keys
  that give the same order as the plugin's order functions, a victim screen that rules whole
  jobs out of preempt and reclaim, and the state its allocatable answers read. The session
  uses a hook only when every plugin of that kind offered one; otherwise it calls the
  callbacks, as Volcano does.
- Memos: ``memo_for_job`` keeps a value derived from one job while the job is unchanged
  (``JobInfo.generation`` and phase; ``kept_for_job``/``keep_for_job`` when the caller checks
  more itself); ``memo_for_cluster`` keeps a value derived from the snapshot while its inputs
  compare equal; ``job_sums`` and ``job_map`` keep per-job figures summed or mapped, looking
  again only at jobs that changed (``scheduler.api.job_sums``). On the live snapshot they
  outlive the session.
- Verdict reuse: the placer's node verdicts kept across sessions and allocate's replayed
  turns (``scheduler.actions.placer``, ``scheduler.actions.retry``) hold for whole
  configurations, proved for the plugins named here (``NODE_LOCAL_PLUGINS``,
  ``JOB_LOCAL_PLUGINS``, ``REPLAY_PLUGINS``), not promised by one callback's hook: any other
  plugin configured turns them off, which is correct, only slower.
- The settled jobs (``scheduler.api.settled``): running gangs with nothing to do, which every
  pass skips while the snapshot's trail does not name them (``unsettled_jobs``); gang's close
  proposes them (``settling``) and the session's close settles those it found quiet
  (``settle_if_quiet``).

``Incremental(cluster, tiers, speedups=False)`` withholds all of it: hooks are ignored, memos
derive every time, no verdict is carried from another session, nothing settles. The
differential tests run the built-in plugins both ways and require the same decisions
(unit/test_sched_speedups_withheld.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, TypeVar, cast

from caldera.api.volcano import PodGroupCondition, PodGroupPhase
from scheduler.api.job_sums import JobMap, JobSums, Parts
from scheduler.api.settled import SettledJobs
from scheduler.api.types import PENDING_PHASES, ClusterInfo, JobInfo, Memo, QueueInfo, TaskInfo
from scheduler.api.verdicts import VerdictMemory
from scheduler.framework.plugin import CallbackKind

V = TypeVar("V")
# A victim screen's promise about whole jobs: False means the plugin's victim functions never
# return a task of that job for this preemptor, whatever the candidates (so preempt and
# reclaim may skip the job's nodes without asking); True promises nothing.
JobScreenFn = Callable[[TaskInfo, JobInfo], bool]
# A node class: what a plugin's predicates and node scores read beyond the pod and the node
# (a queue's affinity, say); equal values give equal verdicts on an unchanged node.
NodeClassFn = Callable[[TaskInfo], Hashable]
_NOTHING_SETTLED: Mapping[str, str] = {}
# PodGroup phases of a gang that is not ready (Volcano's unschedulable jobs).
UNREADY_PHASES = frozenset(
    {PodGroupPhase.PENDING.value, PodGroupPhase.INQUEUE.value, PodGroupPhase.UNKNOWN.value}
)


@dataclass(frozen=True, slots=True)
class Speedups:
    """A plugin's optional speed hooks; each covers the plugin's own callback of its kind and
    must give the same answers as that callback.

    - ``job_order_key``/``queue_order_key``/``task_order_key``: a sort key ordering as the
      plugin's order function does (``fn(a, b) < 0`` exactly when ``key(a) < key(b)``). A job's
      or queue's key may read only what changes with that job or queue itself (it is taken
      when the object enters a heap); a task's only the task (fixed for a TaskInfo's life,
      so a job's tasks sorted in one session stay sorted in the next).
    - ``victim_screen``: for the plugin's preemptable and reclaimable functions, False for a
      job none of whose tasks they would ever return for this preemptor (``JobScreenFn``).
    - ``allocatable_state``: what the plugin's allocatable function reads of the session for a
      queue beyond the task, kept current by its allocate handler: equal states (``==``) give
      equal answers to equal pods, and after equal allocations.
    - ``node_class``: for a plugin outside ``NODE_LOCAL_PLUGINS``, everything its predicates
      and node scores read beyond the pod and the node, as a hashable value (``NodeClassFn``);
      the placer adds it to a pod's class, so node verdicts stay reused with it configured.
    - ``node_overlay``: with ``node_class``, the plugin's predicates and node scores are cheap
      enough to be asked again for every class: the placer then keeps the rest of a node's
      verdict once for the classes that differ only in this plugin's class, and applies the
      plugin's own on top (``scheduler.actions.verdict_split``).
    """

    job_order_key: Callable[[JobInfo], Any] | None = None
    queue_order_key: Callable[[QueueInfo], Any] | None = None
    task_order_key: Callable[[TaskInfo], Any] | None = None
    victim_screen: JobScreenFn | None = None
    allocatable_state: Callable[[QueueInfo], object] | None = None
    node_class: NodeClassFn | None = None
    node_overlay: bool = False


# Volcano's default configuration's plugins, and binpack.
DEFAULT_PLUGINS = frozenset(
    {
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
    }
)
# Plugins whose predicates and node scores depend only on the pod and the node (or register
# none): with only these configured, verdicts of unchanged nodes are reused.
NODE_LOCAL_PLUGINS = DEFAULT_PLUGINS | frozenset(
    {
        "preemption-toleration",
        # Register no predicate or node order at all:
        "cdp",
        "capacity",
        "resourcequota",
        "sla",
        "pdb",
        # registers no predicate or score: it steers jobs with networkTopology to a
        # HyperNode's nodes, whose verdicts are the same (scheduler.actions.topology)
        "network-topology-aware",
        # registers only the shuffle action's victim function
        "rescheduling",
    }
)
# Plugins whose node scores also depend on the pod's job and task (task-topology reads where
# the job's other pods are on the node): with these, pods are equivalent only within one task
# of one job.
JOB_LOCAL_PLUGINS = frozenset({"task-topology"})
# Plugins whose job readiness, queue allocatable and allocate handlers read only the job, the
# queue and what the handlers kept: with only these configured, allocate replays a gang's
# failed turn (scheduler.actions.retry).
REPLAY_PLUGINS = DEFAULT_PLUGINS | frozenset({"rescheduling"})  # it registers none of them

_NO_SPEEDUPS = Speedups()
_ORDER_KEYS: Mapping[CallbackKind, Callable[[Speedups], Callable[[Any], Any] | None]] = {
    CallbackKind.JOB_ORDER: attrgetter("job_order_key"),
    CallbackKind.QUEUE_ORDER: attrgetter("queue_order_key"),
    CallbackKind.TASK_ORDER: attrgetter("task_order_key"),
}


def job_key_tuple(funcs: list[Callable[[JobInfo], Any]]) -> Callable[[JobInfo], tuple[Any, ...]]:
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


class Incremental:
    """One session's incremental layer (see the module docstring)."""

    def __init__(
        self, cluster: ClusterInfo, tiers: Sequence[object], *, speedups: bool = True
    ) -> None:
        self.cluster = cluster
        self.enabled = speedups
        self._speedups: dict[str, Speedups] = {}
        # Settled jobs carried over: only with the live snapshot's trail, and only under the
        # configuration that settled them.
        trail = cluster.job_trail
        if (
            speedups
            and trail is not None
            and (cluster.settled is None or cluster.settled.tiers != tiers)
        ):
            cluster.settled = SettledJobs(tiers, trail.end)
        # Jobs gang's close found ready, nothing waiting, their PodGroup already saying so:
        # the session's close settles those whose status and why record stay as they are.
        self.settling: set[str] = set()
        # The PodGroup condition every settled job has (gang's Scheduled), set once rather
        # than per settled job.
        self.settled_condition: PodGroupCondition | None = None
        self._unsettled: tuple[tuple[int, int], list[JobInfo]] | None = None

    # ---- speed hooks ------------------------------------------------------------------------

    def add(self, plugin: str, speedups: Speedups) -> None:
        """``plugin``'s hooks (``Session.add_speedups``); ignored when speedups are withheld."""
        if self.enabled:
            self._speedups[plugin] = speedups

    def of(self, plugin: str) -> Speedups:
        """``plugin``'s hooks; none when it offered none."""
        return self._speedups.get(plugin, _NO_SPEEDUPS)

    def order_keys(
        self, kind: CallbackKind, plugins: Iterable[str]
    ) -> list[Callable[[Any], Any]] | None:
        """The sort keys of ``plugins``' order functions of ``kind``, in their order; None
        unless every one has one."""
        hook = _ORDER_KEYS[kind]
        keys = []
        for plugin in plugins:
            key = hook(self.of(plugin))
            if key is None:
                return None
            keys.append(key)
        return keys

    def node_classes(self, plugins: Iterable[str]) -> list[NodeClassFn] | None:
        """The node class hooks of ``plugins``, in their order; None unless every one has
        one."""
        found = []
        for plugin in plugins:
            hook = self.of(plugin).node_class
            if hook is None:
                return None
            found.append(hook)
        return found

    def victim_screens(self, plugins: Iterable[str]) -> list[tuple[str, JobScreenFn]]:
        """The victim screens of ``plugins`` (the deciding victim functions'), by plugin."""
        screens = []
        for plugin in plugins:
            screen = self.of(plugin).victim_screen
            if screen is not None:
                screens.append((plugin, screen))
        return screens

    def allocatable_states(
        self, plugins: Iterable[str]
    ) -> list[Callable[[QueueInfo], object]] | None:
        """The ``allocatable_state`` hooks of ``plugins`` (the allocatable functions'), in
        order; None unless each has one."""
        states = []
        for plugin in plugins:
            state = self.of(plugin).allocatable_state
            if state is None:
                return None
            states.append(state)
        return states

    def close(self) -> None:
        """Drop the hooks once the session is over (they refer to the plugins, which may
        refer to the session: see ``Session.close``)."""
        self._speedups.clear()

    # ---- memos ------------------------------------------------------------------------------

    def memo_for_job(self, job: JobInfo, name: str, derive: Callable[[JobInfo], V]) -> V:
        """``derive(job)``, kept with the job under ``name`` and derived again only when the
        job changed (its generation or phase). ``derive`` may read only the job."""
        if self.enabled:
            kept = job.memo.get(name)
            if kept is not None and kept.generation == job.generation and kept.phase == job.phase:
                return cast(V, kept.value)
        value = derive(job)
        self.keep_for_job(job, name, value)
        return value

    def kept_for_job(self, job: JobInfo, name: str) -> object | None:
        """What was kept with the job under ``name`` in its present state; None when the job
        changed since (or nothing was kept)."""
        if not self.enabled:
            return None
        kept = job.memo.get(name)
        if kept is None or kept.generation != job.generation or kept.phase != job.phase:
            return None
        return kept.value

    def keep_for_job(self, job: JobInfo, name: str, value: object) -> None:
        """Keep ``value`` with the job under ``name`` while the job stays as it is."""
        if self.enabled:
            job.memo[name] = Memo(job.generation, job.phase, value)

    def memo_for_cluster(self, name: str, inputs: object, derive: Callable[[], V]) -> V:
        """``derive()``, kept with the snapshot under ``name`` (one name, one derivation) and
        derived again only when ``inputs`` (everything ``derive`` reads) no longer compare
        equal to those it was derived from: for what a plugin derives from the cluster as a
        whole, such as the queues' deserved shares."""
        if not self.enabled:
            return derive()
        derived = self.cluster.derived
        kept = derived.get(name)
        if kept is not None and kept[0] == inputs:
            value: V = kept[1]
            return value
        value = derive()
        derived[name] = (inputs, value)
        return value

    def job_sums(
        self,
        name: str,
        group_of: Callable[[JobInfo], str],
        parts_of: Callable[[JobInfo], Parts],
        width: int,
    ) -> JobSums:
        """Per-group sums of what each job contributes (one name, one pair of functions), as
        the jobs are now: kept with the snapshot, looking again only at jobs that changed
        (``ClusterInfo.sums``)."""
        if not self.enabled:
            sums = JobSums(group_of, parts_of, width)
            sums.refresh(self.cluster.jobs, None)
            return sums
        return self.cluster.sums(name, group_of, parts_of, width)

    def job_map(self, name: str, derive: Callable[[JobInfo], V], context: object) -> JobMap[V]:
        """``derive(job)`` for every job (one name, one function), kept with the snapshot and
        derived again for the jobs that changed, and for all when ``context`` (what else
        ``derive`` reads) is not the object it was (``ClusterInfo.job_map``)."""
        if not self.enabled:
            values = JobMap(derive)
            values.refresh(self.cluster.jobs, None)
            return values
        return self.cluster.job_map(name, derive, context)

    # ---- verdict reuse ----------------------------------------------------------------------

    def verdict_memory(self) -> VerdictMemory | None:
        """The verdicts carried across sessions (``ClusterInfo.verdicts``: the live snapshot's);
        None when speedups are withheld or the snapshot keeps none."""
        return self.cluster.verdicts if self.enabled else None

    # ---- settled jobs -----------------------------------------------------------------------

    def settled(self) -> Mapping[str, str]:
        """The settled jobs as of now (``scheduler.api.settled``), by key, with the phase their
        PodGroup keeps: none without the live snapshot's trail."""
        kept, trail = self.cluster.settled, self.cluster.job_trail
        if kept is None or trail is None or not self.enabled:
            return _NOTHING_SETTLED
        return kept.refresh(trail)

    def unsettled_jobs(self) -> list[JobInfo]:
        """The jobs that are not settled (``settled``), in the snapshot's order: what each pass
        over every job looks at. Kept while no job settles or is unsettled (the jobs a session
        changes are unsettled already), so the passes of a session share one list; when jobs
        only settled since, the kept list is filtered rather than every job looked at."""
        settled = self.settled()
        jobs_now = self.cluster.jobs
        kept_settled = self.cluster.settled
        version = (
            -1 if settled is _NOTHING_SETTLED or kept_settled is None else kept_settled.version
        )
        mark = (version, len(jobs_now))
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
            and (keys := kept_settled.unsettled_keys(jobs_now)) is not None
        ):
            # Kept across sessions: a handful, where the snapshot's jobs are mostly settled. In
            # the snapshot's order, which is the order its JobInfos were made in
            # (``JobInfo.serial``).
            jobs = sorted(map(jobs_now.__getitem__, keys), key=attrgetter("serial"))
        else:
            # Filtered and looked up in C: the snapshot's jobs are mostly settled.
            unsettled = itertools.filterfalse(settled.__contains__, jobs_now)
            jobs = list(map(jobs_now.__getitem__, unsettled))
            if kept_settled is not None and version != -1:
                kept_settled.track({job.key for job in jobs})
        self._unsettled = (mark, jobs)
        return jobs

    def settle_if_quiet(
        self,
        job: JobInfo,
        phase: str,
        *,
        status_unchanged: bool,
        wait_quiet: bool,
        touched: bool,
    ) -> None:
        """The session's close: settle the job (``scheduler.api.settled``) when gang proposed
        it (``settling``), its PodGroup status stays as it was in a ready ``phase``
        (``status_unchanged``), there is no wait record to write or hold back
        (``wait_quiet``), it is past Pending, and the session changed none of its tasks
        (``touched``: a pod it bound is Binding only while the bind is assumed; if the bind
        fails, the live snapshot must derive the job again, which it does for the jobs a
        session touched only while they are unsettled)."""
        if (
            status_unchanged
            and wait_quiet
            and not touched
            and job.key in self.settling
            and phase not in UNREADY_PHASES
            and job.phase not in PENDING_PHASES
        ):
            self.settle(job.key, phase)

    def settle(self, key: str, phase: str) -> None:
        """The job is settled, its PodGroup in ``phase`` (kept only with the live snapshot's
        trail, and only with speedups)."""
        kept, trail = self.cluster.settled, self.cluster.job_trail
        if kept is not None and trail is not None and self.enabled:
            kept.refresh(trail)
            kept.settle(key, phase)
