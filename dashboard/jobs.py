"""The job list: its filter (namespace, queue, phase, labels), its rows, and their order.

Pending jobs come first, by priority (highest first), then creation time (oldest first), then
namespace and name: a stable order a person can follow. Where the scheduler's visibility API
answers (docs/visibility.md), a queue's waiting jobs are put in its order instead and carry
their positions (``with_positions``); each waiting row carries the reason the scheduler's wait
record gives.

A purely computational module with no side-effects.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.meta import controller_of
from caldera.api.visibility import PendingJob
from caldera.api.volcano import Job, JobPhase, PodGroup, PodGroupConditionType, PodGroupPhase
from caldera.api.why import WHY_ANNOTATION, WaitStage, decode_record
from dashboard.format import age
from dashboard.overview import is_pending, queue_of

__all__ = [
    "MAX_ROWS",
    "PHASES",
    "FilterError",
    "JobFilter",
    "JobRow",
    "job_rows",
    "parse_filter",
    "parse_labels",
    "podgroups_by_job",
    "wait_reason",
    "with_positions",
]

PHASES: Final = tuple(p.value for p in JobPhase)
# A page lists at most this many jobs (then says how many more match): the browser, not the
# server, is what slows down past a few thousand rows.
MAX_ROWS: Final = 2000
_NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_ACTIVE: Final = frozenset(
    {JobPhase.RUNNING, JobPhase.RESTARTING, JobPhase.COMPLETING, JobPhase.ABORTING,
     JobPhase.TERMINATING}
)  # fmt: skip


MAX_LABELS: Final = 8
MAX_LABEL_TEXT: Final = 2000
# Kubernetes' label syntax: an optional DNS-subdomain prefix and a name, and a value.
_LABEL_NAME: Final = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_LABEL_KEY: Final = re.compile(rf"({_NAME.pattern}/)?{_LABEL_NAME}")
_LABEL_VALUE: Final = re.compile(rf"{_LABEL_NAME}?")


class FilterError(ValueError):
    """A filter parameter that cannot match anything; the message says what is allowed."""


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What the job list shows; an empty field matches everything."""

    namespace: str = ""
    queue: str = ""
    phase: str = ""
    labels: tuple[tuple[str, str | None], ...] = ()
    """(key, value) pairs the job's labels must hold; a None value: the key, with any value."""

    @property
    def label(self) -> str:
        """The label filter as it is written (``team=a,gpu``)."""
        return ",".join(k if v is None else f"{k}={v}" for k, v in self.labels)

    def matches(self, job: Job) -> bool:
        phase = job.status.state.phase or JobPhase.PENDING
        labels = job.metadata.labels
        return (
            (not self.namespace or job.metadata.namespace == self.namespace)
            and (not self.queue or queue_of(job) == self.queue)
            and (not self.phase or phase == self.phase)
            and all(k in labels and (v is None or labels[k] == v) for k, v in self.labels)
        )


def _shown(value: str) -> str:
    return value if len(value) <= 60 else value[:59] + "…"


def parse_labels(text: str) -> tuple[tuple[str, str | None], ...]:
    """``key=value`` or ``key`` terms, comma-separated, as a label selector writes equality;
    raises `FilterError` for a term Kubernetes would not accept as a label."""
    if len(text) > MAX_LABEL_TEXT:
        raise FilterError(f"label: longer than {MAX_LABEL_TEXT} characters")
    terms = [t.strip() for t in text.split(",") if t.strip()]
    if len(terms) > MAX_LABELS:
        raise FilterError(f"label: at most {MAX_LABELS} terms (key=value or key), not {len(terms)}")
    out: list[tuple[str, str | None]] = []
    for term in terms:
        key, eq, value = term.partition("=")
        key, value = key.strip(), value.strip()
        if value.startswith("="):  # key==value, as kubectl also takes it
            value = value[1:].strip()
        if not _LABEL_KEY.fullmatch(key):
            raise FilterError(
                f"label {_shown(term)!r}: {_shown(key)!r} is not a label key "
                "([prefix/]name: letters, digits, '-', '_', '.'; at most 63 characters)"
            )
        if eq and not _LABEL_VALUE.fullmatch(value):
            raise FilterError(
                f"label {_shown(term)!r}: {_shown(value)!r} is not a label value "
                "(letters, digits, '-', '_', '.'; at most 63 characters)"
            )
        out.append((key, value if eq else None))
    return tuple(out)


def parse_filter(params: Mapping[str, str]) -> JobFilter:
    """The filter of a query string; other parameters are ignored. Raises `FilterError` for a
    name Kubernetes would not accept or a phase that does not exist (in any letter case it is
    accepted and written as Volcano writes it)."""
    values: dict[str, str] = {}
    for field in ("namespace", "queue"):
        value = params.get(field, "").strip()
        if value and not _NAME.fullmatch(value):
            raise FilterError(
                f"{field} {_shown(value)!r} is not a valid name (lower-case DNS name)"
            )
        values[field] = value
    phase = params.get("phase", "").strip()
    if phase:
        canonical = {p.lower(): p for p in PHASES}.get(phase.lower())
        if canonical is None:
            shown = phase if len(phase) <= 60 else phase[:59] + "…"
            raise FilterError(f"phase {shown!r} is not a job phase: one of {', '.join(PHASES)}")
        phase = canonical
    labels = parse_labels(params.get("label", ""))
    return JobFilter(
        namespace=values["namespace"], queue=values["queue"], phase=phase, labels=labels
    )


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job in a list."""

    namespace: str
    name: str
    queue: str
    phase: str
    since: str  # RFC 3339: when the job entered its phase
    since_age: str
    created: str
    priority: int
    waiting: bool
    reason: str
    pods: str  # "running/total"
    position: int = 0  # in its queue, from the visibility API; 0: not known
    cluster_position: int = 0


def podgroups_by_job(podgroups: Iterable[PodGroup]) -> dict[str, PodGroup]:
    """PodGroups by the uid of the Job that controls them."""
    out: dict[str, PodGroup] = {}
    for pg in podgroups:
        ref = controller_of(pg.metadata)
        if ref is not None and ref.kind == "Job":
            out[ref.uid] = pg
    return out


def priority_of(job: Job, podgroup: PodGroup | None, priorities: Mapping[str, int]) -> int:
    """The job's priority: its PriorityClass's value (the PodGroup's class first, as the
    scheduler reads it); 0 when it names none or one not cached."""
    name = (podgroup.spec.priority_class_name if podgroup else "") or job.spec.priority_class_name
    return priorities.get(name, 0) if name else 0


def wait_reason(job: Job, podgroup: PodGroup | None) -> str:
    """Why a pending job waits, in one line; "" for a job that does not wait."""
    if not is_pending(job):
        return ""
    if podgroup is None:
        return "no PodGroup yet: the job controller has not created it"
    record = decode_record(podgroup.metadata.annotations.get(WHY_ANNOTATION))
    if record is not None and record.stage != WaitStage.NONE:
        return record.summary
    for cond in podgroup.status.conditions:
        if cond.type == PodGroupConditionType.UNSCHEDULABLE and cond.status == "True":
            return cond.message or cond.reason or "unschedulable"
    if podgroup.status.phase == PodGroupPhase.INQUEUE:
        return "admitted (Inqueue): its pods are being created and placed"
    return "waiting for the scheduler to admit its PodGroup"


def _row(
    job: Job, podgroup: PodGroup | None, priorities: Mapping[str, int], now: dt.datetime
) -> JobRow:
    state = job.status.state
    since = state.last_transition_time or job.metadata.creation_timestamp or ""
    total = sum(t.replicas for t in job.spec.tasks)
    return JobRow(
        namespace=job.metadata.namespace,
        name=job.metadata.name,
        queue=queue_of(job),
        phase=state.phase or JobPhase.PENDING,
        since=since,
        since_age=age(since, now),
        created=job.metadata.creation_timestamp or "",
        priority=priority_of(job, podgroup, priorities),
        waiting=is_pending(job),
        reason=wait_reason(job, podgroup),
        pods=f"{job.status.running}/{total}",
    )


def _order(row: JobRow) -> tuple[int, int, str, str, str]:
    group = 0 if row.waiting else 1 if row.phase in _ACTIVE else 2
    return (group, -row.priority, row.created, row.namespace, row.name)


def job_rows(
    jobs: Sequence[Job],
    podgroups: Mapping[str, PodGroup],
    priorities: Mapping[str, int],
    now: dt.datetime,
    flt: JobFilter = JobFilter(),
) -> list[JobRow]:
    """The rows of the jobs `flt` matches, pending first (see the module docstring).
    `podgroups` is `podgroups_by_job`'s mapping."""
    rows = [
        _row(job, podgroups.get(job.metadata.uid), priorities, now)
        for job in jobs
        if flt.matches(job)
    ]
    rows.sort(key=_order)
    return rows


def with_positions(rows: Sequence[JobRow], listed: Iterable[PendingJob]) -> list[JobRow]:
    """``rows`` with the positions of ``listed`` (a queue's list from the visibility API, by
    namespace and Volcano Job name): the waiting rows it places first, in its order, then the
    waiting rows it does not know (a job created since the scheduler's last session), then the
    rest as they were."""
    known = {
        (item.metadata.namespace, item.job): item for item in listed if not item.hidden and item.job
    }
    placed: list[JobRow] = []
    unplaced: list[JobRow] = []
    rest: list[JobRow] = []
    for row in rows:
        item = known.get((row.namespace, row.name)) if row.waiting else None
        if item is not None:
            placed.append(
                dataclasses.replace(
                    row,
                    position=item.position_in_queue,
                    cluster_position=item.position_in_cluster,
                )
            )
        elif row.waiting:
            unplaced.append(row)
        else:
            rest.append(row)
    placed.sort(key=lambda r: r.position)
    return [*placed, *unplaced, *rest]
