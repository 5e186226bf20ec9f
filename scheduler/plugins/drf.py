"""drf: Dominant Resource Fairness between jobs, and optionally between namespaces (Volcano's drf).

A job's share is its dominant share: the largest, over the cluster's resources, of what the job
holds divided by what the cluster has (``allocated / total``; a resource the cluster lacks
counts 1 as soon as the job holds any). Jobs with the lower share go first, so two hungry jobs
take turns and end up with equal dominant shares.

Preemption (``preemptable``): a running task may be taken from another job only if that job's
share after losing the task is still at least the preemptor's job's share after gaining the
preemptor (within Volcano's ``shareDelta`` of 1e-6). Several victims of one job are judged
cumulatively, as Volcano does. Tasks of the preemptor's own job are not judged (moving resources
inside a job does not change its share relative to others); Volcano would refuse them, which
makes intra-job preemption impossible whenever drf is preemptable.

Namespace fairness (argument ``drf.namespace-fairness: true``; Volcano's ``enableNamespaceOrder``
switch, which Caldera's framework does not hand to plugins): a namespace's weighted share is the
dominant share of all its jobs divided by its weight (``ClusterInfo.namespace_weights``, the
``volcano.sh/namespace.weight`` of Volcano, default 1). Jobs of the namespace with the lower
weighted share go first; a victim in another namespace is allowed when its namespace's weighted
share after the loss stays above the preemptor namespace's after the gain, refused when it falls
clearly below, and left to the job rule when the two are equal.

Hierarchical mode (the switch ``enableHierarchy: true``, Volcano's hdrf): queues are ordered by
their place in the tree of ``volcano.sh/hierarchy`` annotations and drf also votes on reclaim
(``scheduler.plugins.hdrf``); off, nothing of it is built.

Shares follow every allocation, pipelining and eviction of the session through the session's
allocate handlers. They stay readable on the plugin after the session (``job_shares``,
``namespace_shares``), and the session's result carries them (``job_share``, unless the
session reports no per-job figures, and ``namespace_share``) to the process, which exports
them as metrics.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from caldera.api.resources import Resources
from caldera.api.volcano import HIERARCHY_KEY, HIERARCHY_WEIGHTS_KEY
from scheduler.api.job_sums import by_namespace, held
from scheduler.api.overlay import Overlay
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.hdrf import HdrfTree, path_of

SHARE_DELTA = 1e-6  # Volcano's shareDelta: shares this close are equal
# Names Volcano's Resource does not track as resources: "pods" is a task count there, and
# ephemeral storage is not a scalar resource.
UNTRACKED = ("pods", "ephemeral-storage", "storage")
NAMESPACE_SUMS = "drf.namespaces"  # the snapshot's sums of what each namespace's jobs hold
ALLOCATED_MAP = "drf.allocated"  # the per-job allocation (``Incremental.job_map``)
SHARE_MEMO = "drf.shares"  # the shares worked out so far, kept while the total is the same
HIERARCHY_SWITCH = "enableHierarchy"
REQUEST_MEMO = "drf.request"  # a job's total request (every task's), for hdrf's leaves
_NOTHING = Resources()


def resource_share(used: int, total: int) -> float:
    """``used / total``; a resource of which there is none counts as fully used once held
    (Volcano's ``helpers.Share``)."""
    if total <= 0:
        return 0.0 if used <= 0 else 1.0
    return used / total


def dominant_share(allocated: Resources, total: Resources) -> float:
    """The largest share of any resource that ``allocated`` holds of ``total`` (0 when it
    holds none: a resource only ``total`` lists is a share of 0, so only ``allocated``'s are
    looked at)."""
    share = 0.0
    for name, used in allocated.items():
        if name not in UNTRACKED:
            share = max(share, resource_share(used, total.get(name)))
    return share


class JobShares(Mapping[str, float]):
    """Each job's dominant share of ``total``, worked out when first asked for.

    A session asks for the shares of the jobs it orders or judges, not of every job; when the
    cluster's total changes (a node turns ready or not, as kwok's nodes do under load), a map
    derived for every job cost 0.4 s a session at 50,000 jobs (bench/scheduler_perf.py
    basic-50k). ``memo`` holds each job's share beside the allocation it was worked out from
    (``Resources`` are immutable, so the same object means the same value); it is kept with the
    snapshot for as long as the total is equal, and trimmed of jobs that went."""

    __slots__ = ("_allocated", "_memo", "_total")

    def __init__(
        self,
        allocated: Mapping[str, Resources],
        total: Resources,
        memo: dict[str, tuple[Resources, float]],
    ) -> None:
        self._allocated = allocated
        self._total = total
        self._memo = memo
        if len(memo) > 2 * len(allocated) + 64:
            for key in [key for key in memo if key not in allocated]:
                del memo[key]

    def __getitem__(self, key: str) -> float:
        held = self._allocated[key]
        kept = self._memo.get(key)
        if kept is not None and kept[0] is held:
            return kept[1]
        share = dominant_share(held, self._total)
        self._memo[key] = (held, share)
        return share

    def __iter__(self) -> Iterator[str]:
        return iter(self._allocated)

    def __len__(self) -> int:
        return len(self._allocated)


class DrfPlugin:
    """Dominant Resource Fairness job order and preemption filter."""

    name = "drf"

    def __init__(self, arguments: Arguments) -> None:
        self.namespace_fairness = arguments.boolean("drf.namespace-fairness", False)
        self.total = Resources()
        # Each job's allocation and share: the snapshot's maps, with this session's changes
        # written over them (see open).
        self.job_allocated: Overlay[Resources] = Overlay({})
        self.job_shares: Overlay[float] = Overlay({})
        self.namespace_allocated: dict[str, Resources] = {}
        self.namespace_shares: dict[str, float] = {}
        self.namespace_weights: dict[str, int] = {}
        self.tree: HdrfTree | None = None  # with enableHierarchy only
        self.paths: dict[str, list[str]] = {}  # queue -> its levels below the root

    # ---- shares ------------------------------------------------------------------------------

    def share(self, allocated: Resources) -> float:
        return dominant_share(allocated, self.total)

    def namespace_weight(self, namespace: str) -> int:
        return max(1, self.namespace_weights.get(namespace, 1))

    def weighted_namespace_share(self, namespace: str) -> float:
        """A namespace's share divided by its weight (what namespace fairness compares)."""
        return self.namespace_shares.get(namespace, 0.0) / self.namespace_weight(namespace)

    def _change(self, task: TaskInfo, delta: Resources, sign: int) -> None:
        job = task.job
        held = self.job_allocated.get(job, _NOTHING)
        allocated = held + delta if sign > 0 else held - delta
        self.job_allocated[job] = allocated
        self.job_shares[job] = self.share(allocated)
        held = self.namespace_allocated.get(task.namespace, _NOTHING)
        ns = held + delta if sign > 0 else held - delta
        self.namespace_allocated[task.namespace] = ns
        self.namespace_shares[task.namespace] = self.share(ns)
        if self.tree is not None:
            self.tree.change(job, allocated, delta, sign)

    def _on_allocate(self, task: TaskInfo) -> None:
        self._change(task, task.resreq, +1)

    def _on_deallocate(self, task: TaskInfo) -> None:
        self._change(task, task.resreq, -1)

    # ---- session ------------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self.total = ssn.total_resource.without(*UNTRACKED)
        self.namespace_weights = dict(ssn.cluster.namespace_weights)
        self.namespace_allocated.clear()
        self.namespace_shares.clear()
        # Each job's allocation is kept with the snapshot, derived again only for the jobs
        # that changed since the last session; its share is worked out when asked for, and
        # kept while the job's allocation and the cluster's total stay the same (JobShares).
        # The session's changes are written over the two maps, which stay as they are.
        held_by_job = ssn.incremental.job_map(ALLOCATED_MAP, lambda job: job.allocated, None)
        memo: dict[str, tuple[Resources, float]] = ssn.incremental.memo_for_cluster(
            SHARE_MEMO, self.total, dict
        )
        self.job_allocated = Overlay(held_by_job.values)
        self.job_shares = Overlay(JobShares(held_by_job.values, self.total, memo))
        # The namespaces' sums are kept with the snapshot (``Incremental.job_sums``).
        sums = ssn.incremental.job_sums(NAMESPACE_SUMS, by_namespace, held, 1)
        for namespace in sums.groups():
            allocated = sums.total(namespace)
            self.namespace_allocated[namespace] = allocated
            self.namespace_shares[namespace] = self.share(allocated)
        ssn.add_job_order_fn(self.name, self.job_order)
        # With namespace fairness, allocating to one job moves its namespace's other jobs
        # too: no sort key (``Speedups.job_order_key``), the order is compared each time.
        if not self.namespace_fairness:
            ssn.add_speedups(self.name, Speedups(job_order_key=self.job_share))
        ssn.add_preemptable_fn(self.name, self.preemptable)
        ssn.add_allocate_handler(self.name, self._on_allocate, self._on_deallocate)
        self.tree = None
        if ssn.plugin_switch(self.name, HIERARCHY_SWITCH, False):
            self._open_hierarchy(ssn)

    def _open_hierarchy(self, ssn: Session) -> None:
        """Build hdrf's tree and register its queue order and reclaim filter."""
        self.tree = tree = HdrfTree(self.total)
        self.paths = {}
        levels_of: dict[str, list[tuple[str, float]]] = {}
        for name, queue in ssn.queues.items():
            notes = queue.queue.metadata.annotations if queue.queue is not None else {}
            levels = path_of(notes.get(HIERARCHY_KEY, ""), notes.get(HIERARCHY_WEIGHTS_KEY, ""))
            levels_of[name] = levels
            self.paths[name] = [level for level, _ in levels]
        for job in ssn.jobs.values():
            placed = levels_of.get(job.queue)
            if placed is not None:  # a job of a queue not in the cache has no place
                request = ssn.incremental.memo_for_job(job, REQUEST_MEMO, _total_request)
                tree.add_job(job.key, placed, job.allocated, request)
        jobs = ssn.jobs

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            found = tree.compare(self.paths.get(left.name, []), self.paths.get(right.name, []))
            return -1 if found < 0 else 1 if found > 0 else 0

        def reclaimable(reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            job = jobs.get(reclaimer.job)
            if job is None or job.queue not in self.paths:
                return []
            mine = self.paths[job.queue]
            base = self.job_allocated.get(job.key, _NOTHING)
            tree.change(job.key, base + reclaimer.resreq, reclaimer.resreq, +1)
            victims = []
            for task in candidates:
                victim_job = jobs.get(task.job)
                if victim_job is None or victim_job.queue not in self.paths or task.job == job.key:
                    continue
                held = self.job_allocated.get(task.job, _NOTHING)
                tree.change(task.job, held - task.resreq, task.resreq, -1)
                found = tree.compare(mine, self.paths[victim_job.queue])
                tree.change(task.job, held, task.resreq, +1)
                if found < 0:
                    victims.append(task)
            tree.change(job.key, base, reclaimer.resreq, -1)
            return victims

        ssn.add_queue_order_fn(self.name, queue_order)
        ssn.add_reclaimable_fn(self.name, reclaimable)

    def on_session_close(self, ssn: Session) -> None:
        """Report each job's (unless the session reports no per-job figures) and each
        namespace's dominant share, for the metrics."""
        if ssn.job_figures:
            ssn.result.job_share.update(self.job_shares.merged())
        ssn.result.namespace_share.update(self.namespace_shares)

    # ---- callbacks ----------------------------------------------------------------------------

    def job_share(self, job: JobInfo) -> float:
        return self.job_shares.get(job.key, 0.0)

    def job_order(self, left: JobInfo, right: JobInfo) -> int:
        """Lower weighted namespace share first (when enabled), then lower job share first."""
        if self.namespace_fairness and left.namespace != right.namespace:
            ls = self.weighted_namespace_share(left.namespace)
            rs = self.weighted_namespace_share(right.namespace)
            if ls != rs:
                return -1 if ls < rs else 1
        ls, rs = self.job_shares.get(left.key, 0.0), self.job_shares.get(right.key, 0.0)
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Victims whose job (and namespace, when enabled) stays at least as well served as the
        preemptor's after the exchange; see the module docstring."""
        victims: list[TaskInfo] = []
        undecided: list[TaskInfo] = []
        for task in candidates:
            (victims if task.job == preemptor.job else undecided).append(task)

        if self.namespace_fairness:
            gained = self.namespace_allocated.get(preemptor.namespace, Resources())
            mine = self.share(gained + preemptor.resreq) / self.namespace_weight(
                preemptor.namespace
            )
            left: dict[str, Resources] = {}
            still: list[TaskInfo] = []
            for task in undecided:
                if task.namespace == preemptor.namespace:
                    still.append(task)
                    continue
                base = left.get(task.namespace, self.namespace_allocated.get(task.namespace))
                after = (Resources() if base is None else base) - task.resreq
                left[task.namespace] = after
                theirs = self.share(after) / self.namespace_weight(task.namespace)
                if mine < theirs:
                    victims.append(task)
                elif mine - theirs <= SHARE_DELTA:
                    still.append(task)  # equal namespaces: the job rule decides
            undecided = still

        mine = self.share(self.job_allocated.get(preemptor.job, Resources()) + preemptor.resreq)
        remaining: dict[str, Resources] = {}
        for task in undecided:
            base = remaining.get(task.job, self.job_allocated.get(task.job, Resources()))
            after = base - task.resreq
            remaining[task.job] = after  # Volcano counts every candidate of a job, kept or not
            theirs = self.share(after)
            if mine < theirs or abs(mine - theirs) <= SHARE_DELTA:
                victims.append(task)
        order = {task.uid: i for i, task in enumerate(candidates)}
        victims.sort(key=lambda t: order[t.uid])
        return victims


def _total_request(job: JobInfo) -> Resources:
    """What all the job's tasks request (Volcano's JobInfo.TotalRequest)."""
    return Resources.sum(task.resreq for task in job.tasks.values())
