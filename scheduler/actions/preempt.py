"""preempt: starving jobs take resources from lower-ranked jobs of their own queue (Volcano's).

Between jobs, queue by queue in queue order, starving jobs (``session.job_starving``; a job of a
Pending PodGroup or an invalid job is never a preemptor) in job order:

    for each pending task of the job, in task order, while the job is still starving:
        nodes: those whose predicates pass once every candidate victim on them is gone
               (predicates never check resources), ordered: nodes where the task already fits
               first, then by node score
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

Pipelined tasks are not bound: they get their node in a later session, once the victims are
gone. Best-effort tasks (no request) need no room and are left to backfill, as are pods held by
scheduling gates.

The helpers here are shared with ``reclaim``, which uses the same node walk with other
candidates and ``session.reclaimable``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from caldera.api.resources import Resources
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})  # Volcano's

VictimChooser = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]


def wants_room(task: TaskInfo) -> bool:
    """A pending task that needs resources and is not held by a scheduling gate."""
    if task.best_effort:
        return False
    return task.pod is None or not task.pod.spec.scheduling_gates


def node_without(node: NodeInfo, leaving: Sequence[TaskInfo]) -> NodeInfo:
    """A copy of ``node`` as it would be without ``leaving`` (for predicates only)."""
    gone = {t.uid for t in leaving}
    copy = NodeInfo(
        name=node.name,
        allocatable=node.allocatable,
        node=node.node,
        ready=node.ready,
        unschedulable=node.unschedulable,
        max_pods=node.max_pods,
    )
    for task in node.tasks.values():
        if task.uid not in gone:
            copy.add_task(task)
    return copy


def _fits(ssn: Session, queue: QueueInfo, task: TaskInfo, node: NodeInfo) -> bool:
    # The queue must be able to take the task (not overused, allocatable: Volcano's
    # preemptorFitsOnNode), or the room made would go unused: allocate would refuse the task
    # next session, the victim would come back, and preempt would evict it again.
    return (
        not ssn.overused(queue)
        and ssn.allocatable(queue, task)
        and task.init_resreq.less_equal(node.future_idle())
    )


class Attempt:
    """The statements of one job's attempt, one per placed task, committed or discarded
    together (each statement holds only work that succeeded on its node)."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def commit(self) -> None:
        for stmt in self.statements:
            stmt.commit()
        self.statements.clear()

    def discard(self) -> None:
        for stmt in reversed(self.statements):
            stmt.discard()
        self.statements.clear()


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

    victim_key = ssn.victim_order_key()
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


def pending_in_order(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that need room, in task order."""
    tasks = [t for t in job.tasks_in(TaskStatus.PENDING) if wants_room(t)]
    return sorted(tasks, key=ssn.task_order_key())


def eligible(ssn: Session, job: JobInfo) -> bool:
    """A job that may take others' resources: admitted, in a known queue, valid."""
    return job.phase != "Pending" and job.queue in ssn.queues and ssn.job_valid(job) is None


def pop_first(ssn: Session, jobs: list[JobInfo]) -> JobInfo:
    """Remove and return the first job in the session's current job order (shares change as
    the action works, so the order is asked afresh each time)."""
    job = min(jobs, key=ssn.job_order_key())
    jobs.remove(job)
    return job


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
