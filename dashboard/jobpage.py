"""One job's page: its tasks, pods, phase and conditions, its PodGroup, the scheduler's wait
record, a timeline of its life and its Events.

A purely computational module with no side-effects: `build_job_page` takes the cached objects
(and the Events the server read for this page) and returns what the template renders.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Event, EventType, Pod
from caldera.api.volcano import TASK_SPEC_KEY, Job, JobPhase, PodGroup, PodGroupPhase
from caldera.api.why import WHY_ANNOTATION, WaitStage, decode_record
from dashboard.format import age, parse_timestamp
from dashboard.jobs import wait_reason
from dashboard.overview import queue_of

__all__ = [
    "MAX_EVENTS",
    "MAX_PODS",
    "EventRow",
    "JobPage",
    "PodGroupView",
    "PodRow",
    "TaskRow",
    "TimelineEntry",
    "WhyView",
    "build_job_page",
]

# Bounds of one page: a 10,000-pod job still renders in a fraction of a second.
MAX_PODS: Final = 500
MAX_EVENTS: Final = 100
MAX_TIMELINE: Final = 200


@dataclass(frozen=True, slots=True)
class TaskRow:
    name: str
    replicas: int
    min_available: str
    phases: str  # "Running 2, Pending 1"


@dataclass(frozen=True, slots=True)
class PodRow:
    name: str
    task: str
    phase: str
    node: str
    ready: bool
    restarts: int
    age: str


@dataclass(frozen=True, slots=True)
class ConditionRow:
    kind: str
    status: str
    reason: str
    message: str
    time: str
    age: str


@dataclass(frozen=True, slots=True)
class PodGroupView:
    name: str
    phase: str
    queue: str
    min_member: int
    running: int
    succeeded: int
    failed: int
    conditions: tuple[ConditionRow, ...]


@dataclass(frozen=True, slots=True)
class WhyView:
    """The scheduler's record (`caldera.api.why.WaitRecord`) as shown."""

    stage: str
    summary: str
    details: tuple[str, ...]
    time: str
    age: str
    stale: bool  # its stage contradicts the PodGroup's phase: the scheduler has not rewritten it


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    time: str
    age: str
    what: str
    detail: str
    warning: bool


@dataclass(frozen=True, slots=True)
class EventRow:
    type: str
    reason: str
    message: str
    count: int
    time: str
    age: str
    object: str  # "Pod/name"


@dataclass(frozen=True, slots=True)
class JobPage:
    namespace: str
    name: str
    queue: str
    phase: str
    since: str
    since_age: str
    state_reason: str
    min_available: int
    retries: str
    waiting_for: str
    tasks: tuple[TaskRow, ...]
    pods: tuple[PodRow, ...]
    pods_hidden: int
    conditions: tuple[ConditionRow, ...]
    podgroup: PodGroupView | None
    why: WhyView | None
    timeline: tuple[TimelineEntry, ...]
    events: tuple[EventRow, ...] | None  # None: the user may not read Events


def _tasks(job: Job) -> tuple[TaskRow, ...]:
    rows = []
    for task in job.spec.tasks:
        counts = job.status.task_status_count.get(task.name)
        phases = ", ".join(
            f"{phase} {n}" for phase, n in sorted((counts.phase if counts else {}).items()) if n
        )
        minimum = "" if task.min_available is None else str(task.min_available)
        rows.append(TaskRow(task.name, task.replicas, minimum, phases))
    return tuple(rows)


def _pod(pod: Pod, now: dt.datetime) -> PodRow:
    statuses = pod.status.container_statuses
    return PodRow(
        name=pod.metadata.name,
        task=pod.metadata.annotations.get(TASK_SPEC_KEY, ""),
        phase=pod.status.phase or "Pending",
        node=pod.spec.node_name,
        ready=bool(statuses) and all(s.ready for s in statuses),
        restarts=sum(s.restart_count for s in statuses),
        age=age(pod.metadata.creation_timestamp, now),
    )


def _podgroup(pg: PodGroup, now: dt.datetime) -> PodGroupView:
    return PodGroupView(
        name=pg.metadata.name,
        phase=pg.status.phase or "Pending",
        queue=pg.spec.queue,
        min_member=pg.spec.min_member,
        running=pg.status.running,
        succeeded=pg.status.succeeded,
        failed=pg.status.failed,
        conditions=tuple(
            ConditionRow(
                c.type,
                c.status,
                c.reason,
                c.message,
                c.last_transition_time or "",
                age(c.last_transition_time, now),
            )
            for c in pg.status.conditions
        ),
    )


# The stages that hold a PodGroup before admission: a record of one of them is out of date
# once the PodGroup is admitted (as ``caldera job why`` judges it).
_BEFORE_ADMISSION: Final = frozenset({WaitStage.ENQUEUE, WaitStage.QUEUE})


def _why(pg: PodGroup | None, now: dt.datetime) -> WhyView | None:
    if pg is None:
        return None
    record = decode_record(pg.metadata.annotations.get(WHY_ANNOTATION))
    if record is None:
        return None
    admitted = pg.status.phase not in ("", PodGroupPhase.PENDING)
    return WhyView(
        record.stage,
        record.summary,
        record.details,
        record.time,
        age(record.time, now),
        stale=admitted and record.stage in _BEFORE_ADMISSION,
    )


def _event_time(e: Event) -> str:
    return (
        e.last_timestamp or e.event_time or e.first_timestamp or e.metadata.creation_timestamp or ""
    )


def _events(events: Sequence[Event], now: dt.datetime) -> tuple[EventRow, ...]:
    ordered = sorted(events, key=lambda e: _sort_time(_event_time(e)))[-MAX_EVENTS:]
    return tuple(
        EventRow(
            type=e.type,
            reason=e.reason,
            message=e.message,
            count=max(e.count, e.series.count if e.series else 0, 1),
            time=_event_time(e),
            age=age(_event_time(e), now),
            object=f"{e.involved_object.kind}/{e.involved_object.name}",
        )
        for e in ordered
    )


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _sort_time(value: str) -> dt.datetime:
    return parse_timestamp(value) or _EPOCH


def _timeline(
    job: Job, pg: PodGroup | None, events: Sequence[Event], now: dt.datetime
) -> tuple[TimelineEntry, ...]:
    """The job's life in time order: created, each phase it entered (its conditions), the
    PodGroup's conditions, and the Events of the job, its PodGroup and its pods."""
    raw: list[tuple[str, str, str, bool]] = []
    if job.metadata.creation_timestamp:
        raw.append((job.metadata.creation_timestamp, "created", f"queue {queue_of(job)}", False))
    for cond in job.status.conditions:
        if cond.last_transition_time:
            failed = cond.status in (JobPhase.FAILED, JobPhase.ABORTED, JobPhase.TERMINATED)
            raw.append((cond.last_transition_time, f"job {cond.status}", "", failed))
    if pg is not None:
        for c in pg.status.conditions:
            if c.last_transition_time:
                what = f"PodGroup {c.type}={c.status}"
                raw.append((c.last_transition_time, what, c.message or c.reason, False))
    for e in events:
        when = _event_time(e)
        if when:
            what = f"{e.reason} ({e.involved_object.kind}/{e.involved_object.name})"
            raw.append((when, what, e.message, e.type == EventType.WARNING))
    raw.sort(key=lambda entry: _sort_time(entry[0]))  # stable: ties keep the order above
    return tuple(
        TimelineEntry(when, age(when, now), what, detail, warning)
        for when, what, detail, warning in raw[-MAX_TIMELINE:]
    )


def build_job_page(
    job: Job,
    podgroup: PodGroup | None,
    pods: Sequence[Pod],
    events: Sequence[Event] | None,
    now: dt.datetime,
) -> JobPage:
    """The page of `job`. `pods` are its pods, `events` those of the job, its PodGroup and its
    pods (None when the user may not read Events)."""
    state = job.status.state
    since = state.last_transition_time or job.metadata.creation_timestamp or ""
    shown = sorted(
        pods, key=lambda p: (p.metadata.annotations.get(TASK_SPEC_KEY, ""), p.metadata.name)
    )
    reason = ": ".join(part for part in (state.reason, state.message) if part)
    return JobPage(
        namespace=job.metadata.namespace,
        name=job.metadata.name,
        queue=queue_of(job),
        phase=state.phase or JobPhase.PENDING,
        since=since,
        since_age=age(since, now),
        state_reason=reason,
        min_available=job.spec.min_available,
        retries=f"{job.status.retry_count}/{job.spec.max_retry}",
        waiting_for=wait_reason(job, podgroup),
        tasks=_tasks(job),
        pods=tuple(_pod(p, now) for p in shown[:MAX_PODS]),
        pods_hidden=max(0, len(shown) - MAX_PODS),
        conditions=tuple(
            ConditionRow(
                "phase",
                c.status,
                "",
                "",
                c.last_transition_time or "",
                age(c.last_transition_time, now),
            )
            for c in job.status.conditions
        ),
        podgroup=_podgroup(podgroup, now) if podgroup is not None else None,
        why=_why(podgroup, now),
        timeline=_timeline(job, podgroup, events or (), now),
        events=_events(events, now) if events is not None else None,
    )
