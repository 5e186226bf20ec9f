"""Queue quota by DeviceClass: how many devices of each class a queue's pods hold through their
DRA claims, against the queue's ``deviceclass/<class>`` limits (Volcano v1.15's keys).

A claim's request of ``count`` devices of class ``gpu.example.com`` (``exactly`` with
``allocationMode: ExactCount``) counts as ``deviceclass/gpu.example.com: count``; as in Volcano,
``firstAvailable`` and ``allocationMode: All`` requests are not counted (their number of devices
is not known before allocation). A claim shared by several pods of one queue counts once.

The capacity plugin (``capacity.DynamicResourceAllocationEnable``, Volcano's argument) and the
proportion plugin (``proportion.DynamicResourceAllocationEnable``, Caldera's) register this
check beside their own when on (the default, as Volcano's follows Kubernetes' DRA feature
gate, on since 1.34): a pod is not allocated when it would take its queue (and, with
capacity's hierarchy, an ancestor) past the ``deviceclass/<class>`` amount of its
``capability``. A queue that names no such key is not limited. The wait record says which
class and queue.

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
from caldera.api.why import WaitStage
from scheduler.api.dra.quota import (
    DEVICE_CLASS_PREFIX,
    claim_devices,
    devices_of,
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


def device_limits(queue: QueueInfo) -> dict[str, int]:
    """The queue's ``deviceclass/<class>`` capability, by class."""
    if queue.capability is None:
        return {}
    limits: dict[str, int] = {}
    for name, amount in queue.capability.items():
        if name.startswith(DEVICE_CLASS_PREFIX):
            limits[name.removeprefix(DEVICE_CLASS_PREFIX)] = amount // 1000  # thousandths
    return limits


@dataclass(slots=True)
class _Held:
    devices: dict[str, int] = field(default_factory=dict)
    claims: dict[str, int] = field(default_factory=dict)  # claim key -> tasks using it
    # Claims admitted jobs need at least and no task holds yet, and their devices.
    reserved: dict[str, None] = field(default_factory=dict)
    reserved_devices: dict[str, int] = field(default_factory=dict)


class DeviceClassQuota:
    """One session's device counts per queue, kept by the allocate handlers."""

    def __init__(
        self,
        ssn: Session,
        claims: Mapping[str, ResourceClaim],
        chain: Callable[[str], list[str]],
    ) -> None:
        """``chain(queue)``: the queues whose limits hold for a pod of ``queue`` (itself, and
        with a hierarchy its ancestors)."""
        self.ssn, self.claims, self.chain = ssn, claims, chain
        self.limits = {name: device_limits(q) for name, q in ssn.queues.items()}
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

    def _queues(self, task: TaskInfo) -> list[str]:
        job = self.ssn.jobs.get(task.job)
        return [] if job is None else [q for q in self.chain(job.queue) if q in self.held]

    def allocated(self, task: TaskInfo) -> None:
        for key in self._claims(task):
            wanted = claim_devices(self.claims[key])
            for queue in self._queues(task):
                held = self.held[queue]
                users = held.claims.get(key, 0)
                held.claims[key] = users + 1
                if users == 0:
                    for cls, count in wanted.items():
                        held.devices[cls] = held.devices.get(cls, 0) + count

    def deallocated(self, task: TaskInfo) -> None:
        for key in self._claims(task):
            wanted = claim_devices(self.claims[key])
            for queue in self._queues(task):
                held = self.held[queue]
                users = held.claims.get(key, 0)
                if users <= 1:
                    held.claims.pop(key, None)
                    if users == 1:
                        for cls, count in wanted.items():
                            held.devices[cls] = held.devices.get(cls, 0) - count
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
            more: dict[str, int] = {}
            for key in keys:
                if held.claims.get(key, 0) == 0:
                    for cls, count in claim_devices(self.claims[key]).items():
                        more[cls] = more.get(cls, 0) + count
            for cls, count in more.items():
                limit = limits.get(cls)
                if limit is None:
                    continue
                have = held.devices.get(cls, 0)
                if have + count > limit:
                    if job is not None and job.key not in self.noted:
                        self.noted.add(job.key)
                        self.ssn.note_wait(
                            job.key,
                            WaitStage.ALLOCATE,
                            f"queue {name}: {DEVICE_CLASS_PREFIX}{cls} {have} held of "
                            f"{limit}, pod {task.name} claims {count} more",
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
            for cls, count in devices_of(self._unheld(job, name), self.claims).items():
                limit = limits.get(cls)
                if limit is None:
                    continue
                have = held.devices.get(cls, 0)
                reserved = held.reserved_devices.get(cls, 0)
                if have + reserved + count > limit:
                    return (
                        f"queue {name}: {DEVICE_CLASS_PREFIX}{cls} {have} held and "
                        f"{reserved} reserved of {limit}, the job's minimal claims need "
                        f"{count} more"
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
            for cls, count in devices_of(unheld, self.claims).items():
                held.reserved_devices[cls] = held.reserved_devices.get(cls, 0) + count


def register(
    ssn: Session, plugin: str, chain: Callable[[str], list[str]]
) -> DeviceClassQuota | None:
    """Register the check for ``plugin`` when the snapshot has DRA objects and a queue names
    a ``deviceclass/`` limit; the quota, for the plugin's enqueue checks (None: no limit)."""
    view = ssn.cluster.dra
    if view is None or not any(device_limits(q) for q in ssn.queues.values()):
        return None
    quota = DeviceClassQuota(ssn, view.claims, chain)
    ssn.add_allocatable_fn(plugin, quota.allocatable)
    ssn.add_allocate_handler(plugin, quota.allocated, quota.deallocated)
    return quota
