"""Builders the scheduler's unit tests share: nodes, pods, tasks, jobs and snapshots with
readable defaults (``make_*``; ``cpu_cluster`` and ``add_job`` for tests that grow a snapshot of
cpu-only nodes job by job), ``open_session`` for tests that drive plugins by hand, and ``run``,
one full session over the basic plugins (priority, gang, conformance, overcommit, predicates,
nodeorder, binpack) and actions (enqueue, allocate, backfill); ``run_conf``, one session of a
configuration file with everything the scheduler provides.
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
from caldera.api.names import pod_name
from caldera.api.resources import Resources
from caldera.api.volcano import PodGroup
from scheduler.actions.allocate import AllocateAction
from scheduler.actions.backfill import BackfillAction
from scheduler.actions.enqueue import EnqueueAction
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.framework.plugin import Plugin, PluginOption
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.conformance import ConformancePlugin
from scheduler.plugins.gang import GangPlugin
from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.overcommit import OvercommitPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.priority import PriorityPlugin
from scheduler.registry import REGISTRY as FULL

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
        "network-topology-aware": NetworkTopologyAwarePlugin,
    },
    actions={"enqueue": EnqueueAction, "allocate": AllocateAction, "backfill": BackfillAction},
)
DEFAULT_PLUGINS = (("priority", "gang", "conformance"), ("overcommit", "predicates", "nodeorder"))


def make_node(
    name: str,
    cpu: str = "4",
    memory: str | None = "8Gi",
    *,
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
    unschedulable: bool = False,
    ready: bool = True,
    max_pods: int = 110,
) -> NodeInfo:
    """A node with ``cpu`` and ``memory`` (none if None; and ``extra`` resources) allocatable."""
    alloc = {"cpu": cpu, "pods": str(max_pods), **(extra or {})}
    if memory is not None:
        alloc["memory"] = memory
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
    priority: int | None = None,
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
            priority=priority,
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
    name: str | None = None,
    scheduled_at: dt.datetime | None = None,
    pod_priority: int | None = None,
    **pod_fields: Any,
) -> TaskInfo:
    """Pod ``<job>-<index>`` (or ``name``) of job ``<namespace>/<job>`` (1 cpu, 1Gi unless told);
    ``pod_priority`` is its pod's spec.priority."""
    reqs = {"cpu": "1", "memory": "1Gi"} if requests is None else dict(requests)
    name = name or f"{job}-{index}"
    pod = make_pod(name, reqs, namespace=namespace, priority=pod_priority, **pod_fields)
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
        scheduled_at=scheduled_at,
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
    annotations: Mapping[str, str] | None = None,
) -> JobInfo:
    """A job with ``tasks`` (or that many pending 1-cpu pods); minAvailable defaults to all.
    With ``annotations``, it has a PodGroup carrying them."""
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
        podgroup=None
        if annotations is None
        else PodGroup(
            metadata=ObjectMeta(name=name, namespace=namespace, annotations=dict(annotations))
        ),
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


def cpu_cluster(
    cpus: Mapping[str, str], queues: Sequence[QueueInfo] = (), *, max_pods: int = 110
) -> ClusterInfo:
    """A snapshot of nodes (name -> cpu) with only cpu and pods allocatable, and ``queues``
    (the default queue unless told); ``add_job`` adds jobs to it."""
    nodes = [make_node(name, cpu, None, max_pods=max_pods) for name, cpu in cpus.items()]
    return make_cluster(nodes, (), queues)


def add_job(
    cluster: ClusterInfo,
    name: str,
    *,
    running: int | Sequence[str] = (),
    pending: int = 0,
    roles: Mapping[str, int] | None = None,
    size: str = "1",
    namespace: str = "ns",
    queue: str = "default",
    priority: int = 0,
    task_priorities: Sequence[int] = (),
    min_available: int = 1,
    phase: str = "Running",
    min_resources: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    priority_class: str = "",
) -> JobInfo:
    """Add job ``<namespace>/<name>`` of ``size``-cpu tasks to ``cluster`` and return it.

    Its tasks ``<name>-<i>``: one running on each node of ``running`` (an int: that many on
    ``n0``), accounted on the node and scheduled an hour before T0, then ``pending`` pending
    ones; then, for each role of ``roles``, that many pending tasks ``<name>-<role>-<i>``. Task
    ``i`` has priority ``task_priorities[i]`` (the job's ``priority`` beyond the list), on the
    task and its pod; ``priority_class`` names the pods' PriorityClass.
    """
    nodes = ["n0"] * running if isinstance(running, int) else list(running)
    requests = {"cpu": size}
    tasks = []
    for i, node in enumerate([*nodes, *[""] * pending]):
        task_priority = task_priorities[i] if i < len(task_priorities) else priority
        tasks.append(
            make_task(
                name,
                i,
                requests,
                namespace=namespace,
                priority=task_priority,
                pod_priority=task_priority,
                status=TaskStatus.RUNNING if node else TaskStatus.PENDING,
                node=node,
                scheduled_at=T0 - dt.timedelta(hours=1) if node else None,
                priority_class=priority_class,
            )
        )
    for role, count in (roles or {}).items():
        tasks.extend(
            make_task(
                name, i, requests, namespace=namespace, role=role, name=pod_name(name, role, i)
            )
            for i in range(count)
        )
    job = make_job(
        name,
        tasks,
        min_available=min_available,
        namespace=namespace,
        queue=queue,
        priority=priority,
        phase=phase,
        min_resources=min_resources,
        annotations=annotations,
    )
    cluster.jobs[job.key] = job
    for task in tasks:
        if task.node_name:
            cluster.nodes[task.node_name].add_task(task)
    return job


def open_session(cluster: ClusterInfo, *tiers: Sequence[Plugin]) -> Session:
    """A session over ``cluster`` with the given plugin instances, opened in tier order (no
    actions run): for tests that call the session's votes or a plugin's handlers directly."""
    ssn = Session(cluster, [[PluginOption(p.name) for p in tier] for tier in tiers])
    for tier in tiers:
        for plugin in tier:
            plugin.on_session_open(ssn)
    return ssn


def cpu(amount: str) -> Resources:
    """Resources of ``amount`` cpu."""
    return Resources.from_list({"cpu": amount})


class StandInGang:
    """Gang for the preempt and reclaim tests: a job can lose only tasks beyond minAvailable; it
    is starving below minAvailable and pipelined at it."""

    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            spare: dict[str, int] = {}
            chosen = []
            for task in candidates:
                job = ssn.jobs[task.job]
                left = spare.get(task.job, job.ready_task_num() - job.min_available)
                if left > 0:
                    chosen.append(task)
                    left -= 1
                spare[task.job] = left
            return chosen

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        ssn.add_job_starving_fn(self.name, lambda j: 1 if j.is_starving() else -1)
        ssn.add_job_pipelined_fn(self.name, lambda j: 1 if j.is_pipelined() else -1)

    def on_session_close(self, ssn: Session) -> None:
        return None


class StandInPriority:
    """Priority for the tests: higher task priority first; victims of lower-priority jobs, or
    lower-priority tasks of the preemptor's own job. With ``greedy`` a job starves while any
    of its tasks is unplaced (Volcano's priority plugin)."""

    name = "priority"

    def __init__(self, greedy: bool = False) -> None:
        self.greedy = greedy

    def on_session_open(self, ssn: Session) -> None:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            mine = ssn.jobs[preemptor.job].priority
            return [
                t
                for t in candidates
                if (t.job != preemptor.job and ssn.jobs[t.job].priority < mine)
                or (t.job == preemptor.job and t.priority < preemptor.priority)
            ]

        def task_order(left: TaskInfo, right: TaskInfo) -> int:
            return (left.priority < right.priority) - (left.priority > right.priority)

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_task_order_fn(self.name, task_order)
        if self.greedy:
            ssn.add_job_starving_fn(self.name, lambda j: 1 if j.count(TaskStatus.PENDING) else -1)

    def on_session_close(self, ssn: Session) -> None:
        return None


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


def run_conf(cluster: ClusterInfo, text: str) -> Session:
    """One full session of configuration ``text`` (Volcano's format) with every plugin and
    action the scheduler provides."""
    conf = parse_conf(text, actions=FULL.actions.keys(), plugins=FULL.plugins.keys())
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, FULL)
    return ssn


def binds(ssn: Session) -> dict[str, str]:
    """Pod name -> node of every bind."""
    return {b.task.name: b.node for b in ssn.result.binds}


def expr(key: str, operator: str, *values: str) -> NodeSelectorTerm:
    """A node selector term of one expression (for node affinity)."""
    return NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key=key, operator=operator, values=values),)
    )
