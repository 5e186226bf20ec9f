"""The order in which the scheduler serves waiting jobs, as a session leaves it.

Enqueue and allocate serve jobs the same way (``scheduler.actions.enqueue``): each turn takes
the queue first in queue order and, from it, the first job in job order; the queue then goes
back in line under its order key, taken again. So at the end of a session the jobs whose gang
is not placed (PodGroup phase Pending, Inqueue or Unknown) stand in their queue by job order,
and in the cluster by queue order, then job order: a queue whose key stays the best keeps the
turn (proportion's key is the queue's share, which admitting a job does not move; queues whose
keys tie go by name). That is the order enqueue admits in; allocate's turns interleave the
queues as placing pods moves their shares, so across queues the order of starts is exact only
while the shares stand still.

``pending_order`` takes the session's order keys, not the session, so that it runs (in the
session's worker thread) just before the session drops its plugins' callbacks.
``Positions`` is the published form: the entries indexed by queue, namespace and key, with
since when each job has been waiting.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from caldera.api.meta import controller_of, format_time
from caldera.api.why import WHY_ANNOTATION, WaitRecord, decode_record
from scheduler.api.types import JobInfo, QueueInfo

VOLCANO_JOB_KIND = "Job"
VOLCANO_BATCH_GROUP = "batch.volcano.sh"


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """A waiting job as the session left it."""

    key: str  # namespace/podgroup
    namespace: str
    podgroup: str
    job: str  # the Volcano Job that owns the PodGroup, "" for none
    queue: str
    position_in_queue: int  # from 1
    position_in_cluster: int  # from 1
    priority: int
    phase: str
    record: WaitRecord | None
    created: dt.datetime


def owning_job(job: JobInfo) -> str:
    """The Volcano Job a PodGroup belongs to (its controller owner), "" for none."""
    if job.podgroup is None:
        return ""
    owner = controller_of(job.podgroup.metadata)
    if owner is None or owner.kind != VOLCANO_JOB_KIND:
        return ""
    if owner.api_version.partition("/")[0] != VOLCANO_BATCH_GROUP:
        return ""
    return owner.name


def served_order(
    queues_in_order: Sequence[str], by_queue: Mapping[str, Sequence[Any]]
) -> list[Any]:
    """Each queue's members in turn, the queues in queue order (a queue keeps the turn while
    its key stays the best, as it does while no job of it starts)."""
    return [member for name in queues_in_order for member in by_queue.get(name, ())]


def current_record(job: JobInfo, found: WaitRecord | None) -> WaitRecord | None:
    """What the session found the job waits for; else the record last written on its
    PodGroup (a session that replays a gang's failed turn notes nothing new)."""
    if found is not None:
        return found
    if job.podgroup is None:
        return None
    return decode_record(job.podgroup.metadata.annotations.get(WHY_ANNOTATION))


def pending_order(
    jobs: Iterable[JobInfo],
    queues: Mapping[str, QueueInfo],
    *,
    job_key: Callable[[JobInfo], Any],
    queue_key: Callable[[QueueInfo], Any],
    findings: Mapping[str, WaitRecord],
) -> tuple[PendingEntry, ...]:
    """The waiting ``jobs`` (of existing queues) in cluster order, with their positions;
    ``findings`` are the wait records the session composed (``scheduler.why.wait_record``)."""
    by_queue: dict[str, list[JobInfo]] = {}
    for job in jobs:
        if job.queue in queues:
            by_queue.setdefault(job.queue, []).append(job)
    for members in by_queue.values():
        members.sort(key=job_key)
    order = sorted(by_queue, key=lambda name: queue_key(queues[name]))
    in_queue = {job.key: i for members in by_queue.values() for i, job in enumerate(members, 1)}
    return tuple(
        PendingEntry(
            key=job.key,
            namespace=job.namespace,
            podgroup=job.name,
            job=owning_job(job),
            queue=job.queue,
            position_in_queue=in_queue[job.key],
            position_in_cluster=position,
            priority=job.priority,
            phase=job.phase or "Pending",
            record=current_record(job, findings.get(job.key)),
            created=job.creation,
        )
        for position, job in enumerate(served_order(order, by_queue), 1)
    )


@dataclass(frozen=True)
class Positions:
    """The published order: entries in cluster order, indexed, each with since when it waits."""

    entries: tuple[PendingEntry, ...] = ()
    observed_at: str = ""  # RFC 3339, the session's time; "" before the first session
    since: Mapping[str, str] = field(default_factory=dict)  # key -> RFC 3339
    by_queue: Mapping[str, tuple[PendingEntry, ...]] = field(default_factory=dict)
    by_namespace: Mapping[str, tuple[PendingEntry, ...]] = field(default_factory=dict)
    by_key: Mapping[str, PendingEntry] = field(default_factory=dict)


def publish(
    entries: tuple[PendingEntry, ...], now: dt.datetime, last: Positions | None
) -> Positions:
    """``entries`` indexed, each with since when it waits: a job already waiting at the last
    publication keeps its time; one new since then has waited since its PodGroup was made when
    that was after the last publication (or there was none), else since ``now`` (it ran, or
    was placed, and waits again)."""
    last_since = last.since if last is not None else {}
    last_time = last.observed_at if last is not None else ""
    stamp = format_time(now)
    since: dict[str, str] = {}
    by_queue: dict[str, list[PendingEntry]] = {}
    by_namespace: dict[str, list[PendingEntry]] = {}
    for entry in entries:
        kept = last_since.get(entry.key)
        if kept is None:
            created = format_time(entry.created)
            kept = created if not last_time or created >= last_time else stamp
        since[entry.key] = kept
        by_queue.setdefault(entry.queue, []).append(entry)
        by_namespace.setdefault(entry.namespace, []).append(entry)
    for members in by_queue.values():
        members.sort(key=lambda e: e.position_in_queue)
    return Positions(
        entries=entries,
        observed_at=stamp,
        since=since,
        by_queue={q: tuple(m) for q, m in by_queue.items()},
        by_namespace={n: tuple(m) for n, m in by_namespace.items()},
        by_key={e.key: e for e in entries},
    )
