"""sla: a job that has waited longer than its waiting time is admitted at once and served first
(Volcano's sla plugin).

A job's waiting time is the PodGroup annotation ``volcano.sh/sla-waiting-time`` (the job
controller copies a Job's annotations onto its PodGroup), else the older annotation
``sla-waiting-time``, else the plugin argument ``sla-waiting-time``: a Go duration such as
``1h2m3s`` or ``90s``. An annotation that does not parse, or is not positive, gives the job no
waiting time of its own (Volcano's). A bad argument is an error naming the plugin and the key,
where Volcano logs it and goes on without one. The *deadline* is the PodGroup's creation time
plus its waiting time.

- job order: jobs with a waiting time before jobs without; of two with one, the earlier
  deadline first;
- job enqueueable and job pipelined: permit once the deadline has passed by the session's
  clock, abstain before it. A permit decides its tier's vote: with sla in a tier before the
  enqueue gates (proportion, capacity, overcommit), an overdue job is admitted even over their
  refusal, and in allocate its partly placed gang keeps the nodes it was given in the session
  (pipelined) instead of leaving them to smaller jobs behind it;
- the session asks for another session at the next deadline (``SessionResult.revisit``), so a
  quiet cluster, whose sessions are skipped while nothing changes (``scheduler.quiet``), does
  not hold an overdue job back.
"""

from __future__ import annotations

import datetime as dt

from caldera.api.duration import DurationError, parse_duration_ns
from scheduler.api.types import JobInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

WAITING_TIME = "sla-waiting-time"  # the plugin argument, and the older annotation
WAITING_TIME_ANNOTATION = "volcano.sh/sla-waiting-time"


def waiting_time(text: str | None) -> dt.timedelta | None:
    """A positive Go duration, or None (absent, unparsable, zero or negative)."""
    if text is None:
        return None
    try:
        ns = parse_duration_ns(text)
    except DurationError:
        return None
    return dt.timedelta(microseconds=ns / 1000) if ns > 0 else None


def job_waiting_time(job: JobInfo, default: dt.timedelta | None) -> dt.timedelta | None:
    """The job's own waiting time (new annotation, then old), else ``default``."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    for key in (WAITING_TIME_ANNOTATION, WAITING_TIME):
        found = waiting_time(annotations.get(key))
        if found is not None:
            return found
    return default


class SlaPlugin:
    """Jobs past their waiting time are admitted and served first."""

    name = "sla"

    def __init__(self, arguments: Arguments) -> None:
        self.default: dt.timedelta | None = None
        if WAITING_TIME in arguments.raw:
            text = arguments.string(WAITING_TIME, "")
            try:
                ns = parse_duration_ns(text)
            except DurationError as exc:
                raise ValueError(f"plugin {self.name}: argument {WAITING_TIME}: {exc}") from None
            if ns <= 0:
                raise ValueError(
                    f"plugin {self.name}: argument {WAITING_TIME} must be positive, got {text!r}"
                )
            self.default = dt.timedelta(microseconds=ns / 1000)
        self._deadlines: dict[str, dt.datetime | None] = {}

    def deadline(self, job: JobInfo) -> dt.datetime | None:
        """Creation time plus waiting time, worked out once per job and session."""
        if job.key not in self._deadlines:
            wait = job_waiting_time(job, self.default)
            self._deadlines[job.key] = None if wait is None else job.creation + wait
        return self._deadlines[job.key]

    def on_session_open(self, ssn: Session) -> None:
        self._deadlines = {}
        now = ssn.now

        def job_order(left: JobInfo, right: JobInfo) -> int:
            mine, theirs = self.deadline(left), self.deadline(right)
            if mine is None or theirs is None:
                return 0 if mine is theirs else (1 if mine is None else -1)
            return -1 if mine < theirs else (1 if mine > theirs else 0)

        def overdue(job: JobInfo) -> int:
            due = self.deadline(job)
            if due is None:
                return 0
            if now < due:
                ssn.result.revisit((due - now).total_seconds())
                return 0
            return 1

        def due_key(job: JobInfo) -> tuple[bool, dt.datetime | None]:
            due = self.deadline(job)
            return (due is None, due)  # a job with a deadline first, the earliest first

        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_enqueueable_fn(self.name, overdue)
        ssn.add_job_pipelined_fn(self.name, overdue)
        ssn.add_speedups(self.name, Speedups(job_order_key=due_key))

    def on_session_close(self, ssn: Session) -> None:
        self._deadlines = {}
