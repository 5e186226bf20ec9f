"""The plain preempt and reclaim actions, as they were before they learned to skip work
(issue 14): every pending task scans every node and asks the plugins about every candidate.

Kept in the test tree as the reference that ``test_sched_differential`` compares the fast
actions with: on random clusters both must decide the same binds, evictions and pipelined tasks.
Nothing here is used by the scheduler. See ``scheduler/actions/preempt.py`` for the algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from caldera.api.resources import Resources
from scheduler.actions.room import (
    Attempt,
    eligible,
    node_without,
    pending_in_order,
)
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})  # Volcano's

VictimChooser = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]


def _fits(ssn: Session, queue: QueueInfo, task: TaskInfo, node: NodeInfo) -> bool:
    # The queue must be able to take the task (not overused, allocatable: Volcano's
    # preemptorFitsOnNode), or the room made would go unused: allocate would refuse the task
    # next session, the victim would come back, and preempt would evict it again.
    return (
        not ssn.overused(queue)
        and ssn.allocatable(queue, task)
        and task.init_resreq.less_equal(node.future_idle())
    )


def make_room(
    ssn: Session,
    preemptor: TaskInfo,
    *,
    queue: QueueInfo,
    candidate: Callable[[TaskInfo], bool],
    choose: VictimChooser,
    reason: str,
    use_free: bool = True,
) -> Statement | None:
    """Evict victims on one node so that ``preemptor`` fits, and pipeline it there; with
    ``use_free`` a node where it fits already is taken without evicting anything.

    Returns the statement holding those evictions and the pipelining (not committed), or None
    when no node works, in which case nothing changed.
    """
    options: list[tuple[bool, float, str, NodeInfo, list[TaskInfo]]] = []
    for node in ssn.nodes.values():
        if not node.ready:
            continue
        candidates = [t for t in node.tasks.values() if candidate(t)]
        fits_now = preemptor.init_resreq.less_equal(node.future_idle())
        if not candidates and not (fits_now and use_free):
            continue
        # Predicates see the node as if the candidates were gone (pod count, host ports);
        # the copy is only built for nodes that fail as they are.
        if ssn.predicate(preemptor, node) is not None and (
            not candidates or ssn.predicate(preemptor, node_without(node, candidates)) is not None
        ):
            continue
        options.append(
            (not fits_now, -ssn.node_score(preemptor, node), node.name, node, candidates)
        )
    options.sort(key=lambda o: o[:3])  # nodes needing no eviction first, then by score

    victim_key = ssn.victim_order_key(preemptor)
    for _, _, _, node, candidates in options:
        if _fits(ssn, queue, preemptor, node):
            if use_free and ssn.predicate(preemptor, node) is None:
                stmt = ssn.statement()
                stmt.pipeline(preemptor, node.name)
                return stmt
            continue
        victims = choose(preemptor, candidates) if candidates else []
        if not victims:
            continue
        freed = Resources.sum(v.resreq for v in victims)
        if not preemptor.init_resreq.less_equal(node.future_idle() + freed):
            continue  # even every victim would not make room here
        stmt = ssn.statement()
        for victim in sorted(victims, key=victim_key):
            if _fits(ssn, queue, preemptor, node):
                break
            stmt.evict(victim, reason)
        if _fits(ssn, queue, preemptor, node):
            stmt.pipeline(preemptor, node.name)
            return stmt
        stmt.discard()
    return None


def pop_first(ssn: Session, jobs: list[JobInfo]) -> JobInfo:
    """Remove and return the first job in the session's current job order (shares change as
    the action works, so the order is asked afresh each time)."""
    job = min(jobs, key=ssn.job_order_key())
    jobs.remove(job)
    return job


class ReferencePreemptAction:
    """Volcano's preempt action, scanning every node for every task."""

    name = "preempt"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        starving: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if eligible(ssn, job) and ssn.job_starving(job):
                starving.setdefault(job.queue, []).append(job)
        for queue in sorted((ssn.queues[name] for name in starving), key=ssn.queue_order_key()):
            jobs = list(starving[queue.name])
            waiting = list(jobs)
            while waiting:
                self._between_jobs(ssn, queue, pop_first(ssn, waiting))
            for job in jobs:
                self._within_job(ssn, queue, job)

    @staticmethod
    def _between_jobs(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        def candidate(task: TaskInfo) -> bool:
            if task.job == job.key or task.status not in PREEMPTABLE_STATUSES:
                return False
            if task.resreq.is_empty() or not task.preemptable:
                return False
            owner = ssn.jobs.get(task.job)
            return owner is not None and owner.queue == queue.name

        attempt = Attempt()
        for task in pending_in_order(ssn, job):
            if not ssn.job_starving(job):
                break
            stmt = make_room(
                ssn,
                task,
                queue=queue,
                candidate=candidate,
                choose=ssn.preemptable,
                reason="preempt",
            )
            if stmt is not None:
                attempt.statements.append(stmt)
        if ssn.job_pipelined(job):
            attempt.commit()
        else:
            attempt.discard()

    @staticmethod
    def _within_job(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
        def candidate(task: TaskInfo) -> bool:
            return (
                task.job == job.key
                and task.status in PREEMPTABLE_STATUSES
                and not task.resreq.is_empty()
                and task.preemptable
            )

        for task in pending_in_order(ssn, job):
            stmt = make_room(
                ssn,
                task,
                queue=queue,
                candidate=candidate,
                choose=ssn.preemptable,
                reason="preempt",
                use_free=False,  # a swap inside the job, never a plain placement
            )
            if stmt is None:
                break
            stmt.commit()


class ReferenceReclaimAction:
    """Volcano's reclaim action, scanning every node for every task."""

    name = "reclaim"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})

    def execute(self, ssn: Session) -> None:
        waiting: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if eligible(ssn, job) and pending_in_order(ssn, job):
                waiting.setdefault(job.queue, []).append(job)
        while True:
            queues = sorted(
                (ssn.queues[name] for name, jobs in waiting.items() if jobs),
                key=ssn.queue_order_key(),
            )
            queue = next((q for q in queues if not ssn.overused(q)), None)
            if queue is None:
                return
            self._reclaim_for(ssn, queue, pop_first(ssn, waiting[queue.name]))

    @staticmethod
    def _reclaim_for(ssn: Session, queue: QueueInfo, job: JobInfo) -> None:
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

        attempt = Attempt()
        for task in pending_in_order(ssn, job):
            if ssn.overused(queue):
                break
            if not ssn.preemptive(queue, [task]):
                continue
            stmt = make_room(
                ssn,
                task,
                queue=queue,
                candidate=candidate,
                choose=ssn.reclaimable,
                reason="reclaim",
            )
            if stmt is not None:
                attempt.statements.append(stmt)
        if ssn.job_pipelined(job):
            attempt.commit()
        else:
            attempt.discard()
