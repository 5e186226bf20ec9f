"""Jobs the controller holds instead of running, decided without I/O.

- A Job over the bounds of `caldera.api.limits` (stored without the webhook: before the CRD had
  them, or with the webhook bypassed) is held: no pod, no PodGroup, no plugin object. Its
  status keeps its phase (Pending for a new Job) with reason `OVER_LIMITS` and the fields over
  their bounds as the message; the controller records one Warning Event when it first writes
  that. Each later sync costs the bound check only (it counts lists, never walks `replicas`).
  Scaled back within the bounds, the Job runs and the reason goes (`state.apply_plan`).
- A Job that runs the svc plugin under a name a Service cannot take (`1train`, `a.b`) can never
  run: `svc_problem` names it, and the controller terminates the Job once, as it does a Job
  whose pod template the API server refuses.
- `sync_blocker`: which of these, if any, stops a sync, in the order the controller checks them
  (over the bounds, then the svc name, then the pod templates).

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from msgspec.structs import replace

from caldera.api.jobspec import service_name_error, uses_svc
from caldera.api.limits import job_limit_errors
from caldera.api.meta import format_time
from caldera.api.podtemplate import job_template_errors
from caldera.api.volcano import Job, JobPhase, JobState, JobStatus
from controllers.job.state import INVALID_NAME, INVALID_TEMPLATE, MAX_MESSAGE, OVER_LIMITS
from controllers.job.status import append_condition

__all__ = [
    "MAX_MESSAGE",
    "OVER_LIMITS",
    "Blocker",
    "hold_status",
    "limits_problem",
    "svc_problem",
    "sync_blocker",
]


def limits_problem(job: Job) -> str:
    """Why the Job is held (its fields over their bounds, one message), or "" to run it."""
    errors = job_limit_errors(job.spec)
    if not errors:
        return ""
    text = "; ".join(errors)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return f"{text}; the job is held: no pod or PodGroup is created while it is over the bounds"


def hold_status(status: JobStatus, message: str, now: dt.datetime) -> JobStatus:
    """The status of a held Job: its phase kept (a new Job enters Pending), reason
    `OVER_LIMITS`, `message`. Returns `status` itself when it already says so."""
    state, conditions = status.state, status.conditions
    if state.phase and state.reason == OVER_LIMITS and state.message == message:
        return status
    if not state.phase:
        when = format_time(now)
        state = JobState(phase=JobPhase.PENDING, last_transition_time=when)
        conditions = append_condition(conditions, JobPhase.PENDING, when)
    return replace(
        status, state=replace(state, reason=OVER_LIMITS, message=message), conditions=conditions
    )


def svc_problem(job: Job) -> str:
    """Why the svc plugin can never create the Job's Service, or ""."""
    if not uses_svc(job.spec.plugins):
        return ""
    return service_name_error(job.metadata.name)


@dataclass(frozen=True, slots=True)
class Blocker:
    """What stops a Job's sync: ``reason`` `OVER_LIMITS` (the Job is held), `INVALID_NAME` or
    `INVALID_TEMPLATE` (the Job is terminated), and the ``message`` naming the fields."""

    reason: str
    message: str


def sync_blocker(job: Job) -> Blocker | None:
    """What stops a sync of `job`, first found: its bounds, its svc name, its pod templates (the
    field errors the API server would give each pod); None when the sync may run."""
    over = limits_problem(job)
    if over:
        return Blocker(OVER_LIMITS, over)
    svc = svc_problem(job)
    if svc:
        return Blocker(INVALID_NAME, svc)
    problems = job_template_errors(job)
    if problems:
        return Blocker(INVALID_TEMPLATE, "; ".join(problems))
    return None
