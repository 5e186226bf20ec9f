"""The gang plugin: a job runs only when minAvailable of its pods can (Volcano's).

- job valid: enough pods exist (Pending, Pipelined, placed or Succeeded) for minAvailable, and
  for each task's minAvailable when minMember >= the sum of the tasks' minimums; reasons
  NotEnoughTasks / NotEnoughPodsOfTask. Allocate, backfill and preempt skip invalid jobs; the
  PodGroup's Unschedulable condition then carries that reason and message (Volcano computes
  them but, because its check runs before plugins register, never writes them: Caldera does);
- job ready / pipelined: minAvailable pods placed (or pipelined), per task too, and for a job
  with subGroupPolicy minSubGroups whole sub-groups of each policy (``scheduler.api.subgroups``;
  a job with too few sub-groups is invalid, reason NotEnoughSubGroups, Caldera's name);
- job order: jobs that are not ready yet come first; job starving;
- preemptable / reclaimable: a job gives up only pods beyond its minAvailable;
- at session close: the PodGroup condition (Unschedulable with NotEnoughResources and
  "X/Y tasks in gang unschedulable: ...", or Scheduled; a Pending job keeps the condition an
  enqueue gate gave it in the session, as resourcequota does), the PodGroup event of Volcano's job
  updater (Warning Unschedulable while the phase is Pending, Inqueue or Unknown, else Normal
  Scheduled "pod group is ready" when the status changed), each waiting pod's message, and
  the gang's need for the wait record ("needs 8 pods at once (minAvailable); 5 fit now").
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from caldera.api.meta import format_time
from caldera.api.volcano import PodGroupCondition
from caldera.api.why import WaitStage
from scheduler.api.subgroups import sub_groups_pipelined, sub_groups_ready, sub_groups_valid
from scheduler.api.types import (
    ALLOCATED_STATUSES,
    READY_STATUSES,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from scheduler.framework.incremental import Incremental, Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import ValidateResult
from scheduler.framework.status import podgroup_phase, podgroup_status, status_changed

if TYPE_CHECKING:
    from scheduler.framework.session import Session

NOT_ENOUGH_TASKS = "NotEnoughTasks"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"
NOT_ENOUGH_SUB_GROUPS = "NotEnoughSubGroups"
SCHEDULED_REASON = "tasks in gang are ready to be scheduled"
NOT_READY = "pod group is not ready"
READY = "pod group is ready"
ALL_NODES_UNAVAILABLE = "all nodes are unavailable"
_UNSCHEDULABLE_PHASES = frozenset({"Pending", "Inqueue", "Unknown"})
_VALID_STATUSES = (*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED, TaskStatus.PIPELINED)
_WAITING = (TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED)
_NO_TASKS: dict[str, TaskInfo] = {}
# What the plugin keeps with a job between sessions (``Incremental.memo_for_job``): its
# validity.
_VALIDITY = "gang.valid"
# What close derived for a gang that waits for resources (``Unready``), kept with the job.
_UNREADY = "gang.unready"


def _per_task_checks_apply(job: JobInfo) -> bool:
    """Volcano checks tasks' minimums only when minMember covers their sum."""
    return bool(job.min_task_member) and job.min_available >= sum(job.min_task_member.values())


def _roles_satisfied(job: JobInfo, statuses: Sequence[TaskStatus], best_effort: bool) -> bool:
    if not _per_task_checks_apply(job):
        return True
    wanted = set(statuses)
    counts: dict[str, int] = {}
    for task in job.tasks.values():
        if task.status in wanted or (
            best_effort and task.status == TaskStatus.PENDING and task.best_effort
        ):
            counts[task.role] = counts.get(task.role, 0) + 1
    return all(counts.get(role, 0) >= n for role, n in job.min_task_member.items())


def has_best_effort(job: JobInfo) -> bool:
    """Whether any of the job's pods requests nothing (counted as tasks come and go)."""
    return job.best_effort_tasks > 0


def job_valid(incremental: Incremental, job: JobInfo) -> ValidateResult | None:
    """Why the job cannot be scheduled as a gang (too few valid pods), None when it can;
    kept with the job while it does not change (allocate asks for every job, every session)."""
    return incremental.memo_for_job(job, _VALIDITY, _job_validity)


def _job_validity(job: JobInfo) -> ValidateResult | None:
    if not _roles_satisfied(job, (*_VALID_STATUSES, TaskStatus.PENDING), best_effort=False):
        return ValidateResult(
            False,
            NOT_ENOUGH_PODS_OF_TASK,
            "Not enough valid pods of each task for gang-scheduling",
        )
    valid = job.valid_task_num()
    if valid < job.min_available:
        return ValidateResult(
            False,
            NOT_ENOUGH_TASKS,
            f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}",
        )
    if not sub_groups_valid(job):
        return ValidateResult(
            False, NOT_ENOUGH_SUB_GROUPS, "Not enough sub-groups (minSubGroups) for gang-scheduling"
        )
    return None


def is_ready(job: JobInfo, has_best_effort: bool = True) -> bool:
    """``job.is_ready()``, looking at pending pods only when they can change the answer
    (``has_best_effort``: whether the job has any best-effort pod at all)."""
    ready = job.ready_task_num()
    if ready >= job.min_available:
        return True
    if not has_best_effort:
        return False
    pending = job.by_status.get(TaskStatus.PENDING)
    if not pending or ready + len(pending) < job.min_available:
        return False
    return job.is_ready()


def job_ready(job: JobInfo, has_best_effort: bool = True) -> bool:
    return (
        is_ready(job, has_best_effort)
        and _roles_satisfied(job, tuple(READY_STATUSES), best_effort=True)
        and sub_groups_ready(job)
    )


def job_pipelined(job: JobInfo) -> int:
    statuses = (*READY_STATUSES, TaskStatus.PIPELINED)
    if (
        job.is_pipelined()
        and _roles_satisfied(job, statuses, best_effort=True)
        and sub_groups_pipelined(job)
    ):
        return 1
    return -1


def _histogram(counts: dict[str, int]) -> str:
    """Volcano's sorted "N reason" list."""
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def _context(task: TaskInfo) -> tuple[TaskStatus, str]:
    if task.last_transaction is not None:
        return task.last_transaction
    return task.status, task.node_name


def task_reason(job: JobInfo, task: TaskInfo, job_message: str) -> tuple[str, str]:
    """Why a task waits (Volcano's TaskSchedulingReason): (reason, message)."""
    status, node = _context(task)
    if status == TaskStatus.ALLOCATED:
        return (
            "Schedulable",
            f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, "
            "once minAvailable is satisfied",
        )
    if status == TaskStatus.PIPELINED:
        return (
            "Unschedulable",
            f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, "
            "once resource is released and minAvailable is satisfied",
        )
    if status == TaskStatus.PENDING:
        fit = job.fit_errors.get(task.uid)
        if fit:
            return "Unschedulable", fit
        return "Undetermined", job_message
    return status.value, job_message


def fit_error(job: JobInfo) -> str:
    """Volcano's JobInfo.FitError: task counts by status, why the pending ones wait (the
    reasons, which do not depend on the job's message), and the fit error of the first pod
    (by name) that found no node."""
    prefix, origin = _fit_error_parts(job)
    return _with_origin(job, prefix, origin)


def _fit_error_parts(job: JobInfo) -> tuple[str, TaskInfo | None]:
    """``fit_error(job)`` but for the origin's fit error: the text before it, and the pod it
    is of (None: no pending pod has a fit error). Only which pods have a fit error counts
    here, not what it says."""
    counts = {s.value: len(bucket) for s, bucket in job.by_status.items() if bucket}
    counts["minAvailable"] = job.min_available
    message = f"{NOT_READY}, {_histogram(counts)}"
    reasons: dict[str, int] = {}
    for task in job.tasks_in(TaskStatus.PENDING):
        reason, _ = task_reason(job, task, "")
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        message += f"; Pending: {_histogram(reasons)}"
    # As newer Volcano does: the fit error of one pod that found no node (the first by name).
    failed = [t for t in job.tasks_in(TaskStatus.PENDING) if job.fit_errors.get(t.uid)]
    return message, min(failed, key=_name) if failed else None


def _name(task: TaskInfo) -> str:
    return task.name


def _with_origin(job: JobInfo, prefix: str, origin: TaskInfo | None) -> str:
    if origin is None:
        return prefix
    return f"{prefix}. Origin reason is {origin.name}: {job.fit_errors[origin.uid]}"


class GangPlugin:
    """Gang scheduling: all of minAvailable or nothing."""

    name = "gang"

    def __init__(self, args: Arguments) -> None:
        self.args = args

    def on_session_open(self, ssn: Session) -> None:
        jobs = ssn.jobs

        def ready(job: JobInfo) -> bool:
            return is_ready(job, has_best_effort(job))

        def ready_fn(job: JobInfo) -> bool:
            return job_ready(job, has_best_effort(job))

        def job_order(left: JobInfo, right: JobInfo) -> int:
            left_ready, right_ready = ready(left), ready(right)
            if left_ready == right_ready:
                return 0
            return 1 if left_ready else -1

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            occupied: dict[str, int] = {}
            chosen = []
            for victim in candidates:
                job = jobs.get(victim.job)
                if job is None:
                    continue
                if victim.job not in occupied:
                    occupied[victim.job] = job.ready_task_num()
                if occupied[victim.job] > job.min_available:
                    occupied[victim.job] -= 1
                    chosen.append(victim)
            return chosen

        def has_spare(preemptor: TaskInfo, job: JobInfo) -> bool:
            # A job at or below minAvailable gives no victim, whatever the candidates.
            return job.ready_task_num() > job.min_available

        def starving(job: JobInfo) -> int:
            return 1 if job.is_starving() else -1

        ssn.add_job_valid_fn(self.name, functools.partial(job_valid, ssn.incremental))
        ssn.add_job_ready_fn(self.name, ready_fn)
        ssn.add_job_pipelined_fn(self.name, job_pipelined)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_starving_fn(self.name, starving)
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        # Not ready (False) first; a job at or below minAvailable gives no victim.
        ssn.add_speedups(self.name, Speedups(job_order_key=ready, victim_screen=has_spare))

    def on_session_close(self, ssn: Session) -> None:
        now = format_time(ssn.now)

        def ready(job: JobInfo) -> bool:
            return is_ready(job, has_best_effort(job))

        scheduled = PodGroupCondition(
            type="Scheduled", status="True", last_transition_time=now, reason=SCHEDULED_REASON
        )
        # A settled job is ready, no pod waits, and its PodGroup already said so in an earlier
        # session, unchanged since: no event, no message, the same condition (given once).
        incremental = ssn.incremental
        incremental.settled_condition = scheduled
        for job in incremental.unsettled_jobs():
            job_message = ""
            fit: str | None = None  # fit_error(job), once asked for
            messages: dict[str, str] | None = None  # the waiting pods', once derived
            job_is_ready = ready(job)
            invalid = None if job_is_ready else job_valid(incremental, job)
            gate = ssn.job_conditions.get(job.key) if job.phase in ("", "Pending") else None
            if gate is not None and not job_is_ready:
                # An enqueue gate (resourcequota) said why the job stays Pending: keep it.
                condition, job_message = gate, gate.message
            elif job_is_ready:
                condition = scheduled
            elif invalid is not None:
                condition = PodGroupCondition(
                    type="Unschedulable",
                    status="True",
                    last_transition_time=now,
                    reason=invalid.reason,
                    message=invalid.message,
                )
            else:
                found = recall_unready(incremental, job)
                fit, job_message, messages = found.fit, found.job_message, found.messages
                ssn.note_wait(
                    job.key,
                    WaitStage.ALLOCATE,
                    f"needs {job.min_available} pods at once (minAvailable); "
                    f"{found.schedulable} fit now",
                )
                condition = PodGroupCondition(
                    type="Unschedulable",
                    status="True",
                    last_transition_time=now,
                    reason=NOT_ENOUGH_RESOURCES,
                    message=job_message,
                )
            ssn.job_conditions[job.key] = condition
            unchanged = self._record(ssn, job, condition, job_message, fit, messages)
            if (
                unchanged
                and condition is scheduled
                and job.podgroup is not None
                and not any(job.by_status.get(status) for status in _WAITING)
            ):
                incremental.settling.add(job.key)

    @staticmethod
    def _record(
        ssn: Session,
        job: JobInfo,
        condition: PodGroupCondition,
        job_message: str,
        fit: str | None,
        messages: dict[str, str] | None = None,
    ) -> bool:
        """The job updater's event and the waiting pods' messages; whether the job's PodGroup
        status stays as it is. ``fit``: ``fit_error(job)`` when already built; ``messages``:
        ``waiting_messages(job, job_message)`` when already derived."""
        unchanged = False
        if podgroup_phase(job, condition) in _UNSCHEDULABLE_PHASES:
            if ssn.explain:  # else no Event is wanted: not worth its text
                pending = job.count(TaskStatus.PENDING)
                ssn.record_event(
                    "PodGroup",
                    job.namespace,
                    job.name,
                    "Warning",
                    "Unschedulable",
                    f"{pending}/{len(job.tasks)} tasks in gang unschedulable: "
                    f"{fit if fit is not None else fit_error(job)}",
                )
        else:
            current = job.podgroup.status if job.podgroup is not None else None
            if current is None or status_changed(current, podgroup_status(job, condition)):
                ssn.record_event("PodGroup", job.namespace, job.name, "Normal", "Scheduled", READY)
            else:
                unchanged = True
        if messages is None:
            messages = waiting_messages(job, job_message)
        ssn.result.unschedulable.update(messages)
        return unchanged


def waiting_messages(job: JobInfo, job_message: str) -> dict[str, str]:
    """Why each of the job's waiting pods waits, by pod key (the pods' PodScheduled message)."""
    messages = {}
    for task in job.tasks_in(*_WAITING):
        _, message = task_reason(job, task, job_message)
        messages[task.key] = message or ALL_NODES_UNAVAILABLE
    return messages


@dataclass(frozen=True, slots=True)
class Unready:
    """What close derives for a gang that is valid, not ready and waits for resources, with
    what it read beyond the job's state: the fit errors and the pending pods' last placements
    (a session's marks, set afresh by every turn); and what of it follows the fit errors'
    text alone (``_retold``)."""

    fit_errors: dict[str, str]
    placements: tuple[tuple[TaskStatus, str] | None, ...]  # the waiting pods' last ones
    schedulable: int  # ready pods, and pending ones the last turn placed
    fit: str  # fit_error(job)
    job_message: str  # the condition's message
    messages: dict[str, str]  # waiting_messages(job, job_message)
    prefix: str  # fit but for its origin's fit error
    origin: TaskInfo | None  # the pod whose fit error ends fit
    failing: frozenset[str]  # the pending pods with a fit error, by uid
    own: tuple[TaskInfo, ...]  # waiting pods whose message is their fit error
    general: tuple[str, ...]  # keys of the waiting pods whose message is the job's


def _placements(job: JobInfo) -> tuple[tuple[TaskStatus, str] | None, ...]:
    """The waiting pods' last placements (what their messages read besides the fit errors)."""
    by_status = job.by_status
    return tuple(
        task.last_transaction
        for status in _WAITING
        for task in by_status.get(status, _NO_TASKS).values()
    )


def _failing(job: JobInfo) -> frozenset[str]:
    return frozenset(uid for uid, text in job.fit_errors.items() if text)


def recall_unready(incremental: Incremental, job: JobInfo) -> Unready:
    """``derive_unready(job)``, kept with the job (``Incremental.keep_for_job``) and reused
    while the
    job's state, fit errors and last placements are as they were: a waiting gang whose turn is
    replayed (scheduler.actions.retry) asks for the same, session after session. When only
    the fit errors' text changed (the same pods failing: the nodes' reasons moved), the texts
    are put in anew (``_retold``) rather than everything derived again."""
    kept = incremental.kept_for_job(job, _UNREADY)
    if isinstance(kept, Unready):
        if kept.fit_errors == job.fit_errors:
            if kept.placements == _placements(job):
                return kept
        elif kept.failing == _failing(job) and kept.placements == _placements(job):
            found = _retold(job, kept)
            incremental.keep_for_job(job, _UNREADY, found)
            return found
    found = derive_unready(job)
    incremental.keep_for_job(job, _UNREADY, found)
    return found


def derive_unready(job: JobInfo) -> Unready:
    """The condition's message, the fit error and the waiting pods' messages of a valid gang
    that is not ready (Volcano's "X/Y tasks in gang unschedulable: ...")."""
    schedulable = job.ready_task_num() + sum(
        1
        for task in job.tasks_in(TaskStatus.PENDING)
        if task.last_transaction is not None and task.last_transaction[0] in ALLOCATED_STATUSES
    )
    prefix, origin = _fit_error_parts(job)
    fit = _with_origin(job, prefix, origin)
    job_message = f"{_head(job, schedulable)}{fit}"
    own, general = [], []
    for task in job.tasks_in(*_WAITING):
        if _context(task)[0] == TaskStatus.PENDING:
            if job.fit_errors.get(task.uid):
                own.append(task)
            else:
                general.append(task.key)
    return Unready(
        dict(job.fit_errors),
        _placements(job),
        schedulable,
        fit,
        job_message,
        waiting_messages(job, job_message),
        prefix,
        origin,
        _failing(job),
        tuple(own),
        tuple(general),
    )


def _head(job: JobInfo, schedulable: int) -> str:
    return f"{job.min_available - schedulable}/{len(job.tasks)} tasks in gang unschedulable: "


def _retold(job: JobInfo, kept: Unready) -> Unready:
    """``derive_unready(job)`` for a job whose state, last placements and failing pods are
    ``kept``'s, only the fit errors' text changed: the texts put in anew."""
    fit = _with_origin(job, kept.prefix, kept.origin)
    job_message = f"{_head(job, kept.schedulable)}{fit}"
    messages = dict(kept.messages)
    for task in kept.own:
        messages[task.key] = job.fit_errors[task.uid]
    for key in kept.general:
        messages[key] = job_message or ALL_NODES_UNAVAILABLE
    return Unready(
        dict(job.fit_errors),
        kept.placements,
        kept.schedulable,
        fit,
        job_message,
        messages,
        kept.prefix,
        kept.origin,
        kept.failing,
        kept.own,
        kept.general,
    )
