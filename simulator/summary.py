"""The figures that compare runs: one `Summary` per run (jobs by outcome, waits, completion
times, makespan, utilisation, restarts, evictions and those that led to no placement,
sessions), and the text table
``caldera simulate`` prints. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from caldera.api.volcano import JobPhase
from simulator.results import (
    RunResult,
    evictions_without_placement,
    mean,
    percentile,
    time_average,
)

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Summary:
    """One run in figures (seconds; None when no job gives the figure)."""

    label: str
    jobs: int
    completed: int
    failed: int
    ended_otherwise: int  # Aborted or Terminated
    unfinished: int
    restarts: int
    evictions: int
    evictions_unplaced: int  # evicted pods whose room no other job's pod took (results.py)
    mean_wait: float | None
    p50_wait: float | None
    p95_wait: float | None
    mean_completion: float | None
    makespan: float | None  # the last finish
    utilisation: dict[str, float | None]  # time-averaged share of each resource held
    sessions: int
    wall_seconds: float


def main_resource(run: RunResult) -> str:
    """The resource a cluster is shared by: GPUs when it has any, else cpu."""
    return GPU if run.capacity.get(GPU, 0) > 0 else "cpu"


def summarize(run: RunResult) -> Summary:
    phases = [job.phase for job in run.jobs]
    waits = [w for w in (job.wait for job in run.jobs) if w is not None]
    completions = [c for c in (job.completion for job in run.jobs) if c is not None]
    finishes = [job.finished for job in run.jobs if job.finished is not None]
    done = {JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.ABORTED, JobPhase.TERMINATED}
    return Summary(
        label=run.label,
        jobs=len(run.jobs),
        completed=phases.count(JobPhase.COMPLETED),
        failed=phases.count(JobPhase.FAILED),
        ended_otherwise=phases.count(JobPhase.ABORTED) + phases.count(JobPhase.TERMINATED),
        unfinished=sum(1 for p in phases if p not in done),
        restarts=sum(job.restarts for job in run.jobs),
        evictions=run.evictions,
        evictions_unplaced=evictions_without_placement(run.jobs),
        mean_wait=mean(waits),
        p50_wait=percentile(waits, 50),
        p95_wait=percentile(waits, 95),
        mean_completion=mean(completions),
        makespan=max(finishes) if finishes else None,
        utilisation={
            name: time_average(run.utilisation, name, run.end) for name in sorted(run.capacity)
        },
        sessions=run.sessions,
        wall_seconds=run.wall_seconds,
    )


def duration(seconds: float | None) -> str:
    """Seconds as a short human duration ("-" for none): 45s, 12m30s, 3h05m, 2d04h."""
    if seconds is None:
        return "-"
    whole = round(seconds)
    if whole < 60:
        return f"{seconds:.4g}s" if seconds < 10 else f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def share(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def rows(summaries: Sequence[Summary]) -> list[tuple[str, list[str]]]:
    """(figure, one cell per run) for every figure of the comparison table."""
    table: list[tuple[str, list[str]]] = [
        ("jobs", [str(s.jobs) for s in summaries]),
        ("completed", [str(s.completed) for s in summaries]),
        ("failed", [str(s.failed) for s in summaries]),
        ("aborted or terminated", [str(s.ended_otherwise) for s in summaries]),
        ("unfinished at the end", [str(s.unfinished) for s in summaries]),
        ("restarts (retryCount)", [str(s.restarts) for s in summaries]),
        ("pods evicted", [str(s.evictions) for s in summaries]),
        ("  of which for no placement", [str(s.evictions_unplaced) for s in summaries]),
        ("mean wait", [duration(s.mean_wait) for s in summaries]),
        ("median wait", [duration(s.p50_wait) for s in summaries]),
        ("95th percentile wait", [duration(s.p95_wait) for s in summaries]),
        ("mean completion time", [duration(s.mean_completion) for s in summaries]),
        ("makespan (last finish)", [duration(s.makespan) for s in summaries]),
    ]
    names = sorted({name for s in summaries for name, used in s.utilisation.items() if used})
    for name in names:
        table.append((f"mean {name} held", [share(s.utilisation.get(name)) for s in summaries]))
    table.append(("sessions", [str(s.sessions) for s in summaries]))
    table.append(("wall time", [f"{s.wall_seconds:.2f}s" for s in summaries]))
    return table


def text_table(summaries: Sequence[Summary]) -> str:
    """The comparison as aligned text, one column per run."""
    header = ["", *(s.label for s in summaries)]
    body = [[figure, *cells] for figure, cells in rows(summaries)]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = []
    for row in [header, *body]:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
