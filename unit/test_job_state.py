"""Tests of controllers.job.state: the Job state machine (Volcano's job/state/*.go):
every row of the action table, every update rule, kills, and the status it produces."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import Pod, PodStatus
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    TASK_SPEC_KEY,
    Action,
    Job,
    JobCondition,
    JobPhase,
    JobSpec,
    JobState,
    JobStatus,
    TaskSpec,
)
from controllers.job.state import (
    INVALID_TEMPLATE,
    JOB_TARGET,
    RETAIN_NONE,
    RETAIN_SOFT,
    Plan,
    Step,
    Target,
    TargetKind,
    Transition,
    apply_plan,
    current_phase,
    kill_victims,
    next_phase,
    plan,
)
from controllers.job.status import PodCounts, status_changed

NOW = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
NOW_S = "2024-05-01T12:00:00Z"
CREATED = "2024-05-01T10:00:00Z"

TASK = Target.of_task("worker")
POD = Target.of_pod("worker", "j-worker-0")


def job(
    phase: str = "Running",
    *,
    replicas: tuple[int, ...] = (2, 1),
    task_min: tuple[int | None, ...] = (None, None),
    min_available: int = 3,
    min_success: int | None = None,
    max_retry: int = 3,
    retry_count: int = 0,
    status_min_available: int = 3,
    deleting: bool = False,
    conditions: tuple[JobCondition, ...] = (),
) -> Job:
    names = ("worker", "ps", "chief")
    tasks = tuple(
        TaskSpec(name=names[i], replicas=r, min_available=task_min[i])
        for i, r in enumerate(replicas)
    )
    return Job(
        metadata=ObjectMeta(
            name="j",
            namespace="ns",
            uid="uid",
            creation_timestamp=CREATED,
            deletion_timestamp="2024-05-01T11:00:00Z" if deleting else None,
        ),
        spec=JobSpec(
            tasks=tasks,
            min_available=min_available,
            min_success=min_success,
            max_retry=max_retry,
        ),
        status=JobStatus(
            state=JobState(phase=phase),
            retry_count=retry_count,
            min_available=status_min_available,
            conditions=conditions,
        ),
    )


# --- plan: the action table of Volcano's job/state/*.go -----------------------------------------


def kill_job(
    retain: frozenset[str],
    *,
    retry: int = 0,
    phase: JobPhase | None = None,
    update: bool = False,
    reason: str = "",
) -> Plan:
    return Plan(
        step=Step.KILL_JOB,
        retain=retain,
        bump_version=True,
        delete_podgroup=True,
        retry_increment=retry,
        phase=phase,
        run_update=update,
        reason=reason,
    )


def kill_target(
    target: Target,
    *,
    retry: int = 0,
    phase: JobPhase | None = None,
    update: bool = False,
    reason: str = "",
) -> Plan:
    return Plan(
        step=Step.KILL_TARGET,
        target=target,
        retain=RETAIN_NONE,
        retry_increment=retry,
        phase=phase,
        run_update=update,
        reason=reason,
    )


SYNC = Plan(step=Step.SYNC, run_update=True)
R = JobPhase.RESTARTING


def _pending_running_rows(phase: str, label: str) -> list[Any]:
    return [
        pytest.param(phase, Action.RESTART_JOB, JOB_TARGET,
                     kill_job(RETAIN_NONE, retry=1, phase=R, reason="RestartJob"),
                     id=f"{label}-restart-job"),
        pytest.param(phase, Action.RESTART_TASK, TASK,
                     kill_target(TASK, retry=1, phase=R, reason="RestartTask"),
                     id=f"{label}-restart-task"),
        pytest.param(phase, Action.RESTART_POD, POD,
                     kill_target(POD, retry=1, phase=R, reason="RestartPod"),
                     id=f"{label}-restart-pod"),
        pytest.param(phase, Action.RESTART_PARTITION, TASK,
                     kill_target(TASK, retry=1, phase=R, reason="RestartPartition"),
                     id=f"{label}-restart-partition-task-wide"),
        pytest.param(phase, Action.RESTART_TASK, JOB_TARGET,
                     kill_job(RETAIN_NONE, retry=1, phase=R, reason="RestartJob"),
                     id=f"{label}-restart-task-without-target-restarts-job"),
        pytest.param(phase, Action.RESTART_POD, Target(TargetKind.POD, task="worker"),
                     kill_job(RETAIN_NONE, retry=1, phase=R, reason="RestartJob"),
                     id=f"{label}-restart-pod-without-pod-restarts-job"),
        pytest.param(phase, Action.ABORT_JOB, JOB_TARGET,
                     kill_job(RETAIN_SOFT, phase=JobPhase.ABORTING, reason="AbortJob"),
                     id=f"{label}-abort"),
        pytest.param(phase, Action.COMPLETE_JOB, JOB_TARGET,
                     kill_job(RETAIN_SOFT, phase=JobPhase.COMPLETING, reason="CompleteJob"),
                     id=f"{label}-complete"),
        pytest.param(phase, Action.TERMINATE_JOB, JOB_TARGET,
                     kill_job(RETAIN_SOFT, phase=JobPhase.TERMINATING, reason="TerminateJob"),
                     id=f"{label}-terminate"),
        pytest.param(phase, Action.SYNC_JOB, JOB_TARGET, SYNC, id=f"{label}-sync"),
        pytest.param(phase, Action.RESUME_JOB, JOB_TARGET, SYNC, id=f"{label}-resume-syncs"),
        pytest.param(phase, Action.ENQUEUE_JOB, JOB_TARGET, SYNC, id=f"{label}-other-syncs"),
    ]  # fmt: skip


def _kill_soft_rows(phase: str, update: bool) -> list[Any]:
    return [
        pytest.param(phase, action, JOB_TARGET, kill_job(RETAIN_SOFT, update=update),
                     id=f"{phase}-{action.value}")
        for action in (Action.SYNC_JOB, Action.RESTART_JOB, Action.ABORT_JOB, Action.RESUME_JOB)
        if not (action is Action.RESUME_JOB and phase in ("Aborting", "Aborted"))
    ]  # fmt: skip


TABLE: list[Any] = [
    *_pending_running_rows("", "new"),
    *_pending_running_rows("Pending", "pending"),
    *_pending_running_rows("Running", "running"),
    pytest.param("Restarting", Action.SYNC_JOB, JOB_TARGET, SYNC, id="restarting-sync"),
    pytest.param("Restarting", Action.RESTART_TASK, TASK, kill_target(TASK, update=True),
                 id="restarting-restart-task"),
    pytest.param("Restarting", Action.RESTART_POD, POD, kill_target(POD, update=True),
                 id="restarting-restart-pod"),
    pytest.param("Restarting", Action.RESTART_PARTITION, TASK, kill_target(TASK, update=True),
                 id="restarting-restart-partition"),
    pytest.param("Restarting", Action.RESTART_JOB, JOB_TARGET, kill_job(RETAIN_NONE, update=True),
                 id="restarting-restart-job"),
    pytest.param("Restarting", Action.ABORT_JOB, JOB_TARGET, kill_job(RETAIN_NONE, update=True),
                 id="restarting-abort-kills-all"),
    pytest.param("Restarting", Action.RESUME_JOB, JOB_TARGET, kill_job(RETAIN_NONE, update=True),
                 id="restarting-resume-kills-all"),
    pytest.param("Aborting", Action.RESUME_JOB, JOB_TARGET,
                 kill_job(RETAIN_SOFT, retry=1, phase=R, reason="ResumeJob"),
                 id="aborting-resume"),
    *_kill_soft_rows("Aborting", update=True),
    pytest.param("Aborted", Action.RESUME_JOB, JOB_TARGET,
                 kill_job(RETAIN_SOFT, retry=1, phase=R, reason="ResumeJob"), id="aborted-resume"),
    *_kill_soft_rows("Aborted", update=False),
    *_kill_soft_rows("Completing", update=True),
    *_kill_soft_rows("Terminating", update=True),
    *_kill_soft_rows("Completed", update=False),
    *_kill_soft_rows("Failed", update=False),
    *_kill_soft_rows("Terminated", update=False),
]  # fmt: skip


@pytest.mark.parametrize(("phase", "action", "target", "expected"), TABLE)
def test_plan_table(phase: str, action: Action, target: Target, expected: Plan) -> None:
    """Every row of the state/*.go action table: which kill or sync, retained phases, version bump
    and PodGroup deletion on full kills only, retryCount++ on Restart*/Resume, the forced phase or
    the state's update function. A new Job ("") behaves as Pending."""
    assert plan(job(phase), action, target) == expected


@pytest.mark.parametrize(
    ("retry_count", "action", "target", "retain"),
    [
        pytest.param(2, Action.RESTART_JOB, JOB_TARGET, RETAIN_SOFT, id="last-retry-job"),
        pytest.param(3, Action.RESTART_JOB, JOB_TARGET, RETAIN_SOFT, id="past-last-retry"),
        pytest.param(1, Action.RESTART_JOB, JOB_TARGET, RETAIN_NONE, id="not-last-retry"),
        pytest.param(2, Action.RESTART_TASK, TASK, RETAIN_SOFT, id="last-retry-target"),
        pytest.param(1, Action.RESTART_TASK, TASK, RETAIN_NONE, id="not-last-retry-target"),
    ],
)
def test_last_retry_keeps_finished_pods(
    retry_count: int, action: Action, target: Target, retain: frozenset[str]
) -> None:
    """On the last retry (retryCount >= maxRetry-1) even RestartJob keeps Failed and Succeeded
    pods (Volcano's killJob)."""
    assert plan(job(retry_count=retry_count), action, target).retain == retain


@pytest.mark.parametrize(
    "the_job",
    [
        pytest.param(job("Running", deleting=True), id="being-deleted"),
        pytest.param(job("Suspended"), id="unknown-phase"),
    ],
)
def test_plan_does_nothing(the_job: Job) -> None:
    """A Job being deleted (killJob/syncJob return at once) or in a phase this machine does not
    know gets Step.NONE, and apply_plan leaves its status as it is."""
    p = plan(the_job, Action.RESTART_JOB)
    assert p == Plan(step=Step.NONE)
    assert apply_plan(the_job, p, PodCounts(running=9), NOW) is the_job.status


def test_current_phase() -> None:
    """An empty phase is Pending; known phases map to JobPhase; unknown ones to None."""
    assert current_phase(job("")) is JobPhase.PENDING
    assert current_phase(job("Aborted")) is JobPhase.ABORTED
    assert current_phase(job("Nope")) is None


# --- kill victims -------------------------------------------------------------------------------


def pod(name: str, phase: str, *, task: str = "worker", deleting: bool = False) -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name,
            annotations={TASK_SPEC_KEY: task},
            deletion_timestamp="2024-05-01T11:00:00Z" if deleting else None,
        ),
        status=PodStatus(phase=phase),
    )


PODS = (
    pod("j-worker-0", "Running"),
    pod("j-worker-1", "Succeeded"),
    pod("j-worker-2", "Failed"),
    pod("j-worker-3", "Pending", deleting=True),
    pod("j-ps-0", "Pending", task="ps"),
    pod("j-ps-1", "Failed", task="ps"),
)


@pytest.mark.parametrize(
    ("p", "victims"),
    [
        pytest.param(kill_job(RETAIN_NONE), {"j-worker-0", "j-worker-1", "j-worker-2", "j-ps-0",
                                              "j-ps-1"}, id="job-retain-none"),
        pytest.param(kill_job(RETAIN_SOFT), {"j-worker-0", "j-ps-0"}, id="job-retain-soft"),
        pytest.param(kill_target(TASK), {"j-worker-0", "j-worker-1", "j-worker-2"},
                     id="task-target"),
        pytest.param(kill_target(Target.of_pod("ps", "j-ps-1")), {"j-ps-1"}, id="pod-target"),
        pytest.param(Plan(step=Step.KILL_TARGET, target=TASK, retain=RETAIN_SOFT),
                     {"j-worker-0"}, id="task-target-soft"),
        pytest.param(SYNC, set(), id="sync-kills-nothing"),
    ],
)  # fmt: skip
def test_kill_victims(p: Plan, victims: set[str]) -> None:
    """Kills delete the pods in their target whose phase is not retained, never a pod already
    being deleted; a sync plan kills nothing."""
    assert {v.metadata.name for v in kill_victims(p, PODS)} == victims


# --- next_phase: every update rule --------------------------------------------------------------

P, RU, RS = JobPhase.PENDING, JobPhase.RUNNING, JobPhase.RESTARTING
C, F = JobPhase.COMPLETED, JobPhase.FAILED


def counts(
    pending: int = 0,
    running: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    terminating: int = 0,
    tasks: dict[str, dict[str, int]] | None = None,
) -> PodCounts:
    return PodCounts(
        pending=pending,
        running=running,
        succeeded=succeeded,
        failed=failed,
        terminating=terminating,
        task_status_count=tasks or {},
    )


UPDATES: list[Any] = [
    # Pending
    pytest.param(job(), P, counts(running=2, succeeded=1), RU, id="pending-min-available-met"),
    pytest.param(job(), P, counts(running=1, failed=1, pending=1), None,
                 id="pending-min-available-not-met"),
    pytest.param(job(min_available=0), P, counts(), RU, id="pending-min-available-zero"),
    # Running
    pytest.param(job(replicas=(0, 0), min_success=1), RU, counts(succeeded=5), None,
                 id="running-zero-replicas-unchanged"),
    pytest.param(job(min_success=2), RU, counts(running=1, succeeded=2), C,
                 id="running-min-success-reached"),
    pytest.param(job(min_success=3), RU, counts(succeeded=2, failed=1), F,
                 id="running-all-done-below-min-success"),
    pytest.param(job(task_min=(2, 1)), RU,
                 counts(succeeded=2, failed=1, tasks={"worker": {"Succeeded": 2},
                                                      "ps": {"Failed": 1}}),
                 F, id="running-task-min-available-not-met"),
    pytest.param(job(task_min=(1, 1), min_available=2), RU,
                 counts(succeeded=2, failed=1, tasks={"worker": {"Succeeded": 2},
                                                      "ps": {"Failed": 1}}),
                 F, id="running-task-rule-applies-when-min-available-equals-sum"),
    pytest.param(job(task_min=(2, None)), RU,
                 counts(succeeded=3, tasks={"worker": {"Succeeded": 2}, "ps": {"Succeeded": 1}}),
                 C, id="running-task-min-available-met"),
    pytest.param(job(task_min=(2, 1), min_available=2), RU,
                 counts(succeeded=2, failed=1, tasks={"worker": {"Succeeded": 2},
                                                      "ps": {"Failed": 1}}),
                 C, id="running-task-rule-skipped-when-min-available-below-sum"),
    pytest.param(job(task_min=(1, None), min_available=2), RU,
                 counts(succeeded=1, failed=2, tasks={"worker": {"Succeeded": 1}}),
                 F, id="running-task-rule-met-then-below-min-available"),
    pytest.param(job(), RU, counts(succeeded=3), C, id="running-all-succeeded"),
    pytest.param(job(min_available=2), RU, counts(succeeded=2, failed=1), C,
                 id="running-enough-succeeded"),
    pytest.param(job(), RU, counts(succeeded=2, failed=1), F, id="running-too-few-succeeded"),
    pytest.param(job(min_available=2), RU, counts(pending=2, running=1), P,
                 id="running-too-many-pending"),
    pytest.param(job(min_available=2), RU, counts(pending=1, running=2), None,
                 id="running-pending-within-slack"),
    pytest.param(job(), RU, counts(running=3), None, id="running-stays"),
    # Restarting
    pytest.param(job(retry_count=3), RS, counts(), F, id="restarting-max-retry-reached"),
    pytest.param(job(retry_count=4, max_retry=3), RS, counts(), F, id="restarting-past-max"),
    pytest.param(job(retry_count=1), RS, counts(terminating=0), P, id="restarting-pods-gone"),
    pytest.param(job(retry_count=1), RS, counts(terminating=1), None,
                 id="restarting-still-terminating"),
    pytest.param(job(retry_count=1, status_min_available=2), RS, counts(terminating=1), P,
                 id="restarting-enough-left-for-status-min-available"),
    # Aborting, Completing, Terminating
    *[
        pytest.param(job(), before, c, after if done else None, id=f"{before}-{label}")
        for before, after in ((JobPhase.ABORTING, JobPhase.ABORTED),
                              (JobPhase.COMPLETING, JobPhase.COMPLETED),
                              (JobPhase.TERMINATING, JobPhase.TERMINATED))
        for label, c, done in (("none-alive", counts(succeeded=1, failed=2), True),
                               ("pending", counts(pending=1), False),
                               ("running", counts(running=1), False),
                               ("terminating", counts(terminating=1), False))
    ],
    # terminal and Aborted
    *[pytest.param(job(), ph, counts(), None, id=f"{ph}-no-update")
      for ph in (JobPhase.ABORTED, C, F, JobPhase.TERMINATED)],
]  # fmt: skip


@pytest.mark.parametrize(("the_job", "before", "c", "after"), UPDATES)
def test_next_phase(the_job: Job, before: JobPhase, c: PodCounts, after: JobPhase | None) -> None:
    """Each state's update function of state/*.go, rule by rule."""
    got = next_phase(the_job, before, c)
    assert (got.phase if got else None) == after


# --- apply_plan ---------------------------------------------------------------------------------


def test_new_job_enters_pending_then_running() -> None:
    """A new Job gets Pending (initJobStatus) and, once enough pods run, Running in the same
    pass: two conditions, lastTransitionTime now, minAvailable from the spec."""
    j = job("", status_min_available=0)
    new = apply_plan(j, plan(j, Action.SYNC_JOB), counts(running=3), NOW)
    assert new.state.phase == JobPhase.RUNNING
    assert new.state.last_transition_time == NOW_S
    assert [c.status for c in new.conditions] == ["Pending", "Running"]
    assert (new.min_available, new.running, new.version, new.retry_count) == (3, 3, 0, 0)
    assert new.running_duration is None  # syncs do not set it


def test_new_job_without_pods_stays_pending() -> None:
    """A new Job with too few pods is Pending with one condition."""
    j = job("")
    new = apply_plan(j, plan(j, Action.SYNC_JOB), counts(pending=3), NOW)
    assert new.state == JobState(phase="Pending", last_transition_time=NOW_S)
    assert [c.status for c in new.conditions] == ["Pending"]


def test_restart_job_status() -> None:
    """RestartJob from Running: version++, retryCount++, Restarting with reason and condition,
    killed pods counted as terminating, runningDuration = lastTransitionTime - creation."""
    j = job("Running", conditions=(JobCondition(status="Running", last_transition_time=CREATED),))
    new = apply_plan(j, plan(j, Action.RESTART_JOB), counts(terminating=3), NOW)
    assert new.state.phase == JobPhase.RESTARTING
    assert new.state.reason == "RestartJob"
    assert (new.version, new.retry_count, new.terminating) == (1, 1, 3)
    assert [c.status for c in new.conditions] == ["Running", "Restarting"]
    assert new.running_duration == "2h0m0s"


def test_reentering_a_phase_moves_its_condition_last() -> None:
    """Restarting → Pending when Pending already has a condition: the old Pending entry goes and
    the new one is appended, so there is at most one per phase."""
    old = tuple(
        JobCondition(status=s, last_transition_time=CREATED)
        for s in ("Pending", "Running", "Restarting")
    )
    j = job("Restarting", retry_count=1, conditions=old)
    new = apply_plan(j, plan(j, Action.SYNC_JOB), counts(pending=3), NOW)
    assert [(c.status, c.last_transition_time) for c in new.conditions] == [
        ("Running", CREATED),
        ("Restarting", CREATED),
        ("Pending", NOW_S),
    ]


def test_unchanged_status_is_not_rewritten() -> None:
    """A sync that changes no count and no phase produces an equal status (no write)."""
    j = job("Running")
    j = Job(metadata=j.metadata, spec=j.spec, status=JobStatus(
        state=JobState(phase="Running", last_transition_time=CREATED), min_available=3, running=3,
        task_status_count={}))  # fmt: skip
    new = apply_plan(j, plan(j, Action.SYNC_JOB), counts(running=3), NOW)
    assert not status_changed(j.status, new)


def test_resume_from_aborted() -> None:
    """ResumeJob on an Aborted Job: Restarting, retryCount++, version++ (a full kill)."""
    j = job("Aborted", retry_count=1)
    new = apply_plan(j, plan(j, Action.RESUME_JOB), counts(), NOW)
    assert (new.state.phase, new.retry_count, new.version) == ("Restarting", 2, 1)


def test_targeted_restart_does_not_bump_version() -> None:
    """RestartTask kills only its target: retryCount++ and Restarting, but the version stays."""
    j = job("Running")
    p = plan(j, Action.RESTART_TASK, TASK)
    new = apply_plan(j, p, counts(running=1, terminating=2), NOW)
    assert (new.state.phase, new.retry_count, new.version) == ("Restarting", 1, 0)
    assert not p.delete_podgroup


def test_transition_reason() -> None:
    """Count-driven transitions carry a reason and message."""
    assert next_phase(job(retry_count=3), RS, counts()) == Transition(
        JobPhase.FAILED, "MaxRetryReached", "retryCount reached maxRetry"
    )


def test_invalid_template_reason_survives_to_terminated() -> None:
    """A Job terminated for an invalid template: Terminating with the field errors as its state,
    then Terminated keeping them (not "no pod is alive"), so the final status says why."""
    errors = "spec.task[0].template.spec.containers[0].image: Required value"
    j = job("")
    p = replace(plan(j, Action.TERMINATE_JOB), reason=INVALID_TEMPLATE, message=errors)
    terminating = apply_plan(j, p, counts(), NOW)
    assert (terminating.state.phase, terminating.state.reason) == ("Terminating", INVALID_TEMPLATE)
    assert terminating.state.message == errors
    assert [c.status for c in terminating.conditions] == ["Pending", "Terminating"]
    j2 = Job(metadata=j.metadata, spec=j.spec, status=terminating)
    done = apply_plan(j2, plan(j2, Action.SYNC_JOB), counts(), NOW)
    assert done.state == JobState(
        phase="Terminated", reason=INVALID_TEMPLATE, message=errors, last_transition_time=NOW_S
    )
    plain = job("Terminating")
    assert next_phase(plain, JobPhase.TERMINATING, counts()) == Transition(
        JobPhase.TERMINATED, "Terminated", "no pod is alive"
    )


# --- property: phases move only along the documented edges -------------------------------------

EDGES: dict[str, set[str]] = {
    "Pending": {"Restarting", "Aborting", "Completing", "Terminating", "Running"},
    "Running": {"Restarting", "Aborting", "Completing", "Terminating", "Completed", "Failed",
                "Pending"},
    "Restarting": {"Failed", "Pending"},
    "Aborting": {"Restarting", "Aborted"},
    "Aborted": {"Restarting"},
    "Completing": {"Completed"},
    "Terminating": {"Terminated"},
    "Completed": set(),
    "Failed": set(),
    "Terminated": set(),
}  # fmt: skip
EDGES[""] = {"Pending"} | EDGES["Pending"]
ACTIONS = [a for a in Action if a not in (Action.SYNC_QUEUE, Action.OPEN_QUEUE)]
TARGETS = [JOB_TARGET, TASK, POD, Target(TargetKind.TASK)]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Job, Action, Target, PodCounts]:
    n = draw(st.integers(0, 3))
    replicas = tuple(draw(st.integers(0, 4)) for _ in range(n))
    task_min = tuple(draw(st.none() | st.integers(0, 4)) for _ in range(n))
    spec = JobSpec(
        tasks=tuple(
            TaskSpec(name=("worker", "ps", "chief")[i], replicas=replicas[i],
                     min_available=task_min[i])
            for i in range(n)
        ),
        min_available=draw(st.integers(0, 8)),
        min_success=draw(st.none() | st.integers(1, 8)),
        max_retry=draw(st.integers(0, 4)),
    )  # fmt: skip
    status = JobStatus(
        state=JobState(phase=draw(st.sampled_from(sorted(EDGES)))),
        retry_count=draw(st.integers(0, 5)),
        version=draw(st.integers(0, 3)),
        min_available=draw(st.integers(0, 8)),
    )
    small = st.integers(0, 5)
    c = PodCounts(
        pending=draw(small),
        running=draw(small),
        succeeded=draw(small),
        failed=draw(small),
        terminating=draw(small),
        task_status_count={"worker": {"Succeeded": draw(small)}},
    )
    the_job = Job(metadata=ObjectMeta(name="j", creation_timestamp=CREATED), spec=spec,
                  status=status)  # fmt: skip
    return the_job, draw(st.sampled_from(ACTIONS)), draw(st.sampled_from(TARGETS)), c


@given(scenarios())
def test_transitions_follow_documented_edges(
    scenario: tuple[Job, Action, Target, PodCounts],
) -> None:
    """For any Job, action, target and pod counts: the phase moves only along an edge of the
    state/*.go table (or stays), the version grows by one exactly on full kills, retryCount by
    one at most and only on Restart*/Resume, conditions hold at most one entry per phase and the
    current phase's entry is last when the phase changed."""
    the_job, action, target, c = scenario
    before = the_job.status.state.phase
    p = plan(the_job, action, target)
    new = apply_plan(the_job, p, c, NOW)
    after = new.state.phase
    assert after == before or after in EDGES[before], (before, action, after)
    assert new.version - the_job.status.version == (1 if p.step is Step.KILL_JOB else 0)
    bumped = new.retry_count - the_job.status.retry_count
    assert bumped in (0, 1)
    if bumped:
        assert action in (Action.RESTART_JOB, Action.RESTART_TASK, Action.RESTART_POD,
                          Action.RESTART_PARTITION, Action.RESUME_JOB)  # fmt: skip
    phases = [cond.status for cond in new.conditions]
    assert len(phases) == len(set(phases))
    if after != before:
        assert phases[-1] == after
        assert new.state.last_transition_time == NOW_S
    assert (new.pending, new.running, new.terminating) == (c.pending, c.running, c.terminating)
    if before in ("Completed", "Failed", "Terminated", "Aborted") and action != Action.RESUME_JOB:
        assert after == before
