"""Tests of controllers.job.policy: policy resolution (applyPolicies, GetStateAction) and the
delayed-action bookkeeping (Volcano's pkg/controllers/job/job_controller_util.go)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    Action,
    Event,
    Job,
    JobSpec,
    JobStatus,
    LifecyclePolicy,
    TaskSpec,
)
from controllers.job.events import Request
from controllers.job.policy import (
    Decision,
    DelayedActions,
    apply_policies,
    policy_timeout,
    target_of,
)
from controllers.job.state import JOB_TARGET, Target


def P(  # noqa: N802 - a short constructor keeps the tables readable
    action: str,
    event: str = "",
    *,
    events: tuple[str, ...] = (),
    exit_code: int | None = None,
    timeout: str | None = None,
) -> LifecyclePolicy:
    return LifecyclePolicy(
        action=action, event=event, events=events, exit_code=exit_code, timeout=timeout
    )


def job(
    job_policies: tuple[LifecyclePolicy, ...] = (),
    task_policies: tuple[LifecyclePolicy, ...] = (),
    other_task_policies: tuple[LifecyclePolicy, ...] = (),
    version: int = 1,
) -> Job:
    return Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="uid-1"),
        spec=JobSpec(
            tasks=(
                TaskSpec(name="ps", replicas=1, policies=other_task_policies),
                TaskSpec(name="worker", replicas=2, policies=task_policies),
            ),
            policies=job_policies,
        ),
        status=JobStatus(version=version),
    )


def req(
    event: Event | None = Event.POD_FAILED,
    *,
    exit_code: int | None = None,
    action: Action | None = None,
    task: str = "worker",
    pod: str = "j-worker-1",
    uid: str = "uid-1",
    version: int | None = 1,
    pod_uid: str = "pod-uid",
) -> Request:
    return Request(
        namespace="ns",
        job_name="j",
        job_uid=uid,
        task_name=task,
        pod_name=pod,
        pod_uid=pod_uid,
        event=event,
        exit_code=exit_code,
        action=action,
        job_version=version,
    )


SYNC = Decision(Action.SYNC_JOB)
ABORT = Decision(Action.ABORT_JOB)
TASK = Target.of_task("worker")
POD = Target.of_pod("worker", "j-worker-1")

CASES: list[Any] = [
    # step 1: a Command's action wins
    pytest.param(job((P("RestartJob", "*"),)), req(Event.COMMAND_ISSUED, action=Action.ABORT_JOB),
                 ABORT, id="command-action-used-directly"),
    pytest.param(job(), req(Event.COMMAND_ISSUED, action=Action.ABORT_JOB, uid="other", version=0),
                 ABORT, id="command-action-wins-over-staleness"),
    # step 2: internal events and the plain sync
    pytest.param(job((P("AbortJob", "*"),)), req(Event.OUT_OF_SYNC), SYNC, id="out-of-sync"),
    pytest.param(job((P("AbortJob", "*"),)), req(Event.COMMAND_ISSUED), SYNC, id="command-issued"),
    pytest.param(job((P("AbortJob", "*"),)), req(Event.POD_RUNNING), SYNC, id="pod-running"),
    pytest.param(job((P("AbortJob", "*"),)), req(None), SYNC, id="no-event-never-matches-star"),
    # step 3: stale requests
    pytest.param(job((P("AbortJob", "PodFailed"),)), req(uid="uid-0"), SYNC, id="other-job-uid"),
    pytest.param(job((P("AbortJob", "PodFailed"),)), req(uid=""), ABORT, id="no-job-uid-is-fine"),
    pytest.param(job((P("AbortJob", "PodFailed"),), version=2), req(version=1), SYNC,
                 id="older-job-version"),
    pytest.param(job((P("AbortJob", "Unknown"),), version=2),
                 req(Event.JOB_UNKNOWN, version=None, task="", pod=""), ABORT,
                 id="non-pod-request-never-stale"),
    # step 4: matching
    pytest.param(job((P("AbortJob", "PodFailed"),)), req(), ABORT, id="event-field"),
    pytest.param(job((P("AbortJob", events=("PodEvicted", "PodFailed")),)), req(), ABORT,
                 id="events-list"),
    pytest.param(job((P("AbortJob", "PodEvicted", events=("TaskFailed",)),)),
                 req(Event.TASK_FAILED), ABORT, id="event-and-events-merged"),
    pytest.param(job((P("AbortJob", "*"),)), req(Event.POD_EVICTED), ABORT, id="any-event"),
    pytest.param(job((P("AbortJob", "PodEvicted"),)), req(), SYNC, id="other-event-no-match"),
    pytest.param(job((P("AbortJob", "PodPending"),)), req(Event.POD_PENDING), SYNC,
                 id="pod-pending-needs-timeout"),
    pytest.param(job((P("AbortJob", "*"),)), req(Event.POD_PENDING), SYNC,
                 id="pod-pending-star-needs-timeout"),
    pytest.param(job((P("AbortJob", "PodPending", timeout="10m"),)), req(Event.POD_PENDING),
                 Decision(Action.ABORT_JOB, 600.0), id="pod-pending-with-timeout"),
    pytest.param(job((P("AbortJob", "PodPending"), P("TerminateJob", "*", timeout="1s"))),
                 req(Event.POD_PENDING), Decision(Action.TERMINATE_JOB, 1.0),
                 id="pod-pending-skips-to-next-policy"),
    pytest.param(job((P("AbortJob", "PodFailed", timeout="1m30s"),)), req(),
                 Decision(Action.ABORT_JOB, 90.0), id="timeout-delays"),
    pytest.param(job((P("AbortJob", "PodFailed", timeout="0s"),)), req(), ABORT,
                 id="zero-timeout-runs-now"),
    pytest.param(job((P("AbortJob", "PodFailed", timeout="soon"),)), req(), ABORT,
                 id="bad-timeout-ignored"),
    pytest.param(job((P("AbortJob", exit_code=137),)), req(exit_code=137), ABORT,
                 id="exit-code"),
    pytest.param(job((P("AbortJob", exit_code=137),)), req(exit_code=1), SYNC,
                 id="other-exit-code"),
    pytest.param(job((P("AbortJob", exit_code=137),)), req(), SYNC, id="no-exit-code"),
    pytest.param(job((P("TerminateJob", exit_code=3, timeout="5s"),)), req(exit_code=3),
                 Decision(Action.TERMINATE_JOB, 5.0), id="exit-code-with-timeout"),
    pytest.param(job((P("AbortJob", "PodFailed"),), (P("CompleteJob", "PodFailed"),)), req(),
                 Decision(Action.COMPLETE_JOB), id="task-policy-before-job-policy"),
    pytest.param(job((P("AbortJob", "PodFailed"),), (P("CompleteJob", "TaskFailed"),)), req(),
                 ABORT, id="job-policy-when-task-policy-misses"),
    pytest.param(job((), (), (P("AbortJob", "PodFailed"),)), req(), SYNC,
                 id="other-task-policy-ignored"),
    pytest.param(job((P("AbortJob", "PodFailed"), P("CompleteJob", "PodFailed"))), req(), ABORT,
                 id="first-match-wins"),
    pytest.param(job((P("AbortJob", "PodFailed"),)), req(task="ghost"), ABORT,
                 id="unknown-task-uses-job-policies"),
    pytest.param(job((P("Explode", "PodFailed"),)), req(), SYNC, id="unknown-action-syncs"),
    # step 5
    pytest.param(job(), req(), SYNC, id="no-policy"),
    # targets (GetStateAction)
    pytest.param(job((P("RestartTask", "PodFailed"),)), req(),
                 Decision(Action.RESTART_TASK, target=TASK), id="restart-task-targets-task"),
    pytest.param(job((P("RestartPod", "PodFailed"),)), req(),
                 Decision(Action.RESTART_POD, target=POD), id="restart-pod-targets-pod"),
    pytest.param(job((P("RestartPartition", "PodFailed"),)), req(),
                 Decision(Action.RESTART_PARTITION, target=TASK),
                 id="restart-partition-targets-task"),
    pytest.param(job((P("RestartTask", "Unknown"),)),
                 req(Event.JOB_UNKNOWN, task="", pod="", version=None),
                 Decision(Action.RESTART_JOB), id="restart-task-without-task-restarts-job"),
    pytest.param(job((P("RestartJob", "PodFailed"),)), req(), Decision(Action.RESTART_JOB),
                 id="restart-job-targets-job"),
]  # fmt: skip


@pytest.mark.parametrize(("the_job", "request_", "decision"), CASES)
def test_apply_policies(the_job: Job, request_: Request, decision: Decision) -> None:
    """Each rule of applyPolicies in order: Command action, internal events, stale uid/version,
    task-then-job policies (event, events, *, PodPending with timeout, exit code, timeout as
    delay), default SyncJob; and each action's target."""
    assert apply_policies(the_job, request_) == decision


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [("10s", 10.0), ("1h", 3600.0), ("250ms", 0.25), ("-5s", 0.0), ("x", None), (None, None)],
)
def test_policy_timeout(timeout: str | None, seconds: float | None) -> None:
    """Timeouts are Go durations; a negative one is 0, a bad or missing one None."""
    assert policy_timeout(P("AbortJob", "PodFailed", timeout=timeout)) == seconds


def test_target_of_restart_pod_without_pod_restarts_job() -> None:
    """RestartPod from a Command (no pod in the request) becomes RestartJob on the Job."""
    assert target_of(Action.RESTART_POD, req(pod="")) == (Action.RESTART_JOB, JOB_TARGET)


# --- delayed actions ----------------------------------------------------------------------------


def delayed(*requests: Request) -> tuple[DelayedActions, list[int]]:
    book = DelayedActions()
    tokens = []
    for r in requests:
        entry = book.schedule(r, Decision(Action.RESTART_POD, 60.0, POD))
        assert entry is not None
        tokens.append(entry.token)
    return book, tokens


FAILED_A = req(Event.POD_FAILED, pod="a", task="worker", pod_uid="ua")
EVICTED_A = req(Event.POD_EVICTED, pod="a", task="worker", pod_uid="ua")
PENDING_A = req(Event.POD_PENDING, pod="a", task="worker", pod_uid="ua")
FAILED_B = req(Event.POD_FAILED, pod="b", task="worker", pod_uid="ub")
PENDING_C = req(Event.POD_PENDING, pod="c", task="ps", pod_uid="uc")

CANCELS: list[Any] = [
    pytest.param((FAILED_A, EVICTED_A, FAILED_B), req(Event.POD_RUNNING, pod="a", pod_uid="x"),
                 {0, 1}, id="running-cancels-failed-and-evicted-of-that-pod"),
    pytest.param((PENDING_A,), req(Event.POD_RUNNING, pod="a", pod_uid="x"), set(),
                 id="running-other-uid-keeps-pending"),
    pytest.param((PENDING_A, FAILED_B), req(Event.POD_RUNNING, pod="a", pod_uid="ua"), {0},
                 id="running-same-uid-cancels-pending"),
    pytest.param((PENDING_A,), req(Event.POD_FAILED, pod="a", pod_uid="ua"), {0},
                 id="failed-cancels-pending-same-uid"),
    pytest.param((PENDING_A,), req(Event.POD_EVICTED, pod="a", pod_uid="ua"), {0},
                 id="evicted-cancels-pending-same-uid"),
    pytest.param((PENDING_A,), req(Event.TASK_COMPLETED, pod="a", pod_uid="ua"), {0},
                 id="task-completed-cancels-pending-same-uid"),
    pytest.param((PENDING_A,), req(Event.POD_PENDING, pod="a", pod_uid="ua"), set(),
                 id="pending-keeps-pending"),
    pytest.param((PENDING_A,), req(Event.OUT_OF_SYNC, pod="a", pod_uid="ua"), set(),
                 id="out-of-sync-update-keeps-pending"),
    pytest.param((FAILED_A,), req(Event.POD_FAILED, pod="a", pod_uid="ua"), set(),
                 id="failed-keeps-failed"),
    pytest.param((FAILED_A,), Request(namespace="other", job_name="j", pod_name="a",
                                      event=Event.POD_RUNNING), set(), id="other-job-untouched"),
]  # fmt: skip


@pytest.mark.parametrize(("scheduled", "incoming", "cancelled"), CANCELS)
def test_delayed_actions_on_request(
    scheduled: tuple[Request, ...], incoming: Request, cancelled: set[int]
) -> None:
    """PodRunning cancels the pod's delayed PodFailed/PodEvicted; an event showing the pod left
    Pending cancels the delayed PodPending of the same pod UID; nothing else is cancelled."""
    book, tokens = delayed(*scheduled)
    gone = book.on_request(incoming)
    assert {a.token for a in gone} == {tokens[i] for i in cancelled}
    for i, token in enumerate(tokens):
        assert (book.take(token) is None) is (i in cancelled)


SCOPES: list[Any] = [
    pytest.param(Decision(Action.SYNC_JOB), set(), id="internal-action-cancels-nothing"),
    pytest.param(Decision(Action.RESTART_JOB), {0, 1, 2}, id="job-action-cancels-all"),
    pytest.param(Decision(Action.RESTART_TASK, target=Target.of_task("worker")), {0, 1},
                 id="task-action-cancels-task"),
    pytest.param(Decision(Action.RESTART_POD, target=Target.of_pod("worker", "a")), {0},
                 id="pod-action-cancels-pod"),
]  # fmt: skip


@pytest.mark.parametrize(("decision", "cancelled"), SCOPES)
def test_delayed_actions_on_action_ran(decision: Decision, cancelled: set[int]) -> None:
    """After a non-internal action ran, the delayed actions of its scope (job, task, pod) are
    cancelled; after an internal one, none."""
    book, tokens = delayed(FAILED_A, FAILED_B, PENDING_C)
    gone = book.on_action_ran("ns/j", decision)
    assert {a.token for a in gone} == {tokens[i] for i in cancelled}
    assert len(book) == 3 - len(cancelled)


def test_delayed_actions_schedule_take_and_duplicates() -> None:
    """A second delayed action for the same job, pod and event keeps the first (its timeout
    counts from the first occurrence); take() returns an entry once; forget_job drops all."""
    book = DelayedActions()
    first = book.schedule(FAILED_A, ABORT)
    assert first is not None
    assert book.schedule(FAILED_A, ABORT) is None
    second = book.schedule(FAILED_B, ABORT)
    assert second is not None
    assert book.pending("ns/j") == (first, second)
    assert book.take(first.token) == first
    assert book.take(first.token) is None
    again = book.schedule(FAILED_A, ABORT)  # the key is free again once taken
    assert again is not None
    assert again.token != first.token
    assert set(book.forget_job("ns/j")) == {second, again}
    assert len(book) == 0


def test_resolve_runs_now_schedules_once_and_applies_cancellations() -> None:
    """resolve: a request no timeout delays is decided at once; a delayed one is scheduled the
    first time (its entry returned, for the timer) and not again; and the cancellation rules
    run before the policies (a PodRunning cancels the pod's delayed PodFailed)."""
    book = DelayedActions()
    the_job = job(task_policies=(P("RestartJob", "PodFailed", timeout="1m"),))
    now, entry = book.resolve(job(), req(Event.POD_FAILED, pod="a"))
    assert now == Decision(Action.SYNC_JOB)
    assert entry is None
    now, entry = book.resolve(the_job, req(Event.POD_FAILED, pod="a"))
    assert now is None
    assert entry is not None
    assert entry.decision.delay == 60.0
    assert book.resolve(the_job, req(Event.POD_FAILED, pod="a")) == (None, None)
    now, _ = book.resolve(the_job, req(Event.POD_RUNNING, pod="a"))
    assert now == Decision(Action.SYNC_JOB)
    assert book.take(entry.token) is None  # cancelled by the pod running again
