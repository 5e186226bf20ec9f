"""tdm: time-division multiplexing of revocable nodes, Volcano's plugin (pkg/scheduler/plugins/
tdm, docs/design/tdm-plugin.md).

Some nodes are lent to Kubernetes only part of the day. A node labelled
``volcano.sh/revocable-zone: <zone>`` is revocable; the plugin's arguments give each zone its
daily window, ``tdm.revocable-zone.<zone>: "HH:MM-HH:MM"``. Then:

- predicate: a revocable node takes only pods that may use revocable nodes (the pod annotation
  ``volcano.sh/revocable-zone: "*"``, or ``volcano.sh/preemptable`` true without it), and only
  while its zone's window is open; a node of a zone the arguments do not name takes nothing;
- node order: such a pod scores 100 on a revocable node whose window is open (0 elsewhere);
- victim tasks (the shuffle action's): once a window closes, the Running preemptable pods on
  its nodes, per job at most what the job's disruption budget allows (the PodGroup annotation
  ``volcano.sh/jdb-max-unavailable`` or ``volcano.sh/jdb-min-available``, a count or a
  percent; one pod without either), one round every ``tdm.evict.period`` (1m);
- preemptable: a preemptor that is preemptable itself or may use revocable nodes takes nothing;
  the others may take Running preemptable pods on ordinary nodes, per job within its budget;
- job order: jobs whose PodGroup is not preemptable (``volcano.sh/preemptable``, annotation then
  label, false by default) first; job pipelined: only pipelined jobs; job starving: a job that
  is not preemptable and has pending pods.

Beyond Volcano, on purpose:

- the windows are read on the session's clock (``ssn.now``) in UTC (Volcano reads the process's
  local time, UTC in its image); a window whose end is before its start spans midnight
  (22:00-06:00 is open at 03:00, which Volcano's reading of today's dates misses) and equal
  ends mean always open; a window is open from its start up to, not including, its end;
- the plugin asks for a session when a window opens or closes, and when the next eviction round
  is due, so waiting pods and pods to evict are served then (``SessionResult.revisit``);
- a window that is not ``HH:MM-HH:MM``, a period that is not a positive duration, or an unknown
  ``tdm.`` argument is an error at start naming the argument (Volcano fails the predicate at
  every session, or falls back to 1m);
- Caldera's argument ``tdm.evict.max-num`` bounds one eviction round over all jobs (unset: no
  bound beyond the shuffle action's ``maxEvictions``);
- a job below its ``jdb-min-available`` gives no victim (Volcano's falls back to one pod).

Verdict reuse: the predicate and score read the pod's annotations, the node's label and which
zones are open; the plugin offers the pod's zone and the open zones as its node class
(``Speedups.node_class``), so no verdict crosses a window's opening or closing.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from caldera.api.duration import DurationError, parse_duration
from scheduler.api.types import JobInfo, NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

NAME: Final = "tdm"
REVOCABLE_ZONE: Final = "volcano.sh/revocable-zone"
PREEMPTABLE: Final = "volcano.sh/preemptable"
JDB_MIN_AVAILABLE: Final = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE: Final = "volcano.sh/jdb-max-unavailable"
ZONE_PREFIX: Final = "tdm.revocable-zone."
EVICT_PERIOD: Final = "tdm.evict.period"
EVICT_MAX_NUM: Final = "tdm.evict.max-num"
DEFAULT_EVICT_PERIOD: Final = dt.timedelta(minutes=1)
MAX_NODE_SCORE: Final = 100.0
# Kept with the snapshot across sessions (ClusterInfo.derived): when victims were last chosen.
LAST_EVICT_KEY: Final = "tdm.lastEvictAt"
ANY_ZONE: Final = "*"
DAY_SECONDS: Final = 24 * 3600

# Go's "15:04": the hour in one or two digits, the minute in two.
_WINDOW = re.compile(r"(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})")
_GO_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})


@dataclass(frozen=True)
class Window:
    """A daily window in seconds of the UTC day: open from ``start`` up to ``end``."""

    start: int
    end: int

    def is_open(self, now: dt.datetime) -> bool:
        second = _second_of_day(now)
        if self.start == self.end:
            return True
        if self.start < self.end:
            return self.start <= second < self.end
        return second >= self.start or second < self.end

    def seconds_to_change(self, now: dt.datetime) -> float | None:
        """Seconds from ``now`` until the window next opens or closes; None if it never does."""
        if self.start == self.end:
            return None
        second = _second_of_day(now) + now.microsecond / 1e6
        return min((edge - second) % DAY_SECONDS or DAY_SECONDS for edge in (self.start, self.end))


def _second_of_day(now: dt.datetime) -> int:
    utc = now.astimezone(dt.UTC) if now.tzinfo is not None else now
    return utc.hour * 3600 + utc.minute * 60 + utc.second


def parse_window(key: str, raw: object) -> Window:
    """``HH:MM-HH:MM`` as a Window; a ValueError naming ``key`` otherwise."""
    match = _WINDOW.fullmatch(raw.strip()) if isinstance(raw, str) else None
    if match is None:
        raise ValueError(
            f"plugin {NAME}: argument {key} must be a time range HH:MM-HH:MM, got {raw!r}"
        )
    h1, m1, h2, m2 = (int(part) for part in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise ValueError(f"plugin {NAME}: argument {key}: {raw!r} is not a time of day range")
    return Window(h1 * 3600 + m1 * 60, h2 * 3600 + m2 * 60)


@dataclass(frozen=True)
class TdmConf:
    """The plugin's arguments, checked."""

    zones: Mapping[str, Window]
    evict_period: dt.timedelta = DEFAULT_EVICT_PERIOD
    evict_max_num: int | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> TdmConf:
        zones: dict[str, Window] = {}
        for key, value in raw.items():
            if not isinstance(key, str) or not key.startswith("tdm."):
                continue
            if key.startswith(ZONE_PREFIX):
                zone = key[len(ZONE_PREFIX) :]
                if not zone:
                    raise ValueError(f"plugin {NAME}: argument {key} names no zone")
                zones[zone] = parse_window(key, value)
            elif key not in (EVICT_PERIOD, EVICT_MAX_NUM):
                raise ValueError(
                    f"plugin {NAME}: unknown argument {key}; use {ZONE_PREFIX}<zone>, "
                    f"{EVICT_PERIOD} or {EVICT_MAX_NUM}"
                )
        period = DEFAULT_EVICT_PERIOD
        text = raw.get(EVICT_PERIOD)
        if text is not None:
            try:
                seconds = parse_duration(text) if isinstance(text, str) else -1.0
            except DurationError:
                seconds = -1.0
            if seconds <= 0:
                raise ValueError(
                    f"plugin {NAME}: argument {EVICT_PERIOD} must be a positive duration "
                    f"such as 1m, got {text!r}"
                )
            period = dt.timedelta(seconds=seconds)
        max_num = None
        if EVICT_MAX_NUM in raw:
            max_num = Arguments(NAME, raw).integer(EVICT_MAX_NUM, 0)
            if max_num < 1:
                raise ValueError(
                    f"plugin {NAME}: argument {EVICT_MAX_NUM} must be at least 1, got {max_num}"
                )
        return cls(zones, period, max_num)

    def open_zones(self, now: dt.datetime) -> frozenset[str]:
        return frozenset(zone for zone, window in self.zones.items() if window.is_open(now))

    def seconds_to_change(self, now: dt.datetime) -> float | None:
        """Seconds until any zone's window next opens or closes; None if none ever does."""
        changes = [w.seconds_to_change(now) for w in self.zones.values()]
        known = [c for c in changes if c is not None]
        return min(known) if known else None


def go_bool(text: str) -> bool | None:
    """Go's strconv.ParseBool: True, False, or None for anything else."""
    if text in _GO_TRUE:
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def node_zone(node: NodeInfo) -> str:
    """The node's revocable zone (its label), "" for an ordinary node."""
    return node.node.metadata.labels.get(REVOCABLE_ZONE, "") if node.node is not None else ""


def task_zone(task: TaskInfo) -> str:
    """ "*" when the pod may use revocable nodes, else "" (Volcano's GetPodRevocableZone: the
    zone annotation must be "*"; without it, ``volcano.sh/preemptable`` true)."""
    if task.pod is None:
        return ""
    annotations = task.pod.metadata.annotations
    zone = annotations.get(REVOCABLE_ZONE)
    if zone is not None:
        return ANY_ZONE if zone == ANY_ZONE else ""
    preemptable = annotations.get(PREEMPTABLE)
    return ANY_ZONE if preemptable is not None and go_bool(preemptable) else ""


def job_preemptable(job: JobInfo) -> bool:
    """The PodGroup's ``volcano.sh/preemptable``, annotation then label; false without one or
    for a value that is not a boolean (Volcano's extractPreemptable)."""
    if job.podgroup is None:
        return False
    meta = job.podgroup.metadata
    value = meta.annotations.get(PREEMPTABLE)
    if value is None:
        value = meta.labels.get(PREEMPTABLE)
    return value is not None and go_bool(value) is True


def _int_or_percent(text: str, total: int) -> int:
    """A count, or a percent of ``total`` rounded up (apimachinery's intstr); 0 if neither."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    if text.endswith("%"):
        try:
            return math.ceil(int(text[:-1]) * total / 100)
        except ValueError:
            return 0
    return 0


def max_evictions(job: JobInfo) -> int:
    """How many of the job's pods may be evicted now under its disruption budget."""
    total = len(job.tasks)
    running = job.count(TaskStatus.RUNNING)
    annotations = job.podgroup.metadata.annotations if job.podgroup is not None else {}
    min_available = annotations.get(JDB_MIN_AVAILABLE)
    max_unavailable = annotations.get(JDB_MAX_UNAVAILABLE)
    # Volcano's extractBudget reads min-available first and keeps one of the two.
    if min_available is not None:
        return max(0, running - _int_or_percent(min_available, total))
    if max_unavailable is not None:
        finished = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        unavailable = total - finished - running
        return max(0, _int_or_percent(max_unavailable, total) - unavailable)
    return 1


def within_budgets(
    candidates: Sequence[TaskInfo], jobs: Mapping[str, JobInfo], limit: int | None = None
) -> list[TaskInfo]:
    """The candidates, per job the first ones its budget allows (jobs not in ``jobs`` give
    none), in the order given, at most ``limit`` in all."""
    by_job: dict[str, list[TaskInfo]] = {}
    for task in candidates:
        by_job.setdefault(task.job, []).append(task)
    chosen: list[TaskInfo] = []
    for key, tasks in by_job.items():
        job = jobs.get(key)
        if job is not None:
            chosen.extend(tasks[: max_evictions(job)])
    return chosen if limit is None else chosen[:limit]


def predicate(
    task: TaskInfo, node: NodeInfo, zones: Mapping[str, Window], open_zones: frozenset[str]
) -> str | None:
    """Why ``task`` may not run on ``node`` now, None if it may."""
    zone = node_zone(node)
    if not zone:
        return None
    if zone not in zones:
        return f"revocable zone {zone} not support"
    if zone not in open_zones:
        return f"current time beyond revocable zone {zone}"
    if not task_zone(task):
        return "not allow to dispatch to revocable node"
    return None


def score(task: TaskInfo, node: NodeInfo, open_zones: frozenset[str]) -> float:
    zone = node_zone(node)
    if zone and zone in open_zones and task_zone(task):
        return MAX_NODE_SCORE
    return 0.0


def closed_zone_victims(
    tasks: Sequence[TaskInfo],
    nodes: Mapping[str, NodeInfo],
    jobs: Mapping[str, JobInfo],
    conf: TdmConf,
    open_zones: frozenset[str],
) -> list[TaskInfo]:
    """The Running preemptable pods among ``tasks`` on nodes of configured zones whose window
    is closed, within their jobs' budgets and ``tdm.evict.max-num``."""
    candidates = []
    for task in tasks:
        if task.status is not TaskStatus.RUNNING or not task.preemptable:
            continue
        node = nodes.get(task.node_name)
        zone = node_zone(node) if node is not None else ""
        if zone and zone in conf.zones and zone not in open_zones:
            candidates.append(task)
    return within_budgets(candidates, jobs, conf.evict_max_num)


def preemptable_victims(
    preemptor: TaskInfo,
    candidates: Sequence[TaskInfo],
    nodes: Mapping[str, NodeInfo],
    jobs: Mapping[str, JobInfo],
) -> list[TaskInfo]:
    """Volcano's preemptableFn: none for a preemptor that is preemptable or may use revocable
    nodes; else the Running preemptable candidates on ordinary nodes, within their budgets."""
    if preemptor.preemptable or task_zone(preemptor):
        return []
    chosen = []
    for task in candidates:
        if task.status is not TaskStatus.RUNNING or not task.preemptable:
            continue
        node = nodes.get(task.node_name)
        if node is not None and not node_zone(node):
            chosen.append(task)
    return within_budgets(chosen, jobs)


def has_victims(node: NodeInfo, closed: frozenset[str]) -> bool:
    """Whether ``node`` is in a closed zone and runs a preemptable pod."""
    if node_zone(node) not in closed:
        return False
    return any(t.preemptable and t.status is TaskStatus.RUNNING for t in node.tasks.values())


def eviction_due(last: dt.datetime | None, now: dt.datetime, period: dt.timedelta) -> bool:
    """Whether a round of evictions may run now: never yet, or a period after the last."""
    return last is None or last + period <= now


class TdmPlugin:
    """Revocable nodes used only within their zones' daily windows."""

    name = NAME

    def __init__(self, arguments: Arguments) -> None:
        self.conf = TdmConf.parse(arguments.raw)

    def on_session_open(self, ssn: Session) -> None:
        conf, now = self.conf, ssn.now
        opened = conf.open_zones(now)
        change = conf.seconds_to_change(now)
        if change is not None:
            # A second past the edge: the window reads whole seconds.
            ssn.result.revisit(change + 1.0)
        nodes, jobs = ssn.nodes, ssn.jobs

        def check(task: TaskInfo, node: NodeInfo) -> str | None:
            return predicate(task, node, conf.zones, opened)

        def rank(task: TaskInfo, node: NodeInfo) -> float:
            return score(task, node, opened)

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            return preemptable_victims(preemptor, candidates, nodes, jobs)

        def node_class(task: TaskInfo) -> Hashable:
            return task_zone(task), opened

        ssn.add_predicate_fn(self.name, check)
        ssn.add_node_order_fn(self.name, rank)
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_job_order_fn(self.name, job_order)
        ssn.add_job_pipelined_fn(self.name, pipelined)
        ssn.add_job_starving_fn(self.name, starving)
        ssn.add_speedups(self.name, Speedups(job_order_key=job_preemptable, node_class=node_class))
        self._open_evictions(ssn, opened)

    def _open_evictions(self, ssn: Session, opened: frozenset[str]) -> None:
        """Register the victim-tasks function when a round is due and some zone is closed."""
        conf, now = self.conf, ssn.now
        closed = frozenset(conf.zones) - opened
        if "shuffle" not in ssn.configured_actions or not closed:
            return
        nodes, jobs = ssn.nodes, ssn.jobs
        derived = ssn.cluster.derived
        kept = derived.get(LAST_EVICT_KEY)
        last: dt.datetime | None = kept[1] if kept is not None else None
        if last is not None and not eviction_due(last, now, conf.evict_period):
            if any(has_victims(node, closed) for node in nodes.values()):
                ssn.result.revisit((last + conf.evict_period - now).total_seconds())
            return

        def evict(tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
            derived[LAST_EVICT_KEY] = (None, now)
            chosen = closed_zone_victims(tasks, nodes, jobs, conf, opened)
            if chosen:  # the budgets may allow more in the next round
                ssn.result.revisit(conf.evict_period.total_seconds())
            return chosen

        ssn.add_victim_tasks_fn(self.name, evict)

    def on_session_close(self, ssn: Session) -> None:
        return None


def job_order(left: JobInfo, right: JobInfo) -> int:
    """Jobs that are not preemptable first."""
    return int(job_preemptable(left)) - int(job_preemptable(right))


def pipelined(job: JobInfo) -> int:
    return 1 if job.is_pipelined() else -1


def starving(job: JobInfo) -> int:
    """Only jobs that are not preemptable may preempt, and only with pods pending."""
    if job_preemptable(job):
        return -1
    return 1 if job.by_status.get(TaskStatus.PENDING) else -1
