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

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from msgspec.structs import replace

from caldera.api.jobspec import service_name_error, uses_svc
from caldera.api.limits import job_limit_errors
from caldera.api.meta import format_time
from caldera.api.volcano import Job, JobPhase, JobState, JobStatus
from controllers.job.state import OVER_LIMITS
from controllers.job.status import append_condition

__all__ = ["MAX_MESSAGE", "OVER_LIMITS", "hold_status", "limits_problem", "svc_problem"]

MAX_MESSAGE: Final = 1024  # status.state.message stays readable


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
