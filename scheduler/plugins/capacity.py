"""capacity: elastic queue quotas per resource, flat or hierarchical (Volcano's capacity plugin,
the successor of proportion for queues that set ``spec.deserved``).

Where proportion derives a queue's share from its weight, capacity reads it from the queue:
``deserved`` (what the queue keeps when others want resources back), ``guarantee`` (reserved
for it: nobody else may use it, and it is never reclaimed) and ``capability`` (the most it may
ever hold), per resource. With the switch ``enableHierarchy: true`` queues form a tree through
``spec.parent`` under ``root``: a queue is held to its ancestors' limits too, and only leaf
queues run jobs. ``scheduler.plugins.queue_tree`` derives each queue's effective deserved,
capability and *real capability* (what it may hold once the others' guarantees are set aside).

A queue may hold more than it deserves while others leave resources idle (it *borrows*); when
a queue below its deserved share wants them back, reclaim takes the borrowed pods:

- allocatable: the queue is open, attached to the tree and (with hierarchy) a leaf, and with the
  task it stays within its real capability, and so does each of its ancestors, in every resource
  the task requests (Volcano's ``checkQueueAllocatableHierarchically``); no overused function:
  a queue keeps getting free resources beyond its deserved share;
- job enqueueable: the same queue checks (a refusal notes why the job waits); a job with
  minResources needs ``minResources + allocated + inqueue - elastic <= real capability`` in its
  queue and each ancestor, in the resources minResources names, else the PodGroup gets the
  Normal event ``Unschedulable`` "queue resource quota insufficient: insufficient cpu" (v1.13's
  wording) and the wait record gives the numbers; an enqueued job's minResources count as
  inqueue, up the tree, for the rest of the session;
- preemptive (may the queue reclaim for these tasks): it is open, attached and a leaf, stays
  within its real capability with them, and deserves some resource they request, and with them
  stays within what it deserves of every such resource (resources it deserves nothing of are not
  compared, as Volcano's newer zero filter does);
- reclaimable: a victim shares a resource with the reclaimer's request; its queue keeps at least
  its guarantee without it; and either the queue deserves none of what the victim requests
  (Volcano's "immediate victim": a queue without deserved is best effort), or the queue still
  holds at least its deserved amount of some resource the victim requests once it has lost
  the victim. Judged cumulatively per queue, in the candidates' order;
- with hierarchy, the argument ``ancestorReclaimLevel`` (Volcano's; 0, the default, adds
  nothing) lets a queue reclaim on behalf of an ancestor up to that many levels above it, and
  holds a victim's ancestors where its branch parts from the reclaimer's to their deserved
  amounts too (``scheduler.plugins.capacity_reclaim``; the candidates are then judged in
  victim order);
- queue order: higher ``spec.priority`` first; then the lower share (the largest
  ``allocated / deserved`` over the resources the queue deserves; a queue that deserves nothing
  has share 1, and of two equal shares the one that deserves something goes first). With
  hierarchy, leaves come before inner queues, and two leaves are ordered by the shares of their
  branches just below the ancestor they share (Volcano's ``getQueueLevel``);
- victim queue order (with hierarchy): of two queues losing pods to a reclaimer, the one whose
  deepest ancestor shared with the reclaimer's queue lies deeper in the tree loses first (a
  sibling before a cousin), Volcano's; queues as close as each other fall back to the reverse
  of queue order (``Session.victim_queue_order``).

With Volcano's SchedulingGatesQueueAdmission on (``caldera.api.gates``), a pod that opted in
and that its queue took holds room in the queue and up the tree from then until it is placed,
as Volcano's reserved cache: pods that wait ungated for a node (a cluster autoscaler adds it)
are not overtaken by others of the queue. The room is held only while the feature is on, and
at a session's start for at most what the queue may hold (Volcano holds it for every pod with
the annotation, gated or not, however many).

Reclaim settles: a reclaiming queue ends within its deserved amount of everything the pod asks
for that it deserves, and a queue that loses a pod keeps its deserved amount of something the
pod asked for, so neither can take the pod back. Volcano judges a victim's queue before the
loss ("above deserved"), which can send a pod back and forth (docs/compatibility.md).

Allocated amounts follow the session's allocations, pipelinings and evictions through the
allocate handlers, up the tree, so the order and the checks see every decision as it is taken.
Queue quota by DeviceClass (``capacity.DynamicResourceAllocationEnable``, Volcano v1.15's):
``deviceclass/<class>`` in a queue's capability caps the devices its pods' DRA claims hold
(``scheduler.plugins.dra_quota``).
At session close the plugin reports each queue's deserved share, share, capability and real
capability for the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from caldera.api.gates import opted_in
from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins import dra_quota
from scheduler.plugins.capacity_reclaim import (
    ReclaimScope,
    ancestors_within,
    keeps_deserved,
    reclaim_level,
    within_deserved,
)
from scheduler.plugins.proportion import UNTRACKED, job_inqueue, tracked_capability
from scheduler.plugins.queue_tree import QueueLimits, QueueTerms, QueueTree, queue_tree
from scheduler.why import gate_text

HIERARCHY_SWITCH = "enableHierarchy"
QUOTA_EVENT = "queue resource quota insufficient"
DRA_EXCEEDED = "dra-resource-exceeded"  # Volcano's reason for a job over a deviceclass/ limit


@dataclass
class CapacityAttr:
    """What capacity knows about one queue in a session."""

    limits: QueueLimits
    allocated: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    elastic: Resources = field(default_factory=Resources)
    share: float = 0.0
    # Held for pods its queue took that wait ungated for a node (queue admission gates), in
    # this queue or below it.
    reserved: Resources = field(default_factory=Resources)

    @property
    def name(self) -> str:
        return self.limits.name


def capacity_share(allocated: Resources, deserved: Resources) -> float:
    """The largest ``allocated / deserved`` over the resources the queue deserves; 1 for a
    queue that deserves nothing (Volcano's best-effort queue)."""
    if deserved.is_empty():
        return 1.0
    return max(
        (allocated.get(name) / amount for name, amount in deserved.items() if amount > 0),
        default=1.0,
    )


def _compare_shares(left: CapacityAttr, right: CapacityAttr) -> int:
    """The lower share first; of equal shares, a queue that deserves something first."""
    if left.share != right.share:
        return -1 if left.share < right.share else 1
    left_has, right_has = not left.limits.deserved.is_empty(), not right.limits.deserved.is_empty()
    if left_has == right_has:
        return 0
    return -1 if left_has else 1


def over_limit(need: Resources, held: Resources, limit: Resources) -> Resources:
    """By how much ``held + need`` exceeds ``limit`` in the resources ``need`` asks for (a
    resource ``limit`` does not list may not be held at all); empty when it fits."""
    return Resources(
        {
            name: held.get(name) + amount - limit.get(name)
            for name, amount in need.items()
            if amount > 0 and held.get(name) + amount > limit.get(name)
        }
    )


def insufficient_message(over: Resources) -> str:
    """Volcano v1.13's event text: "queue resource quota insufficient: insufficient cpu"."""
    names = ", ".join(f"insufficient {name}" for name in over.names())
    return f"{QUOTA_EVENT}: {names}" if names else QUOTA_EVENT


def shared_depth(left: Sequence[str], right: Sequence[str]) -> int:
    """How many leading ancestors (from the top's child down) two queues share: Volcano's
    ``getQueueLevel``, whose ancestor lists also hold the root."""
    depth = 0
    for mine, theirs in zip(left, right, strict=False):
        if mine != theirs:
            break
        depth += 1
    return depth


class CapacityPlugin:
    """Per-resource deserved, guarantee and capability, with borrowing and reclaim."""

    name = "capacity"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        # ancestorReclaimLevel (scheduler.plugins.capacity_reclaim); refused here when bad, so
        # at configuration load.
        self.level = reclaim_level(arguments)
        self.hierarchy = False
        self._ancestor_level = 0  # the level in force: 0 without hierarchy
        self.tree = QueueTree(limits={}, detached={})
        self.attrs: dict[str, CapacityAttr] = {}
        self._chains: dict[str, list[CapacityAttr]] = {}
        self._ssn: Session | None = None
        self._dra: dra_quota.DeviceClassQuota | None = None  # with deviceclass/ limits
        # Queue admission gates (SchedulingGatesQueueAdmission): the room held for each pod
        # its queue took that is not placed yet, by uid: (its queue's attr, the amount).
        self._reserved: dict[str, tuple[CapacityAttr, Resources]] = {}
        # Those of them the session placed, kept to be held again if the placement is undone.
        self._placed: dict[str, tuple[CapacityAttr, Resources]] = {}

    # ---- session open -------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self._ssn = ssn
        self.hierarchy = ssn.plugin_switch(self.name, HIERARCHY_SWITCH, False)
        self._ancestor_level = self.level if self.hierarchy else 0
        terms = [
            QueueTerms(
                name=queue.name,
                parent=queue.parent,
                deserved=queue.deserved.without(*UNTRACKED),
                guarantee=queue.guarantee.without(*UNTRACKED),
                capability=tracked_capability(queue),
            )
            for queue in ssn.queues.values()
        ]
        total = ssn.total_resource.without(*UNTRACKED)
        self.tree = queue_tree(terms, total, hierarchy=self.hierarchy)
        self.attrs = {name: CapacityAttr(limits) for name, limits in self.tree.limits.items()}
        self._chains = {
            name: [attr, *(self.attrs[a] for a in reversed(attr.limits.ancestors))]
            for name, attr in self.attrs.items()
        }
        for job in ssn.jobs.values():
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            allocated = job.allocated.without(*UNTRACKED)
            inqueue = job_inqueue(job).without(*UNTRACKED)
            elastic = job.allocated.sub_clamped(job.min_resources).without(*UNTRACKED)
            for member in self._chain(attr):
                member.allocated = member.allocated + allocated
                member.inqueue = member.inqueue + inqueue
                member.elastic = member.elastic + elastic
        for attr in self.attrs.values():
            attr.share = capacity_share(attr.allocated, attr.limits.deserved)
        self._reserved, self._placed = {}, {}
        if ssn.queue_admission_gates:
            self._hold_for_ungated(ssn)

        ssn.add_queue_order_fn(self.name, self.queue_order)
        if self.hierarchy:
            ssn.add_victim_queue_order_fn(self.name, self.victim_queue_order)
        ssn.add_allocatable_fn(self.name, self.allocatable)
        ssn.add_job_enqueueable_fn(self.name, self.job_enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.job_enqueued)
        ssn.add_preemptive_fn(self.name, self.preemptive)
        ssn.add_reclaimable_fn(self.name, self.reclaimable)
        ssn.add_allocate_handler(self.name, self._on_allocate, self._on_deallocate)
        ssn.add_speedups(self.name, Speedups(victim_screen=self.may_give))
        self._dra = None
        if self.arguments.boolean("capacity.DynamicResourceAllocationEnable", True):
            capacity = self.arguments.boolean("capacity.DRAConsumableCapacityEnable", True)
            self._dra = dra_quota.register(ssn, self.name, self._queue_chain, capacity=capacity)

    def _queue_chain(self, name: str) -> list[str]:
        """The queue and, with the hierarchy, its ancestors (their device class limits hold
        too)."""
        attr = self.attrs.get(name)
        if attr is None or not self.hierarchy:
            return [name]
        return [name, *reversed(attr.limits.ancestors)]

    def _chain(self, attr: CapacityAttr) -> list[CapacityAttr]:
        """The queue and its ancestors, the queue first."""
        return self._chains[attr.name]

    def on_session_close(self, ssn: Session) -> None:
        """Report each queue's limits and share, for the metrics."""
        for name, attr in self.attrs.items():
            ssn.result.queue_deserved[name] = attr.limits.deserved
            ssn.result.queue_share[name] = capacity_share(attr.allocated, attr.limits.deserved)
            ssn.result.queue_capability[name] = attr.limits.capability
            ssn.result.queue_real_capability[name] = attr.limits.real_capability
        self._ssn = None

    # ---- allocation tracking ------------------------------------------------------------------

    def _attr_of(self, task: TaskInfo) -> CapacityAttr | None:
        job = self._ssn.jobs.get(task.job) if self._ssn is not None else None
        return None if job is None else self.attrs.get(job.queue)

    def _on_allocate(self, task: TaskInfo) -> None:
        held = self._reserved.pop(task.uid, None)
        if held is not None:  # counted as allocated from now on
            self._hold(held[0], Resources() - held[1])
            self._placed[task.uid] = held
        attr = self._attr_of(task)
        if attr is not None:
            self._move(attr, task.resreq.without(*UNTRACKED))

    def _on_deallocate(self, task: TaskInfo) -> None:
        held = self._placed.pop(task.uid, None)
        if held is not None:  # a placement undone: the pod holds its room again
            self._reserved[task.uid] = held
            self._hold(held[0], held[1])
        attr = self._attr_of(task)
        if attr is not None:
            self._move(attr, Resources() - task.resreq.without(*UNTRACKED))

    def _hold_for_ungated(self, ssn: Session) -> None:
        """A pod that opted in and has no gate left passed its queue's check in an earlier
        session: it holds its room until it is placed (Volcano's reserved cache). Oldest job
        first, and only as much as the queue may hold: pods that never had the gate (created
        while the webhook did not give it) or a capability lowered since must not hold more,
        or they would hold each other out for good (Volcano's can). Settled jobs have no pod
        waiting."""
        jobs = sorted(ssn.incremental.unsettled_jobs(), key=lambda j: (j.creation, j.key))
        for job in jobs:
            attr = self.attrs.get(job.queue)
            if attr is None:
                continue
            waiting = job.tasks_in(TaskStatus.PENDING)
            for task in sorted(waiting, key=lambda t: t.key):
                if task.pod is None or task.gated or not opted_in(task.pod):
                    continue
                if self._fits_chain(attr, task.resreq):
                    self._reserve(attr, task)

    def _reserve(self, attr: CapacityAttr, task: TaskInfo) -> None:
        """Hold room for ``task`` in its queue and up the tree until it is placed."""
        if task.uid not in self._reserved:
            amount = task.resreq.without(*UNTRACKED)
            self._reserved[task.uid] = (attr, amount)
            self._hold(attr, amount)

    def _hold(self, attr: CapacityAttr, amount: Resources) -> None:
        for member in self._chain(attr):
            member.reserved = member.reserved + amount

    def _move(self, attr: CapacityAttr, amount: Resources) -> None:
        for member in self._chain(attr):
            member.allocated = member.allocated + amount
            member.share = capacity_share(member.allocated, member.limits.deserved)

    # ---- queue checks -------------------------------------------------------------------------

    def _refusal(self, queue: QueueInfo) -> str:
        """Why no job of ``queue`` may be admitted or get pods now, or "" (the checks every
        callback makes first)."""
        if not queue.open:
            return (
                f"queue {queue.name} is {queue.state}: no job in it is admitted until it is opened"
            )
        detached = self.tree.detached.get(queue.name)
        if detached is not None:
            return f"queue {queue.name} is not in the queue tree: {detached}"
        attr = self.attrs.get(queue.name)
        if attr is None:
            return f"queue {queue.name} is unknown to the capacity plugin"
        if self.hierarchy and not attr.limits.leaf:
            children = ", ".join(attr.limits.children)
            return (
                f"queue {queue.name} has child queues ({children}): with enableHierarchy, jobs "
                "run only in leaf queues"
            )
        return ""

    def _fits_chain(self, attr: CapacityAttr, request: Resources, uid: str = "") -> bool:
        """The queue and each ancestor stay within their real capability with ``request``
        (``over_limit`` is empty for each; written out: allocate asks for every pod), and with
        the room held for pods behind queue admission gates (but pod ``uid``'s own)."""
        wanted = [(n, a) for n, a in request.items() if a > 0 and n not in UNTRACKED]
        reserved = self._reserved
        own = reserved[uid][1] if uid in reserved else None
        for member in self._chain(attr):
            held, limit = member.allocated, member.limits.real_capability
            if reserved:
                held = held + member.reserved
                if own is not None:
                    held = held - own
            for name, amount in wanted:
                if held.get(name) + amount > limit.get(name):
                    return False
        return True

    # ---- callbacks ----------------------------------------------------------------------------

    def queue_order(self, left: QueueInfo, right: QueueInfo) -> int:
        """Higher priority first, then by share (see the module docstring)."""
        if left.priority != right.priority:
            return -1 if left.priority > right.priority else 1
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if la is None or ra is None:
            return 0 if la is ra else (1 if la is None else -1)
        if not self.hierarchy:
            return _compare_shares(la, ra)
        if la.limits.leaf != ra.limits.leaf:
            return -1 if la.limits.leaf else 1
        if not la.limits.leaf:
            return _compare_shares(la, ra)
        left_path = (*la.limits.ancestors, la.name)
        right_path = (*ra.limits.ancestors, ra.name)
        for mine, theirs in zip(left_path, right_path, strict=False):
            if mine != theirs:
                return _compare_shares(self.attrs[mine], self.attrs[theirs])
        return _compare_shares(la, ra)

    def victim_queue_order(self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
        """The queue nearer the reclaimer's in the tree loses first (see the module
        docstring); 0 when they are as near, or one is outside the tree."""
        own = self.attrs.get(preemptor.name)
        la, ra = self.attrs.get(left.name), self.attrs.get(right.name)
        if own is None or la is None or ra is None:
            return 0
        left_level = shared_depth(la.limits.ancestors, own.limits.ancestors)
        right_level = shared_depth(ra.limits.ancestors, own.limits.ancestors)
        return (right_level > left_level) - (right_level < left_level)

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Open, attached, a leaf, and within the real capability up the tree with the task."""
        if self._refusal(queue):
            return False
        attr = self.attrs[queue.name]
        if not self._fits_chain(attr, task.resreq, task.uid):
            return False
        if self._holds_room(task):
            self._reserve(attr, task)  # taken: held until placed (its gate goes, or has gone)
        return True

    def _holds_room(self, task: TaskInfo) -> bool:
        """A pending pod that opted in to queue admission gates, with the feature on."""
        ssn, pod = self._ssn, task.pod
        if ssn is None or not ssn.queue_admission_gates or pod is None:
            return False
        return task.status == TaskStatus.PENDING and opted_in(pod)

    def preemptive(self, queue: QueueInfo, tasks: Sequence[TaskInfo]) -> bool:
        """May ``queue`` reclaim for ``tasks``: within its real capability with them, and
        within what it deserves of every resource it deserves that they request (or, with
        ancestorReclaimLevel, one of its ancestors within the level is)."""
        if self._refusal(queue):
            return False
        attr = self.attrs[queue.name]
        request = Resources.sum(t.resreq for t in tasks).without(*UNTRACKED)
        if not over_limit(request, attr.allocated, attr.limits.real_capability).is_empty():
            return False
        if within_deserved(attr.allocated, request, attr.limits.deserved):
            return True
        return bool(self._ancestor_level) and self._granting_ancestor(attr, request) is not None

    def _granting_ancestor(self, attr: CapacityAttr, request: Resources) -> str | None:
        """The nearest ancestor within ancestorReclaimLevel that may reclaim for ``request``
        (``within_deserved``) for a queue that may not on its own."""
        for name in ancestors_within(attr.limits, self._ancestor_level):
            ancestor = self.attrs[name]
            if within_deserved(ancestor.allocated, request, ancestor.limits.deserved):
                return name
        return None

    def job_enqueueable(self, job: JobInfo) -> int:
        """Reject jobs of a queue that may not run them, or beyond a quota up the tree."""
        ssn = self._ssn
        queue = ssn.queues.get(job.queue) if ssn is not None else None
        if ssn is None or queue is None:
            return -1
        refusal = self._refusal(queue)
        if refusal:
            ssn.note_wait(job.key, WaitStage.QUEUE, refusal)
            return -1
        if job.min_resources.is_empty():
            return self._devices_enqueueable(ssn, job)
        need = job.min_resources.without(*UNTRACKED)
        for member in self._chain(self.attrs[queue.name]):
            held = member.allocated + member.inqueue - member.elastic
            over = over_limit(need, held, member.limits.real_capability)
            if over.is_empty():
                continue
            ssn.record_event(
                "PodGroup",
                job.namespace,
                job.name,
                "Normal",
                "Unschedulable",
                insufficient_message(over),
            )
            holder = f"queue {member.name}"
            if member.name != queue.name:
                holder += f" (an ancestor of queue {queue.name})"
            ssn.note_wait(
                job.key,
                WaitStage.ENQUEUE,
                gate_text(
                    holder=holder,
                    limit=member.limits.real_capability,
                    allocated=member.allocated,
                    reserved=member.inqueue,
                    need=need,
                    freed_by=over,
                    elastic=member.elastic,
                ),
            )
            return -1
        return self._devices_enqueueable(ssn, job)

    def _devices_enqueueable(self, ssn: Session, job: JobInfo) -> int:
        """The job's minimal DRA claims within its queues' ``deviceclass/`` limits (Volcano's
        DRA check in ``jobEnqueueable``, with its event wording)."""
        why = None if self._dra is None else self._dra.enqueueable(job)
        if why is None:
            return 1
        message = f"{QUOTA_EVENT}: insufficient {DRA_EXCEEDED}"
        ssn.record_event("PodGroup", job.namespace, job.name, "Normal", "Unschedulable", message)
        ssn.note_wait(job.key, WaitStage.ENQUEUE, why)
        return -1

    def job_enqueued(self, job: JobInfo) -> None:
        attr = self.attrs.get(job.queue)
        if attr is None:
            return
        if self._dra is not None:
            self._dra.enqueued(job)
        need = job.min_resources.without(*UNTRACKED)
        for member in self._chain(attr):
            member.inqueue = member.inqueue + need

    def may_give(self, reclaimer: TaskInfo, job: JobInfo) -> bool:
        """Whether ``reclaimable`` could take any task of ``job``: its queue holds something
        it deserves nothing of, or more than it deserves of something."""
        attr = self.attrs.get(job.queue)
        if attr is None:
            return False
        deserved = attr.limits.deserved
        return any(
            amount > 0 and (name not in deserved or amount > deserved.get(name))
            for name, amount in attr.allocated.items()
        )

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Victims per the module docstring, judged cumulatively per queue."""
        if self._ssn is None:
            return []
        wanted = _requested(reclaimer.init_resreq.items())
        scope = self._ancestor_scope(reclaimer) if self._ancestor_level else None
        if scope is not None:
            # Judged in victim order, as Volcano's: the ancestors' cumulative checks then keep
            # the pods that order would lose last.
            candidates = sorted(candidates, key=self._ssn.victim_order_key(reclaimer))
        victims: list[TaskInfo] = []
        remaining: dict[str, Resources] = {}
        for task in candidates:
            job = self._ssn.jobs.get(task.job)
            attr = self.attrs.get(job.queue) if job is not None else None
            if attr is None:
                continue
            released = task.resreq.without(*UNTRACKED)
            requested = _requested(released.items())
            if not requested & wanted:
                continue  # evicting it frees nothing the reclaimer asks for
            after = remaining.get(attr.name, attr.allocated) - released
            if any(after.get(n) < a for n, a in attr.limits.guarantee.items() if a > 0):
                continue  # the queue would fall below its guarantee
            if not keeps_deserved(after, attr.limits.deserved, requested):
                continue  # the queue would fall below its deserved share of all of them
            if scope is not None:
                checked = scope.checked(attr.limits, requested)
                if checked is None or not all(
                    keeps_deserved(
                        remaining.get(name, self.attrs[name].allocated) - released,
                        self.attrs[name].limits.deserved,
                        requested,
                    )
                    for name in checked
                ):
                    continue  # spared, or an ancestor apart from the reclaimer's would fall
                for name in attr.limits.ancestors:
                    remaining[name] = remaining.get(name, self.attrs[name].allocated) - released
            remaining[attr.name] = after
            victims.append(task)
        return victims

    def _ancestor_scope(self, reclaimer: TaskInfo) -> ReclaimScope | None:
        """What ancestorReclaimLevel adds to the judgement of victims for ``reclaimer``."""
        ssn = self._ssn
        job = ssn.jobs.get(reclaimer.job) if ssn is not None else None
        own = self.attrs.get(job.queue) if job is not None else None
        if own is None:
            return None
        request = reclaimer.resreq.without(*UNTRACKED)
        grant = None
        if not within_deserved(own.allocated, request, own.limits.deserved):
            grant = self._granting_ancestor(own, request)
        return ReclaimScope(
            own=own.limits,
            level=self._ancestor_level,
            grant=grant,
            deserves_request=bool(_requested(request.items()) & set(own.limits.deserved.names())),
        )


def _requested(amounts: Iterable[tuple[str, int]]) -> set[str]:
    return {name for name, amount in amounts if amount > 0 and name not in UNTRACKED}
