"""gangreclaim: a starving gang of a queue below its share takes whole gangs back from other
queues, only if it is then placed whole (Volcano v1.15's gangreclaim action).

Queues in queue order; a queue that is overused is passed over (and left as soon as it
becomes overused); in it, starving jobs (admitted, valid) in job order. A job's queue must be
allowed to reclaim for its pending pods at all (``session.preemptive``: proportion and capacity
allow it only within the queue's deserved share). Victims are Running, preemptable pods of jobs
in other queues that are reclaimable (``spec.reclaimable`` not false), as every tier's
reclaimable functions allow (proportion keeps a victim queue at its deserved share, capacity
its guarantee, conformance, cdp, pdb, preemption-toleration; gang's vote is the bundle model);
``scheduler.actions.gang_evict`` evicts whole victim gangs or their pods above minAvailable,
victim queues last in queue order first, and commits only when the job is then pipelined.

Arguments as gangpreempt's: ``maxDomains``, ``allowWholeBundle``.
"""

from __future__ import annotations

from scheduler.actions.gang_evict import GangAction, jobs_by_queue, starving_by_queue
from scheduler.actions.reclaim import RECLAIMABLE_STATUSES
from scheduler.actions.room import JobLine, pending_in_order
from scheduler.api.types import TaskInfo
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.why import DETAIL


class GangReclaimAction(GangAction):
    """Volcano's gangreclaim action; see the module docstring."""

    name = "gangreclaim"
    kind = CallbackKind.RECLAIMABLE
    statuses = frozenset(RECLAIMABLE_STATUSES)

    def execute(self, ssn: Session) -> None:
        starving = starving_by_queue(ssn)
        if not starving:
            return
        evictor = self.evictor(ssn)
        by_queue = jobs_by_queue(ssn, *RECLAIMABLE_STATUSES)
        order = ssn.queue_order_key()
        for queue in sorted((ssn.queues[name] for name in starving), key=order):
            others = [
                job
                for name, q in ssn.queues.items()
                if name != queue.name and q.reclaimable
                for job in by_queue.get(name, [])
            ]
            waiting = JobLine(ssn, starving[queue.name])
            while waiting and not ssn.overused(queue):
                job = waiting.pop()
                pending = pending_in_order(ssn, job)
                if not pending:
                    continue
                if not ssn.preemptive(queue, pending):
                    ssn.note_wait(
                        job.key,
                        DETAIL,
                        f"{self.name}: queue {queue.name} may not reclaim for this gang: with "
                        "it, the queue would exceed its deserved share",
                    )
                    continue
                ranked = sorted(ssn.queues.values(), key=order)
                queue_rank = {q.name: i for i, q in enumerate(ranked)}
                evictor.try_job(queue, job, others, _any, queue_rank=queue_rank)


def _any(task: TaskInfo) -> bool:
    """Reclaim has no priority rule: the plugins' reclaimable functions decide."""
    return True
