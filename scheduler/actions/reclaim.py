"""reclaim: queues below their share take resources back from other queues (Volcano's).

Jobs with pending tasks (admitted, valid, in a known queue) are served one job per turn: each
turn asks the session's queue order afresh and takes the first queue that is not overused, and
in it the first job in job order. For each pending task of that job, in task order, while the
queue is not overused and the queue may reclaim for it (``session.preemptive``: proportion and
capacity allow it only while the queue stays within its deserved share with the task, so a
queue never reclaims beyond what it deserves):

    candidates = Running tasks of jobs in OTHER queues that are reclaimable
                 (``spec.reclaimable`` not false), request something and are preemptable
    victims    = session.reclaimable(task, candidates): what every tier's plugins allow
                 (proportion keeps each queue at or above its deserved share, gang keeps
                 minAvailable, conformance, preemption-toleration ...)

and the same node walk as preempt (``scheduler.actions.room``): evict victims in victim order on one
node until the task fits and its queue may take it (``session.allocatable``, which the
evictions themselves may make true: capacity holds every ancestor queue to its limit, and a
victim below the same ancestor frees room there), then pipeline it there. Volcano's reclaim
checks only ``Preemptive`` before looking for victims, for the same reason. The job's
statement is committed only if the job is then pipelined, else discarded, so a gang is never
half reclaimed for; Volcano evicts task by task without a statement. The walk ranks the nodes
as preempt's does (the node score, plus the batch node scores of a cross-node task); Volcano's
reclaim ranks none, it walks them in the order its predicates returned them.

A job whose networkTopology is hard reclaims within one HyperNode at a time, as in preempt
(``scheduler.actions.topology.eviction_domains``).
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
    wants_room,
)
from scheduler.actions.topology import in_one_hypernode
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.why import DETAIL

RECLAIMABLE_STATUSES = (TaskStatus.RUNNING,)


class ReclaimAction:
    """Volcano's reclaim action; see the module docstring."""

    name = "reclaim"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        by_queue: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if any(wants_room(t) for t in job.tasks_in(TaskStatus.PENDING)) and eligible(ssn, job):
                by_queue.setdefault(job.queue, []).append(job)
        waiting = {name: JobLine(ssn, jobs) for name, jobs in by_queue.items()}
        finder: RoomFinder | None = None
        while True:
            queues = sorted(
                (ssn.queues[name] for name, jobs in waiting.items() if jobs),
                key=ssn.queue_order_key(),
            )
            queue = next((q for q in queues if not ssn.overused(q)), None)
            if queue is None:
                return
            finder = finder or RoomFinder(
                ssn, CallbackKind.RECLAIMABLE, "reclaim", RECLAIMABLE_STATUSES
            )
            self._reclaim_for(ssn, finder, queue, waiting[queue.name].pop())

    @staticmethod
    def _reclaim_for(ssn: Session, finder: RoomFinder, queue: QueueInfo, job: JobInfo) -> None:
        in_one_hypernode(
            ssn,
            finder,
            job,
            lambda note: ReclaimAction._attempt(ssn, finder, queue, job, note=note),
        )

    @staticmethod
    def _attempt(
        ssn: Session, finder: RoomFinder, queue: QueueInfo, job: JobInfo, *, note: bool = True
    ) -> bool:
        """One try at reclaiming room for ``job``; True when committed."""

        def candidate(task: TaskInfo) -> bool:
            if task.status != TaskStatus.RUNNING or task.resreq.is_empty():
                return False
            if not task.preemptable:
                return False
            owner = ssn.jobs.get(task.job)
            if owner is None or owner.queue == queue.name:
                return False
            owner_queue = ssn.queues.get(owner.queue)
            return owner_queue is not None and owner_queue.reclaimable

        others = [name for name, q in ssn.queues.items() if name != queue.name and q.reclaimable]
        owners = finder.jobs_of(others)

        find = functools.partial(finder.make_room, queue=queue, owners=owners, candidate=candidate)

        shapes = Shapes(ssn)
        attempt = Attempt()
        failed: TaskInfo | None = None
        for task in pending_in_order(ssn, job):
            if ssn.overused(queue):
                break
            if shapes.known_to_fail(task):
                failed = failed or task
                continue
            if not ssn.preemptive(queue, [task]):
                shapes.failed_now(task)  # a task of the same shape is refused alike
                failed = failed or task
                continue
            stmt = shapes.try_room(task, find)
            if stmt is not None:
                attempt.statements.append(stmt)
            else:
                failed = failed or task
        if attempt.finish(ssn, job):
            return True
        if failed is not None and note:
            why = finder.why_no_room(failed, queue=queue, where="in other queues", owners=owners)
            ssn.note_wait(job.key, DETAIL, why)
        return False
