"""The gang plugin: validity, readiness, job order, victims beyond minAvailable, and the
PodGroup conditions, events and pod messages written at session close."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from caldera.api.volcano import PodGroup, PodGroupCondition, PodGroupStatus
from scheduler.api.types import ClusterInfo, TaskStatus
from scheduler.framework.incremental import Incremental
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.gang import GangPlugin, derive_unready, job_valid, recall_unready
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task, run

# Memos kept as the session's incremental layer keeps them (no cluster-wide state read).
MEMOS = Incremental(ClusterInfo(), ())


def test_six_pod_gang_on_room_for_five_reports_volcano_messages() -> None:
    """The condition, the event and the pods' messages read as Volcano's do."""
    cluster = make_cluster([make_node("n0", "3"), make_node("n1", "2")], [make_job("a", 6)])
    ssn = run(cluster)
    condition = ssn.job_conditions["ns/a"]
    summary = (
        "pod group is not ready, 6 Pending, 6 minAvailable; Pending: 1 Unschedulable, "
        "5 Schedulable. Origin reason is a-5: 0/2 nodes are available: 2 Insufficient cpu."
    )
    assert (condition.type, condition.status, condition.reason) == (
        "Unschedulable",
        "True",
        "NotEnoughResources",
    )
    assert condition.message == f"1/6 tasks in gang unschedulable: {summary}"
    events = [(e.kind, e.name, e.type, e.reason, e.message) for e in ssn.result.events]
    assert events == [
        (
            "PodGroup",
            "a",
            "Warning",
            "Unschedulable",
            f"6/6 tasks in gang unschedulable: {summary}",
        )
    ]
    messages = ssn.result.unschedulable
    assert messages["ns/a-5"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert messages["ns/a-0"] == (
        "Pod ns/a-0 can possibly be assigned to n0, once minAvailable is satisfied"
    )
    assert ssn.result.podgroup_status["ns/a"].phase == "Inqueue"


def test_ready_gang_gets_scheduled_condition_and_event() -> None:
    """A gang that binds gets the Scheduled condition and a Normal Scheduled event."""
    ssn = run(make_cluster([make_node("n0", "4")], [make_job("a", 2)]))
    condition = ssn.job_conditions["ns/a"]
    assert (condition.type, condition.reason) == (
        "Scheduled",
        "tasks in gang are ready to be scheduled",
    )
    assert [(e.type, e.reason, e.message) for e in ssn.result.events] == [
        ("Normal", "Scheduled", "pod group is ready")
    ]
    assert ssn.result.unschedulable == {}


def test_no_scheduled_event_when_nothing_changed() -> None:
    """A running gang whose PodGroup already says so gets no event (no status write)."""
    tasks = [make_task("a", i, status=TaskStatus.RUNNING, node="n0") for i in range(2)]
    job = make_job("a", tasks, phase="Running")
    scheduled = PodGroupCondition(
        type="Scheduled", status="True", reason="tasks in gang are ready to be scheduled"
    )
    job.podgroup = PodGroup(
        status=PodGroupStatus(phase="Running", running=2, conditions=(scheduled,))
    )
    ssn = run(make_cluster([make_node("n0", "4")], [job]))
    assert ssn.result.events == []
    assert "ns/a" not in ssn.result.podgroup_status


def test_job_without_pods_reports_volcano_summary() -> None:
    """A PodGroup whose pods do not exist yet is invalid: NotEnoughTasks, and the event has
    Volcano's "1/0 tasks in gang unschedulable" form."""
    ssn = run(make_cluster([make_node("n0")], [make_job("a", 0, min_available=1)]))
    condition = ssn.job_conditions["ns/a"]
    assert (condition.reason, condition.message) == (
        "NotEnoughTasks",
        "Not enough valid tasks for gang-scheduling, valid: 0, min: 1",
    )
    assert [e.message for e in ssn.result.events] == [
        "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable"
    ]


def test_per_task_minimums() -> None:
    """minTaskMember is enforced when minMember covers the sum: a missing ps pod makes the job
    invalid; when minMember is below the sum the per-task check is skipped."""
    workers = [make_task("a", i, role="worker") for i in range(3)]
    job = make_job("a", workers, min_available=3, min_task_member={"ps": 1, "worker": 2})
    invalid = job_valid(MEMOS, job)
    assert invalid is not None
    assert invalid.reason == "NotEnoughPodsOfTask"
    workers = [make_task("a", i, role="worker") for i in range(3)]
    job = make_job("a", workers, min_available=3, min_task_member={"ps": 1, "worker": 3})
    assert job_valid(MEMOS, job) is None  # sum 4 > minMember 3


def test_ready_needs_every_task_minimum() -> None:
    """With room for the workers but not the ps pod, a job needing one of each is not ready,
    so nothing binds."""
    ps = make_task("a", 0, {"cpu": "8"}, role="ps")
    workers = [make_task("a", i, role="worker") for i in (1, 2)]
    job = make_job("a", [ps, *workers], min_available=2, min_task_member={"ps": 1, "worker": 1})
    ssn = run(make_cluster([make_node("n0", "4")], [job]))
    assert ssn.result.binds == []


def test_minimum_reached_binds_the_rest_later_in_same_session() -> None:
    """minAvailable 2 of 4 with room for 3: three pods bind, the fourth waits with a reason."""
    ssn = run(make_cluster([make_node("n0", "3")], [make_job("a", 4, min_available=2)]))
    assert len(binds(ssn)) == 3
    assert ssn.job_conditions["ns/a"].type == "Scheduled"
    assert ssn.result.unschedulable == {"ns/a-3": "0/1 nodes are available: 1 Insufficient cpu."}


def test_victims_only_beyond_min_available() -> None:
    """A job with 3 running pods and minAvailable 2 offers one victim."""
    tasks = [make_task("a", i, status=TaskStatus.RUNNING, node="n0") for i in range(3)]
    job = make_job("a", tasks, min_available=2, phase="Running")
    ssn = Session(make_cluster([make_node("n0")], [job]), [[PluginOption("gang")]])
    GangPlugin(Arguments("gang", {})).on_session_open(ssn)
    preemptor = make_task("b", 0)
    assert [t.name for t in ssn.preemptable(preemptor, tasks)] == ["a-0"]
    assert [t.name for t in ssn.reclaimable(preemptor, tasks)] == ["a-0"]


def test_not_ready_jobs_first_and_starving() -> None:
    """Job order puts a job below its minimum before a ready one; starving follows the
    placed-plus-pipelined count."""
    ready = make_job("r", [make_task("r", 0, status=TaskStatus.RUNNING, node="n0")])
    waiting = make_job("w", 1)
    ssn = Session(make_cluster([make_node("n0")], [ready, waiting]), [])
    GangPlugin(Arguments("gang", {})).on_session_open(ssn)
    assert [j.name for j in ssn.sorted_jobs(ssn.jobs.values())] == ["w", "r"]
    assert ssn.job_starving(waiting) is True
    assert ssn.job_starving(ready) is False


def test_pipelined_job_keeps_its_placements() -> None:
    """When a gang is only pipelined (waiting for releasing resources), its statement is kept
    rather than discarded: the allocated pod keeps its node for later actions."""
    leaving = make_task("old", 0, {"cpu": "2"}, status=TaskStatus.RELEASING, node="n0")
    job = make_job("a", 2)
    cluster = make_cluster([make_node("n0", "3")], [make_job("old", [leaving]), job])
    ssn = run(cluster)
    statuses = sorted(t.status.value for t in ssn.jobs["ns/a"].tasks.values())
    assert statuses == ["Allocated", "Pipelined"]
    assert ssn.result.binds == []
    allocated = next(t for t in ssn.jobs["ns/a"].tasks.values() if t.status.value == "Allocated")
    assert ssn.result.unschedulable[allocated.key] == (
        f"Pod ns/{allocated.name} can possibly be assigned to n0, once minAvailable is satisfied"
    )


def test_waiting_gang_findings_are_reused_only_while_what_they_read_is_the_same() -> None:
    """Close keeps what it derived for a gang that waits (fit error, pods' messages) with the
    job: the same object while the job, its fit errors and its pods' last placements are as
    they were; derived again, as from scratch, when any of these changes."""
    job = make_job("a", 3)
    pods = list(job.tasks.values())
    job.fit_errors[pods[2].uid] = "0/2 nodes are available: 2 Insufficient cpu."
    pods[0].last_transaction = (TaskStatus.ALLOCATED, "n0")
    first = recall_unready(MEMOS, job)
    assert recall_unready(MEMOS, job) is first
    assert first.job_message.startswith("2/3 tasks in gang unschedulable: ")

    job.fit_errors[pods[2].uid] = "0/2 nodes are available: 2 Insufficient memory."
    second = recall_unready(MEMOS, job)
    assert second is not first
    assert second == derive_unready(job)
    assert second.prefix is first.prefix  # the same pods fail: only the texts put in anew
    assert second.messages[pods[2].key] == "0/2 nodes are available: 2 Insufficient memory."
    assert second.fit.endswith(
        "Origin reason is a-2: 0/2 nodes are available: 2 Insufficient memory."
    )
    assert second.messages[pods[1].key] == second.job_message

    pods[1].last_transaction = (TaskStatus.ALLOCATED, "n1")
    third = recall_unready(MEMOS, job)
    assert third is not second
    assert third == derive_unready(job)
    assert third.schedulable == 2

    job.set_status(pods[0], TaskStatus.ALLOCATED)  # a new generation
    assert recall_unready(MEMOS, job) == derive_unready(job)
    assert "not ready, 1 Allocated, 2 Pending," in recall_unready(MEMOS, job).fit


@given(
    st.lists(
        st.tuples(
            st.sampled_from(("text", "fails", "clears", "placed", "moved")),
            st.integers(0, 4),
            st.sampled_from(("cpu", "memory", "nvidia.com/gpu")),
        ),
        max_size=12,
    )
)
def test_kept_findings_equal_findings_derived_afresh(
    changes: list[tuple[str, int, str]],
) -> None:
    """Whatever changes between two closes (a fit error's text, which pods fail, the last
    placements, the job's state), what close recalls equals what it derives from scratch."""
    job = make_job("a", 5)
    pods = sorted(job.tasks.values(), key=lambda t: t.name)
    for kind, which, resource in changes:
        pod = pods[which]
        if kind == "text" and pod.uid in job.fit_errors:
            job.fit_errors[pod.uid] = f"0/3 nodes are available: 3 Insufficient {resource}."
        elif kind in ("text", "fails"):
            job.fit_errors[pod.uid] = f"0/2 nodes are available: 2 Insufficient {resource}."
        elif kind == "clears":
            job.fit_errors.pop(pod.uid, None)
        elif kind == "placed":
            pod.last_transaction = (TaskStatus.ALLOCATED, f"n-{resource}")
        elif pod.status == TaskStatus.PENDING:
            job.set_status(pod, TaskStatus.PIPELINED)
        assert recall_unready(MEMOS, job) == derive_unready(job)
