"""Preempt and reclaim skip work, never change a decision: on thousands of seeded random
clusters, a whole session with the fast actions (``scheduler/actions/room.py``) decides the
same binds, evictions (in the same order, for the same reasons), pipelined tasks, PodGroup
statuses and Events as the same session with the plain node walk kept in
``unit/sched_reference.py``.

The clusters mix what the shortcuts depend on: priorities (job and task), several queues with
weights, capabilities and non-reclaimable ones, gangs above and at minAvailable, tasks running,
bound, releasing and pending, jobs Pending and Inqueue, node selectors, taints and
tolerations, nodes not ready, pods that must not be preempted, critical pods, PriorityClasses
with preemption toleration, and preemptors that never preempt. The capacity configurations add
a queue tree with deserved and guarantee amounts, PodDisruptionBudgets over labelled pods, a
ResourceQuota, and a clock past some jobs' sla waiting time.

``CALDERA_DIFFERENTIAL_CLUSTERS`` sets the number of clusters per configuration (CI: 1,000;
docs/development.md has the long run).
"""

from __future__ import annotations

import datetime as dt
import os
import random

import msgspec
import pytest

from caldera.api.core import (
    Container,
    Node,
    NodeSpec,
    Pod,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
    PodSpec,
    PriorityClass,
    ResourceQuota,
    ResourceQuotaStatus,
    Taint,
    Toleration,
)
from caldera.api.meta import LabelSelector, ObjectMeta
from caldera.api.resources import Resources
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.plugins.preemption_toleration import SIGS_K8S_PREFIX, TOLERATION_SECONDS
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from scheduler.snapshot import by_namespace
from unit.sched_reference import ReferencePreemptAction, ReferenceReclaimAction

CLUSTERS = int(os.environ.get("CALDERA_DIFFERENTIAL_CLUSTERS", "1000"))
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REFERENCE = Registry(
    plugins=REGISTRY.plugins,
    actions={
        **REGISTRY.actions,
        "preempt": lambda args: ReferencePreemptAction(args),
        "reclaim": lambda args: ReferenceReclaimAction(args),
    },
)
CONFS = {
    # Volcano's Helm default plus reclaim and preempt, as users switch them on.
    "full": """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
""",
    # drf decides preemption between jobs; priority only orders.
    "drf-first": """\
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: drf}, {name: gang}, {name: conformance}]
- plugins: [{name: priority}, {name: overcommit}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
""",
    # preemption toleration in the deciding tier; no enqueue gate; no binpack.
    "toleration": """\
actions: "allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: preemption-toleration}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
""",
    # no priority plugin at all: jobs of equal priority may be victims.
    "gang-only": """\
actions: "enqueue, allocate, preempt, reclaim"
tiers:
- plugins: [{name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
""",
    # capacity over a queue tree (issue 21), PodDisruptionBudgets deciding preemption.
    "capacity-tree": """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: pdb}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates},
            {name: capacity, enableHierarchy: true}, {name: resourcequota}, {name: nodeorder},
            {name: binpack}]
""",
    # flat capacity; sla ordering jobs and admitting the overdue ones.
    "capacity-sla": """\
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: sla, arguments: {sla-waiting-time: 2s}}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: pdb}, {name: nodeorder}]
""",
    # reservation (issue 45): the first waiting gang of each queue reserves at once, holding
    # room from the others (its predicate, node order, enqueue vote and node classes).
    "reservation": """\
actions: "enqueue, allocate, backfill, preempt, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: reservation, arguments: {wait: 0s, min-wait: 0s}}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}]
""",
}
CLASSES = [
    PriorityClass(metadata=ObjectMeta(name="low"), value=0),
    PriorityClass(metadata=ObjectMeta(name="high"), value=100),
    PriorityClass(
        metadata=ObjectMeta(
            name="tolerant",
            annotations={
                SIGS_K8S_PREFIX + "minimum-preemptable-priority": "1000",
                SIGS_K8S_PREFIX + TOLERATION_SECONDS: "-1",
            },
        ),
        value=10,
    ),
    PriorityClass(metadata=ObjectMeta(name="never"), value=100, preemption_policy="Never"),
]
TAINT = Taint(key="gpu", value="a100", effect="NoSchedule")
TOLERATE = Toleration(key="gpu", operator="Equal", value="a100", effect="NoSchedule")


def _node(rng: random.Random, index: int) -> NodeInfo:
    name = f"n{index}"
    labels = {"zone": rng.choice(["a", "b"])}
    taints = (TAINT,) if rng.random() < 0.2 else ()
    node = Node(metadata=ObjectMeta(name=name, labels=labels), spec=NodeSpec(taints=taints))
    allocatable = Resources.from_list(
        {"cpu": rng.choice(["2", "4", "8"]), "memory": rng.choice(["8Gi", "16Gi"]), "pods": "110"}
    )
    return NodeInfo(name, allocatable, node=node, ready=rng.random() > 0.08)


def random_cluster(seed: int) -> ClusterInfo:
    """A small cluster drawn from ``seed`` (the same seed gives an identical cluster)."""
    rng = random.Random(seed)  # noqa: S311 - seeded test data, not secrets
    cluster = ClusterInfo(now=T0, priority_classes={c.metadata.name: c for c in CLASSES})
    for index in range(rng.randint(1, 6)):
        node = _node(rng, index)
        cluster.nodes[node.name] = node
    for index in range(rng.randint(1, 3)):
        capability = Resources.from_list({"cpu": "6"}) if rng.random() < 0.15 else None
        cluster.queues[f"q{index}"] = QueueInfo(
            f"q{index}",
            weight=rng.randint(1, 3),
            capability=capability,
            reclaimable=rng.random() > 0.15,
        )
    nodes = list(cluster.nodes.values())
    for j in range(rng.randint(2, 10)):
        _add_job(rng, cluster, j, nodes)
    return cluster


def _add_job(rng: random.Random, cluster: ClusterInfo, index: int, nodes: list[NodeInfo]) -> None:
    name = f"j{index}"
    key = f"ns{index % 2}/{name}"
    replicas = rng.randint(1, 6)
    priority = rng.choice([0, 0, 10, 100])
    memory = {"memory": "1Gi"} if rng.random() < 0.5 else {}
    # Each task (role) of the job has its own request.
    by_role = {
        role: Resources.from_list({"cpu": rng.choice(["500m", "1", "1", "2"]), **memory})
        for role in ("w", "ps")
    }
    resreq = by_role["w"]
    job = JobInfo(
        key=key,
        namespace=key.split("/")[0],
        name=name,
        queue=rng.choice(list(cluster.queues)),
        priority=priority,
        min_available=rng.randint(1, replicas),
        min_task_member={},
        min_resources=resreq.multiply(rng.randint(0, replicas)),
        creation=T0 + dt.timedelta(seconds=rng.randint(0, 5)),
        phase=rng.choice(["Running", "Inqueue", "Inqueue", "Pending"]),
    )
    selector = {"zone": "a"} if rng.random() < 0.2 else {}
    tolerations = (TOLERATE,) if rng.random() < 0.3 else ()
    class_name = rng.choice(["", "", "low", "high", "tolerant", "never"])
    namespace = "kube-system" if rng.random() < 0.05 else job.namespace
    for t in range(replicas):
        task_priority = priority + rng.choice([0, 0, 0, -5, 5])
        annotations = {"volcano.sh/preemptable": "false"} if rng.random() < 0.08 else {}
        pod = Pod(
            metadata=ObjectMeta(
                name=f"{name}-{t}", namespace=namespace, uid=f"{key}-{t}", annotations=annotations
            ),
            spec=PodSpec(
                priority=task_priority,
                priority_class_name=class_name,
                node_selector=selector,
                tolerations=tolerations,
                containers=(Container(name="main"),),
            ),
        )
        # Low-priority jobs mostly run, high-priority ones mostly wait: contention.
        running = 0.75 if priority == 0 else 0.3
        status = rng.choice([TaskStatus.RUNNING] * 4 + [TaskStatus.BOUND, TaskStatus.RELEASING])
        if rng.random() > running:
            status = TaskStatus.PENDING
        role = rng.choice(["w", "w", "ps"])
        task = TaskInfo(
            uid=f"{key}-{t}",
            namespace=namespace,
            name=f"{name}-{t}",
            job=key,
            role=role,
            resreq=by_role[role],
            init_resreq=by_role[role],
            priority=task_priority,
            status=status,
            pod=pod,
            preemptable=not annotations,
            scheduled_at=T0 - dt.timedelta(minutes=rng.randint(0, 10)),
        )
        if status != TaskStatus.PENDING:
            room = [n for n in nodes if task.resreq.less_equal(n.future_idle())]
            if not room:
                task.status = TaskStatus.PENDING
            else:
                task.node_name = rng.choice(room).name
                cluster.nodes[task.node_name].add_task(task)
        job.add_task(task)
    cluster.jobs[key] = job


def with_queue_limits(cluster: ClusterInfo, seed: int) -> None:
    """What capacity, pdb and sla read on top of ``random_cluster``: a root queue and a tree
    over the queues (q0 may become a parent), deserved and guarantee amounts, pod labels,
    PodDisruptionBudgets over them, and a clock some jobs' waiting times have passed."""
    rng = random.Random(seed * 7_919 + 1)  # noqa: S311 - seeded test data, not secrets
    cluster.now = T0 + dt.timedelta(seconds=rng.randint(0, 8))
    names = list(cluster.queues)
    cluster.queues["root"] = QueueInfo("root", reclaimable=False)
    for name in names:
        queue = cluster.queues[name]
        queue.parent = rng.choice(["", "", "q0"]) if name != "q0" else ""
        queue.deserved = Resources.from_list({"cpu": str(rng.randint(0, 8))})
        if rng.random() < 0.3:
            queue.guarantee = Resources.from_list({"cpu": str(rng.randint(1, 2))})
    for job in cluster.jobs.values():
        for task in job.tasks.values():
            if task.pod is not None and rng.random() < 0.6:
                meta = msgspec.structs.replace(
                    task.pod.metadata, labels={"app": rng.choice(["a", "b"])}
                )
                task.pod = msgspec.structs.replace(task.pod, metadata=meta)
    budgets = [
        PodDisruptionBudget(
            metadata=ObjectMeta(name=f"pdb{i}", namespace=f"ns{i % 2}"),
            spec=PodDisruptionBudgetSpec(
                selector=LabelSelector(match_labels={"app": rng.choice(["a", "b"])})
            ),
            status=PodDisruptionBudgetStatus(disruptions_allowed=rng.randint(0, 2)),
        )
        for i in range(rng.randint(0, 3))
    ]
    cluster.disruption_budgets = by_namespace(budgets)
    quotas = [
        ResourceQuota(
            metadata=ObjectMeta(name="quota", namespace="ns1"),
            status=ResourceQuotaStatus(hard={"requests.cpu": str(rng.randint(2, 12))}),
        )
    ]
    cluster.resource_quotas = by_namespace(quotas if rng.random() < 0.5 else [])


# Extra cluster features per configuration (the others run on ``random_cluster`` as it is).
DECORATE = {"capacity-tree": with_queue_limits, "capacity-sla": with_queue_limits}


def decisions(cluster: ClusterInfo, result: SessionResult) -> dict[str, object]:
    """Everything a session decided, in comparable form."""
    return {
        "binds": [(b.task.key, b.node) for b in result.binds],
        "evictions": [(e.task.key, e.reason) for e in result.evictions],
        "tasks": sorted(
            (t.key, t.status.value, t.node_name)
            for job in cluster.jobs.values()
            for t in job.tasks.values()
        ),
        "podgroups": result.podgroup_status,
        "events": result.events,
        "queues": result.queue_allocated,
    }


def run(conf: SchedulerConf, registry: Registry, seed: int, name: str) -> dict[str, object]:
    cluster = random_cluster(seed)
    decorate = DECORATE.get(name)
    if decorate is not None:
        decorate(cluster, seed)
    result = run_session(Session(cluster, conf.tiers), conf, registry)
    return decisions(cluster, result)


@pytest.mark.parametrize("name", sorted(CONFS))
def test_same_decisions_as_the_plain_walk(name: str) -> None:
    """Every seeded cluster: identical decisions from the fast and the reference actions,
    and the sample has clusters where preempt or reclaim did evict (else it proves little)."""
    conf = parse_conf(CONFS[name], actions=ACTIONS.keys(), plugins=PLUGINS.keys())
    evicting = 0
    for seed in range(CLUSTERS):
        fast = run(conf, REGISTRY, seed, name)
        plain = run(conf, REFERENCE, seed, name)
        assert fast == plain, f"seed {seed}"
        evicting += bool(fast["evictions"])
    assert evicting >= CLUSTERS // 20, f"only {evicting} of {CLUSTERS} clusters evicted anything"
