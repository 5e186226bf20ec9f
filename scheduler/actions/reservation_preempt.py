"""reservation-preempt: a reservation that has waited long enough takes what its gang still
needs on its nodes from the queues' reclaimable resources, with the gang-level contract:
nothing is evicted unless the gang is then placed whole (a Caldera addition, issue 45; part 2
of docs/reservations.md).

Configured after allocate, with the ``reservation`` plugin (whose reservations it reads from
the live snapshot's plugin memory, ``scheduler.plugins.reservation``):

```yaml
actions: "enqueue, allocate, backfill, reservation-preempt"
configurations:
- name: reservation-preempt
  arguments: {after: 30m}
```

For each reservation, oldest first, that is at least ``after`` old (default ``30m``) and whose
gang is admitted and has pods waiting: the victims are Running, preemptable pods on the
reserved nodes, of jobs in queues that are reclaimable (``spec.reclaimable`` not false), whose
job's priority is not above the gang's, as every tier's reclaimable functions allow them
(proportion keeps a victim queue at its deserved share, capacity its guarantee, pdb, cdp,
conformance, preemption-toleration); the lowest priority go first (victim order). The
eviction engine of gangpreempt and gangreclaim (``scheduler.actions.gang_evict``) evicts whole
victim gangs or their pods above minAvailable, on the reserved nodes only, and commits only
when the gang is then pipelined there; otherwise nothing is evicted and the gang's wait
record says so. Arguments as gangreclaim's (``maxDomains`` aside: the one domain is the
reservation's nodes): ``allowWholeBundle``. The session asks for another when the next
reservation comes of age, so that a quiet cluster, whose sessions are skipped, does not
hold it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caldera.api.duration import DurationError, parse_duration
from caldera.api.meta import parse_time
from scheduler.actions.gang_evict import GangAction, jobs_by_queue
from scheduler.actions.reclaim import RECLAIMABLE_STATUSES
from scheduler.actions.room import eligible, pending_in_order
from scheduler.api.types import TaskInfo
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.plugins.reservation import Memory, ReservationPlugin

AFTER = "after"


class ReservationPreemptAction(GangAction):
    """Ends a long reservation's wait by reclaiming on its nodes; see the module docstring."""

    name = "reservation-preempt"
    kind = CallbackKind.RECLAIMABLE
    statuses = frozenset(RECLAIMABLE_STATUSES)

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        super().__init__(arguments)
        text = self.arguments.get(AFTER, "30m")
        try:
            self.after = parse_duration(str(text))
        except DurationError as exc:
            raise ValueError(f"action {self.name}: argument {AFTER}: {exc}") from None
        if self.after < 0:
            raise ValueError(f"action {self.name}: argument {AFTER} must not be negative")

    def execute(self, ssn: Session) -> None:
        memory = ssn.cluster.plugin_memory.get(ReservationPlugin.name)
        if not isinstance(memory, Memory) or not memory.records:
            return
        evictor = None
        owners = None
        by_since = sorted(memory.records.items(), key=lambda kv: (kv[1][1].since, kv[0]))
        for key, (_, record) in by_since:
            job = ssn.jobs.get(key)
            if job is None or not record.nodes or not record.since:
                continue
            age = (ssn.now - parse_time(record.since)).total_seconds()
            if age < self.after:
                # A quiet cluster's sessions are skipped (scheduler.quiet): ask for one then.
                ssn.result.revisit(self.after - age)
                continue
            queue = ssn.queues.get(job.queue)
            if queue is None or not eligible(ssn, job) or not pending_in_order(ssn, job):
                continue
            if evictor is None or owners is None:
                evictor = self.evictor(ssn)
                by_queue = jobs_by_queue(ssn, *RECLAIMABLE_STATUSES)
                owners = [
                    j
                    for name, q in ssn.queues.items()
                    if q.reclaimable
                    for j in by_queue.get(name, [])
                ]
            priority = job.priority

            def not_above(task: TaskInfo, priority: int = priority) -> bool:
                owner = ssn.jobs.get(task.job)
                return owner is not None and owner.priority <= priority

            evictor.try_job(queue, job, owners, not_above, domains=[frozenset(record.nodes)])
