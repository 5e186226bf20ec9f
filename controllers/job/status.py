"""Job status arithmetic and pod sync planning (killJob and syncJob in Volcano's
pkg/controllers/job/job_controller_actions.go; JobStatus in volcano-sh/apis
pkg/apis/batch/v1alpha1/job.go).

Pure functions, no I/O:

- `count_pods` turns the Job's pods (from the cache) plus what this reconcile deletes and creates
  into `PodCounts`: pending, running, succeeded, failed, terminating, unknown and
  taskStatusCount. Pods with a deletionTimestamp and pods being deleted count as terminating
  only; pods being created count as Pending.
- `append_condition` keeps at most one condition per phase, the latest last.
- `running_duration` is lastTransitionTime - creationTimestamp as a Go duration.
- `status_changed` tells the I/O layer whether a status write is needed at all.
- `plan_sync` is syncJob's step 4: which `<job>-<task>-<index>` pods to create, which to delete
  (index ≥ replicas, out-of-sync), which are terminating, with the PodGroup gate and dependsOn.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from caldera.api.core import Pod, PodPhase
from caldera.api.jobspec import default_task_min_available, pod_name
from caldera.api.meta import format_duration, parse_time
from caldera.api.volcano import (
    TASK_SPEC_KEY,
    Iteration,
    Job,
    JobCondition,
    JobStatus,
    PodGroupPhase,
    TaskSpec,
    TaskState,
)
from controllers.job.events import is_out_of_sync

__all__ = [
    "PodCounts",
    "PodSlot",
    "SyncPlan",
    "append_condition",
    "count_pods",
    "dependencies_met",
    "dependency_ready",
    "plan_sync",
    "pod_task",
    "pods_may_be_created",
    "running_duration",
    "status_changed",
    "task_min_available",
    "with_counts",
]

_POD_PHASES: Final = frozenset(PodPhase)


@dataclass(frozen=True, slots=True)
class PodCounts:
    """Pod counts of a Job as JobStatus holds them.

    ``task_status_count`` maps task name → pod phase → count (terminating pods are not in it).
    """

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    task_status_count: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def task_phase(self, task: str, phase: str) -> int:
        """Pods of `task` in pod phase `phase`."""
        return self.task_status_count.get(task, {}).get(phase, 0)


@dataclass(frozen=True, slots=True)
class PodSlot:
    """A pod the Job should have: its task, its index and its name `<job>-<task>-<index>`."""

    task: str
    index: int
    name: str


def pod_task(pod: Pod) -> str:
    """The task a pod belongs to (annotation ``volcano.sh/task-spec``), "" if none. Pure."""
    return pod.metadata.annotations.get(TASK_SPEC_KEY, "")


def _is_terminating(pod: Pod) -> bool:
    return pod.metadata.deletion_timestamp is not None


def count_pods(
    pods: Iterable[Pod],
    *,
    deleted: Collection[str] = (),
    created: Iterable[PodSlot] = (),
) -> PodCounts:
    """Count the Job's pods into JobStatus counters.

    ``pods`` are the Job's pods from the cache; ``deleted`` names the pods this reconcile
    deleted (they count as terminating, as in Volcano's killJob/syncJob); ``created`` the pods it
    created (they count as Pending). A pod phase outside the five known ones (or empty) counts as
    unknown and appears in taskStatusCount under "Unknown". Pure; no I/O.
    """
    totals = dict.fromkeys(PodPhase, 0)
    terminating = 0
    per_task: dict[str, dict[str, int]] = {}
    for pod in pods:
        if _is_terminating(pod) or pod.metadata.name in deleted:
            terminating += 1
            continue
        raw = pod.status.phase
        phase = PodPhase(raw) if raw in _POD_PHASES else PodPhase.UNKNOWN
        totals[phase] += 1
        task = per_task.setdefault(pod_task(pod), {})
        task[phase.value] = task.get(phase.value, 0) + 1
    for slot in created:
        totals[PodPhase.PENDING] += 1
        task = per_task.setdefault(slot.task, {})
        task[PodPhase.PENDING.value] = task.get(PodPhase.PENDING.value, 0) + 1
    per_task.pop("", None)
    return PodCounts(
        pending=totals[PodPhase.PENDING],
        running=totals[PodPhase.RUNNING],
        succeeded=totals[PodPhase.SUCCEEDED],
        failed=totals[PodPhase.FAILED],
        terminating=terminating,
        unknown=totals[PodPhase.UNKNOWN],
        task_status_count=per_task,
    )


def with_counts(status: JobStatus, counts: PodCounts) -> JobStatus:
    """`status` with its pod counters and taskStatusCount replaced by `counts`. Pure; no I/O."""
    return JobStatus(
        state=status.state,
        min_available=status.min_available,
        task_status_count={
            task: TaskState(phase=dict(phases)) for task, phases in counts.task_status_count.items()
        },
        pending=counts.pending,
        running=counts.running,
        succeeded=counts.succeeded,
        failed=counts.failed,
        terminating=counts.terminating,
        unknown=counts.unknown,
        version=status.version,
        retry_count=status.retry_count,
        running_duration=status.running_duration,
        controlled_resources=status.controlled_resources,
        conditions=status.conditions,
    )


def append_condition(
    conditions: Sequence[JobCondition], phase: str, when: str
) -> tuple[JobCondition, ...]:
    """The conditions after entering `phase` at `when` (RFC 3339): at most one entry per phase,
    so an earlier entry of the same phase is removed and the new one goes last. Pure; no I/O."""
    kept = tuple(c for c in conditions if c.status != phase)
    return (*kept, JobCondition(status=phase, last_transition_time=when))


def running_duration(created: str | None, last_transition: str | None) -> str | None:
    """lastTransitionTime - creationTimestamp as a Go duration ("1h2m3s"), None if either time is
    missing or unparseable. Pure; no I/O."""
    if not created or not last_transition:
        return None
    try:
        delta = parse_time(last_transition) - parse_time(created)
    except ValueError:
        return None
    return format_duration(max(delta, dt.timedelta(0)).total_seconds())


def status_changed(old: JobStatus, new: JobStatus) -> bool:
    """Whether `new` differs from `old`, so that the I/O layer writes the status subresource only
    when something changed (a write re-triggers the Job's watch). Pure; no I/O."""
    return old != new


# --- sync planning ------------------------------------------------------------------------------


def task_min_available(task: TaskSpec) -> int:
    """A task's minAvailable, defaulted as the webhook does (replicas, or the partition minimum).

    Pure; no I/O.
    """
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
    number at least its minAvailable. A task the Job does not have is never ready. Pure; no I/O."""
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
    the field is empty. Pure; no I/O."""
    deps = task.depends_on
    if deps is None or not deps.name:
        return True
    ready = (dependency_ready(job, name, pods_by_name) for name in deps.name)
    return any(ready) if deps.iteration == Iteration.ANY else all(ready)


def pods_may_be_created(podgroup_phase: str | None) -> bool:
    """syncJob's gate: pods are created only once the PodGroup exists with a phase that is
    non-empty and not Pending (the scheduler's enqueue moved it to Inqueue or later).

    ``podgroup_phase`` None means the PodGroup is not in the cache. Pure; no I/O.
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


def plan_sync(job: Job, pods: Iterable[Pod], podgroup_phase: str | None) -> SyncPlan:
    """Plan syncJob step 4 for `job` given its pods from the cache and its PodGroup's phase.

    For every task and index i < replicas the pod is `<job>-<task>-<i>`; a missing one is to be
    created if `pods_may_be_created(podgroup_phase)` and the task's dependencies are met. Pods of
    a task the Job no longer has are left alone, as Volcano does. Pure; no I/O.
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
        slots = {
            (name := pod_name(job.metadata.name, task.name, i)): PodSlot(task.name, i, name)
            for i in range(task.replicas)
        }
        existing = {p.metadata.name: p for p in pods_by_task.get(task.name, ())}
        for name, pod in existing.items():
            if _is_terminating(pod):
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
