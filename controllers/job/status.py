"""Job status arithmetic (JobStatus in volcano-sh/apis pkg/apis/batch/v1alpha1/job.go, as
Volcano's pkg/controllers/job/job_controller_actions.go counts it).

Its functions:

- `count_pods` turns the Job's pods (from the cache) plus what this reconcile deletes and creates
  into `PodCounts`: pending, running, succeeded, failed, terminating, unknown and
  taskStatusCount. Pods with a deletionTimestamp and pods being deleted count as terminating
  only; pods being created count as Pending.
- `append_condition` keeps at most one condition per phase, the latest last.
- `running_duration` is lastTransitionTime - creationTimestamp as a Go duration.
- `status_changed` tells the I/O layer whether a status write is needed at all.
- `volume_claim_resources` and `with_controlled`: the controlledResources entries a sync adds
  (a job-level volume's claim as ``volume-pvc-<claim>``, as Volcano names it) and drops (the
  plugins' objects a kill deleted).

Which pods a sync creates and deletes is `controllers.job.sync`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from msgspec.structs import replace

from caldera.api.core import Pod, PodPhase
from caldera.api.duration import format_duration
from caldera.api.meta import parse_time
from caldera.api.volcano import (
    TASK_SPEC_KEY,
    Job,
    JobCondition,
    JobStatus,
    TaskState,
)

__all__ = [
    "PodCounts",
    "PodSlot",
    "append_condition",
    "count_pods",
    "is_terminating",
    "pod_task",
    "running_duration",
    "status_changed",
    "volume_claim_resources",
    "with_controlled",
    "with_counts",
]

# A pod's phase as the counters name it: the five known ones, anything else Unknown. Plain
# strings, looked up per pod: no enum constructor or member attribute (Python code) per pod,
# and a Job's pods are counted on every sync.
_PHASE_NAMES: Final = {phase.value: phase.value for phase in PodPhase}
_UNKNOWN: Final = PodPhase.UNKNOWN.value
_PENDING: Final = PodPhase.PENDING.value


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
    """The task a pod belongs to (annotation ``volcano.sh/task-spec``), "" if none."""
    return pod.metadata.annotations.get(TASK_SPEC_KEY, "")


def is_terminating(pod: Pod) -> bool:
    """Whether the pod is being deleted (it has a deletionTimestamp)."""
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
    unknown and appears in taskStatusCount under "Unknown".
    """
    totals = dict.fromkeys(_PHASE_NAMES.values(), 0)
    terminating = 0
    per_task: dict[str, dict[str, int]] = {}
    for pod in pods:
        if is_terminating(pod) or pod.metadata.name in deleted:
            terminating += 1
            continue
        phase = _PHASE_NAMES.get(pod.status.phase, _UNKNOWN)
        totals[phase] += 1
        task = per_task.setdefault(pod_task(pod), {})
        task[phase] = task.get(phase, 0) + 1
    for slot in created:
        totals[_PENDING] += 1
        task = per_task.setdefault(slot.task, {})
        task[_PENDING] = task.get(_PENDING, 0) + 1
    per_task.pop("", None)
    return PodCounts(
        pending=totals[_PENDING],
        running=totals[PodPhase.RUNNING.value],
        succeeded=totals[PodPhase.SUCCEEDED.value],
        failed=totals[PodPhase.FAILED.value],
        terminating=terminating,
        unknown=totals[_UNKNOWN],
        task_status_count=per_task,
    )


def with_counts(status: JobStatus, counts: PodCounts) -> JobStatus:
    """`status` with its pod counters and taskStatusCount replaced by `counts`."""
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
    so an earlier entry of the same phase is removed and the new one goes last."""
    kept = tuple(c for c in conditions if c.status != phase)
    return (*kept, JobCondition(status=phase, last_transition_time=when))


def running_duration(created: str | None, last_transition: str | None) -> str | None:
    """lastTransitionTime - creationTimestamp as a Go duration ("1h2m3s"), None if either time is
    missing or unparseable."""
    if not created or not last_transition:
        return None
    try:
        delta = parse_time(last_transition) - parse_time(created)
    except ValueError:
        return None
    return format_duration(max(delta, dt.timedelta(0)).total_seconds())


def status_changed(old: JobStatus, new: JobStatus) -> bool:
    """Whether `new` differs from `old`, so that the I/O layer writes the status subresource only
    when something changed (a write re-triggers the Job's watch)."""
    return old != new


def volume_claim_resources(job: Job) -> dict[str, str]:
    """The controlledResources entries of the Job's job-level volumes that name their claim:
    ``volume-pvc-<claim>`` -> claim, Volcano's key."""
    return {
        f"volume-pvc-{volume.volume_claim_name}": volume.volume_claim_name
        for volume in job.spec.volumes
        if volume.volume_claim_name
    }


def with_controlled(
    status: JobStatus, controlled: Mapping[str, str], released: Iterable[str]
) -> JobStatus:
    """`status` with the `controlled` entries added (a sync's) and the `released` ones removed
    (objects a kill deleted: later kills find no record and delete nothing). `status` itself
    when there is neither."""
    released = tuple(released)
    if not controlled and not released:
        return status
    merged = {**status.controlled_resources, **controlled}
    for entry in released:
        merged.pop(entry, None)
    return replace(status, controlled_resources=merged)


# --- sync planning ------------------------------------------------------------------------------
