"""What DRA claims count against queue quota: devices per DeviceClass (Volcano v1.15's
``deviceclass/<class>`` keys), the claims a job needs at least (for the enqueue check), and
what each queue's running pods hold (for the Queue's ``status.allocated``).

A claim's request of ``count`` devices of class ``gpu.example.com`` (``exactly`` with
``allocationMode: ExactCount``) counts as ``count`` devices of that class; ``firstAvailable``
and ``allocationMode: All`` requests are not counted (their number of devices is not known
before allocation), as in Volcano. A claim shared by several pods counts once per queue.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from caldera.api.dra import ALLOCATION_MODE_ALL, ResourceClaim
from caldera.api.resources import Resources
from scheduler.api.dra.view import pod_claims
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, TaskInfo

DEVICE_CLASS_PREFIX: Final = "deviceclass/"


def claim_devices(claim: ResourceClaim) -> dict[str, int]:
    """The devices a claim asks for, by DeviceClass (ExactCount requests only)."""
    found: dict[str, int] = {}
    for request in claim.spec.devices.requests:
        e = request.exactly
        if e is None or e.allocation_mode == ALLOCATION_MODE_ALL or not e.device_class_name:
            continue
        found[e.device_class_name] = found.get(e.device_class_name, 0) + max(e.count, 1)
    return found


def devices_of(keys: Iterable[str], claims: Mapping[str, ResourceClaim]) -> dict[str, int]:
    """The devices the claims ``keys`` ask for together, by DeviceClass, each claim once."""
    total: dict[str, int] = {}
    for key in dict.fromkeys(keys):
        for cls, count in claim_devices(claims[key]).items():
            total[cls] = total.get(cls, 0) + count
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
    """The devices, by ``deviceclass/<class>`` key, that each queue's allocated and running
    tasks hold through their claims (Volcano's ``status.allocated`` keys), a claim once per
    queue; ``chain(queue)`` names the queues a task's devices count in (its own and its
    ancestors). Queues holding none are left out."""
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
        devices = devices_of(queue_claims, claims)
        amounts = {DEVICE_CLASS_PREFIX + cls: n * 1000 for cls, n in devices.items() if n > 0}
        if amounts:
            found[queue] = Resources(amounts)
    return found
