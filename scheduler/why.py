"""Why a job waits, composed from what a session found (the record of ``caldera.api.why``).

Plugins and actions note what they find as the session runs (``Session.note_wait``):

- the enqueue gate (proportion: the queue is not open, or its quota; overcommit: the
  cluster's promised resources), with the numbers that decide it and what must free up;
- allocate, through gang at session close: how many pods the gang needs at once and how many
  fit; each task's kube-scheduler style rejections come from the job's fit errors;
- preempt and reclaim: that they were considered, and why no victim qualified;
- gangpreempt and gangreclaim: that a gang's preemption was abandoned ("gang would not fit
  after evicting N pods: nothing evicted", ``scheduler.actions.gang_evict``).
- allocate, for a job with partitions (sub-groups): each partition that did not fit, and why,
  as its pods' fit error (``partition_text``: "partition 3 of 4 (task worker, ...) has no rack
  with room").

``wait_record`` turns a job's notes into one bounded record; ``publish`` decides whether it
is worth a write (the finding changed, and its stage changed or the last write is older than
``REFRESH_SECONDS``); ``unschedulable_reasons`` counts pods by reason for the
``caldera_unschedule_task_reason_count{reason}`` metric.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence

from caldera.api.meta import format_time, parse_time
from caldera.api.quantity import format_milli
from caldera.api.resources import Resources
from caldera.api.why import (
    REFRESH_SECONDS,
    WHY_ANNOTATION,
    WaitRecord,
    WaitStage,
    bounded,
    decode_record,
)
from scheduler.api.types import JobInfo, TaskStatus

DETAIL = "detail"  # a note that only adds a line under the stage's summary


def partition_text(index: int, total: int, group: str, size: int, why: str) -> str:
    """Why a partition (a sub-group, ``index`` its ``volcano.sh/partition-id``) was not placed:
    ``partition 3 of 4 (task worker, partition-id 2, 2 pods) has no rack with room``."""
    return (
        f"partition {index + 1} of {total} (task {group}, partition-id {index}, {size} pods) {why}"
    )


def amount(name: str, milli: int) -> str:
    """``6 cpu``, ``12Gi memory``, ``2 nvidia.com/gpu``: an amount as a user writes it."""
    return f"{format_milli(max(milli, 0), name)} {name}"


def gate_text(
    *,
    holder: str,
    limit: Resources,
    allocated: Resources,
    reserved: Resources,
    need: Resources,
    freed_by: Resources,
    elastic: Resources | None = None,
) -> str:
    """The enqueue gate's verdict in the resources that hold the job back: ``holder`` ("queue
    team-a", "the cluster") has ``allocated`` of ``limit`` (``elastic`` of it above its jobs'
    minResources, which the gate does not count) and ``reserved`` by inqueue jobs; the job
    needs ``need``; ``freed_by`` must free up."""
    names = [n for n, over in freed_by.items() if over > 0] or list(need.names())

    def listed(amounts: Resources) -> str:
        return ", ".join(amount(n, amounts.get(n)) for n in names)

    has = ", ".join(f"{amount(n, allocated.get(n))} of {amount(n, limit.get(n))}" for n in names)
    spare = ""
    if elastic is not None and any(elastic.get(n) > 0 for n in names):
        spare = f" ({listed(elastic)} of it above its jobs' minResources, which does not count)"
    if any(need.get(n) > limit.get(n) for n in names):
        return (
            f"this job needs {listed(need)} at least, more than {holder} can ever give "
            f"({listed(limit)}): it cannot enqueue until that limit grows"
        )
    return (
        f"{holder} has {has} allocated{spare} and {listed(reserved)} reserved by inqueue jobs; "
        f"this job needs {listed(need)} at least; it enqueues when {listed(freed_by)} free up"
    )


def _task_lines(job: JobInfo) -> list[str]:
    """One line per (task, fit error): which nodes rejected the task's pods and why, with the
    task's pending pods."""
    pending: dict[str, int] = {}
    failed: set[tuple[str, str]] = set()
    for task in job.tasks_in(TaskStatus.PENDING):
        pending[task.role] = pending.get(task.role, 0) + 1
        message = job.fit_errors.get(task.uid)
        if message:
            failed.add((task.role, message))
    return [
        f"task {role or '(none)'} ({pending[role]} pending): {message}"
        for role, message in sorted(failed)
    ]


def wait_record(
    job: JobInfo, notes: Sequence[tuple[str, str]], now: dt.datetime
) -> WaitRecord | None:
    """The record for ``job`` after a session, or None when the session found no wait."""
    if not notes:
        return None
    time = format_time(now)
    details = [text for stage, text in notes if stage == DETAIL]
    for stage in (WaitStage.QUEUE, WaitStage.ENQUEUE):
        found = [text for s, text in notes if s == stage]
        if found and job.phase in ("", "Pending"):
            return bounded(stage, found[0], [*found[1:], *details], time)
    allocate = [text for s, text in notes if s == WaitStage.ALLOCATE]
    if allocate:
        return bounded(WaitStage.ALLOCATE, allocate[0], [*_task_lines(job), *details], time)
    return None


def placed_record(job: JobInfo, now: dt.datetime) -> WaitRecord:
    ready = job.count(TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING)
    summary = f"{ready} of {job.min_available} pods (minAvailable) placed"
    return bounded(WaitStage.NONE, summary, [], format_time(now))


def publish(
    job: JobInfo, record: WaitRecord | None, now: dt.datetime
) -> tuple[WaitRecord | None, bool]:
    """(the record to write for ``job``, or None; whether a changed finding was held back).

    A job that never waited gets no record; one whose last record said it waits and that no
    longer does gets a "not waiting" record. A changed finding of the same stage is written at
    most every ``REFRESH_SECONDS``: its numbers move with every pod that comes or goes."""
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    text = annotations.get(WHY_ANNOTATION)
    if record is None and text is None:
        return None, False  # most jobs: never waited, nothing to say
    last = decode_record(text)
    if record is None:
        if last is None or last.stage == WaitStage.NONE:
            return None, False
        record = placed_record(job, now)
    if record.same_finding(last):
        return None, False
    if last is not None and last.stage == record.stage and last.time:
        try:
            age = (now - parse_time(last.time)).total_seconds()
        except ValueError:
            age = REFRESH_SECONDS
        if age < REFRESH_SECONDS:
            return None, True
    return record, False


# "0/40 nodes are available: 31 Insufficient nvidia.com/gpu, 6 node(s) had untolerated taint
# {gpu: a100}, 3 node(s) didn't match Pod's node affinity/selector."
_HISTOGRAM = re.compile(r"^0/\d+ nodes are available: (.*?)\.?$")
_ENTRY = re.compile(r"^\d+ (.*)$")


def message_reasons(message: str) -> list[str]:
    """The reasons in a fit error's node histogram, without counts or taint values (a
    bounded set of label values); another message is one reason of its own kind."""
    match = _HISTOGRAM.match(message)
    if match is None:
        return ["gang" if "minAvailable" in message else "other"]
    reasons = []
    for entry in match.group(1).split(", "):
        found = _ENTRY.match(entry.strip())
        if found is not None:
            reasons.append(found.group(1).split(" {")[0].split(": ")[0])
    return reasons or ["other"]


def unschedulable_reasons(messages: Iterable[str]) -> dict[str, int]:
    """Pods by reason: a pod counts once under every reason its message names (as
    kube-scheduler's unschedulable_pods counts a pod under every plugin that rejected it)."""
    pods: dict[str, int] = {}  # many pods share a message: each is parsed once
    for message in messages:
        pods[message] = pods.get(message, 0) + 1
    counts: dict[str, int] = {}
    for message, n in pods.items():
        for reason in _distinct_reasons(message):
            counts[reason] = counts.get(reason, 0) + n
    return counts


@functools.lru_cache(maxsize=4096)
def _distinct_reasons(message: str) -> tuple[str, ...]:
    """``message_reasons`` once each, kept: a waiting gang's pods are told the same messages
    session after session."""
    return tuple(dict.fromkeys(message_reasons(message)))
