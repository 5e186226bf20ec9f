"""Tests of caldera.api.stored and the job controller's use of it: the field messages for
objects stored without the webhook (policies, queue specs), and the Job status message."""

from __future__ import annotations

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.stored import (
    command_target_error,
    not_found,
    policy_errors,
    queue_spec_errors,
)
from caldera.api.volcano import (
    Guarantee,
    Job,
    JobSpec,
    JobState,
    JobStatus,
    LifecyclePolicy,
    QueueSpec,
    TaskSpec,
)
from controllers.job.policy import policy_problems
from controllers.job.state import INVALID_TEMPLATE, note_problems

ACTIONS = (
    '"AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", '
    '"TerminateJob", "CompleteJob", "ResumeJob"'
)


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        (JobSpec(), []),
        (JobSpec(policies=(LifecyclePolicy(event="PodFailed", action="RestartJob"),)), []),
        (
            JobSpec(policies=(LifecyclePolicy(event="PodFailed", action="Explode"),)),
            [f'spec.policies[0].action: Unsupported value: "Explode": supported values: {ACTIONS}'],
        ),
        (
            JobSpec(policies=(LifecyclePolicy(exit_code=3, action=""),)),
            [f'spec.policies[0].action: Unsupported value: "": supported values: {ACTIONS}'],
        ),
        (
            JobSpec(
                tasks=(
                    TaskSpec(name="a"),
                    TaskSpec(
                        name="b",
                        policies=(
                            LifecyclePolicy(event="PodFailed", action="AbortJob"),
                            LifecyclePolicy(events=("Boom",), action="AbortJob"),
                        ),
                    ),
                )
            ),
            [
                'spec.tasks[1].policies[1].event: Unsupported value: "Boom": supported values: '
                '"*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted", '
                '"TaskFailed", "JobUpdated"'
            ],
        ),
    ],
    ids=["none", "valid", "unknown-action", "empty-action", "task-unknown-event"],
)
def test_policy_errors(spec: JobSpec, want: list[str]) -> None:
    """Every policy whose action or event no controller runs is named by its path."""
    assert policy_errors(spec) == want


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        (QueueSpec(weight=1, capability={"cpu": "4"}), []),
        (
            QueueSpec(weight=-3),
            ["spec.weight: Invalid value: -3: must be between 1 and 65535; the scheduler uses 1"],
        ),
        (
            QueueSpec(weight=70000),
            ["spec.weight: Invalid value: 70000: must be between 1 and 65535"],
        ),
        (
            QueueSpec(capability={"cpu": "2"}, guarantee=Guarantee(resource={"cpu": "4"})),
            [
                "spec.guarantee.resource.cpu: Invalid value: 4: must be less than or equal to "
                "spec.capability.cpu (2)"
            ],
        ),
        (
            QueueSpec(capability={"memory": "1Gi"}, deserved={"memory": "2Gi", "cpu": "9"}),
            [
                "spec.deserved.memory: Invalid value: 2Gi: must be less than or equal to "
                "spec.capability.memory (1Gi)"
            ],
        ),
    ],
    ids=["valid", "negative-weight", "weight-too-big", "guarantee-above-cap", "deserved-above-cap"],
)
def test_queue_spec_errors(spec: QueueSpec, want: list[str]) -> None:
    """A Queue spec outside the CRD's and the webhook's rules is named field by field."""
    assert queue_spec_errors(spec) == want


def test_not_found() -> None:
    """Kubernetes' field.NotFound form."""
    assert not_found("spec.queue", "gone") == 'spec.queue: Not found: "gone"'


def _status(message: str = "", reason: str = "") -> JobStatus:
    return JobStatus(state=JobState(phase="Running", reason=reason, message=message))


@pytest.mark.parametrize(
    ("before", "problems", "want"),
    [
        (_status("enough pods are started"), "", "enough pods are started"),
        (_status(), "P", "P"),
        (_status("enough pods are started"), "P", "enough pods are started; P"),
        (_status("enough pods are started; P"), "P", "enough pods are started; P"),
        (_status("bad template", INVALID_TEMPLATE), "P", "bad template"),
    ],
    ids=["no-problem", "empty", "appended", "already-there", "kept-reason"],
)
def test_note_problems(before: JobStatus, problems: str, want: str) -> None:
    """The problems are appended once to status.state.message, never over a kept reason."""
    assert note_problems(before, problems).state.message == want


def test_policy_problems_says_the_policy_is_ignored() -> None:
    """The Job's message lists every bad policy and says it acts as no policy."""
    job = Job(
        metadata=ObjectMeta(name="j"),
        spec=JobSpec(policies=(LifecyclePolicy(event="PodFailed", action="Explode"),)),
    )
    assert policy_problems(job).startswith('spec.policies[0].action: Unsupported value: "Explode"')
    assert policy_problems(job).endswith("; the policy is ignored")
    assert policy_problems(Job()) == ""


@pytest.mark.parametrize(
    ("exists", "age", "want"),
    [
        (True, 100.0, None),
        (False, 1.0, None),
        (False, 5.0, 'target.name: Not found: "j"'),
        (False, 100.0, 'target.name: Not found: "j"'),
    ],
    ids=["exists", "in-grace", "grace-over", "old"],
)
def test_command_target_error(exists: bool, age: float, want: str | None) -> None:
    """A Command for a missing Job is removed, naming target.name, only after its grace."""
    assert command_target_error("j", exists=exists, age=age, grace=5.0) == want
