"""The overcommit plugin: enqueue admits jobs while inqueue + minResources stays within the
cluster's allocatable times overcommit-factor."""

from __future__ import annotations

import pytest

from scheduler.api.types import TaskStatus
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task, run


def test_enqueue_respects_the_factor() -> None:
    """10 cpus * 1.2 = 12: jobs of 5 + 5 fit, the third 5 does not and gets the event."""
    jobs = [
        make_job(f"j{i}", 0, phase="Pending", min_resources={"cpu": "5"}, created=i)
        for i in range(3)
    ]
    ssn = run(make_cluster([make_node("n0", "10")], jobs), actions="enqueue")
    assert [ssn.jobs[f"ns/j{i}"].phase for i in range(3)] == ["Inqueue", "Inqueue", "Pending"]
    refusals = [(e.name, e.reason, e.message) for e in ssn.result.events if e.type == "Normal"]
    assert refusals == [("j2", "Unschedulable", "resource in cluster is overused")]


@pytest.mark.parametrize(("factor", "admitted"), [(1.0, 2), (1.5, 3), (2.0, 4)])
def test_factor_argument(factor: float, admitted: int) -> None:
    """overcommit-factor scales what may be promised: 10 cpus, jobs of 5."""
    jobs = [
        make_job(f"j{i}", 0, phase="Pending", min_resources={"cpu": "5"}, created=i)
        for i in range(5)
    ]
    ssn = run(
        make_cluster([make_node("n0", "10")], jobs),
        actions="enqueue",
        arguments={"overcommit": {"overcommit-factor": factor}},
    )
    assert sum(j.phase == "Inqueue" for j in ssn.jobs.values()) == admitted


def test_inqueue_and_used_resources_count() -> None:
    """Jobs already Inqueue and pods already running take from the budget."""
    running = make_task("r", 0, {"cpu": "4"}, status=TaskStatus.RUNNING, node="n0")
    jobs = [
        make_job("r", [running], phase="Running"),
        make_job("q", 0, phase="Inqueue", min_resources={"cpu": "4"}),
        make_job("new", 0, phase="Pending", min_resources={"cpu": "5"}),
    ]
    ssn = run(make_cluster([make_node("n0", "10")], jobs), actions="enqueue")
    assert ssn.jobs["ns/new"].phase == "Pending"  # 12 - 4 used < 4 inqueue + 5


def test_only_requested_dimensions_are_compared() -> None:
    """A job asking for GPUs is refused on a cluster without any; one asking only cpu is not
    limited by the cluster's memory."""
    jobs = [
        make_job("gpu", 0, phase="Pending", min_resources={"nvidia.com/gpu": "1"}),
        make_job("cpu", 0, phase="Pending", min_resources={"cpu": "1"}, created=1),
    ]
    ssn = run(make_cluster([make_node("n0", "4", "1Gi")], jobs), actions="enqueue")
    assert ssn.jobs["ns/gpu"].phase == "Pending"
    assert ssn.jobs["ns/cpu"].phase == "Inqueue"
