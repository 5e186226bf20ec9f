"""proportion: queues share the cluster by weight (Volcano's proportion plugin).

Each queue gets a *deserved* amount of every resource, computed at session open (and kept
with the snapshot, reused while the cluster's total, the queues and their requests are the
same):

    request_q     what the queue's jobs hold plus what their pending tasks ask for
    capability_q  spec.capability; resources it does not list are unlimited, and cpu or memory
                  listed as 0 are unlimited too (Volcano's rule)
    guarantee_q   spec.guarantee.resource
    realcap_q     min(capability_q, max(total - sum of all guarantees, 0) + guarantee_q):
                  the most a queue may ever hold, since other queues' guarantees are reserved

Water-filling, one resource at a time. Picture a water level L rising from 0; a queue of weight
w holds ``w * L``, but never more than its ceiling ``c_q = min(realcap_q, request_q)`` (it stops
filling there) and never less than its guarantee ``g_q``:

    deserved_q(L) = max(min(w_q * L, c_q), g_q)

The level rises until the queues' deserved amounts add up to the cluster's total, or until every
queue has reached its ceiling (then each has all it asked for and the rest stays unassigned).
``deserved_q(L)`` summed over the queues is continuous, piecewise linear and non-decreasing in L,
with breakpoints at ``g_q / w_q`` and ``c_q / w_q``; the level is found exactly (with
fractions) on the segment where the sum crosses the total, and each amount is rounded down to a
whole milli-unit. So two saturated queues of weights 3 and 1 get exactly 3:1 of what is free,
and what a capped or satisfied queue cannot use flows to the others in proportion to their
weights. When the guarantees alone exceed the total, every queue deserves its guarantee.

Volcano reaches the same point by iteration (each round hands out the remainder by weight, caps,
and repeats until nothing changes); computing the limit directly avoids its float drift and its
early stop. Where the two differ is a binding guarantee: Volcano adds weight shares *on top of*
a guarantee in later rounds, order-dependently; here a guarantee is a floor of the queue's share.

Callbacks, following Volcano's pkg/scheduler/plugins/proportion/proportion.go:
- queue order: higher ``spec.priority`` first, then the lower share (the largest
  ``allocated / deserved`` over the resources);
- overused: ``deserved <= allocated`` in every resource (Volcano's ``LessEqual``);
- allocatable: ``allocated + task request <= deserved`` in every resource the task requests
  (Volcano's ``queueAllocatable`` in pkg/scheduler/plugins/proportion/proportion.go). Since
  deserved is capped by what a queue asks for and fills the cluster, this limits a queue only
  where another queue asks for the same resources; it is what keeps the room reclaim frees for
  one queue from being handed back to the queue it was taken from;
- job enqueueable: the queue must be open, and a job with minResources needs
  ``minResources + allocated + inqueue - elastic <= realcap`` (resources realcap does not list
  are unbounded), otherwise the PodGroup gets the Normal event ``Unschedulable`` "queue resource
  quota insufficient"; an enqueued job's minResources count as inqueue for the rest of the
  session;
- preemptive: a queue may reclaim for tasks only while it stays within its deserved share once
  it has them (``allocated + request <= deserved`` in every resource they request; Volcano's
  preemptive function);
- reclaimable: a victim only while its queue stays at or above what it deserves, after losing
  it, of some resource the victim requests (see ``reclaimable``).

Together the last two make reclaim settle: a queue that reclaims ends at or below its deserved
share and one that loses a task stays at or above it, so neither can undo the other's gain.

Allocated amounts follow the session's allocations, pipelinings and evictions through the
allocate handlers, so the order and the checks see every decision as it is taken.

Queue quota by DeviceClass (``proportion.DynamicResourceAllocationEnable``, a Caldera argument
after capacity's): ``deviceclass/<class>`` in a queue's capability caps the devices its pods'
DRA claims hold (``scheduler.plugins.dra_quota``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.job_sums import by_queue
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import QueueFigures, Session
from scheduler.plugins import dra_quota
from scheduler.why import gate_text

# Names Volcano's Resource does not track as resources (see drf).
UNTRACKED = ("pods", "ephemeral-storage", "storage")
QUOTA_EVENT = "queue resource quota insufficient"


@dataclass(slots=True)
class QueueAttr:
    """What proportion knows about one queue in a session (readable for metrics)."""

    name: str
    weight: int
    guarantee: Resources
    capability: Resources | None  # None: unlimited; cpu/memory <= 0 already dropped
    real_capability: Resources = field(default_factory=Resources)
    request: Resources = field(default_factory=Resources)
    allocated: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    elastic: Resources = field(default_factory=Resources)
    deserved: Resources = field(default_factory=Resources)
    # The share as last derived, and the two vectors it was derived from (compared by
    # identity: both are immutable and replaced, never changed).
    _share: tuple[float, Resources | None, Resources | None] = field(
        default=(0.0, None, None), init=False, repr=False, compare=False
    )

    @property
    def share(self) -> float:
        """``queue_share(allocated, deserved)``, derived when asked for: the allocate handlers
        change ``allocated`` far more often than the queue order asks for the share."""
        share, allocated, deserved = self._share
        if allocated is not self.allocated or deserved is not self.deserved:
            share = queue_share(self.allocated, self.deserved)
            self._share = (share, self.allocated, self.deserved)
        return share


class Claim(NamedTuple):
    """One queue's stake in one resource for ``water_fill`` (a tuple: sessions build one per
    queue and resource whenever a request changes)."""

    weight: int
    ceiling: int  # min(real capability, request)
    guarantee: int = 0


def _scaled_amounts(claims: Sequence[Claim], level: Fraction) -> list[int]:
    """Each claim's amount at ``level`` (its weight times the level, between its guarantee and
    its ceiling), times the level's denominator: integers, so a session builds no Fraction
    per claim (the simulator water-fills every session), and exact, as Fractions would be."""
    num, den = level.numerator, level.denominator
    return [max(min(c.weight * num, c.ceiling * den), c.guarantee * den) for c in claims]


def water_fill(total: int, claims: Sequence[Claim]) -> list[int]:
    """Deserved amounts of one resource, in the order of ``claims`` (module docstring)."""
    full = [max(c.ceiling, c.guarantee) for c in claims]
    if sum(full) <= total:
        return full
    if sum(c.guarantee for c in claims) >= total:
        return [c.guarantee for c in claims]
    points = sorted(
        {Fraction(c.guarantee, c.weight) for c in claims}
        | {Fraction(c.ceiling, c.weight) for c in claims}
    )

    def filled(level: Fraction) -> Fraction:
        return Fraction(sum(_scaled_amounts(claims, level)), level.denominator)

    # The first breakpoint at which the queues hold the total exists: at the last one every
    # queue is at max(ceiling, guarantee), and those add up to more than the total.
    lo, hi = 0, len(points) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if filled(points[mid]) >= total:
            hi = mid
        else:
            lo = mid + 1
    high = points[lo]
    low = points[lo - 1] if lo > 0 else Fraction(0)
    low_sum, high_sum = filled(low), filled(high)
    # Linear between consecutive breakpoints: interpolate the exact level.
    level = (
        high
        if high_sum == low_sum
        else low + (total - low_sum) * (high - low) / (high_sum - low_sum)
    )
    return [scaled // level.denominator for scaled in _scaled_amounts(claims, level)]


# What proportion sums per queue, in this order (``job_figures``).
ALLOCATED, PENDING, INQUEUE, ELASTIC = range(4)


def job_figures(job: JobInfo) -> tuple[Resources, Resources, Resources, Resources]:
    """What a job adds to its queue's sums: what it holds, what its pending pods ask for (the
    two make up the queue's request), ``job_inqueue``, and what it holds beyond its
    minResources."""
    return (
        job.allocated,
        Resources.sum(t.resreq for t in job.tasks_in(TaskStatus.PENDING)),
        job_inqueue(job),
        job.allocated.sub_clamped(job.min_resources),
    )


def job_inqueue(job: JobInfo) -> Resources:
    """Resources an admitted job has reserved but not yet taken (Volcano's inqueue)."""
    if job.phase == "Inqueue":
        return job.min_resources
    if (
        job.phase == "Running"
        and not job.min_resources.is_empty()
        and job.count(*ALLOCATED_STATUSES) >= job.min_available
    ):
        return job.min_resources.sub_clamped(job.allocated)
    return Resources()


def queue_share(allocated: Resources, deserved: Resources) -> float:
    """The largest ``allocated / deserved`` over the resources (a resource deserved 0 counts 1
    once held, Volcano's ``helpers.Share``). A resource only ``deserved`` lists is a share
    of 0, so only ``allocated``'s are looked at."""
    share = 0.0
    for name, used in allocated.items():
        limit = deserved.get(name)
        part = (0.0 if used <= 0 else 1.0) if limit <= 0 else used / limit
        share = max(share, part)
    return share


def tracked(resources: Resources) -> Resources:
    """``resources`` without the names Volcano does not track (the same vector when it lists
    none of them, as pods' requests seldom do)."""
    if any(name in resources for name in UNTRACKED):
        return resources.without(*UNTRACKED)
    return resources


def tracked_capability(queue: QueueInfo) -> Resources | None:
    """A queue's spec.capability as the queue plugins read it: None for no limit, the resources
    Volcano does not track dropped, and cpu or memory listed as 0 or less unlimited."""
    if queue.capability is None:
        return None
    kept = {
        name: amount
        for name, amount in tracked(queue.capability).items()
        if not (name in ("cpu", "memory") and amount <= 0)
    }
    return Resources(kept)


# Kept with the snapshot (``Incremental.memo_for_cluster``): the queues' limits, their
# deserved shares.
_LIMITS = "proportion.limits"
_DESERVED = "proportion.deserved"


@dataclass(frozen=True, slots=True, eq=False)
class QueueLimits:
    """What proportion reads of a queue beyond its jobs: the parts of ``QueueAttr`` that
    depend only on the queues and the cluster's total. Compared by identity, as a kept
    derivation's input."""

    name: str
    weight: int
    guarantee: Resources
    capability: Resources | None  # None: unlimited; cpu/memory <= 0 already dropped
    real_capability: Resources


def _limits_read(queue: QueueInfo) -> tuple[object, ...]:
    """What ``queue_limits`` reads of a queue, listed zeros included."""
    capability = None if queue.capability is None else queue.capability.items()
    return queue.name, queue.weight, capability, queue.guarantee.items()


def queue_limits(total: Resources, queues: Sequence[QueueInfo]) -> tuple[QueueLimits, ...]:
    """Each queue's weight, guarantee, capability and real capability (module docstring),
    in the order of ``queues``; ``total`` without the untracked resources."""
    guarantees = [tracked(q.guarantee) for q in queues]
    spare = total.sub_clamped(Resources.sum(guarantees))
    limits = []
    for queue, guarantee in zip(queues, guarantees, strict=True):
        capability = tracked_capability(queue)
        real = spare + guarantee
        if capability is not None:
            names = set(real.names()) | set(capability.names())
            real = Resources(
                {
                    n: min(real.get(n), capability.get(n)) if n in capability else real.get(n)
                    for n in names
                }
            )
        limits.append(QueueLimits(queue.name, max(queue.weight, 1), guarantee, capability, real))
    return tuple(limits)


def deserved(
    total: Resources, limits: Sequence[QueueLimits], requests: Sequence[Resources]
) -> tuple[Resources, ...]:
    """Each queue's deserved share, water-filled resource by resource (module docstring), in
    the order of ``limits``; ``requests``: what each queue asks for, in the same order."""
    names: set[str] = set(total.names())
    for limit, request in zip(limits, requests, strict=True):
        names |= set(request.names()) | set(limit.guarantee.names())
    amounts: list[dict[str, int]] = [{} for _ in limits]
    for name in sorted(names):
        claims = [
            Claim(
                weight=limit.weight,
                ceiling=max(
                    min(
                        request.get(name),
                        limit.real_capability.get(name)
                        if name in limit.real_capability
                        else request.get(name),
                    ),
                    0,
                ),
                guarantee=max(limit.guarantee.get(name), 0),
            )
            for limit, request in zip(limits, requests, strict=True)
        ]
        for share, amount in zip(amounts, water_fill(max(total.get(name), 0), claims), strict=True):
            share[name] = amount
    return tuple(Resources(share) for share in amounts)


class ProportionPlugin:
    """Weighted queue shares with capability, guarantee and the water-filling deserved share."""

    name = "proportion"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.total = Resources()
        self.queue_attrs: dict[str, QueueAttr] = {}
        self._ssn: Session | None = None
        self._dra: dra_quota.DeviceClassQuota | None = None  # with deviceclass/ limits

    # ---- session open: attributes and deserved ------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self.total = total = tracked(ssn.total_resource)
        # What the queues' limits and deserved shares are derived from changes far less often
        # than sessions run: both are kept with the snapshot while their inputs stay the same
        # (``Incremental.memo_for_cluster``).
        queues = tuple(ssn.queues.values())
        inputs: tuple[object, ...] = (total.items(), *map(_limits_read, queues))
        incremental = ssn.incremental
        limits = incremental.memo_for_cluster(_LIMITS, inputs, lambda: queue_limits(total, queues))
        # The queues' sums are kept with the snapshot: only jobs that changed since the last
        # session are looked at again (``Incremental.job_sums``).
        sums = incremental.job_sums(self.name, by_queue, job_figures, 4)
        self.queue_attrs = {}
        for limit in limits:
            allocated = sums.total(limit.name, ALLOCATED)
            self.queue_attrs[limit.name] = QueueAttr(
                name=limit.name,
                weight=limit.weight,
                guarantee=limit.guarantee,
                capability=limit.capability,
                real_capability=limit.real_capability,
                allocated=tracked(allocated),
                request=tracked(allocated + sums.total(limit.name, PENDING)),
                inqueue=sums.total(limit.name, INQUEUE),
                elastic=sums.total(limit.name, ELASTIC),
            )
        requests = tuple(attr.request for attr in self.queue_attrs.values())
        # Compared name by name, listed zeros included: they are listed in what is derived.
        inputs = (total.items(), limits, tuple(r.items() for r in requests))
        shares = incremental.memo_for_cluster(
            _DESERVED, inputs, lambda: deserved(total, limits, requests)
        )
        for attr, share in zip(self.queue_attrs.values(), shares, strict=True):
            attr.deserved = share

        ssn.add_queue_order_fn(self.name, self.queue_order)
        ssn.add_overused_fn(self.name, self.overused)
        ssn.add_allocatable_fn(self.name, self.allocatable)
        ssn.add_job_enqueueable_fn(self.name, self.job_enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.job_enqueued)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_allocate_handler(self.name, self._on_allocate, self._on_deallocate)
        ssn.add_speedups(
            self.name,
            Speedups(
                queue_order_key=self.queue_key,
                victim_screen=self.may_give,
                allocatable_state=self.allocatable_state,
            ),
        )
        self._dra = None
        if self.arguments.boolean("proportion.DynamicResourceAllocationEnable", True):
            capacity = self.arguments.boolean("proportion.DRAConsumableCapacityEnable", True)
            self._dra = dra_quota.register(ssn, self.name, lambda name: [name], capacity=capacity)

    def on_session_close(self, ssn: Session) -> None:
        """Report each queue's deserved share and how much of it is used, for the metrics."""
        for name, attr in self.queue_attrs.items():
            ssn.result.queue_deserved[name] = attr.deserved
            ssn.result.queue_share[name] = attr.share
            ssn.result.queue_figures[name] = QueueFigures(
                weight=attr.weight,
                request=attr.request,
                inqueue=attr.inqueue,
                real_capability=attr.real_capability,
                capability=attr.capability,
                overused=attr.deserved.less_equal(attr.allocated),
            )
        self._ssn = None

    # ---- allocation tracking ------------------------------------------------------------------

    def _attr_of(self, task: TaskInfo) -> QueueAttr | None:
        if self._ssn is None:
            return None
        job = self._ssn.jobs.get(task.job)
        return None if job is None else self.queue_attrs.get(job.queue)

    def _on_allocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is not None:
            attr.allocated = attr.allocated + tracked(task.resreq)

    def _on_deallocate(self, task: TaskInfo) -> None:
        attr = self._attr_of(task)
        if attr is not None:
            attr.allocated = attr.allocated - tracked(task.resreq)

    # ---- callbacks ----------------------------------------------------------------------------

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        """Higher priority first, then the lower share."""
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.queue_attrs.get(left.name), self.queue_attrs.get(right.name)
        ls = la.share if la is not None else 0.0
        rs = ra.share if ra is not None else 0.0
        if ls == rs:
            return 0
        return -1 if ls < rs else 1

    def queue_key(self, queue: QueueInfo) -> tuple[int, float]:
        """``queue_order`` as a sort key."""
        attr = self.queue_attrs.get(queue.name)
        return -queue.priority, attr.share if attr is not None else 0.0

    def overused(self, queue: QueueInfo) -> bool:
        """Deserved <= allocated in every resource."""
        attr = self.queue_attrs.get(queue.name)
        return attr is not None and attr.deserved.less_equal(attr.allocated)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """The queue stays within its deserved share with the task, in every resource the task
        requests (Volcano's ``queueAllocatable``)."""
        return self.preemptive(queue, (task,))

    def allocatable_state(self, queue: QueueInfo) -> tuple[Resources, Resources] | None:
        """What ``allocatable`` reads of the queue: what it holds and deserves."""
        attr = self.queue_attrs.get(queue.name)
        return None if attr is None else (attr.allocated, attr.deserved)

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        """The queue stays within its deserved share with ``tasks`` added, in every resource
        they request."""
        attr = self.queue_attrs.get(queue.name)
        if attr is None:
            return True
        request = tasks[0].resreq if len(tasks) == 1 else Resources.sum(t.resreq for t in tasks)
        allocated, deserved = attr.allocated, attr.deserved
        for name, amount in request.items():  # a loop, not all(): asked per pod and turn
            if (
                amount > 0
                and name not in UNTRACKED
                and allocated.get(name) + amount > deserved.get(name)
            ):
                return False
        return True

    def job_enqueueable(self, job: JobInfo) -> int:
        """Reject jobs of a closed queue or beyond the queue's quota; permit the others."""
        ssn = self._ssn
        queue = ssn.queues.get(job.queue) if ssn is not None else None
        attr = self.queue_attrs.get(job.queue)
        if queue is None or attr is None or not queue.open:
            if ssn is not None and queue is not None:
                ssn.note_wait(
                    job.key,
                    WaitStage.QUEUE,
                    f"queue {queue.name} is {queue.state}: no job in it is admitted until it "
                    "is opened",
                )
            return -1
        if job.min_resources.is_empty():
            return self._devices_enqueueable(job)
        need = tracked(job.min_resources)
        wanted = need + attr.allocated + attr.inqueue - attr.elastic
        if wanted.less_equal(attr.real_capability, missing="unbounded"):
            return self._devices_enqueueable(job)
        if ssn is not None:
            ssn.record_event(
                "PodGroup", job.namespace, job.name, "Normal", "Unschedulable", QUOTA_EVENT
            )
            limit = attr.real_capability
            over = Resources(
                {n: a - limit.get(n) for n, a in wanted.items() if n in limit and a > limit.get(n)}
            )
            ssn.note_wait(
                job.key,
                WaitStage.ENQUEUE,
                gate_text(
                    holder=f"queue {queue.name}",
                    limit=limit,
                    allocated=attr.allocated,
                    reserved=attr.inqueue,
                    need=need,
                    freed_by=over,
                    elastic=attr.elastic,
                ),
            )
        return -1

    def _devices_enqueueable(self, job: JobInfo) -> int:
        """The job's minimal DRA claims within its queue's ``deviceclass/`` limits."""
        why = None if self._dra is None else self._dra.enqueueable(job)
        if why is None:
            return 1
        if self._ssn is not None:
            self._ssn.record_event(
                "PodGroup", job.namespace, job.name, "Normal", "Unschedulable", QUOTA_EVENT
            )
            self._ssn.note_wait(job.key, WaitStage.ENQUEUE, why)
        return -1

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.queue_attrs.get(job.queue)
        if attr is not None:
            attr.inqueue = attr.inqueue + tracked(job.min_resources)
        if self._dra is not None:
            self._dra.enqueued(job)

    def may_give(self, reclaimer: TaskInfo, job: JobInfo) -> bool:
        """Whether ``reclaimable`` could take any task of ``job``: its queue must hold more
        than it deserves of some tracked resource (a victim keeps it at or above its share
        of a resource it requests, after losing a positive amount of it)."""
        attr = self.queue_attrs.get(job.queue)
        if attr is None:
            return False
        return any(
            amount > attr.deserved.get(name)
            for name, amount in attr.allocated.items()
            if name not in UNTRACKED
        )

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Victims whose queue still holds at least what it deserves, after losing them, of
        some resource the victim requests. Judged cumulatively per queue, in the candidates'
        order.

        Counting only the victim's own resources is what keeps reclaim from going in circles:
        a queue that loses a cpu pod while it sits exactly at its deserved memory is below
        its share of what it lost, and would reclaim the pod back next session. Volcano tests
        the queue *before* the loss, in any resource, which has the same hole.
        """
        if self._ssn is None:
            return []
        victims: list[TaskInfo] = []
        remaining: dict[str, Resources] = {}
        for task in candidates:
            job = self._ssn.jobs.get(task.job)
            attr = self.queue_attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            released = tracked(task.resreq)
            after = remaining.get(attr.name, attr.allocated) - released
            if any(
                after.get(name) >= attr.deserved.get(name)
                for name, amount in released.items()
                if amount > 0
            ):
                remaining[attr.name] = after
                victims.append(task)
        return victims
