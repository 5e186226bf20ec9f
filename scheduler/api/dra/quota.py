"""What DRA claims count against queue quota: devices per DeviceClass (Volcano v1.15's
``deviceclass/<class>`` keys), the claims a job needs at least (for the enqueue check), and
what each queue's running pods hold (for the Queue's ``status.allocated``).

A claim's request of ``count`` devices of class ``gpu.example.com`` (``exactly`` with
``allocationMode: ExactCount``) counts as ``deviceclass/gpu.example.com: count``, and its
``capacity.requests`` (consumable capacity), each times ``count``, as
``<dimension>.deviceclass/gpu.example.com``; ``firstAvailable`` and ``allocationMode: All``
requests are not counted (their number of devices is not known before allocation), as in
Volcano. A claim shared by several pods counts once per queue. Amounts are in thousandths, as
``Resources`` holds them.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from caldera.api.dra import ALLOCATION_MODE_ALL, ResourceClaim
from caldera.api.quantity import QuantityError
from caldera.api.resources import Resources
from scheduler.api.dra.view import pod_claims
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, TaskInfo

DEVICE_CLASS_PREFIX: Final = "deviceclass/"
CAPACITY_SEPARATOR: Final = ".deviceclass/"  # <dimension>.deviceclass/<class>


def device_class_of(key: str) -> str | None:
    """The DeviceClass a quota key names (``deviceclass/<class>`` or
    ``<dimension>.deviceclass/<class>``); None for any other resource name."""
    if key.startswith(DEVICE_CLASS_PREFIX):
        return key.removeprefix(DEVICE_CLASS_PREFIX) or None
    dimension, separator, cls = key.partition(CAPACITY_SEPARATOR)
    return cls or None if separator and dimension else None


def claim_devices(claim: ResourceClaim, *, capacity: bool = True) -> dict[str, int]:
    """What a claim counts against queue quota, by key, in thousandths (ExactCount requests
    only); without ``capacity``, device counts only (``capacity.DRAConsumableCapacityEnable``
    off)."""
    found: dict[str, int] = {}
    for request in claim.spec.devices.requests:
        e = request.exactly
        if e is None or e.allocation_mode == ALLOCATION_MODE_ALL or not e.device_class_name:
            continue
        count = max(e.count, 1)
        amounts = {DEVICE_CLASS_PREFIX + e.device_class_name: 1000}
        if capacity and e.capacity is not None:
            named = {
                f"{d}{CAPACITY_SEPARATOR}{e.device_class_name}": q
                for d, q in e.capacity.requests.items()
            }
            # The API server validates quantities: nothing to count if it did not.
            with contextlib.suppress(QuantityError):
                amounts.update(Resources.from_list(named).items())
        for key, amount in amounts.items():
            found[key] = found.get(key, 0) + amount * count
    return found


def devices_of(
    keys: Iterable[str], claims: Mapping[str, ResourceClaim], *, capacity: bool = True
) -> dict[str, int]:
    """What the claims ``keys`` count together, by quota key (``claim_devices``), each claim
    once."""
    total: dict[str, int] = {}
    for key in dict.fromkeys(keys):
        for name, amount in claim_devices(claims[key], capacity=capacity).items():
            total[name] = total.get(name, 0) + amount
    return total


def task_claims(task: TaskInfo, claims: Mapping[str, ResourceClaim]) -> list[str]:
    """The keys of the task's claims the session knows (a claim still to be made from its
    template is not counted yet, as in Volcano)."""
    pod = task.pod
    if pod is None or not pod.spec.resource_claims:
        return []
    keys, _why = pod_claims(pod)
    return [key for key in keys if key in claims]


def unmade_claim(job: JobInfo, claims: Mapping[str, ResourceClaim]) -> str | None:
    """Why the job's claims are not all known yet (a pod's claim still to be made from its
    template, or not in the cache yet), naming the first such pod; None when they are."""
    for task in job.tasks.values():
        pod = task.pod
        if pod is None or not pod.spec.resource_claims:
            continue
        keys, why = pod_claims(pod)
        missing = next((key for key in keys if key not in claims), None)
        if why is None and missing is None:
            continue
        return f"pod {task.name}: " + (why or f"waiting for ResourceClaim {missing}")
    return None


def min_claims(job: JobInfo, claims: Mapping[str, ResourceClaim]) -> list[str]:
    """The claims of the tasks a job needs at least, as Volcano's ``GetMinDRAResources``
    picks them: with ``minTaskMember``, the first ``n`` tasks (by namespace, name, uid) with
    claims of each role that needs ``n``; without, the first ``minAvailable`` tasks with
    claims. Volcano multiplies one task's request by ``n`` per role; here each picked task's
    own claims count, and a claim several of them share counts once."""
    with_claims = sorted(
        (t for t in job.tasks.values() if task_claims(t, claims)),
        key=lambda t: (t.namespace, t.name, t.uid),
    )
    picked: list[TaskInfo] = []
    if not job.min_task_member:
        picked = with_claims[: max(job.min_available, 0)]
    else:
        for role, wanted in job.min_task_member.items():
            if wanted > 0:
                picked += [t for t in with_claims if t.role == role][:wanted]
    keys: dict[str, None] = {}
    for task in picked:
        keys.update(dict.fromkeys(task_claims(task, claims)))
    return list(keys)


def queue_devices(
    jobs: Iterable[JobInfo],
    claims: Mapping[str, ResourceClaim],
    chain: Callable[[str], Iterable[str]],
) -> dict[str, Resources]:
    """What each queue's allocated and running tasks hold through their claims, by quota key
    (Volcano's ``status.allocated`` keys, its feature gate DRAConsumableCapacity on, as it is
    by default in Kubernetes 1.36), a claim once per queue; ``chain(queue)`` names the queues
    a task's devices count in (its own and its ancestors). Queues holding none are left
    out."""
    held: dict[str, dict[str, None]] = {}
    for job in jobs:
        for task in job.tasks.values():
            if task.status not in ALLOCATED_STATUSES:
                continue
            keys = task_claims(task, claims)
            if not keys:
                continue
            for queue in chain(job.queue):
                held.setdefault(queue, {}).update(dict.fromkeys(keys))
    found: dict[str, Resources] = {}
    for queue, queue_claims in held.items():
        amounts = {k: n for k, n in devices_of(queue_claims, claims).items() if n > 0}
        if amounts:
            found[queue] = Resources(amounts)
    return found
