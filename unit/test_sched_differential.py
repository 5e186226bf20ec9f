"""Preempt and reclaim skip work, never change a decision: on thousands of seeded random
clusters, a whole session with the fast actions (``scheduler/actions/room.py``) decides the
same binds, evictions (in the same order, for the same reasons), pipelined tasks, PodGroup
statuses and Events as the same session with the plain node walk kept in
``unit/sched_reference.py``.

The clusters mix what the shortcuts depend on: priorities (job and task), several queues with
weights, capabilities and non-reclaimable ones, gangs above and at minAvailable, tasks running,
bound, releasing and pending, jobs Pending and Inqueue, node selectors, taints and
tolerations, nodes not ready, pods that must not be preempted, critical pods, PriorityClasses
with preemption toleration, and preemptors that never preempt.

``CALDERA_DIFFERENTIAL_CLUSTERS`` sets the number of clusters per configuration (CI: 1,000;
docs/development.md has the long run).
"""

from __future__ import annotations

import datetime as dt
import os
import random

import pytest

from caldera.api.core import (
    Container,
    Node,
    NodeSpec,
    Pod,
    PodSpec,
    PriorityClass,
    Taint,
    Toleration,
)
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.plugins.preemption_toleration import SIGS_K8S_PREFIX, TOLERATION_SECONDS
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
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


def run(conf: SchedulerConf, registry: Registry, seed: int) -> dict[str, object]:
    cluster = random_cluster(seed)
    result = run_session(Session(cluster, conf.tiers), conf, registry)
    return decisions(cluster, result)


@pytest.mark.parametrize("name", sorted(CONFS))
def test_same_decisions_as_the_plain_walk(name: str) -> None:
    """Every seeded cluster: identical decisions from the fast and the reference actions,
    and the sample has clusters where preempt or reclaim did evict (else it proves little)."""
    conf = parse_conf(CONFS[name], actions=ACTIONS.keys(), plugins=PLUGINS.keys())
    evicting = 0
    for seed in range(CLUSTERS):
        fast = run(conf, REGISTRY, seed)
        plain = run(conf, REFERENCE, seed)
        assert fast == plain, f"seed {seed}"
        evicting += bool(fast["evictions"])
    assert evicting >= CLUSTERS // 20, f"only {evicting} of {CLUSTERS} clusters evicted anything"
