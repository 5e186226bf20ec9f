"""What a session leaves behind for the API: each PodGroup's status (Volcano's job updater
rules), whether it needs a write, the PodGroup as written with its wait record, and each
queue's allocated resources (devices held through DRA claims included).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from caldera.api.resources import Resources
from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY
from caldera.api.volcano import PodGroup, PodGroupCondition, PodGroupPhase, PodGroupStatus
from caldera.api.why import WHY_ANNOTATION, WaitRecord, encode_record
from scheduler.api.dra.quota import queue_devices
from scheduler.api.job_sums import by_queue, held
from scheduler.api.types import JobInfo, TaskStatus
from scheduler.framework.session import Session

# Looked up once: an enum member's lookup runs Python code, and every session asks every job.
_SCHEDULED = (
    TaskStatus.RUNNING,
    TaskStatus.BOUND,
    TaskStatus.BINDING,
    TaskStatus.FAILED,
    TaskStatus.SUCCEEDED,
)
_COMPLETED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
_RUNNING = TaskStatus.RUNNING
_UNKNOWN_PHASE, _COMPLETED_PHASE, _RUNNING_PHASE, _INQUEUE_PHASE, _PENDING_PHASE = (
    PodGroupPhase.UNKNOWN.value,
    PodGroupPhase.COMPLETED.value,
    PodGroupPhase.RUNNING.value,
    PodGroupPhase.INQUEUE.value,
    PodGroupPhase.PENDING.value,
)


def podgroup_phase(job: JobInfo, condition: PodGroupCondition | None) -> str:
    """The phase of ``podgroup_status(job, condition)``."""
    scheduled = job.count(*_SCHEDULED)
    unschedulable = condition is not None and condition.type == "Unschedulable"
    if unschedulable and job.count(_RUNNING):
        return _UNKNOWN_PHASE
    if scheduled >= job.min_available and scheduled > 0:
        completed = job.count(*_COMPLETED)
        return _COMPLETED_PHASE if completed == scheduled else _RUNNING_PHASE
    if job.phase == _INQUEUE_PHASE:
        return _INQUEUE_PHASE
    return _PENDING_PHASE


def podgroup_status(job: JobInfo, condition: PodGroupCondition | None) -> PodGroupStatus:
    """A job's PodGroup status after the session (Volcano's job updater rules)."""
    current = job.podgroup.status if job.podgroup is not None else PodGroupStatus()
    conditions = list(current.conditions)
    if condition is not None:
        conditions = [c for c in conditions if c.type != condition.type] + [condition]
    return PodGroupStatus(
        phase=podgroup_phase(job, condition),
        conditions=tuple(conditions),
        running=job.count(TaskStatus.RUNNING),
        succeeded=job.count(TaskStatus.SUCCEEDED),
        failed=job.count(TaskStatus.FAILED),
    )


def _comparable(status: PodGroupStatus) -> PodGroupStatus:
    conditions = tuple(
        msgspec.structs.replace(c, transition_id="", last_transition_time=None)
        for c in status.conditions
    )
    return msgspec.structs.replace(status, conditions=conditions)


def condition_key(condition: PodGroupCondition | None) -> tuple[str, ...] | None:
    """What of a condition ``status_changed`` compares (not its time or id)."""
    if condition is None:
        return None
    return (condition.type, condition.status, condition.reason, condition.message)


def status_changed(before: PodGroupStatus, after: PodGroupStatus) -> bool:
    """Whether a write is needed: conditions are compared without their ids and times."""
    return _comparable(before) != _comparable(after)


QUEUE_ALLOCATION = "queue allocation"  # the snapshot's sums of what each queue's jobs hold


def queue_allocation(session: Session) -> dict[str, Resources]:
    """Resources held by each queue's jobs, added up the parent chain to the root; with DRA
    claims, the devices they hold too, as ``deviceclass/<class>`` counts (Volcano's keys, a
    claim once per queue: ``scheduler.api.dra.quota.queue_devices``)."""
    # Kept with the snapshot: only jobs that changed since the last call are added again.
    sums = session.cluster.sums(QUEUE_ALLOCATION, by_queue, held, 1)
    own = {name: sums.total(name) for name in session.queues}
    total = dict(own)
    for name, amount in own.items():
        for parent in _ancestors(session, name):
            total[parent] = total[parent] + amount
    view = session.cluster.dra
    if view is not None and view.claims:

        def chain(name: str) -> list[str]:
            return [name, *_ancestors(session, name)] if name in total else []

        for name, devices in queue_devices(session.jobs.values(), view.claims, chain).items():
            total[name] = total[name] + devices
    return total


def _ancestors(session: Session, name: str) -> list[str]:
    """The queue's parent, its parent's, and so on, among the session's queues."""
    found: list[str] = []
    seen = {name}
    parent = session.queues[name].parent
    while parent and parent in session.queues and parent not in seen:
        found.append(parent)
        seen.add(parent)
        parent = session.queues[parent].parent
    return found


def with_findings(
    pg: PodGroup,
    status: PodGroupStatus | None,
    record: WaitRecord | None,
    *,
    hypernode: str | None = None,
    annotations: Mapping[str, str | None] | None = None,
) -> PodGroup:
    """The PodGroup with a session's status, wait record, for a job placed under a
    HyperNode, that HyperNode's name, and the annotations plugins set (None: removed); one
    write carries them all: the PodGroup CRD has no status subresource."""
    if status is not None:
        pg = msgspec.structs.replace(pg, status=status)
    extra: dict[str, str] = {}
    if record is not None:
        extra[WHY_ANNOTATION] = encode_record(record)
    if hypernode is not None:
        extra[JOB_ALLOCATED_HYPERNODE_KEY] = hypernode
    removed = {k for k, v in (annotations or {}).items() if v is None}
    extra.update({k: v for k, v in (annotations or {}).items() if v is not None})
    if extra or removed & pg.metadata.annotations.keys():
        annotations = {
            k: v for k, v in {**pg.metadata.annotations, **extra}.items() if k not in removed
        }
        pg = msgspec.structs.replace(
            pg, metadata=msgspec.structs.replace(pg.metadata, annotations=annotations)
        )
    return pg
