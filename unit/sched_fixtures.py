"""Builders the scheduler's unit tests share: nodes, pods, tasks, jobs and snapshots with
readable defaults, and ``run``, one full session over the basic plugins (priority, gang,
conformance, overcommit, predicates, nodeorder, binpack) and actions (enqueue, allocate,
backfill).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from caldera.api.core import (
    Affinity,
    Container,
    ContainerPort,
    Node,
    NodeAffinity,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    NodeSpec,
    Pod,
    PodSpec,
    PreferredSchedulingTerm,
    ResourceRequirements,
    Taint,
    Toleration,
)
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from scheduler.actions.allocate import AllocateAction
from scheduler.actions.backfill import BackfillAction
from scheduler.actions.enqueue import EnqueueAction
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.plugin import PluginOption
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.conformance import ConformancePlugin
from scheduler.plugins.gang import GangPlugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.overcommit import OvercommitPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.priority import PriorityPlugin

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

REGISTRY = Registry(
    plugins={
        "gang": GangPlugin,
        "priority": PriorityPlugin,
        "predicates": PredicatesPlugin,
        "nodeorder": NodeOrderPlugin,
        "binpack": BinpackPlugin,
        "conformance": ConformancePlugin,
        "overcommit": OvercommitPlugin,
    },
    actions={"enqueue": EnqueueAction, "allocate": AllocateAction, "backfill": BackfillAction},
)
DEFAULT_PLUGINS = (("priority", "gang", "conformance"), ("overcommit", "predicates", "nodeorder"))


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    *,
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
    max_pods: int = 110,
) -> NodeInfo:
    """A node with ``cpu`` and ``memory`` (and ``extra`` resources) allocatable."""
    alloc = {"cpu": cpu, "memory": memory, "pods": str(max_pods), **(extra or {})}
    node = Node(
        metadata=ObjectMeta(name=name, labels=dict(labels or {})),
        spec=NodeSpec(unschedulable=unschedulable, taints=tuple(taints)),
    )
    return NodeInfo(
        name,
        Resources.from_list(alloc),
        node=node,
        ready=ready,
        unschedulable=unschedulable,
        max_pods=max_pods,
    )


def make_pod(
    name: str,
    requests: Mapping[str, str],
    *,
    namespace: str = "ns",
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[NodeSelectorTerm] | None = None,
    preferred: Sequence[PreferredSchedulingTerm] = (),
    tolerations: Sequence[Toleration] = (),
    host_ports: Sequence[int] = (),
    priority_class: str = "",
) -> Pod:
    affinity = None
    if required is not None or preferred:
        affinity = Affinity(
            node_affinity=NodeAffinity(
                required_during_scheduling_ignored_during_execution=(
                    NodeSelector(node_selector_terms=tuple(required))
                    if required is not None
                    else None
                ),
                preferred_during_scheduling_ignored_during_execution=tuple(preferred),
            )
        )
    container = Container(
        name="main",
        resources=ResourceRequirements(requests=dict(requests)),
        ports=tuple(ContainerPort(container_port=p, host_port=p) for p in host_ports),
    )
    return Pod(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodSpec(
            containers=(container,),
            node_selector=dict(node_selector or {}),
            affinity=affinity,
            tolerations=tuple(tolerations),
            priority_class_name=priority_class,
        ),
    )


def make_task(
    job: str,
    index: int,
    requests: Mapping[str, str] | None = None,
    *,
    namespace: str = "ns",
    role: str = "worker",
    priority: int = 0,
    status: TaskStatus = TaskStatus.PENDING,
    node: str = "",
    **pod_fields: Any,
) -> TaskInfo:
    """Pod ``<job>-<index>`` of job ``<namespace>/<job>`` (1 cpu, 1Gi unless told)."""
    reqs = {"cpu": "1", "memory": "1Gi"} if requests is None else dict(requests)
    name = f"{job}-{index}"
    pod = make_pod(name, reqs, namespace=namespace, **pod_fields)
    req = Resources.from_list(reqs)
    return TaskInfo(
        uid=f"uid-{namespace}-{name}",
        namespace=namespace,
        name=name,
        job=f"{namespace}/{job}",
        role=role,
        resreq=req,
        init_resreq=req,
        priority=priority,
        status=status,
        node_name=node,
        pod=pod,
    )


def make_job(
    name: str,
    tasks: Sequence[TaskInfo] | int,
    *,
    min_available: int | None = None,
    namespace: str = "ns",
    queue: str = "default",
    priority: int = 0,
    phase: str = "Inqueue",
    min_resources: Mapping[str, str] | None = None,
    min_task_member: Mapping[str, int] | None = None,
    created: int = 0,
    requests: Mapping[str, str] | None = None,
) -> JobInfo:
    """A job with ``tasks`` (or that many pending 1-cpu pods); minAvailable defaults to all."""
    members = (
        [make_task(name, i, requests, namespace=namespace) for i in range(tasks)]
        if isinstance(tasks, int)
        else list(tasks)
    )
    job = JobInfo(
        key=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        queue=queue,
        priority=priority,
        min_available=len(members) if min_available is None else min_available,
        min_task_member=dict(min_task_member or {}),
        min_resources=Resources.from_list(min_resources or {}),
        creation=T0 + dt.timedelta(seconds=created),
        phase=phase,
    )
    for task in members:
        job.add_task(task)
    return job


def make_cluster(
    nodes: Sequence[NodeInfo], jobs: Sequence[JobInfo], queues: Sequence[QueueInfo] = ()
) -> ClusterInfo:
    """A snapshot; running and bound tasks are accounted on their nodes."""
    cluster = ClusterInfo(now=T0)
    for node in nodes:
        cluster.nodes[node.name] = node
    for queue in queues or (QueueInfo("default"),):
        cluster.queues[queue.name] = queue
    for job in jobs:
        cluster.jobs[job.key] = job
        for task in job.tasks.values():
            if task.node_name:
                cluster.nodes[task.node_name].add_task(task)
    return cluster


def run(
    cluster: ClusterInfo,
    actions: str = "enqueue, allocate, backfill",
    tiers: Sequence[Sequence[str]] = DEFAULT_PLUGINS,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
) -> Session:
    """One full session (open, actions, close, status) with the given plugins."""
    args = arguments or {}
    conf = SchedulerConf(
        actions=tuple(a.strip() for a in actions.split(",") if a.strip()),
        tiers=tuple(tuple(PluginOption(p, args.get(p, {})) for p in tier) for tier in tiers),
    )
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, REGISTRY)
    return ssn


def binds(ssn: Session) -> dict[str, str]:
    """Pod name -> node of every bind."""
    return {b.task.name: b.node for b in ssn.result.binds}


def expr(key: str, operator: str, *values: str) -> NodeSelectorTerm:
    """A node selector term of one expression (for node affinity)."""
    return NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key=key, operator=operator, values=values),)
    )
