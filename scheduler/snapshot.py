"""Build a session's ClusterInfo from the scheduler's cached objects.

What the snapshot holds (Volcano's rules):
- every PodGroup whose queue exists becomes a job; its pods are those annotated with its name
  (``scheduling.k8s.io/group-name``); pods without the annotation wait for the PodGroup
  controller; PodGroups of missing queues are left out and reported;
- every node, with the resources of ALL pods bound to it (any scheduler's), so Caldera never
  overcommits a node another scheduler also uses;
- the ResourceQuotas and PodDisruptionBudgets, by namespace (the resourcequota and pdb plugins
  read them);
- pods this process has bound but the cache has not seen bound yet ("assumed") count as Binding
  on their node, so a slow watch never lets a node be given out twice;
- the HyperNodes, resolved against the nodes' names and labels (``hypernode_tree``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from caldera.api.core import (
    Container,
    Node,
    Pod,
    PodDisruptionBudget,
    PodSpec,
    PriorityClass,
    ResourceQuota,
)
from caldera.api.meta import ResourceList, condition_is_true, find_condition, parse_time
from caldera.api.resources import Resources, pod_requests
from caldera.api.topology import HyperNode
from caldera.api.topology_tree import HyperNodeTree, build_tree
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, TASK_SPEC_KEY, PodGroup, Queue
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
Figures = tuple[Resources, Resources]  # what a pod needs to run, and to start
RequestsFn = Callable[[Pod], Figures]
Namespaced = TypeVar("Namespaced", ResourceQuota, PodDisruptionBudget)


def pod_resources(pod: Pod) -> Figures:
    """(what the pod needs to run, what it needs to start): containers and overhead, then the
    same raised to any init container's needs."""
    spec = msgspec.to_builtins(pod.spec)
    running = pod_requests({k: v for k, v in spec.items() if k != "initContainers"})
    return running, pod_requests(spec)


# What ``pod_resources`` reads of a pod (containers, init containers, overhead), and its figures.
_Shape = tuple[tuple[Container, ...], tuple[Container, ...], ResourceList, Figures]
# How many task shapes ``CachedRequests`` keeps before it starts again (a bound, not a tuning:
# a busy cluster has far fewer live tasks).
_MAX_SHAPES = 4096


class CachedRequests:
    """``pod_resources`` memoised by pod uid, for the pod's resourceVersion or its spec (what
    ``pod_resources`` reads): a session over 10,000 pods should not re-parse 10,000
    quantities every second, nor a pod's whose status alone changed. A new pod of a task
    whose earlier pod had the same containers and overhead (what ``pod_resources`` reads)
    gets that pod's figures: the pods of one task share their template."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str, PodSpec, Figures]] = {}
        # By (namespace, PodGroup, task): the last pod's containers, init containers and
        # overhead, and its figures.
        self._shapes: dict[tuple[str, str, str], _Shape] = {}

    def __call__(self, pod: Pod) -> Figures:
        uid, rv, spec = pod.metadata.uid, pod.metadata.resource_version, pod.spec
        hit = self._cache.get(uid)
        if hit is not None and (hit[0] == rv or hit[1] is spec or hit[1] == spec):
            if hit[0] != rv:
                self._cache[uid] = (rv, spec, hit[2])
            return hit[2]
        value = self._of_task(pod)
        self._cache[uid] = (rv, spec, value)
        return value

    def _of_task(self, pod: Pod) -> Figures:
        annotations = pod.metadata.annotations
        group = annotations.get(KUBE_GROUP_NAME_KEY)
        if group is None:
            return pod_resources(pod)
        spec = pod.spec
        key = (pod.metadata.namespace, group, annotations.get(TASK_SPEC_KEY, ""))
        kept = self._shapes.get(key)
        if (
            kept is not None
            and kept[0] == spec.containers
            and kept[1] == spec.init_containers
            and kept[2] == spec.overhead
        ):
            return kept[3]
        value = pod_resources(pod)
        if len(self._shapes) >= _MAX_SHAPES:
            self._shapes.clear()
        self._shapes[key] = (spec.containers, spec.init_containers, spec.overhead, value)
        return value

    def forget(self, live_uids: Iterable[str]) -> None:
        keep = set(live_uids)
        for uid in [u for u in self._cache if u not in keep]:
            del self._cache[uid]

    def discard(self, uid: str) -> None:
        """Forget one pod (it was deleted)."""
        self._cache.pop(uid, None)


def task_status(pod: Pod) -> TaskStatus:
    """The scheduler's status of a pod."""
    if pod.metadata.deletion_timestamp:
        return TaskStatus.RELEASING
    phase = pod.status.phase
    if phase == "Running":
        return TaskStatus.RUNNING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    if phase == "Unknown":
        return TaskStatus.UNKNOWN
    return TaskStatus.BOUND if pod.spec.node_name else TaskStatus.PENDING


def _scheduled_at(pod: Pod) -> dt.datetime | None:
    cond = find_condition(pod.status.conditions, "PodScheduled")
    if cond is None or cond.status != "True" or not cond.last_transition_time:
        return None
    return parse_time(cond.last_transition_time)


@dataclass
class SnapshotReport:
    """What the snapshot left out and why (for logs and Events)."""

    missing_queue: dict[str, str] = field(default_factory=dict)  # job key -> queue name


def _resources(listed: Mapping[str, object]) -> Resources:
    return Resources.from_list(listed)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Derivation:
    """What turning one cached object into the scheduler's view needs besides the object."""

    scheduler_names: frozenset[str]
    priorities: Mapping[str, int]  # PriorityClass name -> value
    default_priority: int  # of the globalDefault class, else 0
    requests: RequestsFn

    @classmethod
    def of(
        cls,
        priority_classes: Iterable[PriorityClass],
        scheduler_names: Iterable[str],
        requests: RequestsFn,
    ) -> Derivation:
        classes = list(priority_classes)
        return cls(
            scheduler_names=frozenset(scheduler_names),
            priorities={pc.metadata.name: pc.value for pc in classes},
            default_priority=next((pc.value for pc in classes if pc.global_default), 0),
            requests=requests,
        )


def queue_info(q: Queue) -> QueueInfo:
    capability = _resources(q.spec.capability) if q.spec.capability else None
    return QueueInfo(
        name=q.metadata.name,
        # A weight below 1 (stored before the CRD bounded it) counts as 1, as the queue
        # controller's InvalidSpec condition tells the user; nothing divides by it.
        weight=max(q.spec.weight or 1, 1),
        capability=capability,
        guarantee=_resources(q.spec.guarantee.resource),
        deserved=_resources(q.spec.deserved),
        reclaimable=q.spec.reclaimable is not False,
        state=q.status.state or "Open",
        parent=q.spec.parent,
        priority=q.spec.priority,
        dequeue_strategy=q.spec.dequeue_strategy,
        queue=q,
    )


def node_info(n: Node) -> NodeInfo:
    """A node with no tasks yet."""
    allocatable = _resources(n.status.allocatable)
    return NodeInfo(
        name=n.metadata.name,
        allocatable=allocatable,
        node=n,
        ready=condition_is_true(n.status.conditions, "Ready"),
        unschedulable=n.spec.unschedulable,
        max_pods=allocatable.get("pods") // 1000 if "pods" in allocatable else 110,
    )


def node_moved(old: Node, new: Node) -> bool:
    """Whether an update of a node changes what the scheduler reads of it: anything of the
    decoded node (``caldera.api.core.Node``, which drops managedFields and what no plugin
    reads) but its resourceVersion and its conditions' times. The kubelet rewrites
    ``lastHeartbeatTime`` (kwok's heartbeat stage ``lastTransitionTime`` too) while nothing
    else moves; such an update is no news to the snapshot (a session would decide the same)
    and would cost every class of pod another look at the node. A condition's type, status,
    reason and message still count. A purely computational function."""
    if old is new:
        return False
    return _timeless(old) != _timeless(new)


def _timeless(node: Node) -> Node:
    """``node`` without its resourceVersion and its conditions' times."""
    status = node.status
    conditions = tuple(
        msgspec.structs.replace(
            c, last_heartbeat_time=None, last_transition_time=None, last_probe_time=None
        )
        for c in status.conditions
    )
    return msgspec.structs.replace(
        node,
        metadata=msgspec.structs.replace(node.metadata, resource_version=""),
        status=msgspec.structs.replace(status, conditions=conditions),
    )


def job_info(pg: PodGroup, how: Derivation) -> JobInfo:
    """A PodGroup's job with no tasks yet (the caller checks that its queue exists)."""
    created = pg.metadata.creation_timestamp
    return JobInfo(
        key=f"{pg.metadata.namespace}/{pg.metadata.name}",
        namespace=pg.metadata.namespace,
        name=pg.metadata.name,
        queue=pg.spec.queue,
        priority=how.priorities.get(pg.spec.priority_class_name, how.default_priority),
        min_available=pg.spec.min_member,
        min_task_member=dict(pg.spec.min_task_member),
        min_resources=_resources(pg.spec.min_resources or {}),
        creation=parse_time(created) if created else EPOCH,
        podgroup=pg,
        phase=pg.status.phase or "Pending",
    )


def group_key(pod: Pod) -> str:
    """The key of the PodGroup a pod belongs to, "" when it names none."""
    group = pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY, "")
    return f"{pod.metadata.namespace}/{group}" if group else ""


@dataclass(frozen=True)
class Placement:
    """Where a pod's task goes in the snapshot: its job (or none) and its node (or none)."""

    task: TaskInfo
    in_job: bool  # counted among its job's tasks
    on_node: bool  # holds resources on its node (if that node is in the snapshot)


def task_placement(
    pod: Pod, job: JobInfo | None, assumed_node: str | None, how: Derivation
) -> Placement | None:
    """The pod's task and where it counts, or None when the snapshot leaves the pod out."""
    status = task_status(pod)
    node_name = pod.spec.node_name
    if not node_name and assumed_node is not None:
        node_name, status = assumed_node, TaskStatus.BINDING
    if job is None and not node_name:
        return None  # not ours to schedule (yet): another scheduler's, or no PodGroup
    if status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED) and job is None:
        return None  # finished pods of others hold nothing
    resreq, init_resreq = how.requests(pod)
    priority = pod.spec.priority if pod.spec.priority is not None else how.default_priority
    task = TaskInfo(
        uid=pod.metadata.uid,
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        job=job.key if job is not None else "",
        role=pod.metadata.annotations.get(TASK_SPEC_KEY, ""),
        resreq=resreq,
        init_resreq=init_resreq,
        priority=priority,
        status=status,
        node_name=node_name,
        pod=pod,
        preemptable=pod.metadata.annotations.get("volcano.sh/preemptable", "true") != "false",
        scheduled_at=_scheduled_at(pod),
    )
    ours = pod.spec.scheduler_name in how.scheduler_names
    return Placement(
        task=task,
        in_job=job is not None and bool(ours or node_name),
        on_node=bool(node_name) and status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED),
    )


def by_namespace(objects: Iterable[Namespaced]) -> dict[str, tuple[Namespaced, ...]]:
    """Namespaced objects (ResourceQuotas, PodDisruptionBudgets) grouped by namespace, in the
    order given."""
    grouped: dict[str, list[Namespaced]] = {}
    for obj in objects:
        grouped.setdefault(obj.metadata.namespace, []).append(obj)
    return {namespace: tuple(items) for namespace, items in grouped.items()}


def hypernode_tree(hypernodes: Sequence[HyperNode], nodes: Iterable[Node]) -> HyperNodeTree:
    """The HyperNodes resolved against the nodes; the empty tree when there are none (the
    topology-blind case costs nothing)."""
    if not hypernodes:
        return HyperNodeTree()
    return build_tree(hypernodes, {n.metadata.name: n.metadata.labels for n in nodes})


def skeleton(
    *,
    nodes: Iterable[Node],
    podgroups: Iterable[PodGroup],
    queues: Iterable[Queue],
    priority_classes: Sequence[PriorityClass],
    how: Derivation,
    now: dt.datetime,
    resource_quotas: Iterable[ResourceQuota] = (),
    disruption_budgets: Iterable[PodDisruptionBudget] = (),
    hypernodes: Sequence[HyperNode] = (),
) -> tuple[ClusterInfo, SnapshotReport]:
    """The snapshot without its tasks: queues, nodes, ResourceQuotas and PodDisruptionBudgets,
    and a job for every PodGroup whose queue exists (the others are reported)."""
    cluster = ClusterInfo(now=now)
    nodes = list(nodes)
    cluster.hypernodes = hypernode_tree(hypernodes, nodes)
    cluster.priority_classes = {pc.metadata.name: pc for pc in priority_classes}
    cluster.resource_quotas = by_namespace(resource_quotas)
    cluster.disruption_budgets = by_namespace(disruption_budgets)
    report = SnapshotReport()
    for q in queues:
        cluster.queues[q.metadata.name] = queue_info(q)
    for n in nodes:
        cluster.nodes[n.metadata.name] = node_info(n)
    for pg in podgroups:
        if pg.spec.queue not in cluster.queues:
            report.missing_queue[f"{pg.metadata.namespace}/{pg.metadata.name}"] = pg.spec.queue
            continue
        job = job_info(pg, how)
        cluster.jobs[job.key] = job
    return cluster, report


def build_cluster(
    *,
    pods: Iterable[Pod],
    nodes: Iterable[Node],
    podgroups: Iterable[PodGroup],
    queues: Iterable[Queue],
    priority_classes: Iterable[PriorityClass] = (),
    resource_quotas: Iterable[ResourceQuota] = (),
    disruption_budgets: Iterable[PodDisruptionBudget] = (),
    scheduler_names: Iterable[str] = ("volcano",),
    assumed: Mapping[str, str] | None = None,  # pod uid -> node, binds not yet seen
    requests: RequestsFn = pod_resources,
    now: dt.datetime | None = None,
    hypernodes: Sequence[HyperNode] = (),
) -> tuple[ClusterInfo, SnapshotReport]:
    """The session's view, built from every cached object; see the module docstring."""
    classes = list(priority_classes)
    how = Derivation.of(classes, scheduler_names, requests)
    cluster, report = skeleton(
        nodes=nodes,
        podgroups=podgroups,
        queues=queues,
        priority_classes=classes,
        how=how,
        now=now or dt.datetime.now(dt.UTC),
        resource_quotas=resource_quotas,
        disruption_budgets=disruption_budgets,
        hypernodes=hypernodes,
    )
    assumed = assumed or {}
    for pod in pods:
        group = group_key(pod)
        job = cluster.jobs.get(group) if group else None
        placed = task_placement(pod, job, assumed.get(pod.metadata.uid), how)
        if placed is None:
            continue
        if placed.in_job and job is not None:
            job.add_task(placed.task)
        node = cluster.nodes.get(placed.task.node_name) if placed.on_node else None
        if node is not None:
            node.add_task(placed.task)
    return cluster, report
