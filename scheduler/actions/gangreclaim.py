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

from collections.abc import Mapping
from typing import Any

from scheduler.actions.gang_evict import GangEvictor, gang_arguments
from scheduler.actions.gangpreempt import jobs_by_queue
from scheduler.actions.reclaim import RECLAIMABLE_STATUSES
from scheduler.actions.room import JobLine, eligible, pending_in_order
from scheduler.api.types import JobInfo, TaskInfo
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.why import DETAIL


class GangReclaimAction:
    """Volcano's gangreclaim action; see the module docstring."""

    name = "gangreclaim"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.max_domains, self.allow_whole = gang_arguments(self.name, self.arguments)

    def execute(self, ssn: Session) -> None:
        starving: dict[str, list[JobInfo]] = {}
        for job in ssn.jobs.values():
            if eligible(ssn, job) and ssn.job_starving(job):
                starving.setdefault(job.queue, []).append(job)
        if not starving:
            return
        evictor = GangEvictor(
            ssn,
            kind=CallbackKind.RECLAIMABLE,
            reason=self.name,
            statuses=RECLAIMABLE_STATUSES,
            max_domains=self.max_domains,
            allow_whole=self.allow_whole,
        )
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
