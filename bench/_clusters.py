"""The scheduler benches' clusters, built one way: empty nodes under the default queue, and
gangs of pending pods (``bench/scheduler.py``'s pure core, ``bench/topology.py``), or the
informer cache's objects for them (``bench/scheduler_scale.py``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from caldera.api.core import Node, NodeStatus, Pod
from caldera.api.meta import Condition, ObjectMeta
from caldera.api.resources import Resources
from caldera.api.volcano import PodGroup
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.registry import REGISTRY

T0: Final = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NAMESPACE: Final = "bench"
# A 16-core node and a 1-cpu pod, the scheduler benches' usual sizes.
NODE_ALLOCATABLE: Final[Mapping[str, str]] = {"cpu": "16", "memory": "64Gi", "pods": "110"}
POD_REQUESTS: Final[dict[str, str | int | float]] = {"cpu": "1", "memory": "2Gi"}


def conf_of(text: str) -> SchedulerConf:
    """A configuration checked against the scheduler's own actions and plugins."""
    return parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)


def node_object(name: str, allocatable: Mapping[str, str] = NODE_ALLOCATABLE) -> Node:
    """A Ready node as the informer cache holds it."""
    return Node(
        metadata=ObjectMeta(name=name),
        status=NodeStatus(
            allocatable=dict(allocatable), conditions=(Condition(type="Ready", status="True"),)
        ),
    )


def empty_cluster(
    nodes: Iterable[str], allocatable: Resources, now: dt.datetime = T0
) -> ClusterInfo:
    """``nodes``, each with ``allocatable`` and nothing on it, and the default queue."""
    cluster = ClusterInfo(now=now)
    cluster.queues["default"] = QueueInfo("default")
    for name in nodes:
        cluster.nodes[name] = NodeInfo(name, allocatable)
    return cluster


def gang_job(
    name: str,
    size: int,
    request: Resources,
    *,
    created: dt.datetime,
    podgroup: PodGroup | None = None,
    uid_prefix: str = "",
    pod: Callable[[str, str], Pod] | None = None,
) -> JobInfo:
    """A whole gang (minAvailable = ``size``) of pending tasks ``<name>-<i>`` in the default
    queue, each requesting ``request``; ``pod(task name, uid)`` gives each task its pod."""
    key = f"{NAMESPACE}/{name}"
    job = JobInfo(
        key=key,
        namespace=NAMESPACE,
        name=name,
        queue="default",
        priority=0,
        min_available=size,
        min_task_member={},
        min_resources=Resources(),
        creation=created,
        podgroup=podgroup,
        phase="Inqueue",
    )
    for i in range(size):
        task = f"{name}-{i}"
        uid = f"{uid_prefix}{task}"
        job.add_task(
            TaskInfo(
                uid=uid,
                namespace=NAMESPACE,
                name=task,
                job=key,
                role="worker",
                resreq=request,
                init_resreq=request,
                priority=0,
                status=TaskStatus.PENDING,
                pod=pod(task, uid) if pod is not None else None,
            )
        )
    return job
