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
- `note_holds`: a Job whose pods a reconcile held back (an object of a name it needs is not its
  own) says so in its status, and gets Warning Events once per change of what holds it.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from msgspec.structs import replace

from caldera.api.jobspec import service_name_error, uses_svc
from caldera.api.limits import job_limit_errors
from caldera.api.meta import format_time
from caldera.api.ownership import HELD_SHOWN, held_summary, with_held
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
    "note_holds",
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


# How a note of `held_summary` opens ("[held: "), to tell cheaply a message that has none.
_NOTE_OPENS = held_summary(["-"]).partition("-")[0]


def note_holds(
    job: Job, status: JobStatus, holds: Iterable[tuple[str, str]]
) -> tuple[JobStatus, tuple[tuple[str, str], ...]]:
    """`status` with what held the Job's pods back in this reconcile (`holds`: Event reason and
    problem) in its state message (bounded, replacing the last such note; removed once nothing
    holds the Job), and the Warning Events (reason, message) to record: the first few problems
    when that note differs from the one the stored Job carries, so once per change, across
    restarts too, never once per sync."""
    given = tuple(holds)
    if not given and _NOTE_OPENS not in status.state.message:
        return status, ()  # nothing holds the Job, nor did: every status of every Job comes here
    held = sorted(set(given), key=lambda h: h[1])
    summary = held_summary(m for _, m in held) if held else ""
    message = with_held(status.state.message, summary)
    if message != status.state.message:
        status = replace(status, state=replace(status.state, message=message))
    if not held or summary in job.status.state.message:
        return status, ()
    warnings = held[:HELD_SHOWN]
    if len(held) > HELD_SHOWN:
        rest = len(held) - HELD_SHOWN
        more = f"and {rest} more objects the Job needs are not its own; pods held back"
        warnings.append((held[HELD_SHOWN][0], more))
    return status, tuple(warnings)
