"""``caldera job why``: why a job waits, in plain words, one finding per stage that holds it.

`explain` is a pure function: it takes the Job, its PodGroup, its Queue, its pods, the Commands
naming it and `now`, and returns `Finding`s in order of precedence. ``cli/job.py`` fetches those
objects and prints the findings, alone (``job why``) or as the "Why" section of ``job view``.

The order, and what ends the list early:

1. ``finished`` / ``running``: the job is done, or runs with at least minAvailable pods: nothing
   else is said.
2. ``suspended``: Aborting or Aborted (an AbortJob Command, ``caldera job resume`` undoes it);
   its pods and PodGroup are gone, so nothing else is said. ``command``: a Command naming the
   job that the job controller has not consumed yet (it deletes each one it executes).
3. ``queue``: the job's queue is missing or not Open; the scheduler admits nothing from it.
4. ``dependsOn``: a task whose pods wait for the tasks it depends on, by the job controller's rule
   (`controllers.job.sync.dependencies_met`, Volcano's ``waitDependsOnTaskMeetCondition``).
5. The scheduler's record (`caldera.api.why`, the PodGroup annotation ``WHY_ANNOTATION``): its
   stage (``enqueue``, ``queue``, ``allocate``, ``none``), summary and detail lines with their
   age; ``stale`` when the record's stage contradicts the PodGroup's phase.
6. ``podgroup``: without a (current) record, the PodGroup's Unschedulable condition and phase, as
   Volcano's own scheduler leaves them; or that no PodGroup exists yet.
7. ``pods``: the pods' PodScheduled=False messages, grouped, at most `MAX_POD_MESSAGES` lines.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Pod, PodPhase
from caldera.api.duration import human_duration
from caldera.api.meta import parse_time
from caldera.api.names import pod_name
from caldera.api.volcano import (
    BATCH_API_VERSION,
    Action,
    Command,
    Iteration,
    Job,
    JobPhase,
    PodGroup,
    PodGroupConditionType,
    PodGroupPhase,
    Queue,
    QueueState,
    TaskSpec,
)
from caldera.api.why import WHY_ANNOTATION, WaitRecord, WaitStage, decode_record
from controllers.job.sync import dependencies_met, task_min_available

__all__ = ["MAX_POD_MESSAGES", "Finding", "Stage", "explain", "render_lines"]

# Pods of a big job often share one message; more distinct ones than this are summed up.
MAX_POD_MESSAGES: Final = 3


class Stage:
    """The ``stage`` of a finding (the scheduler's own stages come from `WaitStage`)."""

    FINISHED: Final = "finished"
    RUNNING: Final = "running"
    RESTARTING: Final = "restarting"
    SUSPENDED: Final = "suspended"
    COMMAND: Final = "command"
    QUEUE: Final = "queue"
    DEPENDS_ON: Final = "dependsOn"
    STALE: Final = "stale"
    PODGROUP: Final = "podgroup"
    PODS: Final = "pods"
    UNKNOWN: Final = "unknown"


@dataclass(frozen=True, slots=True)
class Finding:
    """One answer: the stage it is about, a sentence, and indented detail lines."""

    stage: str
    text: str
    details: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """The ``-o json|yaml`` form."""
        return {"stage": self.stage, "text": self.text, "details": list(self.details)}


_FINISHED: Final = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED})
_FINISHING: Final = frozenset({JobPhase.COMPLETING, JobPhase.TERMINATING})
_SUSPENDED: Final = frozenset({JobPhase.ABORTING, JobPhase.ABORTED})
_NOT_ENQUEUED: Final = frozenset({"", PodGroupPhase.PENDING})
# The PodGroup phases in which a record of each stage can be current: enqueue and queue hold a
# Pending PodGroup; allocate runs on an admitted one (Unknown: some of its pods run).
_RECORD_PHASES: Final[Mapping[str, frozenset[str]]] = {
    WaitStage.ENQUEUE: _NOT_ENQUEUED,
    WaitStage.QUEUE: _NOT_ENQUEUED,
    WaitStage.ALLOCATE: frozenset(
        {PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN, PodGroupPhase.RUNNING}
    ),
    WaitStage.NONE: frozenset(
        {PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN, PodGroupPhase.RUNNING}
    ),
}


def explain(
    job: Job,
    podgroup: PodGroup | None,
    queue: Queue | None,
    pods: Sequence[Pod],
    now: dt.datetime,
    *,
    commands: Sequence[Command] = (),
    queue_readable: bool = True,
) -> list[Finding]:
    """Why `job` waits, stage by stage, most decisive first; never empty.

    `queue` None means the job's queue does not exist, unless `queue_readable` is False (the
    user may not read it: queues are cluster-scoped), when nothing is said about it. `pods` are
    the job's pods, `commands` the Commands in its namespace (those not naming the job are
    ignored).
    """
    phase = job.status.state.phase
    done = _not_waiting(job, phase)
    if done is not None:
        return [done]
    findings: list[Finding] = []
    if phase in _SUSPENDED:
        findings.append(_suspended(job, now))
    findings += _pending_commands(job, commands, now)
    if phase in _SUSPENDED:
        return findings
    if phase == JobPhase.RESTARTING:
        findings.append(
            Finding(
                Stage.RESTARTING,
                f"job is restarting (retry {job.status.retry_count} of {job.spec.max_retry}): "
                "its pods are deleted, then created again",
            )
        )
        return findings
    queue_finding = _queue(job, queue) if queue_readable else None
    if queue_finding is not None:
        findings.append(queue_finding)
    findings += _depends_on(job, pods)
    findings += _scheduler(job, podgroup, queue_finding is not None, now)
    pods_finding = _unscheduled_pods(pods)
    if pods_finding is not None:
        findings.append(pods_finding)
    if not findings:
        findings.append(_nothing_found(job, podgroup))
    return findings


def render_lines(findings: Sequence[Finding]) -> list[str]:
    """The plain-text form: one line per finding, its details indented below it."""
    lines: list[str] = []
    for f in findings:
        lines.append(f.text)
        lines += [f"  {d}" for d in f.details]
    return lines


# --- 1, 2: not waiting, suspended, Commands -----------------------------------------------------


def _not_waiting(job: Job, phase: str) -> Finding | None:
    if phase in _FINISHED:
        return Finding(Stage.FINISHED, f"job finished: {phase}")
    if phase in _FINISHING:
        return Finding(Stage.FINISHED, f"job is finishing: {phase} (its pods are being deleted)")
    running, minimum = job.status.running, job.spec.min_available
    if phase == JobPhase.RUNNING and running >= minimum:
        total = sum(t.replicas for t in job.spec.tasks)
        text = f"not waiting: {running}/{total} pods running"
        if running < total:
            text += f" (minAvailable {minimum})"
        return Finding(Stage.RUNNING, text)
    return None


def _age(timestamp: str | None, now: dt.datetime) -> str | None:
    """`human_duration` since an RFC 3339 time, or None when there is none or it is bad."""
    if not timestamp:
        return None
    try:
        return human_duration(now - parse_time(timestamp))
    except ValueError:
        return None


def _suspended(job: Job, now: dt.datetime) -> Finding:
    # The Aborting condition is when the AbortJob ran (Aborted follows once the pods are gone).
    when = next(
        (c.last_transition_time for c in job.status.conditions if c.status == JobPhase.ABORTING),
        job.status.state.last_transition_time,
    )
    age = _age(when, now)
    at = f" at {when} ({age} ago)" if when and age else ""
    by_policy = any(
        p.action == Action.ABORT_JOB
        for p in (*job.spec.policies, *(p for t in job.spec.tasks for p in t.policies))
    )
    # A policy of the job may abort it too; the Job's status does not say which one did.
    who = "by a Command or a policy of the job" if by_policy else "by a Command"
    return Finding(
        Stage.SUSPENDED,
        f"suspended {who} ({Action.ABORT_JOB}){at}; `{_job_command('resume', job)}` resumes it",
    )


def _job_command(verb: str, job: Job) -> str:
    return f"caldera job {verb} -n {job.metadata.namespace} -N {job.metadata.name}"


def _names_job(command: Command, job: Job) -> bool:
    target = command.target
    return (
        target is not None
        and target.kind == "Job"
        and target.api_version == BATCH_API_VERSION
        and target.name == job.metadata.name
        and (not target.uid or target.uid == job.metadata.uid)
    )


def _pending_commands(job: Job, commands: Sequence[Command], now: dt.datetime) -> list[Finding]:
    # The job controller deletes a Command before executing it, so one still there has not run.
    found = []
    for c in sorted(commands, key=lambda c: c.metadata.creation_timestamp or ""):
        if not _names_job(c, job):
            continue
        age = _age(c.metadata.creation_timestamp, now)
        since = f", created {age} ago," if age else ""
        found.append(
            Finding(
                Stage.COMMAND,
                f"Command {c.metadata.name} ({c.action or '<no action>'}){since} has not been "
                "executed yet: the job controller (`caldera controllers`) runs it",
            )
        )
    return found


# --- 3, 4: queue, dependsOn ---------------------------------------------------------------------


def _queue(job: Job, queue: Queue | None) -> Finding | None:
    name = job.spec.queue or "default"
    if queue is None:
        return Finding(
            Stage.QUEUE,
            f"queue {name} does not exist: no job in it is admitted until it is created "
            f"(`caldera queue create -n {name}`)",
        )
    state = queue.status.state or QueueState.OPEN
    if state == QueueState.OPEN:
        return None
    return Finding(
        Stage.QUEUE,
        f"queue {name} is {state}: no job in it is admitted until it is opened "
        f"(`caldera queue operate -n {name} -a open`)",
    )


def _ready(pod: Pod) -> bool:
    # The job controller's rule (controllers.job.sync, Volcano's isDependsOnPodsReady):
    # Succeeded, or Running with every container Ready.
    if pod.status.phase == PodPhase.SUCCEEDED:
        return True
    return pod.status.phase == PodPhase.RUNNING and all(
        s.ready for s in pod.status.container_statuses
    )


def _dependency_text(job: Job, task: TaskSpec | None, name: str, pods: Mapping[str, Pod]) -> str:
    if task is None:
        return f"the job has no task {name}"
    slots = [pods.get(pod_name(job.metadata.name, name, i)) for i in range(task.replicas)]
    ready = sum(1 for p in slots if p is not None and _ready(p))
    text = f"{ready}/{task_min_available(task)} {name} pods running"
    unready = sum(
        1 for p in slots if p is not None and p.status.phase == PodPhase.RUNNING and not _ready(p)
    )
    if unready:
        text += f" ({unready} more running but not ready)"
    return text


def _depends_on(job: Job, pods: Sequence[Pod]) -> list[Finding]:
    # All pods, terminating ones too: the job controller counts them the same way (plan_sync).
    by_name = {p.metadata.name: p for p in pods}
    tasks = {t.name: t for t in job.spec.tasks}
    found = []
    for task in job.spec.tasks:
        deps = task.depends_on
        if deps is None or not deps.name:
            continue
        missing = any(
            pod_name(job.metadata.name, task.name, i) not in by_name for i in range(task.replicas)
        )
        if not missing or dependencies_met(job, task, by_name):
            continue
        iteration = Iteration.ANY if deps.iteration == Iteration.ANY else Iteration.ALL
        noun = "task" if len(deps.name) == 1 else "tasks"
        counts = "; ".join(_dependency_text(job, tasks.get(n), n, by_name) for n in deps.name)
        found.append(
            Finding(
                Stage.DEPENDS_ON,
                f"task {task.name} waits for {noun} {', '.join(deps.name)} "
                f"(dependsOn, iteration {iteration}): {counts}",
            )
        )
    return found


# --- 5, 6: the scheduler's record, or the PodGroup ----------------------------------------------


def _scheduler(
    job: Job, podgroup: PodGroup | None, queue_said: bool, now: dt.datetime
) -> list[Finding]:
    if podgroup is None:
        if not job.status.state.phase:
            why = "the job controller has not processed the job yet (is it running?)"
        else:
            why = (
                "the job controller has not created it (it creates the job's plugin resources "
                "and volumes first: see the job's events)"
            )
        return [Finding(Stage.PODGROUP, f"no PodGroup yet: {why}")]
    phase = podgroup.status.phase
    record = decode_record(podgroup.metadata.annotations.get(WHY_ANNOTATION))
    found: list[Finding] = []
    if record is not None:
        stale = _stale(record, phase, queue_said)
        if stale is None:
            if record.stage == WaitStage.QUEUE and queue_said:
                return []  # the queue line above says it, with the queue's state of now
            return [_record_finding(record, now)]
        found.append(stale)
    fallback = _podgroup_finding(podgroup)
    if fallback is not None:
        found.append(fallback)
    return found


def _as_of(record: WaitRecord, now: dt.datetime) -> str:
    age = _age(record.time, now)
    return f"as of {age} ago" if age else "at an unknown time"


def _stale(record: WaitRecord, phase: str, queue_said: bool) -> Finding | None:
    """A finding saying the record no longer holds, or None when it may be current."""
    expected = _RECORD_PHASES.get(record.stage)
    if expected is not None and phase not in expected:
        why = f"the PodGroup is now {phase or PodGroupPhase.PENDING}"
    elif record.stage == WaitStage.QUEUE and not queue_said:
        why = "the queue is open now"
    else:
        return None
    return Finding(
        Stage.STALE,
        f"the scheduler's last finding ({record.stage}: {record.summary}) is from an earlier "
        f"session: {why}",
    )


def _record_finding(record: WaitRecord, now: dt.datetime) -> Finding:
    stage = record.stage if record.stage in _RECORD_PHASES else Stage.UNKNOWN
    if record.stage == WaitStage.NONE:
        text = f"scheduler ({_as_of(record, now)}): the gang is placed: {record.summary}"
    else:
        text = f"scheduler ({_as_of(record, now)}): {record.summary}"
    return Finding(stage, text, record.details)


def _podgroup_finding(podgroup: PodGroup) -> Finding | None:
    phase = podgroup.status.phase or PodGroupPhase.PENDING
    name = podgroup.metadata.name
    for cond in podgroup.status.conditions:
        if cond.type == PodGroupConditionType.UNSCHEDULABLE and cond.status == "True":
            said = ": ".join(x for x in (cond.reason, " ".join(cond.message.split())) if x)
            return Finding(
                Stage.PODGROUP, f"PodGroup {name} is {phase}, unschedulable: {said or 'no reason'}"
            )
    if phase == PodGroupPhase.PENDING:
        return Finding(
            Stage.PODGROUP,
            f"PodGroup {name} is Pending: the scheduler has not admitted it (enqueued) yet and "
            "has not said why",
        )
    return None


# --- 7: the pods --------------------------------------------------------------------------------


def _unscheduled_pods(pods: Sequence[Pod]) -> Finding | None:
    messages: Counter[str] = Counter()
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None or pod.spec.node_name:
            continue
        for cond in pod.status.conditions:
            if cond.type == "PodScheduled" and cond.status == "False":
                messages[" ".join(cond.message.split()) or "(no message)"] += 1
    if not messages:
        return None
    ranked = sorted(messages.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [f"{n} {'pod' if n == 1 else 'pods'}: {m}" for m, n in ranked[:MAX_POD_MESSAGES]]
    rest = ranked[MAX_POD_MESSAGES:]
    if rest:
        pods_left = sum(n for _m, n in rest)
        lines.append(f"... and {pods_left} more pods with {len(rest)} other messages")
    total = sum(messages.values())
    return Finding(
        Stage.PODS, f"{total} {'pod is' if total == 1 else 'pods are'} not scheduled:", tuple(lines)
    )


def _nothing_found(job: Job, podgroup: PodGroup | None) -> Finding:
    pg = podgroup.status.phase if podgroup is not None else ""
    return Finding(
        Stage.UNKNOWN,
        f"nothing found that holds the job: job {job.status.state.phase or 'new'}, PodGroup "
        f"{pg or PodGroupPhase.PENDING}, {job.status.running}/{job.spec.min_available} "
        "minAvailable pods running (pods may be starting on their nodes)",
    )
