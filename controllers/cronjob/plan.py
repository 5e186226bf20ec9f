"""What the cronjob controller does for one CronJob at one instant (pure logic, no I/O).

``plan(cronjob, jobs, now)`` takes the CronJob, the Volcano Jobs it controls (its controller
reference, matched by UID; any other Job given is ignored, a tenant's namesake included) and the
time, and returns the writes: at most one Job to start, Jobs
to delete (the ones ``Replace`` displaces, then the oldest finished beyond the history limits),
the status to write, the Events to record and when to look again. It follows Volcano's
pkg/controllers/cronjob (itself Kubernetes' pkg/controller/cronjob, controller v2):

- The times a CronJob owes are those of its schedule after ``status.lastScheduleTime`` (or its
  creation). Only the most recent one is ever started, so a controller that was down for hours
  starts one Job, not a burst. With ``startingDeadlineSeconds``, that time must be less than that
  many seconds old; otherwise no Job starts and a ``MissSchedule`` Warning says so. More than 100
  owed times within the deadline window give Kubernetes' ``TooManyMissedTimes`` Warning (the
  most recent still starts).
- A Job whose name (``<cronjob>-<Unix minutes>``) already exists was started for that time, even
  if the status does not say so yet: it is never started twice.
- ``Forbid`` skips a time while a Job is active; the time is started late when the active Job
  finishes, if it is still within the deadline. ``Replace`` deletes the active Jobs first.
- ``suspend`` starts nothing but keeps tidying status and history.
- A Job is finished in phase Completed (successful), Failed or Terminated (both failed, for the
  history limit). Volcano keeps Terminated Jobs forever; Caldera counts them with the failed
  ones. Aborted Jobs can be resumed, so they stay active.
- ``status.active`` lists the unfinished Jobs: references to Jobs that no longer exist are
  dropped (``StaleReference``), and an unfinished Job the CronJob controls but the status does
  not list is adopted (the status was written from a stale cache, or the write was lost).

Time comes from the caller, never the system clock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from caldera.api.cron import (
    Schedule,
    ScheduleError,
    ZoneError,
    job_name,
    load_zone,
    parse_schedule,
    rfc3339,
)
from caldera.api.kinds import CRONJOB, controller_reference
from caldera.api.meta import ObjectMeta, ObjectReference, format_time, parse_time
from caldera.api.names import go_quote
from caldera.api.ownership import may_touch
from caldera.api.volcano import (
    CRONJOB_SCHEDULED_TIMESTAMP_KEY,
    ConcurrencyPolicy,
    CronJob,
    CronJobStatus,
    Job,
    JobPhase,
    job_reference,
)
from controllers.notes import Note

__all__ = [
    "MANY_MISSED",
    "REQUEUE_PADDING",
    "Note",
    "Plan",
    "consumed",
    "finished",
    "plan",
    "started",
]

MANY_MISSED: Final = 100
"""Kubernetes' bound on owed start times before it warns (``TooManyMissedTimes``)."""
REQUEUE_PADDING: Final = 0.1
"""Seconds added to the wait for the next time, as Kubernetes does, so that a clock a little
behind still finds the time due when the key comes back."""
SUCCEEDED: Final = frozenset({JobPhase.COMPLETED})
FAILED: Final = frozenset({JobPhase.FAILED, JobPhase.TERMINATED})


@dataclass(frozen=True, slots=True)
class Plan:
    """The writes for one reconcile; ``status`` leaves out the Job in ``create``, whose UID the
    API server gives (see ``started``)."""

    status: CronJobStatus
    create: Job | None = None
    scheduled: dt.datetime | None = None  # the time ``create`` runs for
    replace: tuple[Job, ...] = ()  # active Jobs Replace deletes before ``create``
    expire: tuple[Job, ...] = ()  # finished Jobs beyond the history limits, oldest first
    notes: tuple[Note, ...] = ()
    requeue_after: float | None = None


def _time(value: str | None) -> dt.datetime | None:
    return parse_time(value) if value else None


def _phase(job: Job) -> str:
    return job.status.state.phase


def finished(job: Job) -> bool:
    """Whether ``job`` has ended: Completed, Failed or Terminated."""
    return _phase(job) in SUCCEEDED or _phase(job) in FAILED


def _age_order(job: Job) -> tuple[bool, dt.datetime, str]:
    created = _time(job.metadata.creation_timestamp)
    return (created is None, created or dt.datetime.max.replace(tzinfo=dt.UTC), job.metadata.name)


def consumed(status: CronJobStatus, scheduled: dt.datetime) -> CronJobStatus:
    """``status`` once the time ``scheduled`` is dealt with (lastScheduleTime never goes back)."""
    last = _time(status.last_schedule_time)
    when = scheduled if last is None or scheduled > last else last
    return msgspec.structs.replace(status, last_schedule_time=format_time(when))


def started(status: CronJobStatus, job: Job, scheduled: dt.datetime) -> CronJobStatus:
    """``status`` once ``job`` (as the API server returned it) runs for ``scheduled``."""
    active = status.active
    if all(ref.uid != job.metadata.uid for ref in active):
        active = (*active, job_reference(job))
    return consumed(msgspec.structs.replace(status, active=active), scheduled)


def _template_job(cronjob: CronJob, scheduled: dt.datetime, zone: dt.tzinfo) -> Job:
    template = cronjob.spec.job_template
    annotations = dict(template.metadata.annotations)
    annotations[CRONJOB_SCHEDULED_TIMESTAMP_KEY] = rfc3339(scheduled, zone)
    meta = ObjectMeta(
        name=job_name(cronjob.metadata.name, scheduled),
        namespace=cronjob.metadata.namespace,
        labels=dict(template.metadata.labels),
        annotations=annotations,
        owner_references=(controller_reference(CRONJOB, cronjob.metadata),),
    )
    return Job(metadata=meta, spec=template.spec)


def _expired(jobs: list[Job], limit: int) -> list[Job]:
    extra = len(jobs) - max(limit, 0)
    return sorted(jobs, key=_age_order)[:extra] if extra > 0 else []


def _schedule(cronjob: CronJob) -> tuple[Schedule, dt.tzinfo, list[Note]]:
    """The parsed schedule and zone; ScheduleError or ZoneError when the spec is unusable."""
    notes = []
    spec = cronjob.spec
    zone: dt.tzinfo = dt.UTC
    if spec.time_zone is not None:
        zone = load_zone(spec.time_zone)
    if "TZ" in spec.schedule:
        notes.append(
            Note(
                "Warning",
                "UnsupportedSchedule",
                f"CRON_TZ or TZ in the schedule {go_quote(spec.schedule)} is not officially "
                "supported. If set, the TimeZone field will be ignored during execution.",
            )
        )
    schedule = parse_schedule(spec.schedule)
    return schedule, (schedule.zone or zone), notes


def plan(cronjob: CronJob, jobs: Sequence[Job], now: dt.datetime) -> Plan:
    """Decide what to do for ``cronjob`` at ``now``. Of ``jobs``, only those it controls (their
    controller reference carries its UID) are counted, adopted, replaced or expired: a Job of the
    same name that another made is never touched."""
    spec, status = cronjob.spec, cronjob.status
    notes: list[Note] = []
    jobs = [j for j in jobs if may_touch(j.metadata, cronjob.metadata.uid)]
    live = [j for j in jobs if not j.metadata.deletion_timestamp]
    by_uid = {j.metadata.uid: j for j in live}

    active: list[ObjectReference] = []
    for ref in status.active:
        job = by_uid.get(ref.uid)
        if job is None:
            notes.append(
                Note(
                    "Warning",
                    "StaleReference",
                    f"Active job {go_quote(ref.name)} no longer exists (UID: {ref.uid})",
                )
            )
        elif finished(job):
            notes.append(
                Note(
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {ref.name}, status: {_phase(job)}",
                )
            )
        else:
            active.append(ref)
    listed = {ref.uid for ref in status.active}
    active.extend(
        job_reference(j)
        for j in sorted(live, key=_age_order)
        if j.metadata.uid not in listed and not finished(j)
    )

    last_success = _time(status.last_successful_time)
    for job in live:
        finish = _time(job.status.state.last_transition_time)
        if _phase(job) in SUCCEEDED and finish and (last_success is None or finish > last_success):
            last_success = finish
    expire = _expired(
        [j for j in live if _phase(j) in SUCCEEDED], spec.successful_jobs_history_limit
    )
    expire += _expired([j for j in live if _phase(j) in FAILED], spec.failed_jobs_history_limit)

    new_status = msgspec.structs.replace(
        status,
        active=tuple(active),
        last_successful_time=format_time(last_success) if last_success else None,
    )
    idle = Plan(status=new_status, expire=tuple(expire), notes=tuple(notes))
    if spec.suspend:
        return idle

    try:
        schedule, zone, schedule_notes = _schedule(cronjob)
    except ZoneError as exc:
        notes.append(Note("Warning", "InvalidTimeZone", f"spec.timeZone: {exc}"))
        return dataclasses.replace(idle, notes=tuple(notes))
    except ScheduleError as exc:
        notes.append(
            Note(
                "Warning",
                "InvalidSchedule",
                f"unparseable schedule {go_quote(spec.schedule)}: {exc}",
            )
        )
        return dataclasses.replace(idle, notes=tuple(notes))
    notes.extend(schedule_notes)

    following = schedule.next(now, zone)
    requeue = None
    if following is not None:
        requeue = (following - now).total_seconds() + REQUEUE_PADDING
    waiting = dataclasses.replace(idle, requeue_after=requeue)

    earliest = _time(status.last_schedule_time) or _time(cronjob.metadata.creation_timestamp)
    if earliest is None:
        earliest = now
    due = schedule.latest(earliest, now, zone)
    if due is None:
        return waiting
    deadline = spec.starting_deadline_seconds
    window = earliest
    if deadline is not None:
        window = max(earliest, now - dt.timedelta(seconds=deadline))
        if due <= window:
            notes.append(
                Note(
                    "Warning",
                    "MissSchedule",
                    "Missed scheduled time to start a job: "
                    f"{due.strftime('%a, %d %b %Y %H:%M:%S +0000')} "
                    f"(older than startingDeadlineSeconds: {deadline})",
                )
            )
            return dataclasses.replace(waiting, notes=tuple(notes))
    if schedule.count(earliest, window, now, zone, cap=MANY_MISSED + 1) > MANY_MISSED:
        notes.append(
            Note(
                "Warning",
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds "
                "or check clock skew",
            )
        )

    name = job_name(cronjob.metadata.name, due)
    if any(j.metadata.name == name for j in jobs):
        # Started already; the status that says so has not reached the cache yet.
        return dataclasses.replace(waiting, status=consumed(new_status, due), notes=tuple(notes))

    replace: tuple[Job, ...] = ()
    if active and spec.concurrency_policy == ConcurrencyPolicy.FORBID:
        notes.append(
            Note(
                "Warning",
                "ForbidConcurrent",
                "Skipping job creation because another job is already running",
            )
        )
        return dataclasses.replace(waiting, notes=tuple(notes))
    if active and spec.concurrency_policy == ConcurrencyPolicy.REPLACE:
        notes.append(Note("Warning", "ReplaceConcurrent", "Replacing active job for CronJob"))
        replace = tuple(by_uid[ref.uid] for ref in active)
        new_status = msgspec.structs.replace(new_status, active=())

    missed = schedule.count(earliest, earliest, now, zone, cap=MANY_MISSED + 1)
    if 1 < missed <= MANY_MISSED:
        notes.append(
            Note(
                "Warning",
                "MissSchedule",
                f"Missed {missed - 1} earlier scheduled time(s) since {format_time(earliest)}; "
                f"starting only the most recent, {format_time(due)}",
            )
        )
    return Plan(
        status=new_status,
        create=_template_job(cronjob, due, zone),
        scheduled=due,
        replace=replace,
        expire=tuple(expire),
        notes=tuple(notes),
        requeue_after=requeue,
    )
