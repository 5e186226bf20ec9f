"""What plugins and the session's close keep with a job between sessions (``JobInfo.memo``) is
used only while the job, its phase, its PodGroup and its condition stay what they were.

The differential test in ``unit/test_sched_live_snapshot.py`` checks whole sessions on the live
snapshot against sessions that derive everything again; these check the keys one by one, on a
snapshot whose JobInfo outlives a change (as a hand-built one can).
"""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.volcano import PodGroupCondition, PodGroupStatus
from caldera.api.why import WaitStage
from scheduler.api.job_sums import JobTrail
from scheduler.api.types import ClusterInfo, JobInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.incremental import Incremental
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.runner import _STATUS, Registry, _unchanged_phase, run_session
from scheduler.framework.session import Session
from scheduler.plugins.gang import GangPlugin, has_best_effort
from scheduler.registry import REGISTRY
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task, run

# Memos kept as the session's incremental layer keeps them (no cluster-wide state read).
MEMOS = Incremental(ClusterInfo(), ())


def _running_job() -> JobInfo:
    tasks = [make_task("j", i, status=TaskStatus.RUNNING, node="n0") for i in range(2)]
    return make_job("j", tasks, annotations={})


def test_remembered_until_the_job_changes() -> None:
    job = make_job("j", 2)

    def first_allocated() -> None:
        job.set_status(next(iter(job.tasks.values())), TaskStatus.ALLOCATED)

    def another_task() -> None:
        job.add_task(make_task("j", 9))

    def one_task_less() -> None:
        job.remove_task(next(iter(job.tasks.values())))

    def running() -> None:
        job.phase = "Running"

    memos = Incremental(ClusterInfo(), ())
    for change in (first_allocated, another_task, one_task_less, running):
        memos.keep_for_job(job, "plugin", 42)
        assert memos.kept_for_job(job, "plugin") == 42
        assert memos.memo_for_job(job, "plugin", lambda job: 0) == 42
        change()
        assert memos.kept_for_job(job, "plugin") is None, change.__name__
    memos.keep_for_job(job, "plugin", 7)
    task = next(iter(job.tasks.values()))
    job.set_status(task, task.status)
    assert memos.kept_for_job(job, "plugin") == 7  # the same status: nothing changed
    assert memos.memo_for_job(job, "plugin", lambda job: 0) == 7
    withheld = Incremental(ClusterInfo(), (), speedups=False)
    assert withheld.kept_for_job(job, "plugin") is None  # withheld: nothing is kept
    assert withheld.memo_for_job(job, "plugin", lambda job: 0) == 0


def _session(job: JobInfo) -> Session:
    cluster = make_cluster([make_node("n0", "8", "16Gi")], [job])
    return run(cluster)


def _written(job: JobInfo, ssn: Session) -> PodGroupStatus | None:
    """The status the session wrote for the job, now the PodGroup's (as the process writes)."""
    status = ssn.result.podgroup_status.get(job.key)
    if status is not None and job.podgroup is not None:
        job.podgroup = msgspec.structs.replace(job.podgroup, status=status)
    return status


def test_settled_job_is_not_written_again_until_its_podgroup_changes() -> None:
    """A running job's status is written once; later sessions keep it (the memo is used: the
    gang plugin and the close skip it, no Event); a PodGroup whose status changed behind the
    job's back is corrected, with the Scheduled Event, as without a memo."""
    job = _running_job()
    first = _session(job)
    assert _written(job, first) is not None
    assert [e.reason for e in first.result.events] == ["Scheduled"]
    second = _session(job)
    assert _written(job, second) is None
    assert MEMOS.kept_for_job(job, _STATUS) is not None
    third = _session(job)
    assert _written(job, third) is None
    assert third.result.events == []

    assert job.podgroup is not None
    job.podgroup = msgspec.structs.replace(job.podgroup, status=PodGroupStatus(phase="Pending"))
    fourth = _session(job)
    written = _written(job, fourth)
    assert written is not None
    assert written.phase == "Running"
    assert [e.reason for e in fourth.result.events] == ["Scheduled"]


def test_status_memo_holds_for_one_condition() -> None:
    """The phase kept for a job answers only for the same condition (its time aside)."""
    job = _running_job()
    scheduled = PodGroupCondition(type="Scheduled", status="True", reason="ready")
    MEMOS.keep_for_job(job, _STATUS, (job.podgroup, ("Scheduled", "True", "ready", ""), "Running"))
    timed = msgspec.structs.replace(scheduled, last_transition_time="2026-01-01T00:00:09Z")
    assert _unchanged_phase(MEMOS, job, timed) == "Running"
    assert _unchanged_phase(MEMOS, job, scheduled) == "Running"
    assert _unchanged_phase(MEMOS, job, None) is None
    other = PodGroupCondition(type="Unschedulable", status="True", reason="NotEnoughResources")
    assert _unchanged_phase(MEMOS, job, other) is None
    assert job.podgroup is not None
    job.podgroup = msgspec.structs.replace(job.podgroup, status=PodGroupStatus(phase="Running"))
    assert _unchanged_phase(MEMOS, job, scheduled) is None  # another PodGroup


def _trailed_cluster(jobs: list[JobInfo]) -> ClusterInfo:
    """One node and ``jobs``, with the trail the live snapshot keeps, every job attached."""
    cluster = make_cluster([make_node("n0", "8", "16Gi")], jobs)
    cluster.job_trail = JobTrail()
    cluster.job_log.trail = cluster.job_trail.keys
    for job in jobs:
        job.changes = cluster.job_log
    return cluster


def test_unsettled_jobs_follow_the_trail_and_the_settled_jobs() -> None:
    """The passes' list of jobs that are not settled keeps the snapshot's order, is shared
    while nothing moves, and follows a job that settles, changes or is unsettled by a change."""
    jobs = [make_job(name, 2) for name in ("a", "b", "c")]
    cluster = _trailed_cluster(jobs)
    ssn = Session(cluster, [])
    first = ssn.incremental.unsettled_jobs()
    assert [j.name for j in first] == ["a", "b", "c"]
    assert ssn.incremental.unsettled_jobs() is first  # nothing moved: the same list
    ssn.incremental.settle("ns/b", "Running")
    assert [j.name for j in ssn.incremental.unsettled_jobs()] == ["a", "c"]
    a_task = next(iter(jobs[0].tasks.values()))
    jobs[0].set_status(a_task, TaskStatus.ALLOCATED)  # the trail moves; b stays settled
    assert [j.name for j in ssn.incremental.unsettled_jobs()] == ["a", "c"]
    b_task = next(iter(jobs[1].tasks.values()))
    jobs[1].set_status(b_task, TaskStatus.ALLOCATED)  # b changes: no longer settled
    assert [j.name for j in ssn.incremental.unsettled_jobs()] == ["a", "b", "c"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 4)), max_size=20))
def test_unsettled_jobs_are_every_job_not_settled_in_order(steps: list[tuple[bool, int]]) -> None:
    """Whatever settles and changes, and in whatever order, the list is the snapshot's jobs
    that are not settled, in the snapshot's order (kept, filtered or built again)."""
    jobs = [make_job(name, 2) for name in ("a", "b", "c", "d", "e")]
    cluster = _trailed_cluster(jobs)
    ssn = Session(cluster, [])
    for settles, index in steps:
        job = jobs[index]
        if settles:
            ssn.incremental.settle(job.key, "Running")
        else:  # a change: the trail names the job, which is no longer settled
            task = next(iter(job.tasks.values()))
            status = (
                TaskStatus.PENDING if task.status != TaskStatus.PENDING else TaskStatus.ALLOCATED
            )
            job.set_status(task, status)
        settled = ssn.incremental.settled()
        assert ssn.incremental.unsettled_jobs() == [j for j in jobs if j.key not in settled]


def test_settled_jobs_get_the_scheduled_condition_from_gangs_close() -> None:
    """gang's close gives the settled jobs their condition once, for the session to read as
    theirs (``Session.job_condition``); a job it set one for reads its own."""
    jobs = [make_job(name, 2) for name in ("a", "b")]
    cluster = _trailed_cluster(jobs)
    ssn = Session(cluster, [])
    ssn.incremental.settle("ns/b", "Running")
    assert ssn.job_condition("ns/b") is None  # no plugin closed yet
    GangPlugin(Arguments("gang", {})).on_session_close(ssn)
    settled = ssn.job_condition("ns/b")
    assert settled is not None
    assert settled.type == "Scheduled"
    unsettled = ssn.job_condition("ns/a")
    assert unsettled is not None
    assert unsettled is ssn.job_conditions["ns/a"]
    assert unsettled.type == "Unschedulable"


def test_best_effort_pods_are_counted_as_tasks_come_and_go() -> None:
    """Whether a job has a pod that requests nothing follows its tasks, not a memo."""
    job = make_job("j", 1)
    assert has_best_effort(job) is False
    best_effort = make_task("j", 5, {})
    job.add_task(best_effort)
    assert has_best_effort(job) is True
    job.set_status(best_effort, TaskStatus.ALLOCATED)
    assert has_best_effort(job) is True
    job.remove_task(best_effort)
    assert has_best_effort(job) is False
    job.remove_task(best_effort)  # gone already: nothing counted twice
    assert has_best_effort(job) is False


class _NotesSettledJob:
    """A plugin that notes a wait for job b at close, as if something about it came in."""

    name = "noter"

    def __init__(self, args: Arguments) -> None:
        self.args = args

    def on_session_open(self, ssn: Session) -> None:
        return None

    def on_session_close(self, ssn: Session) -> None:
        ssn.note_wait("ns/b", WaitStage.ALLOCATE, "noted while settled")


def test_a_settled_job_with_a_note_still_gets_its_wait_record() -> None:
    """The status pass walks the unsettled jobs, and a settled job too when a note about it
    came in this session: its wait record is written."""
    jobs = [make_job(name, 2) for name in ("a", "b")]
    cluster = _trailed_cluster(jobs)
    tiers = ((PluginOption("gang"), PluginOption("noter")),)
    ssn = Session(cluster, tiers)
    ssn.incremental.settle("ns/b", "Running")
    registry = Registry(plugins={**REGISTRY.plugins, "noter": _NotesSettledJob}, actions={})
    result = run_session(ssn, SchedulerConf(actions=(), tiers=tiers), registry)
    assert "ns/b" in ssn.incremental.settled()
    assert result.podgroup_why["ns/b"].summary == "noted while settled"
