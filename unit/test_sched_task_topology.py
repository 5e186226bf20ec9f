"""task-topology: affine tasks of a job gather on their partners' nodes, anti-affine ones spread,
and the task-order annotation orders tasks."""

from __future__ import annotations

import pytest

from scheduler.api.task_topology import (
    AFFINITY_KEY,
    ANTI_AFFINITY_KEY,
    TASK_ORDER_KEY,
    parse_groups,
)
from scheduler.api.types import JobInfo, TaskStatus
from scheduler.framework.plugin import Arguments, CallbackKind
from scheduler.framework.session import Session
from scheduler.plugins.task_topology import TaskTopologyPlugin
from unit.sched_fixtures import add_job, cpu_cluster, open_session

NODES = {"n0": "8", "n1": "8", "n2": "8"}


def task_topology(weight: float = 1.0) -> TaskTopologyPlugin:
    return TaskTopologyPlugin(Arguments("task-topology", {"task-topology.weight": weight}))


def place_greedily(ssn: Session, job: JobInfo) -> dict[str, str]:
    """Place the job's tasks one by one in task order on the best-scoring node (ties by name);
    returns task name -> node."""
    placed = {}
    for task in sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_order_key()):
        node = max(
            sorted(ssn.nodes.values(), key=lambda n: n.name),
            key=lambda n: ssn.node_score(task, n),
        )
        ssn.statement().allocate(task, node.name)
        placed[task.name] = node.name
    return placed


@pytest.mark.parametrize(
    ("value", "groups"),
    [
        ("ps,worker;chief", [{"ps", "worker"}, {"chief"}]),
        (" ps , worker ;; ", [{"ps", "worker"}]),
        ("", []),
    ],
)
def test_parse_groups(value: str, groups: list[set[str]]) -> None:
    """Groups split on ';', names on ',', blanks ignored."""
    assert [set(g) for g in parse_groups(value)] == groups


def test_affine_tasks_gather_on_their_partners_node() -> None:
    """With affinity ps,worker the workers follow the ps to its node."""
    cluster = cpu_cluster(NODES)
    job = add_job(
        cluster, "tf", roles={"ps": 1, "worker": 3}, annotations={AFFINITY_KEY: "ps,worker"}
    )
    ssn = open_session(cluster, [task_topology()])
    ps = next(t for t in job.tasks.values() if t.role == "ps")
    ssn.statement().allocate(ps, "n2")
    worker = next(t for t in job.tasks.values() if t.role == "worker")
    scores = {n: ssn.node_score(worker, ssn.nodes[n]) for n in ssn.nodes}
    assert scores["n2"] > 0
    assert scores["n0"] == scores["n1"] == 0
    assert set(place_greedily(ssn, job).values()) == {"n2"}


def test_anti_affine_tasks_spread() -> None:
    """With anti-affinity ps, the ps land on different nodes and a full node scores lower."""
    cluster = cpu_cluster(NODES)
    job = add_job(cluster, "tf", roles={"ps": 3}, annotations={ANTI_AFFINITY_KEY: "ps"})
    ssn = open_session(cluster, [task_topology(weight=2)])
    placed = place_greedily(ssn, job)
    assert sorted(placed.values()) == ["n0", "n1", "n2"]
    extra = add_job(cluster, "tf2", roles={"ps": 1}, annotations={})  # another job: unaffected
    assert ssn.node_score(next(iter(extra.tasks.values())), ssn.nodes["n0"]) == 0


def test_affinity_and_anti_affinity_together() -> None:
    """Workers stay with the ps, and the two ps groups (ps anti-affine) spread."""
    cluster = cpu_cluster({"n0": "8", "n1": "8"})
    job = add_job(
        cluster,
        "tf",
        roles={"ps": 2, "worker": 2},
        annotations={
            AFFINITY_KEY: "ps,worker",
            ANTI_AFFINITY_KEY: "ps",
            TASK_ORDER_KEY: "ps,worker",
        },
    )
    ssn = open_session(cluster, [task_topology()])
    placed = place_greedily(ssn, job)
    assert placed["tf-ps-0"] != placed["tf-ps-1"]
    assert {placed["tf-worker-0"], placed["tf-worker-1"]} <= {placed["tf-ps-0"], placed["tf-ps-1"]}


@pytest.mark.parametrize(
    ("annotations", "first", "rest"),
    [
        pytest.param(
            {TASK_ORDER_KEY: "ps,chief"}, ["ps", "chief"], {"worker", "eval"}, id="listed"
        ),
        pytest.param(
            {ANTI_AFFINITY_KEY: "ps", AFFINITY_KEY: "chief,worker"},
            ["ps"],
            {"chief", "worker"},
            id="strongest-constraint-first",
        ),
    ],
)
def test_task_order(annotations: dict[str, str], first: list[str], rest: set[str]) -> None:
    """Listed tasks first in the annotation's order; else self anti-affinity before affinity;
    tasks without any topology last."""
    cluster = cpu_cluster(NODES)
    job = add_job(
        cluster, "tf", roles={"worker": 1, "chief": 1, "ps": 1, "eval": 1}, annotations=annotations
    )
    ssn = open_session(cluster, [task_topology()])
    ordered = [t.role for t in sorted(job.tasks.values(), key=ssn.task_order_key())]
    assert ordered[: len(first)] == first
    assert set(ordered[len(first) : len(first) + len(rest)]) == rest
    if len(first) + len(rest) < 4:
        assert ordered[-1] == "eval"


def test_inter_task_affinity_does_not_relate_a_task_to_itself() -> None:
    """Affinity "ps,worker" draws workers to ps, but not ps to ps (Volcano's reading)."""
    cluster = cpu_cluster(NODES)
    job = add_job(
        cluster, "tf", roles={"ps": 2, "worker": 1}, annotations={AFFINITY_KEY: "ps,worker"}
    )
    ssn = open_session(cluster, [task_topology()])
    ps0, ps1, worker = sorted(job.tasks.values(), key=lambda t: t.name)
    ssn.statement().allocate(ps0, "n1")
    assert ssn.node_score(ps1, ssn.nodes["n1"]) == 0
    assert ssn.node_score(worker, ssn.nodes["n1"]) > 0


def test_jobs_without_annotations_register_nothing() -> None:
    """No topology annotations anywhere: the plugin stays out of the session."""
    cluster = cpu_cluster(NODES)
    job = add_job(cluster, "plain", roles={"w": 2}, annotations={})
    ssn = open_session(cluster, [task_topology()])
    task = next(iter(job.tasks.values()))
    assert ssn.node_score(task, ssn.nodes["n0"]) == 0
    assert ssn._registered(CallbackKind.NODE_ORDER) == []
