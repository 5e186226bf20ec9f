"""gangpreempt: a starving gang evicts lower-priority gangs of its own queue, only if it is then
placed whole (Volcano v1.15's gangpreempt action).

Queue by queue in queue order, starving jobs (``session.job_starving``; admitted, valid, in a
known queue) in job order. For each, ``scheduler.actions.gang_evict`` looks for victims among
the Bound and Running pods of other jobs of the same queue whose priority is lower than the
preemptor's (Volcano's rule), that are preemptable and that the preemptable functions of the
deciding tier allow (priority, conformance, cdp, pdb, preemption-toleration, drf ...; gang's
vote is the bundle model), evicts whole victim gangs or their pods above minAvailable, and
commits only when the preemptor is then pipelined: else nothing is evicted.

Arguments (Volcano's): ``maxDomains`` (HyperNodes tried for a hard-topology job, default 8;
at or below 0 means 8) and ``allowWholeBundle`` (whether whole victim gangs may go, default
true).
"""

from __future__ import annotations

from scheduler.actions.gang_evict import GangAction, jobs_by_queue, starving_by_queue
from scheduler.actions.preempt import PREEMPTABLE_STATUSES
from scheduler.actions.room import JobLine
from scheduler.api.types import TaskInfo
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session


class GangPreemptAction(GangAction):
    """Volcano's gangpreempt action; see the module docstring."""

    name = "gangpreempt"
    kind = CallbackKind.PREEMPTABLE
    statuses = frozenset(PREEMPTABLE_STATUSES)

    def execute(self, ssn: Session) -> None:
        starving = starving_by_queue(ssn)
        if not starving:
            return
        evictor = self.evictor(ssn)
        owners = jobs_by_queue(ssn, *PREEMPTABLE_STATUSES)
        for queue in sorted((ssn.queues[name] for name in starving), key=ssn.queue_order_key()):
            waiting = JobLine(ssn, starving[queue.name])
            while waiting:
                job = waiting.pop()
                priority = job.priority

                def lower(task: TaskInfo, priority: int = priority) -> bool:
                    owner = ssn.jobs.get(task.job)
                    return owner is not None and owner.priority < priority

                evictor.try_job(queue, job, owners.get(queue.name, []), lower)
