"""The priority plugin: job and task order by priority, victims of lower priority only,
starving jobs."""

from __future__ import annotations

from scheduler.api.types import JobInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.priority import PriorityPlugin
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task, run


def _session(*jobs: JobInfo) -> Session:
    ssn = Session(make_cluster([make_node("n0")], list(jobs)), [])
    PriorityPlugin(Arguments("priority", {})).on_session_open(ssn)
    return ssn


def test_job_order_higher_priority_first_then_creation() -> None:
    """Priority decides; equal priorities fall back to creation time."""
    ssn = _session(
        make_job("old-low", 1, priority=1),
        make_job("new-high", 1, priority=5, created=10),
        make_job("mid", 1, priority=1, created=3),
    )
    assert [j.name for j in ssn.sorted_jobs(ssn.jobs.values())] == ["new-high", "old-low", "mid"]


def test_task_order_higher_priority_first() -> None:
    """Within a job the higher-priority pod is placed first: with room for one, it wins."""
    tasks = [make_task("a", 0, priority=1), make_task("a", 1, priority=9)]
    ssn = run(
        make_cluster([make_node("n0", "1")], [make_job("a", tasks, min_available=1)]),
        tiers=(("priority", "gang"), ("predicates", "nodeorder")),
    )
    assert binds(ssn) == {"a-1": "n0"}


def test_preemptable_between_jobs_by_job_priority_within_job_by_task_priority() -> None:
    """Other jobs' pods are victims when their job's priority is lower; the preemptor's own
    job's pods when the pod's priority is lower."""
    low = make_job("low", [make_task("low", 0, status=TaskStatus.RUNNING, node="n0")], priority=1)
    same = make_job("same", [make_task("same", 0, status=TaskStatus.RUNNING, node="n0")])
    high_tasks = [
        make_task("high", 0, priority=5),
        make_task("high", 1, priority=1, status=TaskStatus.RUNNING, node="n0"),
        make_task("high", 2, priority=7, status=TaskStatus.RUNNING, node="n0"),
    ]
    high = make_job("high", high_tasks, priority=10)
    ssn = _session(low, same, high)
    same.priority = 10
    candidates = [*low.tasks.values(), *same.tasks.values(), *high_tasks[1:]]
    victims = ssn.preemptable(high_tasks[0], candidates)
    assert sorted(t.name for t in victims) == ["high-1", "low-0"]


def test_starving() -> None:
    """A job below minAvailable is starving; a placed one is not."""
    placed = make_job("p", [make_task("p", 0, status=TaskStatus.RUNNING, node="n0")])
    waiting = make_job("w", 2)
    ssn = _session(placed, waiting)
    assert ssn.job_starving(waiting) is True
    assert ssn.job_starving(placed) is False
