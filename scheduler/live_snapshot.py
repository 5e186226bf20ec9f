"""The session's snapshot kept up to date from the cache's changes, not rebuilt every period.

``scheduler.snapshot.build_cluster`` derives a ClusterInfo from every cached object; at 5,000
nodes and 50,000 pods that alone costs a third of a second, every period, for a cluster where
nothing happens. ``LiveSnapshot`` keeps one ClusterInfo across sessions and derives again only
what changed since the last session (kube-scheduler's ``UpdateSnapshot`` copies only the
NodeInfos whose generation moved; Volcano clones its whole cache every session):

- the informer handlers only note keys (``pod_changed``, ``node_changed``, ``podgroup_changed``,
  ``queue_changed``, ``priority_class_changed``, ``resource_quota_changed``,
  ``disruption_budget_changed``): cheap, in the event loop; a node's update is noted only when
  it changes what the scheduler reads (``node_updated``: a heartbeat alone is no news);
- ``update`` (before a session, in the event loop) derives the noted pods, PodGroups and nodes
  again with the very functions ``build_cluster`` uses (``task_placement``, ``job_info``,
  ``node_info``), plus the pods whose assumed bind appeared or went; a changed PodGroup takes
  its pods with it, and a node is rebuilt from the tasks the snapshot knows on it. A change of
  the priority classes or of the set of queues, which every job depends on, rebuilds all;
- the session then changes the ClusterInfo as it plans (tasks allocated, pipelined, evicted,
  jobs enqueued); it tells what it touched (``Session.node_changes``, ``Session.job_changes``,
  and a job's phase or fit errors), and ``after_session`` notes those nodes and jobs, so the
  next ``update`` derives them again from the cache: what a session planned never leaks into
  the next one;
- a job whose tasks are as the session found them (no statement touched them, or every
  statement on them was discarded, which puts each task back as it was) keeps its JobInfo
  and tasks, and so does one whose PodGroup changed only where ``job_info`` does not read
  (its spec, name and creation as they were: a status written back, a why record): the
  PodGroup, the phase it gives, the fit errors and last placements (the session's other
  marks) and, after a discard, ``allocated`` are set as ``job_info`` and ``add_task`` would
  set them. A backlog of waiting gangs, retried and discarded every session and their
  conditions written every session, is not derived again pod by pod every session; nor are
  the nodes every statement on them gave back (``Session.changed_nodes``), only logged for
  the placer's classes that looked at them in between.

Across sessions it also keeps, for the session's own shortcuts, the nodes' verdicts per class
of pod (``ClusterInfo.verdicts``: every node the update derives again, adds, removes or
changes the tasks of is logged, so placers look again only at those), the ready nodes'
allocatable and used resources summed (each node's part is replaced when it changes), and a
trail of the jobs that changed (``ClusterInfo.job_trail``: every job is attached to it, and the
update appends every job it derives again or drops), from which sums and values per job are
kept by difference (``scheduler.api.job_sums``) and settled jobs are unsettled
(``scheduler.api.settled``). The change logs are attached once to each node and job as it is
derived, and redirected by sessions as they begin and end.

The result equals ``build_cluster``'s for the same objects (``unit/test_sched_live_snapshot.py``
checks it over random changes and sessions), except for the order of tasks within a job or a
node and of jobs, which follows the order of changes rather than of the cache. A session
costs what is pending and what changed, not what runs.

Not thread-safe by design: ``update`` and ``after_session`` run in the event loop, the session
in a worker thread in between; handlers during the session only note keys.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from caldera.api.core import Node, Pod, PodDisruptionBudget, PriorityClass, ResourceQuota
from caldera.api.resources import Resources
from caldera.api.topology import HyperNode
from caldera.api.volcano import PodGroup, Queue
from scheduler.api.job_sums import JobTrail
from scheduler.api.types import (
    ALLOCATED_STATUSES,
    ClusterInfo,
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from scheduler.api.verdicts import VerdictMemory
from scheduler.framework.session import Session
from scheduler.snapshot import (
    Derivation,
    RequestsFn,
    SnapshotReport,
    by_namespace,
    group_key,
    hypernode_tree,
    job_info,
    node_info,
    node_moved,
    pod_resources,
    queue_info,
    skeleton,
    task_placement,
)

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
_NONE = Resources()  # a node's part in the ready total while it is not ready


class Objects(Protocol[T_co]):
    """The read side of an informer store: by key ("ns/name", or "name"), or all."""

    def get(self, key: str) -> T_co | None: ...

    def list(self) -> Sequence[T_co]: ...


class KeyedObjects(Generic[T]):
    """``Objects`` over a plain dict, for callers without informers (tests, benchmarks): an
    update keeps the object's position, as in an informer store."""

    def __init__(self) -> None:
        self.items: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        return self.items.get(key)

    def list(self) -> list[T]:
        return list(self.items.values())


@dataclass(frozen=True)
class CachedObjects:
    """The stores a snapshot is derived from (the scheduler's informer stores)."""

    pods: Objects[Pod]
    nodes: Objects[Node]
    podgroups: Objects[PodGroup]
    queues: Objects[Queue]
    priority_classes: Objects[PriorityClass]
    # Read only by the resourcequota and pdb plugins; callers without them pass none.
    resource_quotas: Objects[ResourceQuota] = field(default_factory=KeyedObjects)
    disruption_budgets: Objects[PodDisruptionBudget] = field(default_factory=KeyedObjects)
    hypernodes: Objects[HyperNode] | None = None  # None: no HyperNode informer (tests)


def _key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def _queue_fields(info: QueueInfo) -> tuple[object, ...]:
    """What jobs and plugins read of a queue (not the object it came from)."""
    return (
        info.name,
        info.weight,
        info.capability,
        info.guarantee,
        info.reclaimable,
        info.state,
        info.parent,
        info.priority,
    )


class LiveSnapshot:
    """One ClusterInfo, kept up to date; see the module docstring."""

    def __init__(
        self, *, scheduler_names: Iterable[str] = ("volcano",), requests: RequestsFn = pod_resources
    ) -> None:
        self.scheduler_names = tuple(scheduler_names)
        self.requests = requests
        self.cluster: ClusterInfo | None = None
        self.report = SnapshotReport()
        self.rebuilds = 0  # full derivations, for tests and metrics
        self._how = Derivation.of((), self.scheduler_names, requests)
        # Noted since the last update.
        self._pods: set[str] = set()
        self._nodes: set[str] = set()
        self._groups: set[str] = set()
        # Jobs a session's statements touched: derived again whole, even when their PodGroup
        # allows setting them right in place (``_in_place``).
        self._touched_jobs: set[str] = set()
        # Jobs whose every statement a session discarded: set right in place, ``allocated``
        # summed again.
        self._discarded: set[str] = set()
        self._queues_changed = False
        self._classes_changed = False
        self._quotas_changed = False
        self._budgets_changed = False
        # The HyperNode tree is resolved again when a HyperNode changes, or, while there are
        # HyperNodes, when a node comes, goes or changes its labels.
        self._hypernodes_changed = False
        self._node_labels: dict[str, dict[str, str]] = {}
        self._news = False  # a handler noted something since the last update
        # What the snapshot knows, by pod key.
        self._tasks: dict[str, TaskInfo] = {}  # the pod's task, when the snapshot has one
        self._task_node: dict[str, str] = {}  # the node it holds resources on
        self._on_node: dict[str, dict[str, TaskInfo]] = {}  # node -> pod key -> task
        self._group_pods: dict[str, set[str]] = {}  # group key -> keys of pods naming it
        self._pod_group: dict[str, str] = {}
        self._pod_uid: dict[str, str] = {}
        self._uid_key: dict[str, str] = {}
        self._assumed: dict[str, str] = {}
        # Nodes whose tasks an update changed in place, and each node's part in the totals
        # the ClusterInfo keeps (``_sum_nodes``).
        self._touched: set[str] = set()
        self._node_parts: dict[str, tuple[Resources, Resources]] = {}

    # ---- noting changes (informer handlers) ---------------------------------------------------

    def pod_changed(self, pod: Pod) -> None:
        self._pods.add(_key(pod))
        self._news = True

    def node_changed(self, node: Node) -> None:
        self._nodes.add(node.metadata.name)
        self._news = True

    def node_updated(self, old: Node, new: Node) -> None:
        """An update of a node, noted only when it changes what the scheduler reads
        (``node_moved``): a heartbeat alone is no news."""
        if node_moved(old, new):
            self.node_changed(new)

    def podgroup_changed(self, pg: PodGroup, *, news: bool = True) -> None:
        """``news`` False: a change the caller knows no session decides on (the simulator's
        status writes that keep the phase, ``simulator.engine.phase_kept``); the next update
        derives the group all the same, but the change alone does not call for a session."""
        self._groups.add(f"{pg.metadata.namespace}/{pg.metadata.name}")
        if news:
            self._news = True

    def queue_changed(self, _queue: Queue) -> None:
        self._queues_changed = True
        self._news = True

    def hypernode_changed(self, _hn: HyperNode) -> None:
        self._hypernodes_changed = True
        self._news = True

    def priority_class_changed(self, _pc: PriorityClass) -> None:
        self._classes_changed = True
        self._news = True

    def resource_quota_changed(self, _quota: ResourceQuota) -> None:
        self._quotas_changed = True
        self._news = True

    def disruption_budget_changed(self, _budget: PodDisruptionBudget) -> None:
        self._budgets_changed = True
        self._news = True

    def has_news(self, assumed: Mapping[str, str]) -> bool:
        """Whether the next update would see anything new: a noted change, or an assumed
        bind that came or went (what sessions planned and ``after_session`` undoes is not
        news: the next update derives it again as it was)."""
        return self.cluster is None or self._news or assumed != self._assumed

    def pod_key(self, uid: str) -> str | None:
        """The store key of the pod with ``uid``, as of the last update."""
        return self._uid_key.get(uid)

    # ---- the snapshot -------------------------------------------------------------------------

    def update(
        self,
        objects: CachedObjects,
        *,
        assumed: Mapping[str, str],
        now: dt.datetime | None = None,
    ) -> tuple[ClusterInfo, SnapshotReport]:
        """The ClusterInfo for the next session, with what changed derived again."""
        now = now or dt.datetime.now(dt.UTC)
        self._news = False
        cluster = self.cluster
        if cluster is None or self._classes_changed or self._queue_set_changed(objects.queues):
            return self._rebuild(objects, assumed, now)
        cluster.now = now
        if self._queues_changed:
            for q in objects.queues.list():
                cluster.queues[q.metadata.name] = queue_info(q)
            self._queues_changed = False
        self._derive_namespaced(objects, cluster)
        self._note_assumed(assumed)
        stale_nodes = self._nodes
        for group in self._groups:
            self._derive_group(group, objects.podgroups, cluster)
        for key in self._pods:
            self._derive_pod(key, objects.pods, cluster, stale_nodes)
        if self._hypernodes_changed or (cluster.hypernodes and self._labels_moved(objects)):
            self._resolve_hypernodes(objects, cluster)
        for name in stale_nodes:
            self._derive_node(name, objects.nodes, cluster)
        self._sum_nodes(cluster, self._touched | stale_nodes)
        self._pods, self._nodes, self._groups, self._touched = set(), set(), set(), set()
        self._touched_jobs, self._discarded = set(), set()
        return cluster, self.report

    def _labels_moved(self, objects: CachedObjects) -> bool:
        """Whether a noted node came, went or changed its labels (what HyperNodes select)."""
        moved = False
        for name in self._nodes:
            node = objects.nodes.get(name)
            labels = node.metadata.labels if node is not None else None
            if self._node_labels.get(name) != labels:
                moved = True
                if labels is None:
                    self._node_labels.pop(name, None)
                else:
                    self._node_labels[name] = labels
        return moved

    def _resolve_hypernodes(self, objects: CachedObjects, cluster: ClusterInfo) -> None:
        nodes = objects.nodes.list()
        listed = objects.hypernodes.list() if objects.hypernodes is not None else ()
        cluster.hypernodes = hypernode_tree(listed, nodes)
        self._node_labels = {n.metadata.name: n.metadata.labels for n in nodes}
        self._hypernodes_changed = False

    def tasks_on(self, node: str) -> Iterable[TaskInfo]:
        """The tasks the snapshot knows on ``node``, whether or not the node is in the
        snapshot (hard sharding counts what runs outside its shard in the cluster's totals)."""
        return self._on_node.get(node, {}).values()

    def after_session(self, session: Session) -> None:
        """Note what the session changed, so that the next update derives it again."""
        cluster = self.cluster
        if cluster is None:
            return
        changed = session.changed_nodes()
        self._nodes.update(changed)
        if cluster.verdicts is not None:
            # A node every statement on it gave back is as it was, not derived again; but a
            # class may have looked at it in between: it looks again (finding its verdict).
            cluster.verdicts.log.extend(
                n for n in dict.fromkeys(session.node_changes) if n not in changed
            )
        touched = session.job_changes
        # Jobs a committed statement changed: their tasks keep what the session planned.
        result = session.result
        kept = {b.task.job for b in result.binds} | {e.task.job for e in result.evictions}
        # A settled job was not touched, has no fit error and keeps its PodGroup's phase.
        for job in session.incremental.unsettled_jobs():
            key = job.key
            pg_phase = job.podgroup.status.phase if job.podgroup is not None else ""
            if key in touched and (key in kept or _holds_plans(job)):
                self._groups.add(key)
                self._touched_jobs.add(key)
            elif key in touched:
                self._groups.add(key)  # every statement on it discarded: set right in place
                self._discarded.add(key)
            elif job.fit_errors or job.phase != (pg_phase or "Pending"):
                self._groups.add(key)  # set right in place by the next update
        _between_sessions(cluster)
        cluster.trim_job_trail()

    # ---- deriving -----------------------------------------------------------------------------

    def _queue_set_changed(self, queues: Objects[Queue]) -> bool:
        """Whether queues appeared or went, or changed what jobs read (a job's queue decides
        whether the job is in the snapshot at all)."""
        if not self._queues_changed or self.cluster is None:
            return False
        derived = {q.metadata.name: queue_info(q) for q in queues.list()}
        current = self.cluster.queues
        if derived.keys() != current.keys():
            return True
        return any(_queue_fields(derived[n]) != _queue_fields(current[n]) for n in derived)

    def _rebuild(
        self, objects: CachedObjects, assumed: Mapping[str, str], now: dt.datetime
    ) -> tuple[ClusterInfo, SnapshotReport]:
        """Derive everything, as ``build_cluster`` does, and index it."""
        classes = objects.priority_classes.list()
        self._how = Derivation.of(classes, self.scheduler_names, self.requests)
        cluster, self.report = skeleton(
            nodes=objects.nodes.list(),
            podgroups=objects.podgroups.list(),
            queues=objects.queues.list(),
            priority_classes=classes,
            how=self._how,
            now=now,
            resource_quotas=objects.resource_quotas.list(),
            disruption_budgets=objects.disruption_budgets.list(),
            hypernodes=objects.hypernodes.list() if objects.hypernodes is not None else (),
        )
        # Node labels matter only while HyperNodes select nodes (a HyperNode's arrival
        # resolves the tree again and records them then).
        self._node_labels = (
            {n.metadata.name: n.metadata.labels for n in objects.nodes.list()}
            if cluster.hypernodes
            else {}
        )
        self._hypernodes_changed = False
        if self.cluster is not None:  # plugins' memory outlives a rebuild (ClusterInfo)
            cluster.plugin_memory = self.cluster.plugin_memory
        self.cluster = cluster
        self.rebuilds += 1
        self._assumed = dict(assumed)
        self._tasks, self._task_node, self._on_node = {}, {}, {}
        self._group_pods, self._pod_group, self._pod_uid, self._uid_key = {}, {}, {}, {}
        for pod in objects.pods.list():
            self._add_pod(_key(pod), pod, cluster, set())
        # Every NodeInfo is new: no verdict from before applies (a fresh memory), and from
        # now on node changes are logged for the verdicts of later sessions. Every node and
        # job is attached to the snapshot's change logs, and each one to come will be.
        cluster.verdicts = VerdictMemory()
        for node in cluster.nodes.values():
            node.changes = cluster.node_log
        for job in cluster.jobs.values():
            job.changes = cluster.job_log
        cluster.logs_attached = True
        cluster.job_trail = JobTrail()
        cluster.job_log.trail = cluster.job_trail.keys
        _between_sessions(cluster)
        self._sum_nodes(cluster, None)
        self._pods, self._nodes, self._groups, self._touched = set(), set(), set(), set()
        self._touched_jobs, self._discarded = set(), set()
        self._queues_changed = self._classes_changed = False
        self._quotas_changed = self._budgets_changed = False
        return cluster, self.report

    def _derive_namespaced(self, objects: CachedObjects, cluster: ClusterInfo) -> None:
        """ResourceQuotas and PodDisruptionBudgets again, when one of them changed (few
        objects: all of them are grouped again)."""
        if self._quotas_changed:
            cluster.resource_quotas = by_namespace(objects.resource_quotas.list())
            self._quotas_changed = False
        if self._budgets_changed:
            cluster.disruption_budgets = by_namespace(objects.disruption_budgets.list())
            self._budgets_changed = False

    def _index_pod(self, key: str, pod: Pod | None) -> None:
        old_group = self._pod_group.pop(key, None)
        if old_group:
            self._group_pods.get(old_group, set()).discard(key)
        old_uid = self._pod_uid.pop(key, None)
        if old_uid is not None:
            self._uid_key.pop(old_uid, None)
        if pod is None:
            return
        group = group_key(pod)
        if group:
            self._pod_group[key] = group
            self._group_pods.setdefault(group, set()).add(key)
        self._pod_uid[key] = pod.metadata.uid
        self._uid_key[pod.metadata.uid] = key

    def _note_assumed(self, assumed: Mapping[str, str]) -> None:
        """Pods whose assumed bind appeared, went or moved are derived again."""
        if assumed == self._assumed:
            return
        for uid in self._assumed.keys() | assumed.keys():
            if self._assumed.get(uid) != assumed.get(uid):
                key = self._uid_key.get(uid)
                if key is not None:
                    self._pods.add(key)
        self._assumed = dict(assumed)

    def _derive_group(self, group: str, podgroups: Objects[PodGroup], cluster: ClusterInfo) -> None:
        """Derive a PodGroup's job again, and note its pods (their tasks name the job); or
        set it right in place when that gives the same job (``_in_place``)."""
        if cluster.job_trail is not None:
            cluster.job_trail.keys.append(group)
        job, pg = cluster.jobs.get(group), podgroups.get(group)
        if (
            job is not None
            and pg is not None
            and group not in self._touched_jobs
            and _same_job(job.podgroup, pg)
        ):
            _in_place(job, pg, discarded=group in self._discarded)
            return
        cluster.jobs.pop(group, None)
        self.report.missing_queue.pop(group, None)
        pg = podgroups.get(group)
        if pg is not None:
            if pg.spec.queue in cluster.queues:
                job = cluster.jobs[group] = job_info(pg, self._how)
                job.changes = cluster.job_log
            else:
                self.report.missing_queue[group] = pg.spec.queue
        self._pods.update(self._group_pods.get(group, ()))

    def _derive_pod(
        self, key: str, pods: Objects[Pod], cluster: ClusterInfo, stale_nodes: set[str]
    ) -> None:
        """Take the pod's old task out (of its job, and of its node unless that node is
        rebuilt anyway) and put its new one in."""
        old = self._tasks.pop(key, None)
        if old is not None:
            job = cluster.jobs.get(old.job) if old.job else None
            if job is not None and job.tasks.get(old.uid) is old:  # it counted in this job
                job.remove_task(old)
            node_name = self._task_node.pop(key, None)
            if node_name is not None:
                self._on_node.get(node_name, {}).pop(key, None)
                node = cluster.nodes.get(node_name)
                if node is not None and node_name not in stale_nodes:
                    node.remove_task(old)
                    self._touched.add(node_name)
        self._add_pod(key, pods.get(key), cluster, stale_nodes)

    def _add_pod(
        self, key: str, pod: Pod | None, cluster: ClusterInfo, stale_nodes: set[str]
    ) -> None:
        """Index the pod and place its task as ``build_cluster`` would."""
        self._index_pod(key, pod)
        if pod is None:
            return
        group = self._pod_group.get(key, "")
        job = cluster.jobs.get(group) if group else None
        placed = task_placement(pod, job, self._assumed.get(pod.metadata.uid), self._how)
        if placed is None:
            return
        task = self._tasks[key] = placed.task
        if placed.in_job and job is not None:
            job.add_task(task)
        if placed.on_node:
            self._task_node[key] = task.node_name
            self._on_node.setdefault(task.node_name, {})[key] = task
            node = cluster.nodes.get(task.node_name)
            if node is not None and task.node_name not in stale_nodes:
                node.add_task(task)
                self._touched.add(task.node_name)

    def _derive_node(self, name: str, nodes: Objects[Node], cluster: ClusterInfo) -> None:
        """A node derived again, with the tasks the snapshot knows on it (logged for the
        verdict memory)."""
        obj = nodes.get(name)
        if cluster.verdicts is not None:
            cluster.verdicts.log.append(name)
        if obj is None:
            cluster.nodes.pop(name, None)
            return
        node = node_info(obj)
        for task in self._on_node.get(name, {}).values():
            node.add_task(task)
        node.changes = cluster.node_log
        cluster.nodes[name] = node

    def _sum_nodes(self, cluster: ClusterInfo, names: Iterable[str] | None) -> None:
        """Bring the ready nodes' allocatable and the nodes' use, summed, up to date with
        the nodes ``names`` (None: every node, from scratch), from each node's last
        contribution: a session's totals cost what changed, not the number of nodes."""
        parts = self._node_parts
        ready, used = cluster.ready_allocatable, cluster.nodes_used
        if names is None or ready is None or used is None:
            parts.clear()
            ready, used, names = Resources(), Resources(), cluster.nodes.keys()
        for name in names:
            old = parts.pop(name, None)
            if old is not None:
                ready, used = ready - old[0], used - old[1]
            node = cluster.nodes.get(name)
            if node is not None:
                part = parts[name] = (node.allocatable if node.ready else _NONE, node.used)
                ready, used = ready + part[0], used + part[1]
        if ready == cluster.ready_allocatable:
            # The same object while the total is the same: what plugins derive from the
            # total is kept by its identity (drf's job shares).
            ready = cluster.ready_allocatable
        cluster.ready_allocatable, cluster.nodes_used = ready, used


def _same_job(old: PodGroup | None, new: PodGroup) -> bool:
    """Whether ``job_info`` derives the same job from ``new`` as from ``old`` but for the
    PodGroup itself and its phase: the same spec, name and creation."""
    return (
        old is not None
        and old.spec == new.spec
        and old.metadata.name == new.metadata.name
        and old.metadata.namespace == new.metadata.namespace
        and old.metadata.creation_timestamp == new.metadata.creation_timestamp
    )


def _holds_plans(job: JobInfo) -> bool:
    """Whether a statement the session kept left tasks of the job allocated or pipelined."""
    return bool(job.by_status.get(TaskStatus.ALLOCATED) or job.by_status.get(TaskStatus.PIPELINED))


def _in_place(job: JobInfo, pg: PodGroup, *, discarded: bool) -> None:
    """Set a job whose tasks are as its unchanged pods give them (no statement touched it,
    or every one was discarded) to what ``job_info`` and those pods would derive: the
    PodGroup, the phase it gives, no fit errors or last placements (a session's marks), and,
    after discarded statements, ``allocated`` summed as ``add_task`` sums it (a resource
    added and taken away again stays listed as 0 otherwise)."""
    job.podgroup = pg
    for uid in job.fit_errors:
        task = job.tasks.get(uid)
        if task is not None:
            task.fit_error = ""
    job.fit_errors.clear()
    for task in job.tasks.values():
        task.last_transaction = None  # a discard's, or a replayed turn's (actions.retry)
    if discarded:
        job.allocated = Resources.sum(
            t.resreq for t in job.tasks.values() if t.status in ALLOCATED_STATUSES
        )
    job.set_phase(pg.status.phase or "Pending")


def _between_sessions(cluster: ClusterInfo) -> None:
    """Point the snapshot's change logs where changes go between sessions: nodes' into the
    verdict memory's log, which the next session's placers read; jobs' nowhere (the session's
    set must not keep growing)."""
    cluster.node_log.note = cluster.verdicts.log.append if cluster.verdicts is not None else None
    cluster.job_log.note = None
