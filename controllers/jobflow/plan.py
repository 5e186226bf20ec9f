"""What the jobflow controller does for one JobFlow at one instant (pure logic, no I/O).

``plan(jobflow, jobs, templates, now)`` takes the JobFlow, the Volcano Jobs of its namespace that
matter (those it controls, and any under the name of one of its flows), the JobTemplates by name
and the time, and returns the writes. It follows Volcano's pkg/controllers/jobflow (v1.12-v1.13;
where v1.13 and later releases differ, the later fix):

- The Job of flow ``f`` is ``<jobflow>-<f>``, made from the JobTemplate ``f`` of the JobFlow's
  namespace: its spec, the labels and annotations ``volcano.sh/createdByJobFlow`` and
  ``volcano.sh/createdByJobTemplate`` (``<namespace>.<name>``), a controller owner reference to
  the JobFlow. A flow's Job is created once every flow in its ``dependsOn.targets`` has a Job in
  phase Completed (at once without targets); probes are not read (nor by Volcano).
- The status lists the JobFlow's Jobs by phase (``pendingJobs`` ... ``unKnowJobs``; Completing,
  Terminating, Aborting, Aborted and Restarting Jobs are in no list but ``unKnowJobs`` for the
  last three, as in Volcano), ``conditions`` per Job, and ``jobStatusList``, which keeps an entry
  per Job ever seen with the history of the phases the controller saw, each stamped ``now``.
- The phase: Pending until a Job runs or completes (Running) or one fails (Failed); Running
  until every flow's Job has completed (Succeed) or a Job is Failed or Terminated (Failed).
  Succeed and Failed are final; Terminating is declared by Volcano and entered by nothing.
- Only a Pending or Running flow creates Jobs. A Succeed flow with ``jobRetainPolicy: delete``
  deletes its Jobs and keeps its status as it was, as Volcano does.
- A flow whose Job completed is done even once that Job is gone (its ``ttlSecondsAfterFinished``,
  a user's delete): ``jobStatusList`` remembers it Completed, so it is not run again and the
  flows waiting for it may start (Volcano creates the Job again and runs the step twice).
- Only Jobs whose controller reference carries the JobFlow's UID are its own: counted in the
  status, deleted (``jobRetainPolicy: delete``). A Job of a flow's name that another made is
  left alone: the flow waits for it to go (a ``ForeignJob`` Warning), or, done before it came,
  stays done.

Time comes from the caller, never the system clock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from caldera.api.duration import DurationError, parse_duration
from caldera.api.flow import (
    CREATED_BY_JOB_FLOW_KEY,
    CREATED_BY_JOB_TEMPLATE_KEY,
    FlowCondition,
    FlowJobStatus,
    FlowPhase,
    FlowState,
    JobFlow,
    JobFlowStatus,
    JobRunningHistory,
    JobTemplate,
    RetainPolicy,
    flow_job_name,
    object_string,
)
from caldera.api.flowgraph import find_cycle, graph_of, undefined
from caldera.api.kinds import JOBFLOW, controller_reference
from caldera.api.meta import ObjectMeta, format_time, parse_time
from caldera.api.volcano import Job, JobPhase
from controllers.notes import Note

__all__ = [
    "Plan",
    "Transition",
    "controlled_by",
    "flow_job_keys",
    "foreign_job",
    "job_for",
    "next_phase",
    "plan",
    "status_of",
]

# The phases Volcano's getAllJobStatus sorts Jobs into; every other phase is "unknown".
_LISTED: Final = frozenset(
    {
        JobPhase.PENDING,
        JobPhase.RUNNING,
        JobPhase.COMPLETING,
        JobPhase.COMPLETED,
        JobPhase.TERMINATING,
        JobPhase.TERMINATED,
        JobPhase.FAILED,
    }
)
_CREATING: Final = frozenset({FlowPhase.PENDING, FlowPhase.RUNNING})
_PHASES: Final = frozenset(FlowPhase)


@dataclass(frozen=True, slots=True)
class Transition:
    """The flow reached a final phase with this status: counted and told once it is written."""

    phase: str  # Succeed | Failed
    note: Note


@dataclass(frozen=True, slots=True)
class Plan:
    """The writes for one reconcile. ``status`` None: leave the status alone."""

    create: tuple[Job, ...] = ()
    delete: tuple[Job, ...] = ()
    status: JobFlowStatus | None = None
    notes: tuple[Note, ...] = ()
    transition: Transition | None = None


def controlled_by(job: Job, jobflow: JobFlow) -> bool:
    """Whether ``jobflow`` (this one, by UID) is the controller of ``job``."""
    return any(
        ref.controller and ref.kind == "JobFlow" and ref.uid == jobflow.metadata.uid
        for ref in job.metadata.owner_references
    )


def foreign_job(name: str, flow: str) -> Note:
    """The Warning for a Job of a flow's name that this JobFlow does not control: it is left
    alone (never counted, patched or deleted) and the flow waits for it to go."""
    return Note(
        "Warning",
        "ForeignJob",
        f"Job {name} exists and this JobFlow does not control it: "
        f"flow {flow!r} waits until it is gone",
    )


def flow_job_keys(jobflow: JobFlow) -> list[str]:
    """The keys (``namespace/name``) of the Jobs the flows of ``jobflow`` make: any Job under
    one of them, its own or another's, concerns the flow (another's going lets it start)."""
    namespace, name = jobflow.metadata.namespace, jobflow.metadata.name
    return sorted({f"{namespace}/{flow_job_name(name, f.name)}" for f in jobflow.spec.flows})


def job_for(jobflow: JobFlow, flow: str, template: JobTemplate) -> Job:
    """The Job of ``flow``, as Volcano's loadJobTemplateAndSetJob makes it."""
    namespace = jobflow.metadata.namespace
    created_by = {
        CREATED_BY_JOB_TEMPLATE_KEY: object_string(namespace, flow),
        CREATED_BY_JOB_FLOW_KEY: object_string(namespace, jobflow.metadata.name),
    }
    meta = ObjectMeta(
        name=flow_job_name(jobflow.metadata.name, flow),
        namespace=namespace,
        labels=dict(created_by),
        annotations=dict(created_by),
        owner_references=(controller_reference(JOBFLOW, jobflow.metadata),),
    )
    return Job(metadata=meta, spec=template.spec)


def _phase(job: Job) -> str:
    return job.status.state.phase


def _end(job: Job) -> str | None:
    """The creation time plus ``runningDuration`` (Volcano's endTimestamp), or None."""
    created, duration = job.metadata.creation_timestamp, job.status.running_duration
    if not created or not duration:
        return None
    try:
        return format_time(parse_time(created) + dt.timedelta(seconds=parse_duration(duration)))
    except (ValueError, DurationError, OverflowError):
        return None


def _histories(old: Sequence[FlowJobStatus], job: Job, now: str) -> tuple[JobRunningHistory, ...]:
    """Volcano's getRunningHistories: the last entry closed and a new one opened at ``now``
    when the Job's phase changed; a first entry when the Job is first seen with a phase."""
    phase = _phase(job)
    for entry in old:
        if entry.name == job.metadata.name and entry.running_histories:
            *earlier, last = entry.running_histories
            if last.state == phase:
                return entry.running_histories
            closed = JobRunningHistory(
                start_timestamp=last.start_timestamp, end_timestamp=now, state=last.state
            )
            return (*earlier, closed, JobRunningHistory(start_timestamp=now, state=phase))
    return (JobRunningHistory(start_timestamp=now, state=phase),) if phase else ()


def status_of(
    jobflow: JobFlow, jobs: Sequence[Job], now: dt.datetime
) -> tuple[JobFlowStatus, dict[str, list[str]]]:
    """The status Volcano's getAllJobStatus derives from ``jobs`` (the flow's own, in the order
    to list them), with the phase as it was; and the Job names by phase."""
    by_phase: dict[str, list[str]] = {phase: [] for phase in _LISTED}
    unknown: list[str] = []
    conditions: dict[str, FlowCondition] = {}
    for job in jobs:
        name = job.metadata.name
        by_phase.get(_phase(job), unknown).append(name)
        conditions[name] = FlowCondition(
            phase=_phase(job),
            create_time=job.metadata.creation_timestamp,
            running_duration=job.status.running_duration,
            task_status_count=job.status.task_status_count,
        )
    stamp = format_time(now)
    old = jobflow.status.job_status_list
    entries = list(old)
    for job in jobs:
        entry = FlowJobStatus(
            name=job.metadata.name,
            state=_phase(job),
            start_timestamp=job.metadata.creation_timestamp,
            end_timestamp=_end(job),
            restart_count=job.status.retry_count,
            running_histories=_histories(old, job, stamp),
        )
        at = [i for i, e in enumerate(entries) if e.name == entry.name]
        for i in at:
            entries[i] = entry
        if not at:
            entries.append(entry)
    status = JobFlowStatus(
        pending_jobs=tuple(by_phase[JobPhase.PENDING]),
        running_jobs=tuple(by_phase[JobPhase.RUNNING]),
        failed_jobs=tuple(by_phase[JobPhase.FAILED]),
        completed_jobs=tuple(by_phase[JobPhase.COMPLETED]),
        terminated_jobs=tuple(by_phase[JobPhase.TERMINATED]),
        un_know_jobs=tuple(unknown),
        job_status_list=tuple(entries),
        conditions=conditions,
        state=jobflow.status.state,
    )
    return status, by_phase


def next_phase(phase: str, by_phase: Mapping[str, Sequence[str]], all_completed: bool) -> str:
    """Volcano's state machine (pkg/controllers/jobflow/state), run until it settles: a Pending
    flow whose Jobs all completed between two looks ends Succeed in one step."""
    failed = bool(by_phase.get(JobPhase.FAILED) or by_phase.get(JobPhase.TERMINATED))
    if phase == FlowPhase.PENDING:
        started = by_phase.get(JobPhase.RUNNING) or by_phase.get(JobPhase.COMPLETED)
        if started and not by_phase.get(JobPhase.FAILED):
            phase = FlowPhase.RUNNING
        elif failed:
            return FlowPhase.FAILED
        else:
            return FlowPhase.PENDING
    if phase == FlowPhase.RUNNING:
        if all_completed:
            return FlowPhase.SUCCEED
        if failed:
            return FlowPhase.FAILED
    return phase


def _current_phase(jobflow: JobFlow) -> str:
    phase = jobflow.status.state.phase
    # "" is a new flow; a value no controller writes is read as Pending and derived again.
    return phase if phase in _PHASES else FlowPhase.PENDING


def _graph_notes(jobflow: JobFlow) -> list[Note]:
    """Warnings for a stored flow the webhook would have refused: its waits never end."""
    notes = [
        Note(
            "Warning",
            "InvalidFlow",
            f"{u.path}: flow {u.target!r} is not defined; the flow that waits for it never starts",
        )
        for u in undefined(jobflow.spec.flows)
    ]
    cycle = find_cycle(graph_of(jobflow.spec.flows))
    if cycle is not None:
        notes.append(
            Note(
                "Warning",
                "InvalidFlow",
                f"spec.flows: the dependencies form a cycle ({' -> '.join(cycle)}); "
                "these flows never start",
            )
        )
    return notes


def _completed(jobflow: JobFlow, by_name: Mapping[str, Job]) -> set[str]:
    """The flows whose Job completed: the Job is there and Completed, or it is gone (a TTL, a
    user's delete) and ``jobStatusList`` last saw it Completed. Such a flow is not run again."""
    seen = {e.name: e.state for e in jobflow.status.job_status_list}
    done = set()
    for flow in jobflow.spec.flows:
        name = flow_job_name(jobflow.metadata.name, flow.name)
        job = by_name.get(name)
        if job is None or not controlled_by(job, jobflow):
            # Another's Job of the name (made after ours went) neither undoes nor does the step.
            finished = seen.get(name) == JobPhase.COMPLETED
        else:
            finished = _phase(job) == JobPhase.COMPLETED
        if finished:
            done.add(flow.name)
    return done


def _creations(
    jobflow: JobFlow,
    by_name: Mapping[str, Job],
    templates: Mapping[str, JobTemplate],
    completed: set[str],
) -> tuple[list[Job], list[Note]]:
    """The Jobs whose turn has come, in the order of ``spec.flows``, and why others wait."""
    create: list[Job] = []
    notes: list[Note] = []
    seen: set[str] = set()
    namespace = jobflow.metadata.namespace
    for flow in jobflow.spec.flows:
        name = flow_job_name(jobflow.metadata.name, flow.name)
        existing = by_name.get(name)
        if existing is not None:
            if (
                not controlled_by(existing, jobflow)
                and flow.name not in seen
                and flow.name not in completed
            ):
                notes.append(foreign_job(name, flow.name))
            seen.add(flow.name)
            continue
        if flow.name in seen or flow.name in completed:
            continue
        if not set(flow.depends_on.targets if flow.depends_on else ()) <= completed:
            continue
        seen.add(flow.name)
        template = templates.get(flow.name)
        if template is None:
            notes.append(
                Note(
                    "Warning",
                    "MissingJobTemplate",
                    f"jobtemplate {flow.name!r} not found in namespace {namespace!r}: "
                    f"job {name} is created when it exists",
                )
            )
            continue
        create.append(job_for(jobflow, flow.name, template))
    return create, notes


def _order(jobflow: JobFlow, jobs: Sequence[Job]) -> list[Job]:
    """The flow's Jobs in the order of its flows, then any other it controls, by name."""
    rank = {
        flow_job_name(jobflow.metadata.name, f.name): i for i, f in enumerate(jobflow.spec.flows)
    }
    return sorted(jobs, key=lambda j: (rank.get(j.metadata.name, len(rank)), j.metadata.name))


def _transition(old: str, new: str, by_phase: Mapping[str, Sequence[str]], n: int) -> Transition:
    if new == FlowPhase.SUCCEED:
        return Transition(new, Note("Normal", "Succeeded", f"all {n} job(s) of the flow completed"))
    ended = [*by_phase.get(JobPhase.FAILED, ()), *by_phase.get(JobPhase.TERMINATED, ())]
    return Transition(
        new,
        Note(
            "Warning",
            "Failed",
            f"job(s) {', '.join(ended)} failed or terminated: the flow stops ({old} -> {new})",
        ),
    )


def plan(
    jobflow: JobFlow,
    jobs: Sequence[Job],
    templates: Mapping[str, JobTemplate],
    now: dt.datetime,
) -> Plan:
    """Decide what to do for ``jobflow`` at ``now``; see the module docstring."""
    phase = _current_phase(jobflow)
    by_name = {j.metadata.name: j for j in jobs}
    own = _order(jobflow, [j for j in jobs if controlled_by(j, jobflow)])
    if phase == FlowPhase.SUCCEED and jobflow.spec.job_retain_policy == RetainPolicy.DELETE:
        return Plan(delete=tuple(j for j in own if not j.metadata.deletion_timestamp))

    create: list[Job] = []
    notes: list[Note] = []
    completed = _completed(jobflow, by_name)
    if phase in _CREATING:
        notes = _graph_notes(jobflow)
        create, waits = _creations(jobflow, by_name, templates, completed)
        notes += waits
    status, by_phase = status_of(jobflow, own, now)
    names = {f.name for f in jobflow.spec.flows}
    new = next_phase(phase, by_phase, bool(names) and names <= completed)
    transition = None
    if new != phase and new in (FlowPhase.SUCCEED, FlowPhase.FAILED):
        transition = _transition(phase, new, by_phase, len(names))
    status = msgspec.structs.replace(status, state=FlowState(phase=new))
    return Plan(
        create=tuple(create),
        status=status if status != jobflow.status else None,
        notes=tuple(notes),
        transition=transition,
    )
