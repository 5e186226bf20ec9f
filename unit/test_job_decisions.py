"""The job controller's decisions that sit in its pure modules: which policies are ignored
(controllers.job.policy.policy_problems), when a failing Job is terminated (on_failure), what
stops a sync (controllers.job.bounds.sync_blocker) and the plan of a Job refused
(controllers.job.state.refusal_plan), the controlledResources a sync records and a kill drops
(controllers.job.status), what a Job held back by others' objects says and tells
(controllers.job.bounds.note_holds), and the PVC of a job-level volume (controllers.job.pods)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from caldera.api.limits import MAX_TASKS
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    Action,
    Job,
    JobPhase,
    JobSpec,
    JobState,
    JobStatus,
    LifecyclePolicy,
    TaskSpec,
    VolumeSpec,
)
from controllers.job.bounds import Blocker, note_holds, sync_blocker
from controllers.job.pods import build_job_volume_claim, job_volume_claim_name, job_volume_name
from controllers.job.policy import TERMINATE, Decision, on_failure, policy_problems
from controllers.job.state import (
    INVALID_NAME,
    INVALID_TEMPLATE,
    MAX_MESSAGE,
    OVER_LIMITS,
    RETAIN_SOFT,
    Step,
    plan,
    refusal_plan,
)
from controllers.job.status import volume_claim_resources, with_controlled

GOOD: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
BAD: dict[str, Any] = {
    "spec": {
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"memory": "-1"}}}
        ]
    }
}


def job(
    *tasks: TaskSpec,
    name: str = "j",
    plugins: dict[str, tuple[str, ...]] | None = None,
    policies: tuple[LifecyclePolicy, ...] = (),
    volumes: tuple[VolumeSpec, ...] = (),
    phase: str = "",
) -> Job:
    return Job(
        metadata=ObjectMeta(name=name, namespace="ns", uid="u1"),
        spec=JobSpec(
            tasks=tasks or (TaskSpec(name="w", replicas=1, template=GOOD),),
            min_available=1,
            plugins=plugins or {},
            policies=policies,
            volumes=volumes,
        ),
        status=JobStatus(state=JobState(phase=phase)),
    )


@pytest.mark.parametrize(
    ("policies", "start", "end"),
    [
        ((), "", ""),
        ((LifecyclePolicy(event="PodFailed", action="RestartJob"),), "", ""),
        (
            (LifecyclePolicy(event="PodFailed", action="Explode"),),
            'spec.policies[0].action: Unsupported value: "Explode"',
            "; the policy is ignored",
        ),
        (
            (LifecyclePolicy(event="Bogus", action="AbortJob"),),
            "spec.policies[0].event",
            "; the policy is ignored",
        ),
    ],
    ids=["none", "valid", "bad-action", "bad-event"],
)
def test_policy_problems(policies: tuple[LifecyclePolicy, ...], start: str, end: str) -> None:
    """Policies no controller runs are named, and said to be ignored; valid ones say nothing."""
    problems = policy_problems(job(policies=policies))
    assert problems.startswith(start)
    assert problems.endswith(end)
    assert bool(problems) == bool(start)


def test_policy_problems_are_bounded() -> None:
    """However many bad policies, the message fits status.state.message's bound."""
    many = tuple(LifecyclePolicy(event="PodFailed", action="X" * 40) for _ in range(64))
    assert len(policy_problems(job(policies=many))) == MAX_MESSAGE


@pytest.mark.parametrize(
    ("requeues", "limit", "want"),
    [
        (0, 15, None),
        (14, 15, None),
        (15, 15, TERMINATE),
        (16, 15, TERMINATE),
        (0, 0, TERMINATE),
        (100, -1, None),
    ],
    ids=["first", "below", "at", "above", "limit-0", "never"],
)
def test_on_failure(requeues: int, limit: int, want: Decision | None) -> None:
    """Volcano's handleJobError: TerminateJob once the requeues reach the limit; never when the
    limit is negative."""
    assert on_failure(requeues, limit) == want


def test_on_failure_terminates_the_whole_job() -> None:
    """The last resort is a Job-wide TerminateJob, run now."""
    assert Decision(Action.TERMINATE_JOB) == TERMINATE


@pytest.mark.parametrize(
    ("the_job", "reason", "fragment"),
    [
        (job(), None, ""),
        (job(name="1train", plugins={"svc": ()}), INVALID_NAME, "DNS-1035"),
        (job(TaskSpec(name="w", replicas=1, template=BAD)), INVALID_TEMPLATE, "requests[memory]"),
        (
            job(*(TaskSpec(name=f"t{i}", template=GOOD) for i in range(MAX_TASKS + 1))),
            OVER_LIMITS,
            "the job is held",
        ),
        (
            job(
                *(TaskSpec(name=f"t{i}", template=BAD) for i in range(MAX_TASKS + 1)),
                name="1train",
                plugins={"svc": ()},
            ),
            OVER_LIMITS,
            "the job is held",
        ),
        (
            job(TaskSpec(name="w", replicas=1, template=BAD), name="1train", plugins={"svc": ()}),
            INVALID_NAME,
            "DNS-1035",
        ),
    ],
    ids=["runs", "svc-name", "template", "over-limits", "limits-first", "name-before-template"],
)
def test_sync_blocker(the_job: Job, reason: str | None, fragment: str) -> None:
    """The first of: over the bounds, a svc name no Service takes, a template refused."""
    blocker = sync_blocker(the_job)
    if reason is None:
        assert blocker is None
        return
    assert isinstance(blocker, Blocker)
    assert blocker.reason == reason
    assert fragment in blocker.message


@pytest.mark.parametrize("phase", ["", JobPhase.PENDING, JobPhase.RUNNING])
@pytest.mark.parametrize("reason", [INVALID_TEMPLATE, INVALID_NAME])
def test_refusal_plan_terminates_saying_why(phase: str, reason: str) -> None:
    """A refused Job gets TerminateJob's plan with the refusal as reason and message."""
    the_job = job(phase=phase)
    p = refusal_plan(the_job, reason, "spec.x: bad")
    assert p.step is Step.KILL_JOB
    assert p.phase is JobPhase.TERMINATING
    assert p.retain == RETAIN_SOFT
    assert (p.reason, p.message) == (reason, "spec.x: bad")
    terminate = plan(the_job, Action.TERMINATE_JOB)
    assert p == replace(terminate, reason=reason, message="spec.x: bad")


def test_refusal_plan_bounds_the_message() -> None:
    """A big template's field errors say no more than status.state.message's bound."""
    p = refusal_plan(job(), INVALID_TEMPLATE, "e" * (MAX_MESSAGE + 10))
    assert p.message == "e" * MAX_MESSAGE


@pytest.mark.parametrize(
    ("volumes", "want"),
    [
        ((), {}),
        ((VolumeSpec(mount_path="/d", volume_claim_name="data"),), {"volume-pvc-data": "data"}),
        ((VolumeSpec(mount_path="/d", volume_claim={"resources": {}}),), {}),
        (
            (
                VolumeSpec(mount_path="/a", volume_claim_name="a"),
                VolumeSpec(mount_path="/b", volume_claim_name="b"),
            ),
            {"volume-pvc-a": "a", "volume-pvc-b": "b"},
        ),
    ],
    ids=["none", "claim", "template-unnamed", "two"],
)
def test_volume_claim_resources(volumes: tuple[VolumeSpec, ...], want: dict[str, str]) -> None:
    """Each job-level volume naming its claim is recorded as Volcano keys it."""
    assert volume_claim_resources(job(volumes=volumes)) == want


BEFORE = JobStatus(controlled_resources={"plugin-svc": "svc", "volume-pvc-a": "a"})


@pytest.mark.parametrize(
    ("controlled", "released", "want"),
    [
        ({}, (), {"plugin-svc": "svc", "volume-pvc-a": "a"}),
        (
            {"volume-pvc-b": "b"},
            (),
            {"plugin-svc": "svc", "volume-pvc-a": "a", "volume-pvc-b": "b"},
        ),
        ({}, ("plugin-svc",), {"volume-pvc-a": "a"}),
        ({}, ("plugin-ssh",), {"plugin-svc": "svc", "volume-pvc-a": "a"}),
        ({"volume-pvc-a": "a2"}, (), {"plugin-svc": "svc", "volume-pvc-a": "a2"}),
    ],
    ids=["nothing", "added", "released", "released-unknown", "replaced"],
)
def test_with_controlled(
    controlled: dict[str, str], released: tuple[str, ...], want: dict[str, str]
) -> None:
    """A sync's entries are added, a kill's deleted objects removed; the rest is kept."""
    assert with_controlled(BEFORE, controlled, released).controlled_resources == want


def test_with_controlled_without_change_is_the_same_status() -> None:
    """Nothing to add or drop: the status itself, so no write follows."""
    assert with_controlled(BEFORE, {}, ()) is BEFORE


def test_job_volume_claim() -> None:
    """A job-level claim template's PVC is named after the Job and a digest of the mount path
    (the same on every reconcile), apart from the pod volume's name, and owned by the Job."""
    name = job_volume_claim_name("j", "/data")
    assert name == job_volume_claim_name("j", "/data")
    assert name.startswith("j-pvc-")
    assert name != job_volume_claim_name("j", "/other")
    assert name.removeprefix("j-pvc-") == job_volume_name("j", "/data").removeprefix("j-")
    pvc = build_job_volume_claim(job(), name, {"resources": {"requests": {"storage": "1Gi"}}})
    assert pvc["metadata"]["name"] == name
    assert pvc["metadata"]["namespace"] == "ns"
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert pvc["spec"] == {"resources": {"requests": {"storage": "1Gi"}}}


CLASH = ("FailedCreate", "Pod j-w-0 exists and is not the Job's own")


def held(message: str) -> Job:
    return Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="u1"),
        status=JobStatus(state=JobState(phase="Pending", message=message)),
    )


@pytest.mark.parametrize(
    ("stored", "holds", "message", "events"),
    [
        ("", [], "", 0),
        ("", [CLASH], "[held: Pod j-w-0 exists and is not the Job's own]", 1),
        ("", [CLASH, CLASH], "[held: Pod j-w-0 exists and is not the Job's own]", 1),
        (
            "[held: Pod j-w-0 exists and is not the Job's own]",
            [CLASH],
            "[held: Pod j-w-0 exists and is not the Job's own]",
            0,
        ),
        ("created; [held: Pod j-w-0 exists and is not the Job's own]", [], "created", 0),
    ],
    ids=["nothing", "new-hold", "duplicates", "told-already", "released"],
)
def test_note_holds(stored: str, holds: list[tuple[str, str]], message: str, events: int) -> None:
    """The note replaces the last one (or goes); Events only when the stored note differs."""
    the_job = held(stored)
    status, warnings = note_holds(the_job, the_job.status, holds)
    assert status.state.message == message
    assert len(warnings) == events
    assert all(reason == "FailedCreate" for reason, _ in warnings)


def test_note_holds_tells_the_first_few_and_counts_the_rest() -> None:
    """Twelve clashes: five Events naming them, one counting the other seven."""
    holds = [("FailedCreate", f"Pod j-w-{i:02d} is not the Job's own") for i in range(12)]
    the_job = held("")
    status, warnings = note_holds(the_job, the_job.status, holds)
    assert [m for _, m in warnings[:5]] == [m for _, m in holds[:5]]
    assert warnings[5] == (
        "FailedCreate",
        "and 7 more objects the Job needs are not its own; pods held back",
    )
    assert status.state.message.endswith("and 7 more]")
