"""preempt: starving jobs take resources from lower-ranked jobs of their own queue (Volcano's).

Between jobs, queue by queue in queue order, starving jobs (``session.job_starving``; a job of a
Pending PodGroup or an invalid job is never a preemptor) in job order:

    for each pending task of the job, in task order, while the job is still starving:
        nodes: those whose predicates pass once every candidate victim on them is gone
               (predicates never check resources), ordered: nodes where the task already fits
               first, then by node score (plus the batch node scores of a cross-node task, as
               Volcano's util.PrioritizeNodes)
        on the first node where it works:
            candidates = Bound/Running tasks of OTHER jobs of the SAME queue that request
                         something and are preemptable (``volcano.sh/preemptable``)
            victims    = session.preemptable(task, candidates): the plugins' intersection
                         (gang keeps minAvailable, priority, conformance, drf, toleration ...)
            skip the node unless the task fits in its future idle plus all victims; evict
            victims in victim order until the task fits (and its queue is not overused and
            may take it: ``session.allocatable``), then pipeline the task there
    commit the job's work only if the job is then pipelined (session.job_pipelined), else
    discard it: a gang is never left half preempted for.

Evictions tried on a node where the task still does not fit are undone at once, so committed
work holds only evictions that made room for a pipelined task.

Within a job (Volcano's second pass, kept): for each of those jobs, each pending task may then
evict lower-ranked running tasks of its own job (the plugins decide, e.g. priority by task
priority); each such swap is committed on its own, since it does not change the job's count;
this pass only swaps, it never places a task in free room.

A job whose networkTopology is hard (with the network-topology-aware plugin) takes room within
one HyperNode: the walk is restricted to one HyperNode's nodes at a time
(``scheduler.actions.topology.eviction_domains``), and a HyperNode where the gang cannot be
pipelined whole is given up before the next is tried.

Pipelined tasks are not bound: they get their node in a later session, once the victims are
gone. Best-effort tasks (no request) need no room and are left to backfill, as are pods held by
scheduling gates.

The node walk is ``scheduler.actions.room``'s, shared with ``reclaim``: it looks for victims
only on nodes of jobs the deciding plugins do not screen out, and a task whose shape found no
room is not tried again while nothing has changed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from scheduler.actions.room import (
    Attempt,
    JobLine,
    RoomFinder,
    Shapes,
    eligible,
    pending_in_order,
)
from scheduler.actions.topology import in_one_hypernode
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.why import DETAIL

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})  # Volcano's


class PreemptAction:
    """Volcano's preempt action; see the module docstring."""

    name = "preempt"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        starving: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if eligible(ssn, job) and ssn.job_starving(job):
                starving.setdefault(job.queue, []).append(job)
        if not starving:
            return
        finder = RoomFinder(ssn, CallbackKind.PREEMPTABLE, "preempt", PREEMPTABLE_STATUSES)
        for queue in sorted((ssn.queues[name] for name in starving), key=ssn.queue_order_key()):
            jobs = list(starving[queue.name])
            waiting = JobLine(ssn, jobs)
            while waiting:
                self._between_jobs(ssn, finder, queue, waiting.pop())
            for job in jobs:
                self._within_job(ssn, finder, queue, job)

    @staticmethod
    def _between_jobs(ssn: Session, finder: RoomFinder, queue: QueueInfo, job: JobInfo) -> None:
        in_one_hypernode(
            ssn,
            finder,
            job,
            lambda note: PreemptAction._attempt(ssn, finder, queue, job, note=note),
        )

    @staticmethod
    def _attempt(
        ssn: Session, finder: RoomFinder, queue: QueueInfo, job: JobInfo, *, note: bool = True
    ) -> bool:
        """One try at making room for ``job``; True when committed."""

        def candidate(task: TaskInfo) -> bool:
            if task.job == job.key or task.status not in PREEMPTABLE_STATUSES:
                return False
            if task.resreq.is_empty() or not task.preemptable:
                return False
            owner = ssn.jobs.get(task.job)
            return owner is not None and owner.queue == queue.name

        owners = [j for j in finder.jobs_of([queue.name]) if j.key != job.key]

        find = functools.partial(finder.make_room, queue=queue, owners=owners, candidate=candidate)

        shapes = Shapes(ssn)
        attempt = Attempt()
        failed: TaskInfo | None = None
        for task in pending_in_order(ssn, job):
            if not ssn.job_starving(job):
                break
            stmt = shapes.try_room(task, find)
            if stmt is not None:
                attempt.statements.append(stmt)
            elif failed is None:
                failed = task
        if attempt.finish(ssn, job):
            return True
        if failed is not None and note:
            where = f"in queue {queue.name}"
            why = finder.why_no_room(failed, queue=queue, where=where, owners=owners)
            ssn.note_wait(job.key, DETAIL, why)
        return False

    @staticmethod
    def _within_job(ssn: Session, finder: RoomFinder, queue: QueueInfo, job: JobInfo) -> None:
        def candidate(task: TaskInfo) -> bool:
            return (
                task.job == job.key
                and task.status in PREEMPTABLE_STATUSES
                and not task.resreq.is_empty()
                and task.preemptable
            )

        for task in pending_in_order(ssn, job):
            stmt = finder.make_room(
                task,
                queue=queue,
                owners=[job],
                candidate=candidate,
                use_free=False,  # a swap inside the job, never a plain placement
            )
            if stmt is None:
                break
            stmt.commit()
