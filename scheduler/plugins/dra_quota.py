"""Queue quota by DeviceClass: how many devices of each class a queue's pods hold through their
DRA claims, against the queue's ``deviceclass/<class>`` limits (Volcano v1.15's keys).

What a claim counts is ``scheduler.api.dra.quota``'s: ``deviceclass/<class>`` devices, and
``<dimension>.deviceclass/<class>`` capacity requests (consumable capacity) with the plugin's
``DRAConsumableCapacityEnable`` (``capacity.`` Volcano's, ``proportion.`` Caldera's; true by
default, as Volcano's follows Kubernetes' feature gate DRAConsumableCapacity, beta and on in
1.36). As Volcano's ``checkDRAAllocatable``: a class the capability names no count for has no
count limit, and a capacity dimension the capability does not list for a class it limits is
refused. A claim shared by several pods of one queue counts once.

The capacity plugin (``capacity.DynamicResourceAllocationEnable``, Volcano's argument) and the
proportion plugin (``proportion.DynamicResourceAllocationEnable``, Caldera's) register this
check beside their own when on (the default, as Volcano's follows Kubernetes' DRA feature
gate, on since 1.34): a pod is not allocated when it would take its queue (and, with
capacity's hierarchy, an ancestor) past a ``deviceclass/`` amount of its ``capability``. A
queue that names no such key is not limited. The wait record says which key and queue.

At enqueue (Volcano's ``jobEnqueueable`` with the job's minimal DRA request): a Pending job
whose minimal claims (``scheduler.api.dra.quota.min_claims``) would take its queue, or an
ancestor, past a ``deviceclass/<class>`` limit, counting what the queue's pods hold and what
its admitted (Inqueue) jobs' minimal claims reserve, stays Pending; an admitted job's minimal
claims reserve room for the rest of the session, and from the next session on while the job
is Inqueue. Volcano reserves them only in the session that admits the job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from caldera.api.dra import ResourceClaim
from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.dra.quota import (
    DEVICE_CLASS_PREFIX,
    claim_devices,
    device_class_of,
    min_claims,
    task_claims,
    unmade_claim,
)
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["DEVICE_CLASS_PREFIX", "DeviceClassQuota", "claim_devices", "register"]

# Tasks whose claims hold devices (or will, once bound) in the session.
HOLDING: Final = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
    }
)


def device_limits(queue: QueueInfo, *, capacity: bool = True) -> dict[str, int]:
    """The queue's ``deviceclass/<class>`` capability (and, with ``capacity``, its
    ``<dimension>.deviceclass/<class>`` capability), by key, in thousandths."""
    if queue.capability is None:
        return {}
    return {
        name: amount
        for name, amount in queue.capability.items()
        if device_class_of(name) is not None and (capacity or name.startswith(DEVICE_CLASS_PREFIX))
    }


def shown(key: str, amount: int) -> str:
    """An amount of ``key`` as a quantity (a count of devices as a whole number)."""
    return Resources({key: amount}).to_list()[key]


def over_limit(
    limits: Mapping[str, int], have: Mapping[str, int], need: Mapping[str, int]
) -> tuple[str, int | None] | None:
    """The first key that ``need`` on top of ``have`` takes past ``limits``, and its limit
    (None: a capacity dimension the limits do not list for a class they limit, refused as
    Volcano's ``checkDRAAllocatable`` refuses it); None when within. A class without a
    ``deviceclass/`` count in the limits has no count limit."""
    limited = {device_class_of(key) for key in limits}
    for key, amount in need.items():
        if device_class_of(key) not in limited:
            continue
        limit = limits.get(key)
        if limit is None:
            if key.startswith(DEVICE_CLASS_PREFIX):
                continue
            return key, None
        if have.get(key, 0) + amount > limit:
            return key, limit
    return None


def _add(into: dict[str, int], amounts: Mapping[str, int], sign: int = 1) -> None:
    for key, amount in amounts.items():
        into[key] = into.get(key, 0) + sign * amount


@dataclass(slots=True)
class _Held:
    """What one queue holds and has reserved, by quota key, in thousandths."""

    devices: dict[str, int] = field(default_factory=dict)
    claims: dict[str, int] = field(default_factory=dict)  # claim key -> tasks using it
    # Claims admitted jobs need at least and no task holds yet, and what they count.
    reserved: dict[str, None] = field(default_factory=dict)
    reserved_devices: dict[str, int] = field(default_factory=dict)


class DeviceClassQuota:
    """One session's device counts per queue, kept by the allocate handlers."""

    def __init__(
        self,
        ssn: Session,
        claims: Mapping[str, ResourceClaim],
        chain: Callable[[str], list[str]],
        *,
        capacity: bool = True,
    ) -> None:
        """``chain(queue)``: the queues whose limits hold for a pod of ``queue`` (itself, and
        with a hierarchy its ancestors); ``capacity``: consumable capacity counts
        (``<dimension>.deviceclass/<class>``)."""
        self.ssn, self.claims, self.chain, self.capacity = ssn, claims, chain, capacity
        self.limits = {name: device_limits(q, capacity=capacity) for name, q in ssn.queues.items()}
        self._wants: dict[str, dict[str, int]] = {}
        self.held: dict[str, _Held] = {name: _Held() for name in ssn.queues}
        self.noted: set[str] = set()
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                if task.status in HOLDING:
                    self.allocated(task)
        for job in ssn.jobs.values():
            if job.phase == "Inqueue":
                self.enqueued(job)

    def _claims(self, task: TaskInfo) -> list[str]:
        return task_claims(task, self.claims)

    def _wanted(self, key: str) -> dict[str, int]:
        """What claim ``key`` counts, by quota key (kept: asked for every pod and queue)."""
        found = self._wants.get(key)
        if found is None:
            found = self._wants[key] = claim_devices(self.claims[key], capacity=self.capacity)
        return found

    def _sum(self, keys: list[str]) -> dict[str, int]:
        total: dict[str, int] = {}
        for key in dict.fromkeys(keys):
            _add(total, self._wanted(key))
        return total

    def _queues(self, task: TaskInfo) -> list[str]:
        job = self.ssn.jobs.get(task.job)
        return [] if job is None else [q for q in self.chain(job.queue) if q in self.held]

    def allocated(self, task: TaskInfo) -> None:
        for key in self._claims(task):
            for queue in self._queues(task):
                held = self.held[queue]
                users = held.claims.get(key, 0)
                held.claims[key] = users + 1
                if users == 0:
                    _add(held.devices, self._wanted(key))

    def deallocated(self, task: TaskInfo) -> None:
        for key in self._claims(task):
            for queue in self._queues(task):
                held = self.held[queue]
                users = held.claims.get(key, 0)
                if users <= 1:
                    held.claims.pop(key, None)
                    if users == 1:
                        _add(held.devices, self._wanted(key), -1)
                else:
                    held.claims[key] = users - 1

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Whether the task's claims keep its queue (and the queue's chain) within their
        ``deviceclass/<class>`` limits."""
        keys = self._claims(task)
        if not keys:
            return True
        job = self.ssn.jobs.get(task.job)
        for name in self.chain(queue.name):
            limits = self.limits.get(name)
            if not limits:
                continue
            held = self.held[name]
            more = self._sum([key for key in keys if held.claims.get(key, 0) == 0])
            over = over_limit(limits, held.devices, more)
            if over is None:
                continue
            if job is not None and job.key not in self.noted:
                self.noted.add(job.key)
                key, limit = over
                have = held.devices.get(key, 0)
                self.ssn.note_wait(
                    job.key,
                    WaitStage.ALLOCATE,
                    f"queue {name}: {_limit_text(key, limit, have)}, pod {task.name} claims "
                    f"{shown(key, more[key])} more",
                )
            return False
        return True

    def _unheld(self, job: JobInfo, queue: str) -> list[str]:
        """The job's minimal claims that ``queue`` neither holds nor has reserved."""
        held = self.held[queue]
        return [
            key
            for key in min_claims(job, self.claims)
            if held.claims.get(key, 0) == 0 and key not in held.reserved
        ]

    def enqueueable(self, job: JobInfo) -> str | None:
        """Why the job's minimal claims would take its queue, or an ancestor, past a
        ``deviceclass/<class>`` limit, counting what the queue holds and has reserved for
        admitted jobs (Volcano's ``checkDRAAllocatable`` with ``includeInqueue``); None when
        they would not. A job whose claims are not all made yet waits for them when a limit
        holds for its queue (Caldera's: Volcano admits it with what it knows)."""
        if not any(self.limits.get(name) for name in self.chain(job.queue)):
            return None
        unmade = unmade_claim(job, self.claims)
        if unmade is not None:
            return f"{unmade} (counted against the queue's deviceclass/ limits once made)"
        for name in self.chain(job.queue):
            limits = self.limits.get(name)
            if not limits or name not in self.held:
                continue
            held = self.held[name]
            more = self._sum(self._unheld(job, name))
            have = dict(held.devices)
            _add(have, held.reserved_devices)
            over = over_limit(limits, have, more)
            if over is not None:
                key, limit = over
                reserved = held.reserved_devices.get(key, 0)
                text = _limit_text(key, limit, held.devices.get(key, 0), reserved)
                return (
                    f"queue {name}: {text}, the job's minimal claims need "
                    f"{shown(key, more[key])} more"
                )
        return None

    def enqueued(self, job: JobInfo) -> None:
        """Reserve the admitted job's minimal claims in its queue's chain."""
        for name in self.chain(job.queue):
            if name not in self.held:
                continue
            held = self.held[name]
            unheld = self._unheld(job, name)
            held.reserved.update(dict.fromkeys(unheld))
            _add(held.reserved_devices, self._sum(unheld))


def _limit_text(key: str, limit: int | None, have: int, reserved: int | None = None) -> str:
    """``<key> <held> held [and <reserved> reserved] of <limit>``, or that the key is not
    in the capability."""
    if limit is None:
        return f"{key} is not in its capability, which limits DeviceClass {device_class_of(key)}"
    held = f"{key} {shown(key, have)} held"
    if reserved is not None:
        held += f" and {shown(key, reserved)} reserved"
    return f"{held} of {shown(key, limit)}"


def register(
    ssn: Session, plugin: str, chain: Callable[[str], list[str]], *, capacity: bool = True
) -> DeviceClassQuota | None:
    """Register the check for ``plugin`` when the snapshot has DRA objects and a queue names
    a ``deviceclass/`` limit; the quota, for the plugin's enqueue checks (None: no limit).
    ``capacity``: the plugin's ``DRAConsumableCapacityEnable``."""
    view = ssn.cluster.dra
    if view is None or not any(device_limits(q, capacity=capacity) for q in ssn.queues.values()):
        return None
    quota = DeviceClassQuota(ssn, view.claims, chain, capacity=capacity)
    ssn.add_allocatable_fn(plugin, quota.allocatable)
    ssn.add_allocate_handler(plugin, quota.allocated, quota.deallocated)
    return quota
