"""The enqueue action: admit Pending jobs (PodGroup phase Pending -> Inqueue), Volcano's way.

Queues take turns in queue order, round-robin; each turn looks at the queue's highest-ordered
job still Pending. A job without minResources is admitted; one with minResources, or with
pods that claim devices through DRA (Caldera's: Volcano admits those without asking, so its
capacity plugin's DRA check never sees them), is admitted when the plugins' enqueueable votes
allow it (overcommit, proportion, ...). Admission calls the
plugins' enqueued callbacks (so the next job sees the resources this one reserved) and sets
the phase to Inqueue, which lets the job controller create the job's pods.

A queue whose ``spec.dequeueStrategy`` is ``fifo`` stops at its first job that is not admitted:
its later jobs stay Pending behind it for the session (``traverse``, the default, goes on to
them, as Volcano's enqueue always does; Volcano's scheduler does not read the field).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from caldera.api.why import WaitStage
from scheduler.api.dra.view import has_claims
from scheduler.api.types import PENDING_PHASES, JobInfo, QueueInfo

if TYPE_CHECKING:
    from scheduler.framework.session import Session

INQUEUE = "Inqueue"


def queue_rounds(
    ssn: Session, jobs: Mapping[str, list[JobInfo]]
) -> tuple[
    list[tuple[Any, int, QueueInfo]],
    dict[str, list[tuple[Any, int, JobInfo]]],
    itertools.count[int],
]:
    """Heaps of queues (queue order) and of each queue's jobs (job order), and a counter that
    keeps entries distinct. Keys are taken as a queue or a job enters, when its plugins give
    keys (the same order as Volcano's priority queues, which compare at each comparison: only
    the queue and the job whose turn it is change, out of their heaps;
    ``Session.job_order_key``, ``Session.queue_order_key``); else they compare then."""
    counter = itertools.count()
    job_key: Callable[[JobInfo], Any] = ssn.job_order_key()
    queue_key: Callable[[QueueInfo], Any] = ssn.queue_order_key()
    job_heaps: dict[str, list[tuple[Any, int, JobInfo]]] = {}
    for name, members in jobs.items():
        heap = [(job_key(j), next(counter), j) for j in members]
        heapq.heapify(heap)
        job_heaps[name] = heap
    queue_heap = [(queue_key(ssn.queues[name]), next(counter), ssn.queues[name]) for name in jobs]
    heapq.heapify(queue_heap)
    return queue_heap, job_heaps, counter


def held_behind(
    ssn: Session, queue: QueueInfo, head: JobInfo, behind: Iterable[JobInfo], stage: WaitStage
) -> None:
    """Note, for each job of the fifo ``queue`` left ``behind`` its ``head``, that it waits
    for the head to pass ``stage`` (enqueue: admitted; allocate: placed) first."""
    verb = "admitted" if stage == WaitStage.ENQUEUE else "placed"
    if not ssn.explain:
        return
    text = (
        f"queue {queue.name} is fifo (dequeueStrategy): this job waits until job "
        f"{head.key}, ahead of it, is {verb}"
    )
    for job in behind:
        ssn.note_wait(job.key, stage, text)


def _claims_devices(job: JobInfo) -> bool:
    """Whether a pod of the job has DRA claims: the plugins then vote on it even without
    minResources, so that its claims are held to the queues' ``deviceclass/`` limits."""
    return any(has_claims(task.pod) for task in job.tasks.values())


class EnqueueAction:
    """Moves admissible Pending jobs to Inqueue."""

    name = "enqueue"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        pending: dict[str, list[JobInfo]] = {}
        for job in ssn.incremental.unsettled_jobs():  # settled jobs are never Pending
            if job.queue in ssn.queues and job.phase in PENDING_PHASES:
                pending.setdefault(job.queue, []).append(job)
        queue_heap, job_heaps, counter = queue_rounds(ssn, pending)
        queue_key = ssn.queue_order_key()
        while queue_heap:
            _, _, queue = heapq.heappop(queue_heap)
            jobs = job_heaps[queue.name]
            if not jobs:
                continue
            _, _, job = heapq.heappop(jobs)
            unasked = job.min_resources.is_empty() and not _claims_devices(job)
            if unasked or ssn.job_enqueueable(job):
                ssn.job_enqueued(job)
                job.set_phase(INQUEUE)
                ssn.result.podgroup_phase_inqueue.append(job.key)
            elif queue.fifo:
                held_behind(ssn, queue, job, (j for _, _, j in jobs), WaitStage.ENQUEUE)
                continue  # the queue's later jobs wait for this one (dequeueStrategy fifo)
            heapq.heappush(queue_heap, (queue_key(queue), next(counter), queue))
