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

from collections.abc import Mapping
from typing import Any

from scheduler.actions.gang_evict import GangEvictor, gang_arguments
from scheduler.actions.preempt import PREEMPTABLE_STATUSES
from scheduler.actions.room import JobLine, eligible
from scheduler.api.types import JobInfo, TaskInfo
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session


def jobs_by_queue(ssn: Session, *statuses: Any) -> dict[str, list[JobInfo]]:
    """The jobs holding a pod in ``statuses``, by queue: where victims may come from. Indexed
    once per action: the action only evicts and pipelines, so no pod enters those statuses."""
    found: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if job.count(*statuses):
            found.setdefault(job.queue, []).append(job)
    return found


class GangPreemptAction:
    """Volcano's gangpreempt action; see the module docstring."""

    name = "gangpreempt"

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
            kind=CallbackKind.PREEMPTABLE,
            reason=self.name,
            statuses=PREEMPTABLE_STATUSES,
            max_domains=self.max_domains,
            allow_whole=self.allow_whole,
        )
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
