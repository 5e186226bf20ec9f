"""The allocate action: place pending pods gang by gang (Volcano's allocate).

Queues take turns in queue order (an overused queue drops out); each turn takes the queue's
first job in job order and places its pending pods in task order, in one Statement:

- nodes are filtered: the pod's init request must fit the node's future idle resources
  ("Insufficient cpu"), then every predicate must pass; the fitting nodes are scored
  (node order) and the best one wins, ties going to the node name;
- the pod is allocated when it fits the node's idle resources now, else pipelined (it waits
  for resources being released);
- a pod no node fits records Kubernetes' fit error ("0/3 nodes are available: 2 Insufficient
  cpu, 1 node(s) were unschedulable.") and ends the job's turn;
- once the job is ready with pods left, the job goes back in line after this one pod, so that
  elastic pods beyond minAvailable are shared out between jobs;
- at the end of the turn the statement is committed when the job is ready (the pods bind),
  kept when the job is pipelined, else discarded.

A queue whose ``spec.dequeueStrategy`` is ``fifo`` drops out of the session when its job's
turn ends with the gang neither ready nor pipelined: its later jobs wait behind that one
(``traverse``, the default, moves on to them). Volcano declares the field but its scheduler
does not read it; this is the field's documented meaning (docs/compatibility.md).

Pods held by a scheduling gate are not placed. A pod held only by the queue admission gate
(``caldera.api.gates``) is asked of its queue (``session.allocatable``) at its job's first turn
(``admit_gated``): when the queue takes it, the gate is removed (``session.queue_admitted``)
and the pod is placed in a later session, once the cache shows it ungated; when it does not,
the job's wait record says "queue admission gate: queue q at capability". Either way it gets
no fit error, so no Unschedulable condition (Volcano v1.15's SchedulingGatesQueueAdmission).

Jobs still Pending are skipped, unless the configuration has no enqueue action: then allocate
moves them to Inqueue itself. Jobs the plugins find invalid (gang: too few pods) are skipped,
with their reason as the PodGroup's Unschedulable condition. Best-effort pods (no requests) are
left to backfill.

A job with networkTopology (and the network-topology-aware plugin configured) is placed under
one HyperNode instead (``scheduler.actions.topology``); a soft-mode job that fits under none
is then placed as here. A job with sub-groups (PodGroup subGroupPolicy, a Job's partitions)
is placed sub-group by sub-group, each whole (``scheduler.actions.partitions``).

Speed: the best node comes from a ``scheduler.actions.placer.Placer``, which looks again only
at the nodes that changed since a pod of the same class was placed; and on the live snapshot a
gang's failed, discarded turn is remembered and replayed, not run again, while nothing it
reads has changed (``scheduler.actions.retry``): the same pods, last placements and fit error.
A job's waiting pods in task order are kept with the job while it and the task order stay the
same (``waiting_in_order``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from caldera.api.gates import only_queue_gate
from caldera.api.volcano import PodGroupCondition
from caldera.api.why import WaitStage
from scheduler.actions.enqueue import INQUEUE, held_behind, queue_rounds
from scheduler.actions.partitions import place_with_sub_groups
from scheduler.actions.placer import Placer, fit_error_histogram, fits_idle
from scheduler.actions.retry import Retries
from scheduler.actions.topology import job_constraint, place_in_hypernode
from scheduler.api.subgroups import has_sub_groups
from scheduler.api.types import PENDING_PHASES, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.api.verdicts import FailedTurn
from scheduler.framework.statement import Statement

if TYPE_CHECKING:
    from scheduler.framework.incremental import Incremental
    from scheduler.framework.session import Session

# Kept with a job between sessions (``Incremental.keep_for_job``): its waiting pods in task
# order.
_WAITING_IN_ORDER = "allocate.waiting"


def discard(stmt: Statement) -> None:
    """Discard a statement, remembering each pod's tentative placement (Volcano's
    LastTransaction)."""
    for op in stmt.operations:
        status = TaskStatus.ALLOCATED if op.op == "allocate" else TaskStatus.PIPELINED
        if op.op in ("allocate", "pipeline"):
            op.task.last_transaction = (status, op.node)
    stmt.discard()


def queue_gate_note(queue: QueueInfo) -> str:
    """Why a pod behind the queue admission gate keeps it (the job's wait record)."""
    return f"queue admission gate: queue {queue.name} at capability"


def skip_invalid(ssn: Session, job: JobInfo) -> bool:
    """True (and the reason recorded as the job's condition) when plugins find it invalid."""
    invalid = ssn.job_valid(job)
    if invalid is None:
        return False
    ssn.job_conditions.setdefault(
        job.key,
        PodGroupCondition(
            type="Unschedulable", status="True", reason=invalid.reason, message=invalid.message
        ),
    )
    return True


def waiting_in_order(
    incremental: Incremental,
    job: JobInfo,
    waiting: Mapping[str, TaskInfo],
    signature: tuple[str, ...] | None,
    task_key: Callable[[TaskInfo], Any],
) -> list[TaskInfo]:
    """The job's ``waiting`` (pending) pods that request resources, in task order; kept with
    the job while it and the task order (``Session.task_order_signature``) stay the same:
    a waiting gang asks for the same list session after session."""
    kept = incremental.kept_for_job(job, _WAITING_IN_ORDER)
    if signature is not None and isinstance(kept, tuple) and kept[0] == signature:
        tasks: list[TaskInfo] = kept[1]
        return tasks
    tasks = sorted((t for t in waiting.values() if waits_for_room(t)), key=task_key)
    if signature is not None:
        incremental.keep_for_job(job, _WAITING_IN_ORDER, (signature, tasks))
    return tasks


def waits_for_room(task: TaskInfo) -> bool:
    """A pending pod allocate places: one that requests resources and that no scheduling gate
    holds but, possibly, the queue admission gate (asked of its queue, then skipped)."""
    if task.best_effort:
        return False
    return not task.gated or task.pod is None or only_queue_gate(task.pod)


def admit_gated(
    ssn: Session, queue: QueueInfo, job: JobInfo, tasks: list[TaskInfo]
) -> list[TaskInfo]:
    """The job's pods to place this session: ``tasks`` but those held by the queue admission
    gate, each of which is asked of its queue first, in task order: taken, its gate is removed
    (it is placed in a later session, ungated); refused, the job's wait record says so."""
    if not any(t.gated for t in tasks):
        return tasks
    ungated = []
    for task in tasks:
        if not task.gated:
            ungated.append(task)
        elif ssn.allocatable(queue, task):
            ssn.queue_admitted(task)
        else:
            ssn.note_wait(job.key, WaitStage.ALLOCATE, queue_gate_note(queue))
    return ungated


class AllocateAction:
    """Places pending pods, committing each gang whole."""

    name = "allocate"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        enqueue_here = "enqueue" not in ssn.configured_actions
        by_queue: dict[str, list[JobInfo]] = {}
        pending: dict[str, list[TaskInfo]] = {}
        task_key, signature = ssn.task_order_key(), ssn.task_order_signature()
        # Settled jobs are not Pending and have no pod waiting (scheduler.api.settled).
        for job in ssn.incremental.unsettled_jobs():
            if job.phase in PENDING_PHASES:
                if not enqueue_here:
                    continue
                job.set_phase(INQUEUE)
                ssn.result.podgroup_phase_inqueue.append(job.key)
            # Jobs with no pod to place are passed over before validity is asked: for them
            # it would only set the condition that gang's close sets for every job anyway.
            waiting = job.by_status.get(TaskStatus.PENDING)
            if not waiting or job.queue not in ssn.queues:
                continue
            tasks = waiting_in_order(ssn.incremental, job, waiting, signature, task_key)
            if tasks and not skip_invalid(ssn, job):
                by_queue.setdefault(job.queue, []).append(job)
                pending[job.key] = tasks
        if not by_queue:
            return
        placer = Placer(ssn)
        retries = Retries.of(ssn, placer)
        ordered: dict[str, deque[TaskInfo]] = {}
        queue_heap, job_heaps, counter = queue_rounds(ssn, by_queue)
        queue_key, job_key = ssn.queue_order_key(), ssn.job_order_key()
        while queue_heap:
            _, _, queue = heapq.heappop(queue_heap)
            if ssn.overused(queue):
                continue
            jobs = job_heaps[queue.name]
            if not jobs:
                continue
            _, _, job = heapq.heappop(jobs)
            if job.key not in ordered:
                ordered[job.key] = deque(admit_gated(ssn, queue, job, pending[job.key]))
            turn = ordered[job.key]
            if turn and self._turn(ssn, placer, retries, queue, job, turn):
                heapq.heappush(jobs, (job_key(job), next(counter), job))
            elif queue.fifo and not (ssn.job_ready(job) or ssn.job_pipelined(job)):
                held_behind(ssn, queue, job, (j for _, _, j in jobs), WaitStage.ALLOCATE)
                continue  # the queue's later jobs wait for this one (dequeueStrategy fifo)
            heapq.heappush(queue_heap, (queue_key(queue), next(counter), queue))

    @staticmethod
    def _turn(
        ssn: Session,
        placer: Placer,
        retries: Retries | None,
        queue: QueueInfo,
        job: JobInfo,
        tasks: deque[TaskInfo],
    ) -> bool:
        """One job's turn; True when the job should get another turn."""
        rule = job_constraint(ssn, job)
        if rule is not None:
            if place_in_hypernode(ssn, placer, queue, job, tasks, rule):
                return False
            retries = None  # a soft-mode job placed as here: its turns are not remembered
        if has_sub_groups(job):
            # Partitions: each placed whole, the job committed with minSubGroups of them.
            pending = [t for t in tasks if t.status == TaskStatus.PENDING]
            tasks.clear()
            place_with_sub_groups(ssn, placer, queue, job, pending)
            return False
        # A gang's failed turn that nothing it reads has changed since is replayed, not run
        # (scheduler.actions.retry).
        if retries is not None and retries.replay(queue, job, tasks):
            return False
        record = retries.record(queue, job, tasks) if retries is not None else None
        failed: FailedTurn | None = None
        stmt = ssn.statement()
        again = False
        while tasks:
            task = tasks.popleft()
            if task.status != TaskStatus.PENDING:
                continue
            if not ssn.allocatable(queue, task):
                if record is not None:
                    record.passed_over(task)
                continue
            name, cand = placer.best(task)
            if record is not None:
                record.looked(cand, ssn.nodes)
            if name is None:
                message = fit_error_histogram(len(ssn.nodes), cand.reason_counts)
                job.fit_errors[task.uid] = task.fit_error = message
                failed = record.failed(task, cand) if record is not None else None
                break
            if fits_idle(task.init_resreq, ssn.nodes[name]):
                stmt.allocate(task, name)
            else:
                stmt.pipeline(task, name)
            if record is not None:
                record.placed(task, name)
            if tasks and ssn.job_ready(job):
                again = True
                break
        if ssn.job_ready(job):
            stmt.commit()
            failed = None
        elif not ssn.job_pipelined(job):
            discard(stmt)
        else:
            failed = None
        if retries is not None:
            retries.keep(job, failed)
        return again
