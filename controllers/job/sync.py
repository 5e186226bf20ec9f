"""syncJob's plan (step 4 of syncJob in Volcano's
pkg/controllers/job/job_controller_actions.go): which ``<job>-<task>-<index>`` pods to create
and which to delete, with the PodGroup gate and dependsOn.

- `plan_sync`: the pods to create (missing ones, once the PodGroup is past Pending and the
  task's dependencies are ready), to delete (index >= replicas, out of sync) and those already
  terminating;
- `dependencies_met` / `dependency_ready`: a task's dependsOn, as Volcano's
  ``isDependsOnPodsReady`` decides it;
- `pods_may_be_created`: the PodGroup gate; `task_min_available`: a task's minimum, defaulted.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from caldera.api.core import Pod, PodPhase
from caldera.api.jobspec import default_task_min_available, pod_name
from caldera.api.volcano import Iteration, Job, PodGroupPhase, TaskSpec
from controllers.job.events import is_out_of_sync
from controllers.job.status import PodSlot, is_terminating, pod_task

__all__ = [
    "SyncPlan",
    "dependencies_met",
    "dependency_ready",
    "plan_sync",
    "pods_may_be_created",
    "task_min_available",
]


def task_min_available(task: TaskSpec) -> int:
    """A task's minAvailable, defaulted as the webhook does (replicas, or the partition minimum)."""
    return (
        task.min_available if task.min_available is not None else default_task_min_available(task)
    )


def _pod_is_ready(pod: Pod) -> bool:
    if pod.status.phase == PodPhase.SUCCEEDED:
        return True
    return pod.status.phase == PodPhase.RUNNING and all(
        s.ready for s in pod.status.container_statuses
    )


def dependency_ready(job: Job, task_name: str, pods_by_name: Mapping[str, Pod]) -> bool:
    """Whether task `task_name` is ready for the tasks depending on it: its pods
    `<job>-<task>-<i>` (i < replicas) that are Succeeded, or Running with every container Ready,
    number at least its minAvailable. A task the Job does not have is never ready."""
    for task in job.spec.tasks:
        if task.name == task_name:
            ready = 0
            for i in range(task.replicas):
                pod = pods_by_name.get(pod_name(job.metadata.name, task.name, i))
                if pod is not None and _pod_is_ready(pod):
                    ready += 1
            return ready >= task_min_available(task)
    return False


def dependencies_met(job: Job, task: TaskSpec, pods_by_name: Mapping[str, Pod]) -> bool:
    """Whether `task` may create pods: no dependsOn (or an empty one), or any (iteration ``any``)
    / all (otherwise) of its dependencies are ready. Volcano's default iteration is "all" when
    the field is empty."""
    deps = task.depends_on
    if deps is None or not deps.name:
        return True
    ready = (dependency_ready(job, name, pods_by_name) for name in deps.name)
    return any(ready) if deps.iteration == Iteration.ANY else all(ready)


def pods_may_be_created(podgroup_phase: str | None) -> bool:
    """syncJob's gate: pods are created only once the PodGroup exists with a phase that is
    non-empty and not Pending (the scheduler's enqueue moved it to Inqueue or later).

    ``podgroup_phase`` None means the PodGroup is not in the cache.
    """
    return bool(podgroup_phase) and podgroup_phase != PodGroupPhase.PENDING


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What syncJob must do with the Job's pods.

    - ``create``: missing pods to create now (after the gate and dependsOn);
    - ``delete``: pods to delete: index ≥ replicas or a name outside the task's slots (scale
      down), and out-of-sync pods (they are recreated by a later sync once gone);
    - ``terminating``: names of pods already being deleted (never deleted twice);
    - ``missing``: every missing pod, including those held back;
    - ``gated``: creation held back because the PodGroup is missing or Pending;
    - ``waiting``: tasks whose missing pods are held back by dependsOn.
    """

    create: tuple[PodSlot, ...] = ()
    delete: tuple[Pod, ...] = ()
    terminating: tuple[str, ...] = ()
    missing: tuple[PodSlot, ...] = ()
    gated: bool = False
    waiting: tuple[str, ...] = ()


@functools.lru_cache(maxsize=1024)
def task_slots(job_name: str, task: str, replicas: int) -> Mapping[str, PodSlot]:
    """The task's pod slots by pod name (read only). Kept for the Jobs synced lately: a Job is
    synced on each of its pods' events, and its slots stay the same while its replicas do."""
    return MappingProxyType(
        {(name := pod_name(job_name, task, i)): PodSlot(task, i, name) for i in range(replicas)}
    )


def plan_sync(job: Job, pods: Iterable[Pod], podgroup_phase: str | None) -> SyncPlan:
    """Plan syncJob step 4 for `job` given its pods from the cache and its PodGroup's phase.

    For every task and index i < replicas the pod is `<job>-<task>-<i>`; a missing one is to be
    created if `pods_may_be_created(podgroup_phase)` and the task's dependencies are met. Pods of
    a task the Job no longer has are left alone, as Volcano does.
    """
    pods_by_task: dict[str, list[Pod]] = {}
    pods_by_name: dict[str, Pod] = {}
    for pod in pods:
        pods_by_task.setdefault(pod_task(pod), []).append(pod)
        pods_by_name[pod.metadata.name] = pod
    may_create = pods_may_be_created(podgroup_phase)
    create: list[PodSlot] = []
    missing: list[PodSlot] = []
    delete: list[Pod] = []
    terminating: list[str] = []
    waiting: list[str] = []
    for task in job.spec.tasks:
        slots = task_slots(job.metadata.name, task.name, task.replicas)
        existing = {p.metadata.name: p for p in pods_by_task.get(task.name, ())}
        for name, pod in existing.items():
            if is_terminating(pod):
                terminating.append(name)
            elif name not in slots or is_out_of_sync(pod):
                delete.append(pod)
        task_missing = [slot for name, slot in slots.items() if name not in existing]
        missing.extend(task_missing)
        if not task_missing or not may_create:
            continue
        if dependencies_met(job, task, pods_by_name):
            create.extend(task_missing)
        else:
            waiting.append(task.name)
    return SyncPlan(
        create=tuple(create),
        delete=tuple(delete),
        terminating=tuple(terminating),
        missing=tuple(missing),
        gated=bool(missing) and not may_create,
        waiting=tuple(waiting),
    )
