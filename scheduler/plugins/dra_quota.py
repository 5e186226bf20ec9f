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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from caldera.api.dra import ALLOCATION_MODE_ALL, ResourceClaim
from caldera.api.why import WaitStage
from scheduler.api.dra.view import pod_claims
from scheduler.api.types import QueueInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

DEVICE_CLASS_PREFIX: Final = "deviceclass/"
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


def claim_devices(claim: ResourceClaim) -> dict[str, int]:
    """The devices a claim asks for, by DeviceClass (ExactCount requests only)."""
    found: dict[str, int] = {}
    for request in claim.spec.devices.requests:
        e = request.exactly
        if e is None or e.allocation_mode == ALLOCATION_MODE_ALL or not e.device_class_name:
            continue
        found[e.device_class_name] = found.get(e.device_class_name, 0) + max(e.count, 1)
    return found


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

    def _claims(self, task: TaskInfo) -> list[str]:
        pod = task.pod
        if pod is None or not pod.spec.resource_claims:
            return []
        keys, _why = pod_claims(pod)
        return [key for key in keys if key in self.claims]

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


def register(ssn: Session, plugin: str, chain: Callable[[str], list[str]]) -> None:
    """Register the check for ``plugin`` when the snapshot has DRA objects."""
    view = ssn.cluster.dra
    if view is None or not any(device_limits(q) for q in ssn.queues.values()):
        return
    quota = DeviceClassQuota(ssn, view.claims, chain)
    ssn.add_allocatable_fn(plugin, quota.allocatable)
    ssn.add_allocate_handler(plugin, quota.allocated, quota.deallocated)
