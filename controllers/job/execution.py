"""What running one decision on a Job takes, and the status it leaves, decided without I/O: what
the job controller (``controllers/job/controller.py``) and the simulator's
(``simulator/controller.py``) both run for each `Turn.decision` of ``controllers.job.inbox``.

``course = execution(job, decision, blocker)`` says which of four courses the decision takes:

- ``NOTHING``: the Job is being deleted, or its phase is unknown (``state.plan``'s Step.NONE);
- ``HOLD``: a sync of a Job over the bounds (``bounds.sync_blocker``): no pod, no PodGroup; the
  status says why (``bounds.hold_status``);
- ``REFUSE``: a sync of a Job that can never run (its svc name, its pod templates): TerminateJob
  with the reason and message of ``state.refusal_plan``, once;
- ``RUN``: the plan of ``state.plan``: kill (``kill_victims``) or sync (``sync.plan_sync``).

After its pods are killed or synced, ``status_after`` is the Job's new status: ``apply_plan``,
the controlledResources entries, the policies no controller runs (``policy.policy_problems``)
and what held the pods back (``bounds.note_holds``), with the Warning Events to record. The
caller writes it when ``status.status_changed``.

``sync_blocker`` reads every pod template; a caller that sees the same spec object again (the
simulator: status writes keep it) may pass its earlier answer as ``blocker``.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from caldera.api.volcano import Action, Job, JobStatus
from controllers.job.bounds import Blocker, note_holds, sync_blocker
from controllers.job.policy import Decision
from controllers.job.state import OVER_LIMITS, Plan, Step, apply_plan, note_problems, plan
from controllers.job.state import refusal_plan as _refusal_plan
from controllers.job.status import PodCounts, with_controlled

__all__ = ["UNCHECKED", "Course", "Execution", "execution", "status_after"]


class Course(enum.StrEnum):
    """Which way a decision goes (see the module docstring)."""

    NOTHING = "Nothing"
    HOLD = "Hold"
    REFUSE = "Refuse"
    RUN = "Run"


@dataclass(frozen=True, slots=True)
class Execution:
    """A decision's course: the plan to run (RUN, REFUSE), the decision it runs as (TerminateJob
    for REFUSE) and the blocker that held or refused it."""

    course: Course
    plan: Plan | None = None
    decision: Decision | None = None
    blocker: Blocker | None = None


_NOTHING: Final = Execution(Course.NOTHING)
_TERMINATE: Final = Decision(Action.TERMINATE_JOB)


class _Unchecked:
    """The ``blocker`` argument's default: `execution` checks the Job itself."""


UNCHECKED: Final = _Unchecked()


def execution(
    job: Job, decision: Decision, blocker: Blocker | _Unchecked | None = UNCHECKED
) -> Execution:
    """The course of `decision` on the cached `job` (see the module docstring). `blocker`, when
    given, is ``sync_blocker(job)`` as known for this spec; it is read for syncs only."""
    if job.metadata.deletion_timestamp:
        return _NOTHING  # the garbage collector removes everything the Job owns
    p = plan(job, decision.action, decision.target)
    if p.step is Step.NONE:
        return _NOTHING
    if p.step is not Step.SYNC:
        return Execution(Course.RUN, p, decision)
    found = sync_blocker(job) if isinstance(blocker, _Unchecked) else blocker
    if found is None:
        return Execution(Course.RUN, p, decision)
    if found.reason == OVER_LIMITS:
        return Execution(Course.HOLD, blocker=found)
    return Execution(Course.REFUSE, refusal_plan(job, found), _TERMINATE, found)


def refusal_plan(job: Job, blocker: Blocker) -> Plan:
    """TerminateJob's plan for a Job that can never run, saying why (``state.refusal_plan``)."""
    return _refusal_plan(job, blocker.reason, blocker.message)


def status_after(
    job: Job,
    p: Plan,
    counts: PodCounts,
    now: dt.datetime,
    *,
    problems: str = "",
    controlled: Mapping[str, str] | None = None,
    released: Iterable[str] = (),
    holds: Iterable[tuple[str, str]] = (),
) -> tuple[JobStatus, tuple[tuple[str, str], ...]]:
    """The Job's status after plan `p` ran with `counts` (from after its pod changes), and the
    Warning Events (reason, message) its holds call for. ``problems``: ``policy_problems(job)``;
    ``controlled`` / ``released``: the controlledResources a sync adds and a kill dropped;
    ``holds``: what held the Job's pods back (Event reason, problem)."""
    status = apply_plan(job, p, counts, now)
    if controlled or released:
        status = with_controlled(status, controlled or {}, released)
    if problems:
        status = note_problems(status, problems)
    return note_holds(job, status, holds)
