"""Cache objects for the dashboard's tests and its page benchmark: Jobs with their PodGroups
and pods, queues, nodes, built as the informers would hold them."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from caldera.api.core import (
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    Pod,
    PodSpec,
    PodStatus,
    PriorityClass,
    ResourceRequirements,
)
from caldera.api.meta import Condition, ObjectMeta, OwnerReference, format_time
from caldera.api.volcano import (
    JOB_NAME_KEY,
    TASK_SPEC_KEY,
    Guarantee,
    Job,
    JobCondition,
    JobSpec,
    JobState,
    JobStatus,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    QueueStatus,
    TaskSpec,
)
from caldera.api.why import WHY_ANNOTATION, bounded, encode_record
from dashboard.cache import ClusterCache

T0: Final = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)


def ts(seconds: float) -> str:
    """T0 plus `seconds`, as the API server writes a time."""
    return format_time(T0 + dt.timedelta(seconds=seconds))


def queue(
    name: str,
    *,
    parent: str = "",
    deserved: dict[str, Any] | None = None,
    capability: dict[str, Any] | None = None,
    allocated: dict[str, Any] | None = None,
    state: str = "Open",
) -> Queue:
    return Queue(
        metadata=ObjectMeta(name=name, uid=f"uid-q-{name}"),
        spec=QueueSpec(
            parent=parent,
            deserved=deserved or {},
            capability=capability or {},
            guarantee=Guarantee(),
        ),
        status=QueueStatus(state=state, allocated=allocated or {}),
    )


def job(
    name: str,
    *,
    namespace: str = "team-a",
    queue_name: str = "default",
    phase: str = "Pending",
    created: float = 0,
    since: float | None = None,
    replicas: int = 2,
    running: int = 0,
    priority_class: str = "",
    conditions: tuple[tuple[str, float], ...] = (),
) -> Job:
    return Job(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            uid=f"uid-{namespace}-{name}",
            creation_timestamp=ts(created),
        ),
        spec=JobSpec(
            queue=queue_name,
            min_available=replicas,
            priority_class_name=priority_class,
            tasks=(TaskSpec(name="worker", replicas=replicas),),
        ),
        status=JobStatus(
            state=JobState(
                phase=phase, last_transition_time=ts(created if since is None else since)
            ),
            running=running,
            conditions=tuple(
                JobCondition(status=p, last_transition_time=ts(t)) for p, t in conditions
            ),
        ),
    )


def podgroup(of: Job, *, phase: str = "Pending", why: str = "", stage: str = "enqueue") -> PodGroup:
    annotations = {}
    if why:
        annotations[WHY_ANNOTATION] = encode_record(bounded(stage, why, [], ts(5)))
    return PodGroup(
        metadata=ObjectMeta(
            name=f"{of.metadata.name}-{of.metadata.uid}",
            namespace=of.metadata.namespace,
            uid=f"pg-{of.metadata.uid}",
            annotations=annotations,
            owner_references=(
                OwnerReference(
                    api_version="batch.volcano.sh/v1alpha1",
                    kind="Job",
                    name=of.metadata.name,
                    uid=of.metadata.uid,
                    controller=True,
                ),
            ),
        ),
        spec=PodGroupSpec(min_member=of.spec.min_available, queue=of.spec.queue),
        status=PodGroupStatus(phase=phase),
    )


def pod(of: Job, index: int, *, phase: str = "Pending", node: str = "", gpus: int = 0) -> Pod:
    requests: dict[str, str | int | float] = {"cpu": "1"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    name = f"{of.metadata.name}-worker-{index}"
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace=of.metadata.namespace,
            uid=f"uid-pod-{of.metadata.namespace}-{name}",
            creation_timestamp=ts(1),
            annotations={JOB_NAME_KEY: of.metadata.name, TASK_SPEC_KEY: "worker"},
            owner_references=(
                OwnerReference(
                    api_version="batch.volcano.sh/v1alpha1",
                    kind="Job",
                    name=of.metadata.name,
                    uid=of.metadata.uid,
                    controller=True,
                ),
            ),
        ),
        spec=PodSpec(
            node_name=node,
            containers=(Container(name="main", resources=ResourceRequirements(requests=requests)),),
        ),
        status=PodStatus(phase=phase),
    )


def node(name: str, *, gpus: int = 4, ready: bool = True, unschedulable: bool = False) -> Node:
    return Node(
        metadata=ObjectMeta(name=name),
        spec=NodeSpec(unschedulable=unschedulable),
        status=NodeStatus(
            allocatable={"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
            conditions=(Condition(type="Ready", status="True" if ready else "False"),),
        ),
    )


def priority_class(name: str, value: int) -> PriorityClass:
    return PriorityClass(metadata=ObjectMeta(name=name), value=value)


def synthetic_cache(*, jobs: int, nodes: int, queues: int, seed: int = 0) -> ClusterCache:
    """A cluster of `jobs` jobs spread over `queues` queues (the first one holds a tenth of
    them), half pending with a wait record, half running with their pods bound."""
    qs = [queue("root")] + [
        queue(f"q{i}", parent="root", deserved={"cpu": "64", "memory": "256Gi"},
              capability={"cpu": "128"}, allocated={"cpu": str(i % 64)})
        for i in range(queues - 1)
    ]  # fmt: skip
    all_jobs, pgs, pods = [], [], []
    for i in range(jobs):
        q = "q0" if i % 10 == 0 else f"q{(i + seed) % (queues - 1)}"
        pending = i % 2 == 0
        phase = "Pending" if pending else "Running"
        j = job(f"job-{i}", namespace=f"ns-{i % 20}", queue_name=q, phase=phase, created=i)
        all_jobs.append(j)
        pgs.append(
            podgroup(j, phase=phase, why="queue q0 is over its capability" if pending else "")
        )
        for k in range(2):
            where = "" if pending else f"node-{(i + k) % nodes}"
            pods.append(pod(j, k, phase=phase, node=where))
    return ClusterCache.static(
        queues=qs,
        jobs=all_jobs,
        podgroups=pgs,
        pods=pods,
        nodes=[node(f"node-{i}") for i in range(nodes)],
    )
