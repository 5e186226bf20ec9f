"""What a simulation run leaves: per job, per queue over time, the cluster's use over time and
why pods waited, as msgspec Structs that encode to the JSON ``caldera simulate --json`` writes
(docs/simulator.md describes every field). Times are seconds from the start of the trace."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

import msgspec


class PodRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One run of one pod: from its bind to its end."""

    pod: str
    attempt: int  # 1 for the first pod of that name, 2 for the pod created again, ...
    node: str
    bound: float
    started: float | None = None
    ended: float | None = None
    outcome: str = ""  # Succeeded, Failed, Deleted, Evicted; "" while it runs
    exit_code: int | None = None
    # The cards deviceshare bound the pod to (its volcano.sh/vgpu-ids-new annotation,
    # caldera.api.vgpu's format); "" for a pod that shares no card.
    devices: str = ""


class JobResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One Job: when it came, started (entered Running) and finished, how, and where its pods
    ran."""

    job: str  # namespace/name
    queue: str  # the queue the trace gave it
    arrival: float
    started: float | None = None
    finished: float | None = None
    deleted: float | None = None  # by its TTL
    phase: str = ""
    phases: list[str] = msgspec.field(default_factory=list)  # every phase entered, in order
    restarts: int = 0  # status.retryCount
    pods: list[PodRun] = msgspec.field(default_factory=list)

    @property
    def wait(self) -> float | None:
        return None if self.started is None else self.started - self.arrival

    @property
    def run(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return self.finished - self.started

    @property
    def completion(self) -> float | None:
        return None if self.finished is None else self.finished - self.arrival


class Series(msgspec.Struct, kw_only=True):
    """Values over time, as steps: ``values[name][i]`` holds from ``times[i]`` on."""

    times: list[float] = msgspec.field(default_factory=list)
    values: dict[str, list[float]] = msgspec.field(default_factory=dict)

    def add(self, time: float, sample: dict[str, float]) -> None:
        """Append a sample (replacing one taken at the same time), unless nothing changed."""
        if self.times and sample.keys() <= self.values.keys():
            for name, column in self.values.items():
                if column[-1] != sample.get(name, 0.0):
                    break
            else:  # a loop, not all(): samples come with every pod that starts or ends
                return
        if self.times and self.times[-1] == time:
            self.times.pop()
            for column in self.values.values():
                column.pop()
        length = len(self.times)
        for name in sample:
            if name not in self.values:
                self.values[name] = [0.0] * length
        for name, column in self.values.items():
            column.append(sample.get(name, 0.0))
        self.times.append(time)

    def at(self, time: float, name: str) -> float:
        """The value of ``name`` at ``time`` (0 before the first sample)."""
        column = self.values.get(name, [])
        found = 0.0
        for when, value in zip(self.times, column, strict=False):
            if when > time:
                break
            found = value
        return found

    def mean(self, name: str, start: float, end: float) -> float:
        """The time-weighted mean of ``name`` over [start, end], as ``at`` reads it (0 before
        the first sample); 0 for an empty span."""
        if end <= start:
            return 0.0
        total, value, at = 0.0, 0.0, start
        for when, sample in zip(self.times, self.values.get(name, []), strict=False):
            if when > end:
                break
            if when > at:
                total += value * (when - at)
                at = when
            value = sample
        return (total + value * (end - at)) / (end - start)

    def thinned(self, limit: int) -> Series:
        """At most about ``limit`` samples: within each of ``limit`` equal spans of time, the
        last sample (a step plot of it still ends each span right)."""
        if len(self.times) <= limit or not self.times:
            return self
        start, end = self.times[0], self.times[-1]
        width = (end - start) / limit or 1.0
        keep: dict[int, int] = {}
        for i, when in enumerate(self.times):
            keep[int((when - start) / width)] = i
        chosen = sorted(keep.values())
        return Series(
            times=[self.times[i] for i in chosen],
            values={name: [column[i] for i in chosen] for name, column in self.values.items()},
        )


class QueueSeries(msgspec.Struct, kw_only=True):
    """A queue over time: resources its jobs' pods hold (the trace's queue, whatever the mode),
    and, when the scheduler's proportion plugin ran, its deserved resources and share."""

    allocated: Series = msgspec.field(default_factory=Series)
    deserved: Series = msgspec.field(default_factory=Series)
    share: Series = msgspec.field(default_factory=Series)


class RunResult(msgspec.Struct, kw_only=True):
    """One run of a trace under one scheduling mode."""

    mode: str
    label: str
    jobs: list[JobResult]
    utilisation: Series  # per resource: the share of the cluster's allocatable that pods hold
    queues: dict[str, QueueSeries]
    unschedulable: dict[str, int]  # pods by reason, counted once per session they waited in
    capacity: dict[str, float]  # the cluster's allocatable, per resource (cores, bytes, ...)
    # Per resource: what reservations keep idle (their nodes' idle room held from other pods,
    # in the resource's unit), after each session that held any (reservation plugin, EASY).
    held: Series = msgspec.field(default_factory=Series)
    sessions: int = 0
    binds: int = 0
    evictions: int = 0
    end: float = 0.0  # virtual time when the run ended
    wall_seconds: float = 0.0
    scheduler_seconds: float = 0.0  # of which in the scheduler's core (snapshot + session)

    def job(self, name: str) -> JobResult:
        for job in self.jobs:
            if job.job == name or job.job.endswith(f"/{name}"):
                return job
        raise KeyError(name)

    def waiting(self, times: Sequence[float]) -> list[int]:
        """The jobs waiting at each of ``times``: arrived, and not yet started (nor finished
        or deleted without starting): the backlog a session works through."""
        arrived = sorted(job.arrival for job in self.jobs)
        left = sorted(_left_waiting(job) for job in self.jobs)
        return [bisect.bisect_right(arrived, t) - bisect.bisect_right(left, t) for t in times]


# How soon after an evicted pod is gone another job's pod must be bound on its node for the
# eviction to count as having made room for someone: two sessions and a bind at the
# simulator's default timing, with slack.
PLACEMENT_WINDOW = 10.0


def evictions_without_placement(jobs: Sequence[JobResult], within: float = PLACEMENT_WINDOW) -> int:
    """Evicted pods after whose end (their node's room freed) no pod of another job was bound
    on their node within ``within`` seconds: evictions that led to no placement, the waste a
    preemptor that then does not fit causes."""
    binds: dict[str, list[tuple[float, str]]] = {}
    for job in jobs:
        for pod in job.pods:
            if pod.node:
                binds.setdefault(pod.node, []).append((pod.bound, job.job))
    wasted = 0
    for job in jobs:
        for pod in job.pods:
            if pod.outcome != "Evicted" or pod.ended is None:
                continue
            end = pod.ended
            placed = any(
                other != job.job and end <= bound <= end + within
                for bound, other in binds.get(pod.node, ())
            )
            wasted += not placed
    return wasted


def _left_waiting(job: JobResult) -> float:
    for when in (job.started, job.finished, job.deleted):
        if when is not None:
            return when
    return math.inf


class Report(msgspec.Struct, kw_only=True):
    """Every run of one simulation, the configured scheduler's first."""

    cluster: str
    trace: str
    runs: list[RunResult]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation, None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def mean(values: Iterable[float]) -> float | None:
    found = list(values)
    return sum(found) / len(found) if found else None


def time_average(series: Series, name: str, end: float) -> float | None:
    """The average of a step series over [first sample, ``end``] (``Series.mean``)."""
    if not series.values.get(name) or not series.times or end <= series.times[0]:
        return None
    return series.mean(name, series.times[0], end)


ENCODER = msgspec.json.Encoder()


def to_json(report: Report) -> bytes:
    return ENCODER.encode(report)
