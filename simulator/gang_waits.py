"""The large-gangs experiment's figures (``examples/experiments/large-gangs``): how long the
large gangs and the small jobs waited, the GPUs' utilisation, what reservations kept idle, and
the goal of issue 45 judged on them, MET or MISS beside each figure:

- bounded: no large gang waits more than ``factor`` times the longest running job's duration
  in the trace (a gang never started counts as waiting until the run's end);
- utilisation: the share of the GPUs that pods hold over the arrivals' span (from 0 to the
  last arrival: the busy cluster, not the drain after it) within ``points`` percentage points
  of today's run (or above it).

The claim holds when today's run misses the bound (the gangs starve) and every run named in
``bounded`` meets both goals. Gangs are the Jobs named ``gang-*``, the rest are small jobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from simulator.results import JobResult, RunResult

GPU = "nvidia.com/gpu"
HOUR = 3600.0


@dataclass(frozen=True)
class Figures:
    """One run's figures (seconds, and shares from 0 to 1)."""

    label: str
    gang_waits: list[float]  # one per gang; never started: until the run's end
    gangs_never_started: int
    small_waits: list[float]  # of the small jobs that started
    utilisation: float
    held_gpu_hours: float


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (``share`` from 0 to 1); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def _is_gang(job: JobResult) -> bool:
    return job.job.split("/")[-1].startswith("gang-")


def figures(label: str, run: RunResult, window: float) -> Figures:
    """A run's figures; utilisation over [0, window]."""
    gangs = [j for j in run.jobs if _is_gang(j)]
    waits = [j.wait if j.wait is not None else run.end - j.arrival for j in gangs]
    small = [j.wait for j in run.jobs if not _is_gang(j) and j.wait is not None]
    held = run.held.mean(GPU, 0.0, run.end) * run.end / HOUR if run.end > 0 else 0.0
    return Figures(
        label=label,
        gang_waits=waits,
        gangs_never_started=sum(1 for j in gangs if j.started is None),
        small_waits=small,
        utilisation=run.utilisation.mean(GPU, 0.0, window),
        held_gpu_hours=held,
    )


def longest_run(runs: Sequence[RunResult]) -> float:
    """The longest time a job ran (first Running to its end), over every run."""
    return max((j.run for r in runs for j in r.jobs if j.run is not None), default=0.0)


def _hours(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds / HOUR:.1f} h"


def _minutes(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds / 60:.1f} min"


def _mark(met: bool) -> str:
    return "MET" if met else "MISS"


def evaluate(expect: Mapping[str, Any], runs: Mapping[str, RunResult]) -> Any:
    """(header, rows, holds, verdict, figure) as ``simulator.experiments`` shows them."""
    factor = float(expect["factor"])
    points = float(expect["points"])
    today = str(expect["today"])
    bounded = [str(label) for label in expect["bounded"]]
    window = max(j.arrival for r in runs.values() for j in r.jobs)
    longest = longest_run(list(runs.values()))
    bound = factor * longest
    found = {label: figures(label, run, window) for label, run in runs.items()}
    base = found[today].utilisation
    rows = []
    for label, f in found.items():
        worst = max(f.gang_waits, default=0.0)
        never = f" ({f.gangs_never_started} never started)" if f.gangs_never_started else ""
        close = f.utilisation >= base - points / 100
        rows.append(
            [
                label,
                f"{_hours(percentile(f.gang_waits, 0.5))} / "
                f"{_hours(percentile(f.gang_waits, 0.99))} / {_hours(worst)}{never}",
                f"{_mark(worst <= bound)} ({_hours(worst)} vs {_hours(bound)})",
                f"{_minutes(percentile(f.small_waits, 0.5))} / "
                f"{_minutes(percentile(f.small_waits, 0.99))} / "
                f"{_minutes(max(f.small_waits, default=math.nan))}",
                f"{100 * f.utilisation:.1f}%",
                "-" if label == today else f"{_mark(close)} ({100 * (f.utilisation - base):+.1f})",
                f"{f.held_gpu_hours:.0f}",
            ]
        )
    starving = max(found[today].gang_waits, default=0.0) > bound
    met = {
        label: max(found[label].gang_waits, default=0.0) <= bound
        and found[label].utilisation >= base - points / 100
        for label in bounded
    }
    holds = starving and all(met.values())
    verdict = (
        f"today's large gangs wait up to {_hours(max(found[today].gang_waits, default=0.0))} "
        f"(bound {_hours(bound)}: twice the longest job, {_hours(longest)}); "
        + "; ".join(
            f"{label}: up to {_hours(max(found[label].gang_waits, default=0.0))}, GPUs "
            f"{100 * found[label].utilisation:.1f}% ({_mark(met[label])})"
            for label in bounded
        )
    )
    header = [
        "run",
        "large gangs' wait p50 / p99 / max",
        f"goal: max at most {factor:g} times the longest job",
        "small jobs' wait p50 / p99 / max",
        "GPU utilisation (arrivals' span)",
        f"goal: within {points:g} points of today",
        "GPU-hours held idle by reservations",
    ]
    return header, rows, holds, verdict, figure(list(found.values()), bound, factor)


def figure(found: Sequence[Figures], bound: float, factor: float) -> Figure:
    """Three panels: large gangs' waits against the bound, small jobs' waits, and GPU
    utilisation with the GPU-hours reservations held idle."""
    fig = Figure(layout="constrained", figsize=(10, 7.5))
    gang_ax, small_ax, use_ax = fig.subplots(3, 1)
    labels = [f.label for f in found]
    xs = list(range(len(found)))
    width = 0.27
    for i, (name, share) in enumerate((("p50", 0.5), ("p99", 0.99), ("max", 1.0))):
        gang_ax.bar(
            [x + (i - 1) * width for x in xs],
            [percentile(f.gang_waits, share) / HOUR for f in found],
            width,
            label=name,
        )
        small_ax.bar(
            [x + (i - 1) * width for x in xs],
            [percentile(f.small_waits, share) / 60 for f in found],
            width,
            label=name,
        )
    gang_ax.axhline(
        bound / HOUR, color="0.3", linestyle="--", label=f"goal: {factor:g} times the longest job"
    )
    gang_ax.set_ylabel("hours")
    gang_ax.set_title("large gangs' wait", fontsize="small")
    small_ax.set_ylabel("minutes")
    small_ax.set_title("small jobs' wait", fontsize="small")
    use_ax.bar([x - 0.2 for x in xs], [100 * f.utilisation for f in found], 0.4, label="GPUs held")
    use_ax.set_ylabel("GPU utilisation (%)")
    use_ax.set_ylim(0, 100)
    held_ax = use_ax.twinx()
    held_ax.bar(
        [x + 0.2 for x in xs],
        [f.held_gpu_hours for f in found],
        0.4,
        color="tab:red",
        label="GPU-hours held idle by reservations",
    )
    held_ax.set_ylabel("GPU-hours held idle")
    use_ax.set_title(
        "GPU utilisation over the arrivals' span, and idle reserved GPUs", fontsize="small"
    )
    for ax in (gang_ax, small_ax, use_ax):
        ax.set_xticks(xs, labels, fontsize="x-small")
        ax.grid(alpha=0.3, axis="y")
    gang_ax.legend(fontsize="x-small")
    small_ax.legend(fontsize="x-small")
    handles = use_ax.get_legend_handles_labels()
    extra = held_ax.get_legend_handles_labels()
    use_ax.legend(handles[0] + extra[0], handles[1] + extra[1], fontsize="x-small")
    return fig
