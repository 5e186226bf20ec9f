"""The Job state machine as pure functions: Volcano's pkg/controllers/job/state/*.go and the
killJob of its pkg/controllers/job/job_controller_actions.go.

One reconcile of a Job runs one action (from `controllers.job.policy.apply_policies`) in the
Job's current state. The I/O layer drives it in four steps:

1. ``p = plan(job, action, target)``: what the state does with the action: kill the whole job,
   kill a target (a task or a pod), or sync; which pod phases a kill keeps; whether it bumps
   ``status.version``, deletes the PodGroup, increments ``retryCount``; and either a forced next
   phase (``p.phase``) or whether to run the state's update function (``p.run_update``).
   ``p.step is Step.NONE``: do nothing at all (the Job is being deleted, or has a phase this
   machine does not know).
2. For kills: ``victims = kill_victims(p, pods)``; patch each with
   ``volcano.sh/controller-out-of-sync: "true"``, then delete it; ``counts = count_pods(pods,
   deleted=<names actually deleted>)``. For syncs: ``sync.plan_sync`` and its counts.
3. ``new = apply_plan(job, p, counts, now)``: the new JobStatus, with the phase change of
   ``p.phase`` or of `next_phase` (the per-state update function), a condition and
   lastTransitionTime when the phase changed, ``runningDuration`` on kills.
4. Write the status when ``status.status_changed(job.status, new)``; delete the PodGroup when
   ``p.delete_podgroup`` (after the pods, as Volcano does).

Retained phases: ``RETAIN_NONE`` kills every pod, ``RETAIN_SOFT`` keeps Succeeded and Failed pods.
On the last retry (``retryCount >= maxRetry - 1``) every kill keeps finished pods.

Versions: RestartTask and RestartPod kill only their target (Volcano v1.11+), RestartPartition
(v1.14) the pods of the triggering pod's partition (its task's pods with the same
``volcano.sh/partition-id``). A targeted action without its target (a RestartTask from a
Command or from a Job-level event) restarts the whole Job; a RestartPartition from a pod
without a partition restarts its task (see ``controllers.job.policy.target_of``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from msgspec.structs import replace

from caldera.api.core import Pod, PodPhase
from caldera.api.meta import format_time
from caldera.api.volcano import PARTITION_ID_KEY, Action, Job, JobPhase, JobState, JobStatus
from controllers.job.status import (
    PodCounts,
    append_condition,
    pod_task,
    running_duration,
    with_counts,
)
from controllers.job.sync import task_min_available

__all__ = [
    "FINISHED_PHASES",
    "INVALID_NAME",
    "INVALID_TEMPLATE",
    "JOB_TARGET",
    "KEPT_REASONS",
    "MAX_MESSAGE",
    "OVER_LIMITS",
    "RETAIN_NONE",
    "RETAIN_SOFT",
    "TARGETED_ACTIONS",
    "Plan",
    "Step",
    "Target",
    "TargetKind",
    "Transition",
    "apply_plan",
    "current_phase",
    "kill_victims",
    "next_phase",
    "note_problems",
    "plan",
    "refusal_plan",
]

RETAIN_NONE: Final[frozenset[str]] = frozenset()
RETAIN_SOFT: Final[frozenset[str]] = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
FINISHED_PHASES: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED})
TARGETED_ACTIONS: Final = frozenset(
    {Action.RESTART_TASK, Action.RESTART_POD, Action.RESTART_PARTITION}
)
_KNOWN_PHASES: Final = frozenset(JobPhase)
INVALID_TEMPLATE: Final = "InvalidPodTemplate"  # the reason of a Job whose pods can never exist
INVALID_NAME: Final = "InvalidJobName"  # a Job the svc plugin can name no Service after
# Reasons of an Aborting/Completing/Terminating Job that its final phase keeps.
KEPT_REASONS: Final = frozenset({INVALID_TEMPLATE, INVALID_NAME})
# The reason of a Job held over the bounds of caldera.api.limits (controllers.job.bounds); a
# sync of the Job back within them clears it.
OVER_LIMITS: Final = "SpecOverLimits"
MAX_MESSAGE: Final = 1024  # status.state.message stays readable (a big template's field errors)


class TargetKind(enum.StrEnum):
    """What an action applies to."""

    JOB = "Job"
    TASK = "Task"
    POD = "Pod"
    PARTITION = "Partition"


@dataclass(frozen=True, slots=True)
class Target:
    """The scope of an action: the whole Job, one task, one pod (with its task), or one
    partition of a task."""

    kind: TargetKind = TargetKind.JOB
    task: str = ""
    pod: str = ""
    partition: str = ""

    @classmethod
    def of_task(cls, task: str) -> Target:
        """A task target."""
        return cls(TargetKind.TASK, task=task)

    @classmethod
    def of_pod(cls, task: str, pod: str) -> Target:
        """A pod target."""
        return cls(TargetKind.POD, task=task, pod=pod)

    @classmethod
    def of_partition(cls, task: str, partition: str) -> Target:
        """A partition target: the task's pods labelled ``volcano.sh/partition-id: partition``."""
        return cls(TargetKind.PARTITION, task=task, partition=partition)

    def covers(self, pod: Pod) -> bool:
        """Whether `pod` is in this scope."""
        if self.kind is TargetKind.JOB:
            return True
        if self.kind is TargetKind.TASK:
            return pod_task(pod) == self.task
        if self.kind is TargetKind.PARTITION:
            return (
                pod_task(pod) == self.task
                and pod.metadata.labels.get(PARTITION_ID_KEY) == self.partition
            )
        return pod.metadata.name == self.pod


JOB_TARGET: Final = Target()


class Step(enum.StrEnum):
    """What the I/O layer does with the pods."""

    NONE = "None"  # nothing at all, not even a status update
    KILL_JOB = "KillJob"
    KILL_TARGET = "KillTarget"
    SYNC = "SyncJob"


@dataclass(frozen=True, slots=True)
class Plan:
    """What one action does in the Job's current state (see the module docstring)."""

    step: Step
    target: Target = JOB_TARGET
    retain: frozenset[str] = RETAIN_NONE
    bump_version: bool = False
    delete_podgroup: bool = False
    retry_increment: int = 0
    phase: JobPhase | None = None
    run_update: bool = False
    reason: str = ""
    message: str = ""  # status.state.message of a forced phase; "" means "<reason> was executed"

    @property
    def kills(self) -> bool:
        """Whether the step deletes pods by the kill rules (rather than by sync)."""
        return self.step in (Step.KILL_JOB, Step.KILL_TARGET)


@dataclass(frozen=True, slots=True)
class Transition:
    """A phase change with the reason and message written to ``status.state``."""

    phase: JobPhase
    reason: str = ""
    message: str = ""


def current_phase(job: Job) -> JobPhase | None:
    """The state the machine is in: "" (a new Job) is Pending, a value this machine does not
    know (from a newer Volcano) None."""
    raw = job.status.state.phase
    if not raw:
        return JobPhase.PENDING
    return JobPhase(raw) if raw in _KNOWN_PHASES else None


def _last_retry(job: Job) -> bool:
    return job.status.retry_count >= job.spec.max_retry - 1


def _kill_job(
    job: Job,
    retain: frozenset[str],
    *,
    retry: int = 0,
    phase: JobPhase | None = None,
    run_update: bool = False,
    reason: str = "",
) -> Plan:
    return Plan(
        step=Step.KILL_JOB,
        retain=RETAIN_SOFT if _last_retry(job) else retain,
        bump_version=True,
        delete_podgroup=True,
        retry_increment=retry,
        phase=phase,
        run_update=run_update,
        reason=reason,
    )


def _kill_target(
    job: Job,
    target: Target,
    *,
    retry: int = 0,
    phase: JobPhase | None = None,
    run_update: bool = False,
    reason: str = "",
) -> Plan:
    return Plan(
        step=Step.KILL_TARGET,
        target=target,
        retain=RETAIN_SOFT if _last_retry(job) else RETAIN_NONE,
        retry_increment=retry,
        phase=phase,
        run_update=run_update,
        reason=reason,
    )


def _normalise(action: Action, target: Target) -> tuple[Action, Target]:
    """Targeted restarts without a usable target restart the Job; other actions target the Job."""
    if action not in TARGETED_ACTIONS:
        return action, JOB_TARGET
    if target.kind is TargetKind.TASK and target.task:
        return action, target
    if target.kind is TargetKind.POD and target.pod:
        return action, target
    if target.kind is TargetKind.PARTITION and target.task and target.partition:
        return action, target
    return Action.RESTART_JOB, JOB_TARGET


def plan(job: Job, action: Action, target: Target = JOB_TARGET) -> Plan:
    """What `action` does in the Job's current state: the table of Volcano's state/*.go.

    A Job with a deletionTimestamp, or in a phase this machine does not know, gets
    ``Step.NONE``: Volcano's killJob and syncJob return at once for a Job being deleted.
    """
    phase = current_phase(job)
    if job.metadata.deletion_timestamp is not None or phase is None:
        return Plan(step=Step.NONE)
    action, target = _normalise(action, target)
    targeted = target.kind is not TargetKind.JOB
    why = action.value
    if phase in (JobPhase.PENDING, JobPhase.RUNNING):
        if action is Action.RESTART_JOB:
            return _kill_job(job, RETAIN_NONE, retry=1, phase=JobPhase.RESTARTING, reason=why)
        if targeted:
            return _kill_target(job, target, retry=1, phase=JobPhase.RESTARTING, reason=why)
        forced = {
            Action.ABORT_JOB: JobPhase.ABORTING,
            Action.COMPLETE_JOB: JobPhase.COMPLETING,
            Action.TERMINATE_JOB: JobPhase.TERMINATING,
        }.get(action)
        if forced is not None:
            return _kill_job(job, RETAIN_SOFT, phase=forced, reason=why)
        return Plan(step=Step.SYNC, run_update=True)
    if phase is JobPhase.RESTARTING:
        if action is Action.SYNC_JOB:
            return Plan(step=Step.SYNC, run_update=True)
        if targeted:
            return _kill_target(job, target, run_update=True)
        return _kill_job(job, RETAIN_NONE, run_update=True)
    if phase in (JobPhase.ABORTING, JobPhase.ABORTED):
        if action is Action.RESUME_JOB:
            return _kill_job(job, RETAIN_SOFT, retry=1, phase=JobPhase.RESTARTING, reason=why)
        return _kill_job(job, RETAIN_SOFT, run_update=phase is JobPhase.ABORTING)
    if phase in (JobPhase.COMPLETING, JobPhase.TERMINATING):
        return _kill_job(job, RETAIN_SOFT, run_update=True)
    return _kill_job(job, RETAIN_SOFT)  # Completed, Failed, Terminated: terminal


def refusal_plan(job: Job, reason: str, message: str) -> Plan:
    """TerminateJob's plan with `reason` and `message` (bounded) as the state's: a Job that can
    never run (`INVALID_TEMPLATE`, `INVALID_NAME`) ends saying why, not "TerminateJob"."""
    terminate = plan(job, Action.TERMINATE_JOB)
    return dataclasses.replace(terminate, reason=reason, message=message[:MAX_MESSAGE])


def kill_victims(p: Plan, pods: Iterable[Pod]) -> tuple[Pod, ...]:
    """The pods a kill plan deletes: those in its target, not already being deleted, whose phase
    is not retained. Empty for non-kill plans."""
    if not p.kills:
        return ()
    return tuple(
        pod
        for pod in pods
        if p.target.covers(pod)
        and pod.metadata.deletion_timestamp is None
        and pod.status.phase not in p.retain
    )


def _total_replicas(job: Job) -> int:
    return sum(t.replicas for t in job.spec.tasks)


def _running_update(job: Job, counts: PodCounts) -> Transition | None:
    spec = job.spec
    total = _total_replicas(job)
    if total == 0:  # scaled down to zero: keep the phase
        return None
    if spec.min_success is not None and counts.succeeded >= spec.min_success:
        return Transition(
            JobPhase.COMPLETED, "MinSuccessReached", "succeeded pods reached minSuccess"
        )
    if counts.succeeded + counts.failed == total:
        if spec.min_available >= sum(task_min_available(t) for t in spec.tasks):
            for task in spec.tasks:
                if task.min_available is None:
                    continue
                if counts.task_phase(task.name, PodPhase.SUCCEEDED) < task.min_available:
                    return Transition(
                        JobPhase.FAILED,
                        "TaskMinAvailableNotMet",
                        f"task {task.name} has fewer succeeded pods than its minAvailable",
                    )
        if spec.min_success is not None and counts.succeeded < spec.min_success:
            return Transition(
                JobPhase.FAILED, "MinSuccessNotMet", "all pods finished below minSuccess"
            )
        if counts.succeeded >= spec.min_available:
            return Transition(JobPhase.COMPLETED, "Completed", "all pods finished")
        return Transition(
            JobPhase.FAILED, "MinAvailableNotMet", "all pods finished below minAvailable"
        )
    if counts.pending > total - spec.min_available:
        return Transition(JobPhase.PENDING, "NotEnoughPods", "too many pods are pending")
    return None


def next_phase(job: Job, phase_before: JobPhase, counts: PodCounts) -> Transition | None:
    """The update function of state `phase_before`: the phase the counts move the Job to, or None
    to stay. `job` carries the status being built (retryCount, minAvailable).

    - Pending → Running when spec.minAvailable ≤ running + succeeded + failed;
    - Running → Completed / Failed / Pending by minSuccess, the task minAvailable rule,
      spec.minAvailable and the pending count (state/running.go); no change with zero replicas;
    - Restarting → Failed when retryCount ≥ spec.maxRetry, else → Pending when
      Σreplicas - terminating ≥ status.minAvailable;
    - Aborting / Completing / Terminating → Aborted / Completed / Terminated when no pod is
      pending, running or terminating (keeping the reason and message of `KEPT_REASONS`);
    - every other state: no change.
    """
    alive = counts.pending + counts.running + counts.terminating
    if phase_before is JobPhase.PENDING:
        if job.spec.min_available <= counts.running + counts.succeeded + counts.failed:
            return Transition(JobPhase.RUNNING, "MinAvailableReached", "enough pods are started")
        return None
    if phase_before is JobPhase.RUNNING:
        return _running_update(job, counts)
    if phase_before is JobPhase.RESTARTING:
        if job.status.retry_count >= job.spec.max_retry:
            return Transition(JobPhase.FAILED, "MaxRetryReached", "retryCount reached maxRetry")
        if _total_replicas(job) - counts.terminating >= job.status.min_available:
            return Transition(JobPhase.PENDING, "Restarted", "old pods are gone")
        return None
    done = {
        JobPhase.ABORTING: JobPhase.ABORTED,
        JobPhase.COMPLETING: JobPhase.COMPLETED,
        JobPhase.TERMINATING: JobPhase.TERMINATED,
    }.get(phase_before)
    if done is not None and alive == 0:
        if job.status.state.reason in KEPT_REASONS:
            # The end of the Job is explained by why it was ended, not by its last pod going.
            return Transition(done, job.status.state.reason, job.status.state.message)
        return Transition(done, done.value, "no pod is alive")
    return None


def apply_plan(job: Job, p: Plan, counts: PodCounts, now: dt.datetime) -> JobStatus:
    """The Job's new status after running plan `p`, with `counts` from after its pod changes.

    A new Job (phase "") first enters Pending. Then: counters from `counts`, ``minAvailable`` =
    spec.minAvailable, ``version`` bumped on full kills, ``retryCount`` incremented by Restart*
    and Resume, and the phase change forced by `p` or computed by `next_phase`. A phase change
    sets ``state`` (phase, reason, message, lastTransitionTime = `now`) and moves that phase's
    condition to the end. Kills also set ``runningDuration``. ``Step.NONE`` returns the status
    unchanged.
    """
    old = job.status
    before = current_phase(job)
    if p.step is Step.NONE or before is None:
        return old
    when = format_time(now)
    state, conditions = old.state, old.conditions
    if state.reason == OVER_LIMITS:  # no longer held: this plan runs it
        state = replace(state, reason="", message="")
    if not state.phase:
        state = JobState(phase=JobPhase.PENDING, last_transition_time=when)
        conditions = append_condition(conditions, JobPhase.PENDING, when)
    status = replace(
        with_counts(old, counts),
        state=state,
        conditions=conditions,
        min_available=job.spec.min_available,
        version=old.version + (1 if p.bump_version else 0),
        retry_count=old.retry_count + p.retry_increment,
    )
    change: Transition | None = None
    if p.phase is not None:
        message = p.message or (f"{p.reason} was executed" if p.reason else "")
        change = Transition(p.phase, p.reason, message)
    elif p.run_update:
        change = next_phase(replace(job, status=status), before, counts)
    if change is not None and change.phase != status.state.phase:
        status = replace(
            status,
            state=JobState(
                phase=change.phase,
                reason=change.reason,
                message=change.message,
                last_transition_time=when,
            ),
            conditions=append_condition(status.conditions, change.phase, when),
        )
    if p.kills:
        duration = running_duration(
            job.metadata.creation_timestamp, status.state.last_transition_time
        )
        if duration is not None:
            status = replace(status, running_duration=duration)
    return status


def note_problems(status: JobStatus, problems: str) -> JobStatus:
    """``status.state.message`` with `problems` (the Job's policies no controller runs) appended,
    re-added after each phase change so the user sees it while the Job exists. A Job ended for
    a `KEPT_REASONS` reason keeps its message."""
    state = status.state
    if not problems or problems in state.message or state.reason in KEPT_REASONS:
        return status
    message = f"{state.message}; {problems}" if state.message else problems
    return replace(status, state=replace(state, message=message))
