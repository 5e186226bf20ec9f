"""Build a session's ClusterInfo from the scheduler's cached objects (pure; no I/O).

What the snapshot holds (Volcano's rules):
- every PodGroup whose queue exists becomes a job; its pods are those annotated with its name
  (``scheduling.k8s.io/group-name``); pods without the annotation wait for the PodGroup
  controller; PodGroups of missing queues are left out and reported;
- every node, with the resources of ALL pods bound to it (any scheduler's), so Caldera never
  overcommits a node another scheduler also uses;
- pods this process has bound but the cache has not seen bound yet ("assumed") count as Binding
  on their node, so a slow watch never lets a node be given out twice.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from caldera.api.core import Node, Pod, PriorityClass
from caldera.api.meta import condition_is_true, find_condition, parse_time
from caldera.api.resources import Resources, pod_requests
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, TASK_SPEC_KEY, PodGroup, Queue
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
RequestsFn = Callable[[Pod], tuple[Resources, Resources]]


def pod_resources(pod: Pod) -> tuple[Resources, Resources]:
    """(what the pod needs to run, what it needs to start): containers and overhead, then the
    same raised to any init container's needs."""
    spec = msgspec.to_builtins(pod.spec)
    running = pod_requests({k: v for k, v in spec.items() if k != "initContainers"})
    return running, pod_requests(spec)


class CachedRequests:
    """``pod_resources`` memoised by pod uid and resourceVersion: a session over 10,000 pods
    should not re-parse 10,000 quantities every second."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str, tuple[Resources, Resources]]] = {}

    def __call__(self, pod: Pod) -> tuple[Resources, Resources]:
        uid, rv = pod.metadata.uid, pod.metadata.resource_version
        hit = self._cache.get(uid)
        if hit is not None and hit[0] == rv:
            return hit[1]
        value = pod_resources(pod)
        self._cache[uid] = (rv, value)
        return value

    def forget(self, live_uids: Iterable[str]) -> None:
        keep = set(live_uids)
        for uid in [u for u in self._cache if u not in keep]:
            del self._cache[uid]


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


def build_cluster(
    *,
    pods: Iterable[Pod],
    nodes: Iterable[Node],
    podgroups: Iterable[PodGroup],
    queues: Iterable[Queue],
    priority_classes: Iterable[PriorityClass] = (),
    scheduler_names: Iterable[str] = ("volcano",),
    assumed: Mapping[str, str] | None = None,  # pod uid -> node, binds not yet seen
    requests: RequestsFn = pod_resources,
    now: dt.datetime | None = None,
) -> tuple[ClusterInfo, SnapshotReport]:
    """The session's view; see the module docstring."""
    cluster = ClusterInfo(now=now or dt.datetime.now(dt.UTC))
    cluster.priority_classes = {pc.metadata.name: pc for pc in priority_classes}
    report = SnapshotReport()
    names = set(scheduler_names)
    assumed = assumed or {}
    priorities = {pc.metadata.name: pc.value for pc in priority_classes}
    default_priority = next((pc.value for pc in priority_classes if pc.global_default), 0)

    for q in queues:
        capability = _resources(q.spec.capability) if q.spec.capability else None
        cluster.queues[q.metadata.name] = QueueInfo(
            name=q.metadata.name,
            weight=q.spec.weight or 1,
            capability=capability,
            guarantee=_resources(q.spec.guarantee.resource),
            reclaimable=q.spec.reclaimable is not False,
            state=q.status.state or "Open",
            parent=q.spec.parent,
            priority=q.spec.priority,
            queue=q,
        )

    for n in nodes:
        allocatable = _resources(n.status.allocatable)
        cluster.nodes[n.metadata.name] = NodeInfo(
            name=n.metadata.name,
            allocatable=allocatable,
            node=n,
            ready=condition_is_true(n.status.conditions, "Ready"),
            unschedulable=n.spec.unschedulable,
            max_pods=allocatable.get("pods") // 1000 if "pods" in allocatable else 110,
        )

    for pg in podgroups:
        key = f"{pg.metadata.namespace}/{pg.metadata.name}"
        if pg.spec.queue not in cluster.queues:
            report.missing_queue[key] = pg.spec.queue
            continue
        created = pg.metadata.creation_timestamp
        cluster.jobs[key] = JobInfo(
            key=key,
            namespace=pg.metadata.namespace,
            name=pg.metadata.name,
            queue=pg.spec.queue,
            priority=priorities.get(pg.spec.priority_class_name, default_priority),
            min_available=pg.spec.min_member,
            min_task_member=dict(pg.spec.min_task_member),
            min_resources=_resources(pg.spec.min_resources or {}),
            creation=parse_time(created) if created else EPOCH,
            podgroup=pg,
            phase=pg.status.phase or "Pending",
        )

    for pod in pods:
        status = task_status(pod)
        node_name = pod.spec.node_name
        if not node_name and pod.metadata.uid in assumed:
            node_name, status = assumed[pod.metadata.uid], TaskStatus.BINDING
        group = pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY, "")
        job = cluster.jobs.get(f"{pod.metadata.namespace}/{group}") if group else None
        ours = pod.spec.scheduler_name in names
        if job is None and not node_name:
            continue  # not ours to schedule (yet): another scheduler's, or no PodGroup
        if status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED) and job is None:
            continue  # finished pods of others hold nothing
        resreq, init_resreq = requests(pod)
        priority = pod.spec.priority if pod.spec.priority is not None else default_priority
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
        if job is not None and (ours or node_name):
            job.add_task(task)
        node = cluster.nodes.get(node_name) if node_name else None
        if node is not None and status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
            node.add_task(task)
    return cluster, report
