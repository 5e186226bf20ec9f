"""Pure rendering for the vcctl-style commands: tables, JSON/YAML, ages, pod status, job views.

Nothing here does I/O: every function takes decoded objects (and `now`, for ages) and returns
strings or rows, so `unit/test_cli_output.py` checks the output byte for byte.

Tables follow vcctl: its column names (``Name``, ``Creation``, ``Phase``, ...), left-aligned,
each column as wide as its longest cell plus three spaces, and ``No resources found`` when there
is nothing to show. Ages follow kubectl's ``HumanDuration`` (``45s``, ``3m12s``, ``5h``, ``3d4h``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from caldera.api.core import Event, Pod
from caldera.api.duration import human_duration
from caldera.api.flow import JobFlow, JobTemplate
from caldera.api.meta import parse_time
from caldera.api.subgroups import group_key
from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY
from caldera.api.volcano import (
    JOB_NAME_KEY,
    JOB_TYPE_KEY,
    PARTITION_ID_KEY,
    QUEUE_NAME_KEY,
    SCHEDULING_QUEUE_NAME_KEY,
    TASK_SPEC_KEY,
    CronJob,
    Job,
    NetworkTopologySpec,
    PodGroup,
    PodGroupConditionType,
    PodGroupPhase,
    Queue,
)

__all__ = [
    "CRONJOB_COLUMNS",
    "JOBFLOW_COLUMNS",
    "JOBTEMPLATE_COLUMNS",
    "JOB_COLUMNS",
    "NO_RESOURCES",
    "POD_COLUMNS",
    "QUEUE_COLUMNS",
    "QueueCounts",
    "QueueShare",
    "as_list",
    "cronjob_row",
    "cronjob_table",
    "dump",
    "format_age",
    "gang_status",
    "job_row",
    "job_table",
    "jobflow_row",
    "jobflow_table",
    "jobtemplate_row",
    "jobtemplate_table",
    "pod_row",
    "pod_status",
    "pod_table",
    "queue_counts",
    "queue_row",
    "queue_table",
    "render_job_view",
    "render_table",
]

NO_RESOURCES: Final = "No resources found"
COLUMN_GAP: Final = 3
OUTPUT_FORMATS: Final = ("json", "yaml", "wide")

JOB_COLUMNS: Final = (
    "Name",
    "Creation",
    "Phase",
    "JobType",
    "Replicas",
    "Min",
    "Pending",
    "Running",
    "Succeeded",
    "Failed",
    "Unknown",
    "RetryCount",
)
JOB_WIDE_COLUMNS: Final = ("Queue", "Scheduler", "Terminating", "Version", "Age")
QUEUE_COLUMNS: Final = (
    "Name",
    "Weight",
    "State",
    "Parent",
    "Inqueue",
    "Pending",
    "Running",
    "Unknown",
    "Completed",
)
QUEUE_WIDE_COLUMNS: Final = ("Priority", "Dequeue", "Deserved", "Allocated", "Share")
POD_COLUMNS: Final = ("Name", "Ready", "Status", "Restart", "Age")
CRONJOB_COLUMNS: Final = ("NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE")
CRONJOB_WIDE_COLUMNS: Final = ("TIMEZONE", "CONCURRENCY", "LAST SUCCESSFUL")
POD_WIDE_COLUMNS: Final = ("Job", "Task", "Queue", "Node", "IP")
JOBFLOW_COLUMNS: Final = ("Name", "Namespace", "Phase", "Age")
JOBFLOW_WIDE_COLUMNS: Final = ("Pending", "Running", "Completed", "Failed", "Terminated", "Unknown")
JOBTEMPLATE_COLUMNS: Final = ("Name", "Namespace")
JOBTEMPLATE_WIDE_COLUMNS: Final = ("Jobs",)


# --- generic ----------------------------------------------------------------------------------


def render_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns, each as wide as its longest cell plus `COLUMN_GAP` spaces; no
    trailing spaces; one line per row, ending with a newline."""
    all_rows = [list(headers), *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in all_rows) + COLUMN_GAP for i in range(len(headers))]
    lines = [
        "".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in all_rows
    ]
    return "\n".join(lines) + "\n"


def format_age(timestamp: str | None, now: dt.datetime) -> str:
    """Time since `timestamp` the way kubectl prints ages; `<unknown>` without one."""
    if not timestamp:
        return "<unknown>"
    try:
        then = parse_time(timestamp)
    except ValueError:
        return "<unknown>"
    return human_duration(now - then)


def as_list(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A kubectl-style ``List`` wrapping several objects for ``-o json|yaml``."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}


def dump(obj: Any, fmt: str) -> str:
    """`obj` (plain JSON data) as ``json`` (4-space indent, as kubectl) or ``yaml``."""
    if fmt == "json":
        return json.dumps(obj, indent=4) + "\n"
    if fmt == "yaml":
        text: str = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)
        return text
    raise ValueError(f"unknown output format {fmt!r} (use json or yaml)")


def _creation_date(timestamp: str | None) -> str:
    if not timestamp:
        return ""
    try:
        return parse_time(timestamp).astimezone(dt.UTC).strftime("%Y-%m-%d")
    except ValueError:
        return ""


# --- jobs -------------------------------------------------------------------------------------


def job_row(
    job: Job, *, all_namespaces: bool = False, wide: bool = False, now: dt.datetime | None = None
) -> list[str]:
    """One `caldera job list` row: vcctl's columns (Namespace first with --all-namespaces)."""
    status = job.status
    row = [
        job.metadata.name,
        _creation_date(job.metadata.creation_timestamp),
        status.state.phase,
        job.metadata.labels.get(JOB_TYPE_KEY) or "Batch",
        str(sum(task.replicas for task in job.spec.tasks)),
        str(status.min_available),
        str(status.pending),
        str(status.running),
        str(status.succeeded),
        str(status.failed),
        str(status.unknown),
        str(status.retry_count),
    ]
    if all_namespaces:
        row.insert(0, job.metadata.namespace)
    if wide:
        row += [
            job.spec.queue,
            job.spec.scheduler_name,
            str(status.terminating),
            str(status.version),
            format_age(job.metadata.creation_timestamp, now or dt.datetime.now(dt.UTC)),
        ]
    return row


def job_headers(*, all_namespaces: bool = False, wide: bool = False) -> list[str]:
    """The header of `caldera job list`."""
    headers = list(JOB_COLUMNS)
    if all_namespaces:
        headers.insert(0, "Namespace")
    if wide:
        headers += JOB_WIDE_COLUMNS
    return headers


def job_table(
    jobs: Sequence[Job],
    *,
    all_namespaces: bool = False,
    wide: bool = False,
    now: dt.datetime | None = None,
) -> str:
    """The `caldera job list` table, or `No resources found`."""
    if not jobs:
        return NO_RESOURCES + "\n"
    return render_table(
        job_headers(all_namespaces=all_namespaces, wide=wide),
        (job_row(j, all_namespaces=all_namespaces, wide=wide, now=now) for j in jobs),
    )


# --- queues -----------------------------------------------------------------------------------


@dataclass
class QueueCounts:
    """PodGroups of one queue by phase (vcctl computes these by listing PodGroups)."""

    inqueue: int = 0
    pending: int = 0
    running: int = 0
    unknown: int = 0
    completed: int = 0


@dataclass(frozen=True)
class QueueShare:
    """What the proportion plugin computes for a queue: deserved and allocated resources (as
    quantity strings) and the share, the largest allocated/deserved ratio over resources."""

    deserved: Mapping[str, str] = field(default_factory=dict)
    allocated: Mapping[str, str] = field(default_factory=dict)
    share: float = 0.0


_PHASE_FIELD: Final = {
    PodGroupPhase.INQUEUE: "inqueue",
    PodGroupPhase.PENDING: "pending",
    "": "pending",  # not yet given a phase: waiting like a Pending one
    PodGroupPhase.RUNNING: "running",
    PodGroupPhase.UNKNOWN: "unknown",
    PodGroupPhase.COMPLETED: "completed",
}


def queue_counts(podgroups: Iterable[PodGroup]) -> dict[str, QueueCounts]:
    """PodGroup counts per queue name and phase; a PodGroup without a phase counts as Pending."""
    counts: dict[str, QueueCounts] = {}
    for pg in podgroups:
        name = _PHASE_FIELD.get(pg.status.phase)
        if name is None:
            continue
        entry = counts.setdefault(pg.spec.queue, QueueCounts())
        setattr(entry, name, getattr(entry, name) + 1)
    return counts


def _resources_text(resources: Mapping[str, str]) -> str:
    if not resources:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(resources.items()))


def queue_row(
    queue: Queue, counts: QueueCounts | None, *, share: QueueShare | None = None, wide: bool = False
) -> list[str]:
    """One `caldera queue list` row (vcctl's columns; -o wide adds the queue's priority and
    dequeue strategy, then deserved, allocated, share)."""
    c = counts or QueueCounts()
    row = [
        queue.metadata.name,
        str(queue.spec.weight),
        queue.status.state or "Open",
        queue.spec.parent,
        str(c.inqueue),
        str(c.pending),
        str(c.running),
        str(c.unknown),
        str(c.completed),
    ]
    if wide:
        row += [str(queue.spec.priority), queue.spec.dequeue_strategy]
        if share is None:
            allocated = {k: str(v) for k, v in queue.status.allocated.items()}
            row += ["<unknown>", _resources_text(allocated), "<unknown>"]
        else:
            row += [
                _resources_text(share.deserved),
                _resources_text(share.allocated),
                f"{share.share:.2f}",
            ]
    return row


def queue_table(
    queues: Sequence[Queue],
    counts: Mapping[str, QueueCounts],
    *,
    shares: Mapping[str, QueueShare] | None = None,
    wide: bool = False,
) -> str:
    """The `caldera queue list` / `get` table, or `No resources found`."""
    if not queues:
        return NO_RESOURCES + "\n"
    headers = list(QUEUE_COLUMNS) + (list(QUEUE_WIDE_COLUMNS) if wide else [])
    rows = (
        queue_row(
            q,
            counts.get(q.metadata.name),
            share=(shares or {}).get(q.metadata.name) if shares is not None else None,
            wide=wide,
        )
        for q in queues
    )
    return render_table(headers, rows)


# --- cronjobs ---------------------------------------------------------------------------------


def cronjob_row(
    cronjob: CronJob, *, all_namespaces: bool = False, wide: bool = False, now: dt.datetime
) -> list[str]:
    """One row of `caldera cronjob list`: kubectl's columns (ages of the last schedule and of
    the object; `<none>` before the first schedule)."""
    spec, status = cronjob.spec, cronjob.status
    last = status.last_schedule_time
    row = [
        cronjob.metadata.name,
        spec.schedule,
        str(spec.suspend),
        str(len(status.active)),
        format_age(last, now) if last else "<none>",
        format_age(cronjob.metadata.creation_timestamp, now),
    ]
    if all_namespaces:
        row.insert(0, cronjob.metadata.namespace)
    if wide:
        success = status.last_successful_time
        row += [
            spec.time_zone or "<none>",
            spec.concurrency_policy,
            format_age(success, now) if success else "<none>",
        ]
    return row


def cronjob_table(
    cronjobs: Sequence[CronJob],
    *,
    all_namespaces: bool = False,
    wide: bool = False,
    now: dt.datetime,
) -> str:
    """The `caldera cronjob list` / `get` table, or `No resources found`."""
    if not cronjobs:
        return NO_RESOURCES + "\n"
    headers = (["NAMESPACE"] if all_namespaces else []) + list(CRONJOB_COLUMNS)
    headers += list(CRONJOB_WIDE_COLUMNS) if wide else []
    rows = (cronjob_row(c, all_namespaces=all_namespaces, wide=wide, now=now) for c in cronjobs)
    return render_table(headers, rows)


# --- pods -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodStatusSummary:
    """What kubectl shows of a pod: ready containers, status word, restarts."""

    ready: str
    status: str
    restarts: str


def pod_status(pod: Pod, now: dt.datetime) -> PodStatusSummary:
    """kubectl's READY / STATUS / RESTARTS for a pod (init containers, waiting and terminated
    reasons, Terminating, sidecars counted as containers)."""
    spec, st = pod.spec, pod.status
    total = len(spec.containers)
    sidecars = {c.name for c in spec.init_containers if c.restart_policy == "Always"}
    total += len(sidecars)
    ready = 0
    restarts = 0
    last_restart: str | None = None
    reason = st.reason or st.phase

    def note_restart(finished: str | None) -> None:
        nonlocal last_restart
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished

    initializing = False
    for i, cs in enumerate(st.init_container_statuses):
        restarts += cs.restart_count
        if cs.last_state.terminated is not None:
            note_restart(cs.last_state.terminated.finished_at)
        term, wait = cs.state.terminated, cs.state.waiting
        if term is not None and term.exit_code == 0:
            continue
        if cs.name in sidecars and cs.state.running is not None:
            ready += 1 if cs.ready else 0
            continue
        if term is not None:
            if term.reason:
                reason = f"Init:{term.reason}"
            elif term.signal:
                reason = f"Init:Signal:{term.signal}"
            else:
                reason = f"Init:ExitCode:{term.exit_code}"
        elif wait is not None and wait.reason and wait.reason != "PodInitializing":
            reason = f"Init:{wait.reason}"
        else:
            reason = f"Init:{i}/{len(spec.init_containers)}"
        initializing = True
        break

    if not initializing:
        has_running = False
        for cs in reversed(st.container_statuses):
            restarts += cs.restart_count
            if cs.last_state.terminated is not None:
                note_restart(cs.last_state.terminated.finished_at)
            term, wait = cs.state.terminated, cs.state.waiting
            if wait is not None and wait.reason:
                reason = wait.reason
            elif term is not None and term.reason:
                reason = term.reason
            elif term is not None:
                reason = f"Signal:{term.signal}" if term.signal else f"ExitCode:{term.exit_code}"
            elif cs.ready and cs.state.running is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            pod_ready = any(c.type == "Ready" and c.status == "True" for c in st.conditions)
            reason = "Running" if pod_ready else "NotReady"

    if pod.metadata.deletion_timestamp and st.reason == "NodeLost":
        reason = "Unknown"
    elif pod.metadata.deletion_timestamp and st.phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    if not reason:
        reason = "Pending"
    restart_text = str(restarts)
    if restarts and last_restart:
        restart_text = f"{restarts} ({format_age(last_restart, now)} ago)"
    return PodStatusSummary(f"{ready}/{total}", reason, restart_text)


def pod_queue(pod: Pod) -> str:
    """The queue of a pod: Volcano's job label, else the plain-pod annotation."""
    return pod.metadata.labels.get(QUEUE_NAME_KEY) or pod.metadata.annotations.get(
        SCHEDULING_QUEUE_NAME_KEY, ""
    )


def pod_row(
    pod: Pod, now: dt.datetime, *, all_namespaces: bool = False, wide: bool = False
) -> list[str]:
    """One `caldera pod list` row: vcctl's Name, Ready, Status, Restart, Age."""
    summary = pod_status(pod, now)
    row = [
        pod.metadata.name,
        summary.ready,
        summary.status,
        summary.restarts,
        format_age(pod.metadata.creation_timestamp, now),
    ]
    if all_namespaces:
        row.insert(0, pod.metadata.namespace)
    if wide:
        labels = pod.metadata.labels
        row += [
            labels.get(JOB_NAME_KEY, "") or "<none>",
            labels.get(TASK_SPEC_KEY, "") or "<none>",
            pod_queue(pod) or "<none>",
            pod.spec.node_name or "<none>",
            pod.status.pod_ip or "<none>",
        ]
    return row


def pod_table(
    pods: Sequence[Pod], now: dt.datetime, *, all_namespaces: bool = False, wide: bool = False
) -> str:
    """The `caldera pod list` table, or `No resources found`."""
    if not pods:
        return NO_RESOURCES + "\n"
    headers = list(POD_COLUMNS)
    if all_namespaces:
        headers.insert(0, "Namespace")
    if wide:
        headers += POD_WIDE_COLUMNS
    return render_table(
        headers, (pod_row(p, now, all_namespaces=all_namespaces, wide=wide) for p in pods)
    )


# --- job view ---------------------------------------------------------------------------------


def gang_status(podgroup: PodGroup | None, events: Sequence[Event] = ()) -> str | None:
    """Why a job's gang cannot be scheduled, or None when nothing says it is stuck: the
    PodGroup's Unschedulable condition, else the latest Unschedulable/FailedScheduling event on
    it."""
    if podgroup is None:
        return None
    if podgroup.status.phase in (PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED):
        return None
    for cond in podgroup.status.conditions:
        if cond.type == PodGroupConditionType.UNSCHEDULABLE and cond.status == "True":
            text = cond.message or cond.reason or "unschedulable"
            return f"{cond.reason}: {text}" if cond.reason and cond.message else text
    uid = podgroup.metadata.uid
    stuck = [
        e
        for e in events
        if e.involved_object.uid == uid and e.reason in ("Unschedulable", "FailedScheduling")
    ]
    if stuck:
        latest = max(stuck, key=_event_time)
        return latest.message or latest.reason
    return None


def _event_time(event: Event) -> str:
    return (
        event.last_timestamp
        or event.event_time
        or event.first_timestamp
        or event.metadata.creation_timestamp
        or ""
    )


def _indent(text: str, prefix: str = "  ") -> list[str]:
    return [prefix + line for line in text.rstrip("\n").split("\n")]


def _job_fields(job: Job, now: dt.datetime) -> list[str]:
    """The job's spec and status, one aligned ``Key: value`` line each."""
    meta, spec, status = job.metadata, job.spec, job.status
    state = status.state
    age = format_age(meta.creation_timestamp, now)
    phase = state.phase or "<none>"
    if state.reason or state.message:
        phase += f" ({': '.join(x for x in (state.reason, state.message) if x)})"
    fields = [
        ("Name", meta.name),
        ("Namespace", meta.namespace),
        ("Creation", f"{meta.creation_timestamp or '<unknown>'} ({age} ago)"),
        ("Queue", spec.queue),
        ("Scheduler", spec.scheduler_name or "<none>"),
        ("Job Type", meta.labels.get(JOB_TYPE_KEY) or "Batch"),
        ("Phase", phase),
        ("Min Available", str(spec.min_available)),
        ("Max Retry", str(spec.max_retry)),
        ("Retry Count", str(status.retry_count)),
        ("Version", str(status.version)),
        (
            "Pods",
            f"Pending {status.pending}, Running {status.running}, Succeeded {status.succeeded},"
            f" Failed {status.failed}, Terminating {status.terminating}, Unknown {status.unknown}",
        ),
    ]
    if spec.plugins:
        fields.append(("Plugins", ", ".join(sorted(spec.plugins))))
    if spec.policies:
        fields.append(
            (
                "Policies",
                ", ".join(
                    f"{p.event or ','.join(p.events) or p.exit_code}->{p.action}"
                    for p in spec.policies
                ),
            )
        )
    width = max(len(k) for k, _ in fields) + 2
    return [f"{(k + ':').ljust(width)}{v}" for k, v in fields]


def _job_tasks(job: Job) -> list[str]:
    """The ``Tasks:`` table: replicas, minimum and pods by phase, per task."""
    rows = []
    for task in job.spec.tasks:
        counts = job.status.task_status_count.get(task.name)
        by_phase = counts.phase if counts is not None else {}
        image = ",".join(
            str(c.get("image", "")) for c in task.template.get("spec", {}).get("containers", [])
        )
        rows.append(
            [
                task.name or "<none>",
                str(task.replicas),
                str(task.min_available if task.min_available is not None else task.replicas),
                str(by_phase.get("Pending", 0)),
                str(by_phase.get("Running", 0)),
                str(by_phase.get("Succeeded", 0)),
                str(by_phase.get("Failed", 0)),
                image or "<none>",
            ]
        )
    headers = ["Name", "Replicas", "Min", "Pending", "Running", "Succeeded", "Failed", "Image"]
    return ["Tasks:", *_indent(render_table(headers, rows))]


def _topology_text(topology: NetworkTopologySpec) -> str:
    limit = (
        f"tier <= {topology.highest_tier_allowed}"
        if topology.highest_tier_allowed is not None
        else f"tier {topology.highest_tier_name!r}"
        if topology.highest_tier_name
        else "any tier"
    )
    return f"{topology.mode} mode, {limit}"


def _holds_a_node(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and pod.status.phase != "Failed"


def partition_lines(podgroup: PodGroup, pods: Sequence[Pod]) -> list[str]:
    """One line per subGroupPolicy (a Job's partitioned task): how many of its partitions
    have all their pods placed (``subGroupSize`` of them on a node, not failed), of how many,
    and minSubGroups; then the partitions not (wholly) placed."""
    policies = podgroup.spec.sub_group_policy
    groups: dict[tuple[int, tuple[str, ...]], list[Pod]] = {}
    for pod in pods:
        for i, policy in enumerate(policies):
            values = group_key(policy, pod.metadata.labels)
            if values is not None:
                groups.setdefault((i, values), []).append(pod)
                break
    lines = []
    for i, policy in enumerate(policies):
        mine = sorted(
            ((values, members) for (j, values), members in groups.items() if j == i),
            key=lambda item: (len(item[0][0]), item[0]),
        )
        size = max(policy.sub_group_size, 1)
        placed = [v for v, members in mine if sum(map(_holds_a_node, members)) >= size]
        text = (
            f"Partitions {policy.name or '<none>'}: {len(placed)} of {len(mine)} placed "
            f"(minSubGroups {policy.min_sub_groups}, {size} pods each)"
        )
        if policy.network_topology is not None:
            text += f", network topology {_topology_text(policy.network_topology)}"
        waiting = ["-".join(v) for v, _ in mine if v not in placed]
        if waiting:
            text += f"; not placed: {', '.join(waiting)}"
        lines.append(text)
    return lines


def _job_podgroup(
    podgroup: PodGroup | None, events: Sequence[Event], pods: Sequence[Pod] = ()
) -> list[str]:
    """The ``PodGroup:`` section with its conditions, its partitions, and why the gang waits,
    if it does."""
    lines = ["PodGroup:"]
    if podgroup is None:
        lines.append("  <none>")
    else:
        pg = podgroup
        lines.append(
            f"  {pg.metadata.name}: phase {pg.status.phase or 'Pending'}, minMember "
            f"{pg.spec.min_member}, running {pg.status.running}, queue {pg.spec.queue}"
        )
        topology = pg.spec.network_topology
        if topology is not None:
            lines.append(f"  Network topology: {_topology_text(topology)}")
        hypernode = pg.metadata.annotations.get(JOB_ALLOCATED_HYPERNODE_KEY)
        if hypernode:
            lines.append(f"  HyperNode: {hypernode}")
        lines += [f"  {line}" for line in partition_lines(pg, pods)]
        for cond in pg.status.conditions:
            text = f"  Condition {cond.type}={cond.status}"
            if cond.reason:
                text += f" reason {cond.reason}"
            if cond.message:
                text += f": {cond.message}"
            lines.append(text)
    unschedulable = gang_status(podgroup, events)
    if unschedulable:
        lines.append(f"Unschedulable: {unschedulable}")
    return lines


def _job_pods(pods: Sequence[Pod], now: dt.datetime) -> list[str]:
    """The ``Pods:`` table."""
    if not pods:
        return ["Pods:", "  <none>"]
    partitioned = any(PARTITION_ID_KEY in p.metadata.labels for p in pods)
    rows = []
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        s = pod_status(pod, now)
        row = [
            pod.metadata.name,
            s.ready,
            s.status,
            s.restarts,
            pod.spec.node_name or "<none>",
            format_age(pod.metadata.creation_timestamp, now),
        ]
        if partitioned:
            row.insert(5, pod.metadata.labels.get(PARTITION_ID_KEY, "<none>"))
        rows.append(row)
    headers = ["Name", "Ready", "Status", "Restart", "Node", "Age"]
    if partitioned:
        headers.insert(5, "Partition")
    return ["Pods:", *_indent(render_table(headers, rows))]


def _job_events(events: Sequence[Event], now: dt.datetime) -> list[str]:
    """The ``Events:`` table, oldest first."""
    if not events:
        return ["Events:", "  <none>"]
    rows = []
    for e in sorted(events, key=_event_time):
        obj = e.involved_object
        source = e.source.component or e.reporting_component or ""
        rows.append(
            [
                e.type or "Normal",
                e.reason,
                format_age(_event_time(e) or None, now),
                f"{obj.kind.lower()}/{obj.name}",
                source or "<none>",
                " ".join(e.message.split()),
            ]
        )
    headers = ["Type", "Reason", "Age", "Object", "From", "Message"]
    return ["Events:", *_indent(render_table(headers, rows))]


def render_job_view(
    job: Job,
    *,
    podgroup: PodGroup | None,
    pods: Sequence[Pod],
    events: Sequence[Event],
    now: dt.datetime,
    why: Sequence[str] = (),
    position: Sequence[str] = (),
) -> str:
    """`caldera job view`: the job's spec and status, its tasks, pods (with their partition,
    for a job with partitions), PodGroup (with its partitions placed), why the gang waits (if
    it does), where it stands in the scheduler's order (``position``, from the visibility
    API), the ``Why`` lines of `cli.why` (``caldera job why``), and the events of the job, its
    PodGroup and its pods, oldest first."""
    lines = [*_job_fields(job, now), *_job_tasks(job), *_job_podgroup(podgroup, events, pods)]
    if position:
        lines += ["Position:", *(f"  {line}" for line in position)]
    if why:
        lines += ["Why:", *(f"  {line}" for line in why)]
    lines += [*_job_pods(pods, now), *_job_events(events, now)]
    return "\n".join(lines) + "\n"


# --- jobflows and jobtemplates ----------------------------------------------------------------


def jobflow_row(jobflow: JobFlow, *, wide: bool = False, now: dt.datetime) -> list[str]:
    """One row of `caldera jobflow list|get`: vcctl's Name, Namespace, Phase, Age; with `wide`,
    how many of its Jobs are in each list of its status."""
    row = [
        jobflow.metadata.name,
        jobflow.metadata.namespace,
        jobflow.status.state.phase,
        format_age(jobflow.metadata.creation_timestamp, now),
    ]
    if wide:
        status = jobflow.status
        lists = (
            status.pending_jobs,
            status.running_jobs,
            status.completed_jobs,
            status.failed_jobs,
            status.terminated_jobs,
            status.un_know_jobs,
        )
        row += [str(len(jobs)) for jobs in lists]
    return row


def jobflow_table(jobflows: Sequence[JobFlow], *, wide: bool = False, now: dt.datetime) -> str:
    """The `caldera jobflow list|get` table, or `No resources found`."""
    headers = [*JOBFLOW_COLUMNS, *(JOBFLOW_WIDE_COLUMNS if wide else ())]
    return _table(headers, [jobflow_row(f, wide=wide, now=now) for f in jobflows])


def jobtemplate_row(template: JobTemplate, *, wide: bool = False) -> list[str]:
    """One row of `caldera jobtemplate list|get`: vcctl's Name, Namespace; with `wide`, how many
    Jobs were created from it (its status)."""
    row = [template.metadata.name, template.metadata.namespace]
    if wide:
        row.append(str(len(template.status.job_depends_on_list)))
    return row


def jobtemplate_table(templates: Sequence[JobTemplate], *, wide: bool = False) -> str:
    """The `caldera jobtemplate list|get` table, or `No resources found`."""
    headers = [*JOBTEMPLATE_COLUMNS, *(JOBTEMPLATE_WIDE_COLUMNS if wide else ())]
    return _table(headers, [jobtemplate_row(t, wide=wide) for t in templates])


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return render_table(headers, rows) if rows else NO_RESOURCES + "\n"
