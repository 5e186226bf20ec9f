"""syncJob's plan (step 4 of syncJob in Volcano's
pkg/controllers/job/job_controller_actions.go): which ``<job>-<task>-<index>`` pods to create
and which to delete, with the PodGroup gate and dependsOn.

- `plan_sync`: the pods to create (missing ones, once the PodGroup is past Pending and the
  task's dependencies are ready; at most `MAX_CREATES_PER_SYNC`, computed lazily, so a sync's
  cost follows the pods that exist, not `replicas`), to delete (index >= replicas, out of sync)
  and those already terminating;
- `dependencies_met` / `dependency_ready`: a task's dependsOn, as Volcano's
  ``isDependsOnPodsReady`` decides it;
- `pods_may_be_created`: the PodGroup gate; `task_min_available`: a task's minimum, defaulted.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from caldera.api.core import Pod, PodPhase
from caldera.api.jobspec import default_task_min_available
from caldera.api.names import pod_index, pod_name, pod_name_prefix
from caldera.api.volcano import Iteration, Job, PodGroupPhase, TaskSpec
from controllers.job.events import is_out_of_sync
from controllers.job.status import PodSlot, is_terminating, pod_task

__all__ = [
    "MAX_CREATES_PER_SYNC",
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


# Tasks of at most this many replicas keep their slots in a small cache: a Job is synced on
# each of its pods' events, and a dict lookup is ten times quicker than parsing the name.
# Bigger tasks parse (O(1) each) and compute their missing slots as they are taken; the cache
# holds at most 256 x 1,000 slots whatever the specs say.
_CACHED_SLOTS: Final = 1000


@functools.lru_cache(maxsize=256)
def _cached_slots(job: str, task: str, replicas: int) -> Mapping[str, PodSlot]:
    return MappingProxyType(
        {
            (name := pod_name(job, task, index)): PodSlot(task, index, name)
            for index in range(replicas)
        }
    )


def _task_slots(job: str, task: str, replicas: int) -> Mapping[str, PodSlot] | None:
    """The task's slots by pod name when the task is small enough to cache them, else None."""
    return _cached_slots(job, task, replicas) if replicas <= _CACHED_SLOTS else None


def _index_of(
    name: str, prefix: str, replicas: int, slots: Mapping[str, PodSlot] | None
) -> int | None:
    """The slot index of pod `name` in its task, or None (from `_task_slots` when given)."""
    if slots is None:
        return pod_index(name, prefix, replicas)
    slot = slots.get(name)
    return None if slot is None else slot.index


def dependency_ready(job: Job, task_name: str, pods_by_name: Mapping[str, Pod]) -> bool:
    """Whether task `task_name` is ready for the tasks depending on it: its pods
    `<job>-<task>-<i>` (i < replicas) that are Succeeded, or Running with every container Ready,
    number at least its minAvailable. A task the Job does not have is never ready.

    The Job's pods are counted, not the task's slots: the cost follows the pods that exist."""
    for task in job.spec.tasks:
        if task.name == task_name:
            prefix = pod_name_prefix(job.metadata.name, task.name)
            slots = _task_slots(job.metadata.name, task.name, task.replicas)
            ready = sum(
                1
                for name, pod in pods_by_name.items()
                if _index_of(name, prefix, task.replicas, slots) is not None and _pod_is_ready(pod)
            )
            return ready >= task_min_available(task)
    return False


def dependencies_met(
    job: Job,
    task: TaskSpec,
    pods_by_name: Mapping[str, Pod],
    known: dict[str, bool] | None = None,
) -> bool:
    """Whether `task` may create pods: no dependsOn (or an empty one), or any (iteration ``any``)
    / all (otherwise) of its dependencies are ready. Volcano's default iteration is "all" when
    the field is empty. `known` keeps each dependency's answer across the tasks of one sync."""
    deps = task.depends_on
    if deps is None or not deps.name:
        return True
    cache = {} if known is None else known

    def ready(name: str) -> bool:
        if name not in cache:
            cache[name] = dependency_ready(job, name, pods_by_name)
        return cache[name]

    answers = (ready(name) for name in deps.name)
    return any(answers) if deps.iteration == Iteration.ANY else all(answers)


def pods_may_be_created(podgroup_phase: str | None) -> bool:
    """syncJob's gate: pods are created only once the PodGroup exists with a phase that is
    non-empty and not Pending (the scheduler's enqueue moved it to Inqueue or later).

    ``podgroup_phase`` None means the PodGroup is not in the cache.
    """
    return bool(podgroup_phase) and podgroup_phase != PodGroupPhase.PENDING


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What syncJob must do with the Job's pods.

    - ``create``: missing pods to create now (after the gate and dependsOn), at most the
      ``create_limit`` of `plan_sync`, lowest task and index first;
    - ``delete``: pods to delete: index ≥ replicas or a name outside the task's slots (scale
      down), and out-of-sync pods (they are recreated by a later sync once gone);
    - ``terminating``: names of pods already being deleted (never deleted twice);
    - ``missing``: how many pods are missing, including those held back;
    - ``more``: missing pods that may be created were left for the next sync (the limit);
    - ``gated``: creation held back because the PodGroup is missing or Pending;
    - ``waiting``: tasks whose missing pods are held back by dependsOn.
    """

    create: tuple[PodSlot, ...] = ()
    delete: tuple[Pod, ...] = ()
    terminating: tuple[str, ...] = ()
    missing: int = 0
    more: bool = False
    gated: bool = False
    waiting: tuple[str, ...] = ()


# Pods one sync creates at most; the rest follow on the next sync (the controller queues it).
# Bounds the pods built and the requests in flight per reconcile, whatever `replicas` says.
MAX_CREATES_PER_SYNC: Final = 500


def _missing_slots(job: str, task: str, replicas: int, have: set[int]) -> Iterator[PodSlot]:
    """The task's missing slots, lowest index first, computed as they are taken."""
    for index in range(replicas):
        if index not in have:
            yield PodSlot(task, index, pod_name(job, task, index))


def plan_sync(
    job: Job,
    pods: Iterable[Pod],
    podgroup_phase: str | None,
    *,
    create_limit: int = MAX_CREATES_PER_SYNC,
) -> SyncPlan:
    """Plan syncJob step 4 for `job` given its pods from the cache and its PodGroup's phase.

    For every task and index i < replicas the pod is `<job>-<task>-<i>`; a missing one is to be
    created if `pods_may_be_created(podgroup_phase)` and the task's dependencies are met, at
    most `create_limit` of them. Pods of a task the Job no longer has are left alone, as Volcano
    does. The work and memory follow the pods that exist plus `create_limit`, never `replicas`.
    """
    pods_by_task: dict[str, dict[str, Pod]] = {}
    pods_by_name: dict[str, Pod] = {}
    for pod in pods:
        pods_by_task.setdefault(pod_task(pod), {})[pod.metadata.name] = pod
        pods_by_name[pod.metadata.name] = pod
    may_create = pods_may_be_created(podgroup_phase)
    create: list[PodSlot] = []
    delete: list[Pod] = []
    terminating: list[str] = []
    waiting: list[str] = []
    missing = 0
    more = False
    ready: dict[str, bool] = {}
    for task in job.spec.tasks:
        replicas = max(task.replicas, 0)
        prefix = pod_name_prefix(job.metadata.name, task.name)
        slots = _task_slots(job.metadata.name, task.name, replicas)
        have: set[int] = set()
        for name, pod in pods_by_task.get(task.name, {}).items():
            if slots is None:
                index = pod_index(name, prefix, replicas)
            else:  # inline: this loop runs per pod on every pod event
                slot = slots.get(name)
                index = None if slot is None else slot.index
            if index is not None:
                have.add(index)
            if is_terminating(pod):
                terminating.append(name)
            elif index is None or is_out_of_sync(pod):
                delete.append(pod)
        task_missing = replicas - len(have)
        missing += task_missing
        if not task_missing or not may_create:
            continue
        if not dependencies_met(job, task, pods_by_name, ready):
            waiting.append(task.name)
            continue
        room = create_limit - len(create)
        if slots is not None:
            absent: Iterator[PodSlot] = (s for s in slots.values() if s.index not in have)
        else:
            absent = _missing_slots(job.metadata.name, task.name, replicas, have)
        create.extend(itertools.islice(absent, room))
        more = more or task_missing > room
    return SyncPlan(
        create=tuple(create),
        delete=tuple(delete),
        terminating=tuple(terminating),
        missing=missing,
        more=more,
        gated=bool(missing) and not may_create,
        waiting=tuple(waiting),
    )
