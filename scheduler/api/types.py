"""The scheduler's view of the cluster for one session: tasks (pods), jobs (PodGroups with their
pods), nodes and queues, with the bookkeeping the actions and plugins share.

The process keeps one snapshot up to date from the informer cache (``scheduler.live_snapshot``;
``scheduler.snapshot`` derives it); a session mutates it as it plans (a node's idle resources
shrink as tasks are allocated on it), reports what it touched (``NodeInfo.changes``,
``JobInfo.changes``), and the next update derives that again from the cache, never from what a
session planned. Everything here is pure data and arithmetic.

Resources are ``caldera.api.resources.Resources`` (integer milli-units), so comparisons are exact.
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from caldera.api.core import Node, Pod, PodDisruptionBudget, PriorityClass, ResourceQuota
from caldera.api.mig import NO_DEVICE_CONFIG, DeviceConfig
from caldera.api.numatopology import Numatopology
from caldera.api.resources import Resources
from caldera.api.topology_tree import HyperNodeTree
from caldera.api.volcano import PodGroup, Queue
from scheduler.api.dra.view import DraView
from scheduler.api.job_sums import JobMap, JobSums, JobTrail, Parts
from scheduler.api.namespace_labels import NamespaceLabels
from scheduler.api.settled import SettledJobs
from scheduler.api.verdicts import VerdictMemory

# Node generations are drawn from one counter for the whole process, so that a generation names
# one state of one node: a verdict stamped with it (``scheduler.api.verdicts``) stays true for
# as long as the node has it, even across sessions and NodeInfos derived again. Jobs draw from
# it too, so that a job's generation, once left, is never given to a later state of the job
# (``JobInfo.restore`` gives an earlier one back).
_generations = itertools.count(1)
_serials = itertools.count(1)  # JobInfo.serial
V = TypeVar("V")


class ChangeLog:
    """Where the changes of a snapshot's nodes (or jobs) are noted: ``note`` is given each
    changed one's name (key). Every node (job) of a snapshot shares one log, so that a session
    redirects the notes by setting ``note``, instead of visiting every node to hook it."""

    __slots__ = ("note", "trail")

    def __init__(self) -> None:
        self.note: Callable[[str], object] | None = None
        # Jobs only: where every change of a job's state is appended, when the snapshot keeps
        # a trail (``ClusterInfo.job_trail``); ``note`` hears of task status changes only.
        self.trail: list[str] | None = None


class TaskStatus(enum.Enum):
    """Where a pod is in its life, as the scheduler sees it (Volcano's task status machine)."""

    PENDING = "Pending"  # waits for a node
    ALLOCATED = "Allocated"  # given a node in this session, not bound yet
    PIPELINED = "Pipelined"  # will get a node once resources being released are free
    BINDING = "Binding"  # bind sent to the API server
    BOUND = "Bound"  # has a node, not running yet
    RUNNING = "Running"
    RELEASING = "Releasing"  # being deleted or evicted
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    # Members are singletons compared by identity: hash them by identity too (C speed;
    # Enum's own __hash__ is Python code, and sessions look statuses up millions of times).
    __hash__ = object.__hash__


# A job's (its PodGroup's) phases before it is admitted: enqueue, or allocate without an
# enqueue action, moves such a job to Inqueue.
PENDING_PHASES = frozenset({"", "Pending"})

# Statuses in which a task holds resources on its node.
ALLOCATED_STATUSES = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
# Statuses that count towards a gang being ready (Volcano's ReadyTaskNum).
READY_STATUSES = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
# Statuses of tasks that were scheduled at some point (for PodGroup phase computation).
SCHEDULED_STATUSES = frozenset(
    {
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
    }
)


def scheduling_signature(pod: Pod | None) -> bytes:
    """What the node filters and scorers read of a pod (selector, affinity, tolerations,
    ports), as bytes: pods with equal signatures are filtered and scored alike."""
    if pod is None:
        return b""
    spec = pod.spec
    return msgspec.json.encode(
        (
            spec.node_selector,
            spec.affinity,
            spec.tolerations,
            [c.ports for c in spec.containers if c.ports],
            [c.ports for c in spec.init_containers if c.ports],
        )
    )


@dataclass(slots=True, eq=False)
class TaskInfo:
    """One pod of a job."""

    uid: str
    namespace: str
    name: str
    job: str  # the job's key, "<namespace>/<podgroup name>"
    role: str  # the task name (volcano.sh/task-spec), "" for pods of other owners
    resreq: Resources  # what it needs to run (containers, overhead)
    init_resreq: Resources  # what it needs to start (max with init containers)
    priority: int
    status: TaskStatus
    node_name: str = ""
    pod: Pod | None = None
    preemptable: bool = True
    scheduled_at: dt.datetime | None = None  # the PodScheduled condition's transition time
    fit_error: str = ""
    # (status, node) of this task's last placement in the session that a statement discarded,
    # as Volcano's LastTransaction: it tells "could be placed, once the gang is" from "no room".
    last_transaction: tuple[TaskStatus, str] | None = None
    _signature: bytes | None = None
    # Derived once (sessions ask for them all the time; namespace, name and requests of a
    # task never change): "<namespace>/<name>", and whether the pod requests nothing
    # (backfill places these).
    key: str = field(init=False)
    best_effort: bool = field(init=False)
    # The placer's class of the pod when not job-local (``Placer.class_key``), kept once asked.
    shared_class: tuple[object, ...] | None = None

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"
        self.best_effort = self.init_resreq.is_empty()

    @property
    def gated(self) -> bool:
        """The pod has a scheduling gate: Kubernetes does not let it be bound."""
        return self.pod is not None and bool(self.pod.spec.scheduling_gates)

    @property
    def signature(self) -> bytes:
        """``scheduling_signature`` of the pod, computed once (the pod does not change within
        a session)."""
        if self._signature is None:
            self._signature = scheduling_signature(self.pod)
        return self._signature


@dataclass(slots=True, frozen=True)
class Memo:
    """What a plugin derived from a job, and the job's state it was derived in."""

    generation: int
    phase: str
    value: object


@dataclass(slots=True, eq=False)
class JobInfo:
    """A PodGroup and its pods."""

    key: str  # "<namespace>/<podgroup name>"
    namespace: str
    name: str
    queue: str
    priority: int
    min_available: int
    min_task_member: dict[str, int]
    min_resources: Resources
    creation: dt.datetime
    podgroup: PodGroup | None = None
    tasks: dict[str, TaskInfo] = field(default_factory=dict)  # by uid
    by_status: dict[TaskStatus, dict[str, TaskInfo]] = field(default_factory=dict)
    allocated: Resources = field(default_factory=Resources)  # of tasks in ALLOCATED_STATUSES
    fit_errors: dict[str, str] = field(default_factory=dict)  # task uid -> why it did not fit
    preemptable: bool = True
    phase: str = ""  # the PodGroup's phase; enqueue moves Pending to Inqueue in the session
    # Told the job's key whenever its tasks change status, when attached: the session's set
    # of such jobs (a snapshot kept across sessions learns from it what to derive again).
    changes: ChangeLog | None = None
    # Renewed on every change of the tasks or of their statuses. With the phase it names the
    # job's state (the other fields are fixed for a JobInfo's life: a changed PodGroup is
    # derived into a new one), so that what plugins derive from a job is kept in ``memo`` (by
    # name, ``Incremental.memo_for_job``) and reused while both stay the same: on the live
    # snapshot a JobInfo outlives the session when nothing changed it (``Memo``). A
    # discarded statement gives the job its generation back (``restore``).
    generation: int = 0
    memo: dict[str, Memo] = field(default_factory=dict)
    best_effort_tasks: int = 0  # how many of the tasks request nothing (kept by add/remove)
    # Kept by add/remove/set_status, as the statuses' buckets are: read by every readiness
    # check of every waiting gang each session.
    ready_tasks: int = 0  # tasks in READY_STATUSES
    pending_best_effort: int = 0  # best-effort tasks still PENDING
    # Tasks whose pods have topology spread constraints (kept by add/remove): a session whose
    # jobs have none registers no spread callbacks, and asks no pod whether it is cross-node.
    spread_tasks: int = 0
    # Drawn when the JobInfo is made. A snapshot adds each job it makes at once and never adds
    # one again (a changed PodGroup is derived into a new JobInfo), so its jobs are in this
    # order: a list of a few of them is put in the snapshot's order by it.
    serial: int = field(default_factory=lambda: next(_serials), init=False)

    def _moved(self) -> None:
        """The job's tasks changed: a new generation, told to the snapshot's trail."""
        self.generation = next(_generations)
        self._tell_trail()

    def mark(self) -> tuple[int, Resources]:
        """The job's state as it is now, for ``restore``."""
        return self.generation, self.allocated

    def restore(self, mark: tuple[int, Resources]) -> None:
        """Name the job's state as ``mark`` named it, once every change since has been undone
        (a statement discarded: each task back in its status and on its node), so that what
        was derived from that state holds again. ``allocated`` is put back as it was, not as
        the undoing left it (a resource added and taken away again would stay listed as 0)."""
        self.generation, self.allocated = mark

    def _tell_trail(self) -> None:
        log = self.changes
        if log is not None and log.trail is not None:
            log.trail.append(self.key)

    def set_phase(self, phase: str) -> None:
        """Move the job to ``phase`` (a session enqueueing it), told to the snapshot's trail."""
        if phase != self.phase:
            self.phase = phase
            self._tell_trail()

    def add_task(self, task: TaskInfo) -> None:
        self._moved()
        self.tasks[task.uid] = task
        if task.best_effort:
            self.best_effort_tasks += 1
        pod = task.pod
        if pod is not None and pod.spec.topology_spread_constraints:
            self.spread_tasks += 1
        self._count(task, task.status, 1)
        self.by_status.setdefault(task.status, {})[task.uid] = task
        if task.status in ALLOCATED_STATUSES:
            self.allocated = self.allocated + task.resreq

    def remove_task(self, task: TaskInfo) -> None:
        """Undo ``add_task`` for the task as it is now."""
        if self.tasks.pop(task.uid, None) is None:
            return
        self._moved()
        if task.best_effort:
            self.best_effort_tasks -= 1
        pod = task.pod
        if pod is not None and pod.spec.topology_spread_constraints:
            self.spread_tasks -= 1
        self._count(task, task.status, -1)
        bucket = self.by_status.get(task.status)
        if bucket is not None:
            bucket.pop(task.uid, None)
        if task.status in ALLOCATED_STATUSES:
            self.allocated = self.allocated - task.resreq

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move a task to ``status``, keeping the per-status index and ``allocated`` right."""
        old = task.status
        if old == status:
            return
        self._moved()
        bucket = self.by_status.get(old)
        if bucket is not None:
            bucket.pop(task.uid, None)
        self._count(task, old, -1)
        self._count(task, status, 1)
        was, now = old in ALLOCATED_STATUSES, status in ALLOCATED_STATUSES
        if was and not now:
            self.allocated = self.allocated - task.resreq
        elif now and not was:
            self.allocated = self.allocated + task.resreq
        task.status = status
        self.by_status.setdefault(status, {})[task.uid] = task
        log = self.changes
        if log is not None and log.note is not None:
            log.note(self.key)

    def _count(self, task: TaskInfo, status: TaskStatus, by: int) -> None:
        if status in READY_STATUSES:
            self.ready_tasks += by
        elif status == TaskStatus.PENDING and task.best_effort:
            self.pending_best_effort += by

    def count(self, *statuses: TaskStatus) -> int:
        total = 0
        by_status = self.by_status
        for status in statuses:
            bucket = by_status.get(status)
            if bucket:
                total += len(bucket)
        return total

    def tasks_in(self, *statuses: TaskStatus) -> Iterator[TaskInfo]:
        for status in statuses:
            yield from list(self.by_status.get(status, {}).values())

    def ready_task_num(self) -> int:
        return self.ready_tasks

    def pending_best_effort_num(self) -> int:
        return self.pending_best_effort

    def is_ready(self) -> bool:
        """Enough tasks placed for the gang to start (pending best-effort pods count too)."""
        return self.ready_task_num() + self.pending_best_effort_num() >= self.min_available

    def pipelined_task_num(self) -> int:
        """Tasks that count towards a pipelined gang: ready, pipelined, pending best-effort."""
        return self.ready_tasks + self.count(TaskStatus.PIPELINED) + self.pending_best_effort

    def is_pipelined(self) -> bool:
        return self.pipelined_task_num() >= self.min_available

    def is_starving(self) -> bool:
        return self.count(TaskStatus.PIPELINED) + self.ready_task_num() < self.min_available

    def valid_task_num(self) -> int:
        return self.count(
            *ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED, TaskStatus.PENDING
        )

    def role_counts(self, statuses: Iterable[TaskStatus]) -> dict[str, int]:
        wanted = set(statuses)
        counts: dict[str, int] = {}
        for task in self.tasks.values():
            if task.status in wanted:
                counts[task.role] = counts.get(task.role, 0) + 1
        return counts

    def total_request(self) -> Resources:
        return Resources.sum(t.resreq for t in self.tasks.values())


# A node's generation and sums (used, releasing, pipelined), for ``NodeInfo.restore``.
NodeMark = tuple[int, Resources, Resources, Resources]


def generations_from_now() -> int:
    """A generation no state has been given yet: every later change gets one at least this
    large, so a state named by a smaller one existed before now."""
    return next(_generations)


@dataclass(slots=True, eq=False)
class NodeInfo:
    """A node and the tasks placed on it."""

    name: str
    allocatable: Resources
    node: Node | None = None
    used: Resources = field(default_factory=Resources)
    releasing: Resources = field(default_factory=Resources)  # of tasks being released here
    pipelined: Resources = field(default_factory=Resources)  # promised to pipelined tasks
    tasks: dict[str, TaskInfo] = field(default_factory=dict)  # by task key
    ready: bool = True
    unschedulable: bool = False
    max_pods: int = 110
    # A new value on every change of the tasks placed here (unique in the process: see
    # ``_generations``), and the node's name noted in ``changes`` (for the session's log, or
    # the verdict memory's between sessions) when one is attached: cached verdicts about this
    # node (``scheduler.actions.placer``) know from them when to look again.
    generation: int = field(default_factory=lambda: next(_generations))
    changes: ChangeLog | None = None

    def _changed(self) -> None:
        self.generation = next(_generations)
        log = self.changes
        if log is not None and log.note is not None:
            log.note(self.name)

    def mark(self) -> NodeMark:
        """The node's state as it is now, for ``restore``."""
        return self.generation, self.used, self.releasing, self.pipelined

    def restore(self, mark: NodeMark) -> None:
        """Name the node's state as ``mark`` named it, once every change since has been
        undone (a statement discarded: the same tasks on it, in the same statuses), so that
        verdicts about that state hold again; the sums are put back as they were."""
        self.generation, self.used, self.releasing, self.pipelined = mark

    @property
    def idle(self) -> Resources:
        return self.allocatable - self.used

    def future_idle(self) -> Resources:
        """What will be free once releasing tasks are gone and pipelined ones have arrived."""
        return self.idle + self.releasing - self.pipelined

    def add_task(self, task: TaskInfo) -> None:
        """Account a task on this node according to its status."""
        if task.key in self.tasks:
            return
        self.tasks[task.key] = task
        self._changed()
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined + task.resreq
            return
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing + task.resreq
        self.used = self.used + task.resreq

    def remove_task(self, task: TaskInfo) -> None:
        """Undo ``add_task`` for the task as it is now."""
        if self.tasks.pop(task.key, None) is None:
            return
        self._changed()
        if task.status == TaskStatus.PIPELINED:
            self.pipelined = self.pipelined - task.resreq
            return
        if task.status == TaskStatus.RELEASING:
            self.releasing = self.releasing - task.resreq
        self.used = self.used - task.resreq

    def pod_count(self) -> int:
        return len(self.tasks)


@dataclass(slots=True, eq=False)
class QueueInfo:
    """A queue and its limits."""

    name: str
    weight: int = 1
    capability: Resources | None = None  # None: unlimited
    guarantee: Resources = field(default_factory=Resources)
    deserved: Resources = field(default_factory=Resources)  # spec.deserved (capacity)
    reclaimable: bool = True
    state: str = "Open"
    parent: str = ""
    priority: int = 0
    # spec.dequeueStrategy: "fifo" holds the queue's later jobs back in a session while its
    # first job cannot be admitted or placed; "traverse" (the default) moves on to them.
    dequeue_strategy: str = "traverse"
    queue: Queue | None = None

    @property
    def fifo(self) -> bool:
        return self.dequeue_strategy == "fifo"

    @property
    def open(self) -> bool:
        return self.state in ("Open", "")


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's measured load (Volcano's NodeUsage over its one period): average cpu and memory
    use in percent (0-100) and when the metrics source measured them."""

    cpu: float
    memory: float
    measured: dt.datetime


@dataclass(slots=True, eq=False)
class ClusterInfo:
    """A session's snapshot: every schedulable job, node and queue."""

    jobs: dict[str, JobInfo] = field(default_factory=dict)
    nodes: dict[str, NodeInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    namespace_weights: dict[str, int] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)  # by name
    # By namespace, for the resourcequota and pdb plugins.
    resource_quotas: dict[str, tuple[ResourceQuota, ...]] = field(default_factory=dict)
    disruption_budgets: dict[str, tuple[PodDisruptionBudget, ...]] = field(default_factory=dict)
    # The HyperNodes resolved against the nodes (empty: no HyperNode, topology-blind).
    hypernodes: HyperNodeTree = field(default_factory=HyperNodeTree)
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    # Node load by node name, from the metrics source the process reads (the usage and
    # rescheduling plugins); empty when none is configured.
    node_usage: dict[str, NodeUsage] = field(default_factory=dict)
    # Whether the process reads a metrics source at all (node_usage may still be empty: nothing
    # read yet, or the source down); the rescheduling plugin then weighs the measured load.
    load_measured: bool = False
    # Numatopology objects by node name (the numa-aware plugin); empty when no configuration
    # names that plugin, as the process watches them only then.
    numa_topologies: dict[str, Numatopology] = field(default_factory=dict)
    # The GPU cards given to pods whose bind is in flight (pod uid -> the
    # volcano.sh/vgpu-ids-new text written with the bind, or volcano.sh/gpu-index in the
    # older GPU memory / number mode), for the deviceshare plugin.
    device_grants: dict[str, str] = field(default_factory=dict)
    # The MIG geometries the process read from the device ConfigMap, for the deviceshare
    # plugin's MIG nodes (caldera.api.mig); its problem says why none was read.
    device_config: DeviceConfig = NO_DEVICE_CONFIG
    # ResourceClaims, DeviceClasses and ResourceSlices (Dynamic Resource Allocation); None
    # when the process does not watch them (no pod uses a claim, DRA not configured).
    dra: DraView | None = None
    # Kept by the live snapshot across sessions; None: verdicts live one session.
    verdicts: VerdictMemory | None = None
    # The namespaces' labels, which resolve inter-pod affinity terms' namespaceSelector
    # (scheduler.api.namespace_labels); None when the process does not watch Namespaces.
    namespace_labels: NamespaceLabels | None = None
    # The ready nodes' allocatable, and what the nodes' tasks use, summed as of the session's
    # start, when the live snapshot keeps them up to date; None: summed when asked.
    ready_allocatable: Resources | None = None
    nodes_used: Resources | None = None
    # Hard node sharding (scheduler.sharding): the nodes outside the scheduler's shard are not
    # in the snapshot, but the cluster's totals count them, as Volcano's (a queue's share is
    # of the whole cluster, its allocation counts pods everywhere); None: no sharding.
    outside_allocatable: Resources | None = None
    outside_used: Resources | None = None
    # The logs every node and every job of the snapshot note their changes in, and whether
    # each of them has been attached to them (the live snapshot attaches new ones as they
    # come; a session attaches them all to a snapshot that does not say so).
    node_log: ChangeLog = field(default_factory=ChangeLog)
    job_log: ChangeLog = field(default_factory=ChangeLog)
    logs_attached: bool = False
    # Per-group sums of what jobs contribute, by the name of what is summed (``sums``): they
    # live as long as the snapshot, so on the live snapshot across sessions.
    job_sums: dict[str, JobSums] = field(default_factory=dict)
    # Values derived per job, kept the same way (``job_map``), by name: the context they were
    # derived in (compared by identity) and the map.
    job_maps: dict[str, tuple[object, JobMap[Any]]] = field(default_factory=dict)
    # Values derived from the snapshot as a whole (``Incremental.memo_for_cluster``), by
    # name: what they were derived from and the value.
    derived: dict[str, tuple[object, Any]] = field(default_factory=dict)
    # Every change of a job's state, when the snapshot keeps the trail (the live snapshot:
    # every job attached, every job added, derived again or gone appended); None: sums compare
    # every job with what they kept.
    job_trail: JobTrail | None = None
    # The jobs whose session outcome is known until the trail names them (only with a trail).
    settled: SettledJobs | None = None
    # What a plugin keeps across sessions by its name, on the live snapshot (carried over when
    # it is built again): only a cache of what the plugin also writes to the API (the
    # reservation plugin's PodGroup annotation), which a new process reads back.
    plugin_memory: dict[str, Any] = field(default_factory=dict)

    def sums(
        self,
        name: str,
        group_of: Callable[[JobInfo], str],
        parts_of: Callable[[JobInfo], Parts],
        width: int,
    ) -> JobSums:
        """The sums kept under ``name`` (one name, one pair of functions), brought up to date
        with the jobs as they are now: only jobs that changed since the last call are looked
        at again (``scheduler.api.job_sums``)."""
        kept = self.job_sums.get(name)
        if kept is None:
            kept = self.job_sums[name] = JobSums(group_of, parts_of, width)
        kept.refresh(self.jobs, self.job_trail)
        return kept

    def job_map(self, name: str, derive: Callable[[JobInfo], V], context: object) -> JobMap[V]:
        """The values kept under ``name`` (one name, one function), brought up to date with
        the jobs as they are now; derived afresh for every job when ``context`` (what else
        ``derive`` reads, such as the cluster's total) is not the object it was."""
        kept = self.job_maps.get(name)
        if kept is None or kept[0] is not context:
            kept = self.job_maps[name] = (context, JobMap(derive))
        values: JobMap[V] = kept[1]
        values.refresh(self.jobs, self.job_trail)
        return values

    def trim_job_trail(self) -> None:
        """Drop what every kept sum and map has read of the trail; one left too far behind
        (its plugin no longer configured) is dropped instead and would start again from
        every job."""
        trail = self.job_trail
        if trail is None:
            return
        oldest = trail.end - max(4 * len(self.jobs), 1024)

        def behind(position: int | None) -> bool:
            return position is None or position < oldest

        for name in [n for n, s in self.job_sums.items() if behind(s.position)]:
            del self.job_sums[name]
        for name in [n for n, (_, m) in self.job_maps.items() if behind(m.position)]:
            del self.job_maps[name]
        positions = [s.position for s in self.job_sums.values()]
        positions += [m.position for _, m in self.job_maps.values()]
        if self.settled is not None:
            positions.append(self.settled.position)
        trail.trim(min((p for p in positions if p is not None), default=trail.end))

    def total_allocatable(self) -> Resources:
        if self.ready_allocatable is not None:
            total = self.ready_allocatable
        else:
            total = Resources.sum(n.allocatable for n in self.nodes.values() if n.ready)
        return total if self.outside_allocatable is None else total + self.outside_allocatable

    def total_used(self) -> Resources:
        """What the nodes' tasks use; read at a session's start (before it places anything)."""
        if self.nodes_used is not None:
            used = self.nodes_used
        else:
            used = Resources.sum(n.used for n in self.nodes.values())
        return used if self.outside_used is None else used + self.outside_used
