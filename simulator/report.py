"""The HTML report of a simulation: one self-contained page (plots embedded as PNG data URIs,
no script, no link to fetch) comparing the runs side by side.

Sections: the comparison table (``simulator.summary``); cluster utilisation over time, per
resource, one line per run; each queue's share of the cluster over time per run (with the
deserved share proportion computed, dashed); the distribution of job wait times; a Gantt chart
of a chosen set of jobs (waiting, then running, per run); the reasons pods waited; and a table
of the jobs. Plots are drawn with matplotlib's object API (no pyplot state), so building a
report changes nothing global.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from simulator.results import JobResult, Report, RunResult, Series
from simulator.summary import duration, main_resource, rows, summarize

MAX_POINTS = 2000  # per plotted series
MAX_GANTT_JOBS = 40
MAX_TABLE_JOBS = 200
FINISHED_COLOURS = {"Completed": "tab:green", "Failed": "tab:red"}


def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image(alt: str, figure: Figure) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{_png(figure)}">'


def _scale(end: float) -> tuple[float, str]:
    """(divisor, unit) for a time axis that ends at ``end`` seconds."""
    if end > 3 * 3600:
        return 3600.0, "hours"
    if end > 180:
        return 60.0, "minutes"
    return 1.0, "seconds"


def _steps(
    series: Series, name: str, end: float, divisor: float
) -> tuple[list[float], list[float]]:
    thin = series.thinned(MAX_POINTS)
    column = thin.values.get(name, [])
    if not thin.times:
        return [0.0, end / divisor], [0.0, 0.0]
    times = [t / divisor for t in thin.times] + [max(end, thin.times[-1]) / divisor]
    return times, [*column, column[-1] if column else 0.0]


def utilisation_figure(runs: Sequence[RunResult]) -> Figure:
    names = sorted(
        {
            name
            for run in runs
            for name, column in run.utilisation.values.items()
            if run.capacity.get(name, 0) > 0 and any(column)
        }
    ) or ["cpu"]
    end = max(run.end for run in runs)
    divisor, unit = _scale(end)
    figure = Figure(layout="constrained", figsize=(9, 2.2 * len(names)))
    axes = figure.subplots(len(names), 1, squeeze=False, sharex=True)
    for ax, name in zip(axes[:, 0], names, strict=False):
        for run in runs:
            times, values = _steps(run.utilisation, name, run.end, divisor)
            ax.step(times, [100 * v for v in values], where="post", label=run.label)
        ax.set_ylabel(f"{name} held (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="lower right", fontsize="small")
    axes[-1, 0].set_xlabel(f"time ({unit})")
    return figure


def queues_figure(runs: Sequence[RunResult]) -> Figure | None:
    queues = sorted({q for run in runs for q, s in run.queues.items() if s.allocated.times})
    if not queues:
        return None
    end = max(run.end for run in runs)
    divisor, unit = _scale(end)
    figure = Figure(layout="constrained", figsize=(9, 2.4 * len(runs)))
    axes = figure.subplots(len(runs), 1, squeeze=False, sharex=True)
    for ax, run in zip(axes[:, 0], runs, strict=False):
        resource = main_resource(run)
        capacity = run.capacity.get(resource, 0.0) or 1.0
        for i, queue in enumerate(queues):
            colour = f"C{i % 10}"
            series = run.queues.get(queue)
            if series is None:
                continue
            times, values = _steps(series.allocated, resource, run.end, divisor)
            ax.step(
                times, [100 * v / capacity for v in values], where="post", color=colour, label=queue
            )
            if series.deserved.times:
                times, values = _steps(series.deserved, resource, run.end, divisor)
                ax.step(
                    times,
                    [100 * v / capacity for v in values],
                    where="post",
                    color=colour,
                    linestyle="--",
                    alpha=0.6,
                )
        ax.set_title(
            f"{run.label}: {resource} held by each queue's jobs (dashed: deserved)",
            fontsize="small",
        )
        ax.set_ylabel("% of cluster")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize="x-small")
    axes[-1, 0].set_xlabel(f"time ({unit})")
    return figure


def waits_figure(runs: Sequence[RunResult]) -> Figure:
    figure = Figure(layout="constrained", figsize=(9, 3))
    ax = figure.subplots()
    longest = max((job.wait or 0.0 for run in runs for job in run.jobs), default=0.0)
    divisor, unit = _scale(longest)
    for run in runs:
        waits = sorted(w for w in (job.wait for job in run.jobs) if w is not None)
        total = len(run.jobs) or 1
        if waits:
            ax.step(
                [w / divisor for w in waits],
                [100 * (i + 1) / total for i in range(len(waits))],
                where="post",
                label=f"{run.label} ({total - len(waits)} never started)",
            )
    ax.set_xlabel(f"wait from arrival to Running ({unit})")
    ax.set_ylabel("% of jobs started")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return figure


def gantt_figure(runs: Sequence[RunResult], names: Sequence[str]) -> Figure:
    end = max(run.end for run in runs)
    divisor, unit = _scale(end)
    figure = Figure(
        layout="constrained", figsize=(9, 0.6 + 0.22 * len(names) * len(runs) + 0.6 * len(runs))
    )
    axes = figure.subplots(len(runs), 1, squeeze=False, sharex=True)
    for ax, run in zip(axes[:, 0], runs, strict=False):
        by_name = {job.job: job for job in run.jobs}
        for row, name in enumerate(names):
            job = by_name.get(name)
            if job is None:
                continue
            start = job.started if job.started is not None else run.end
            ax.broken_barh(
                [(job.arrival / divisor, (start - job.arrival) / divisor)],
                (row - 0.35, 0.7),
                color="0.85",
            )
            if job.started is not None:
                stop = job.finished if job.finished is not None else run.end
                colour = FINISHED_COLOURS.get(job.phase, "tab:blue")
                ax.broken_barh(
                    [(start / divisor, (stop - start) / divisor)], (row - 0.35, 0.7), color=colour
                )
        ax.set_yticks(range(len(names)), [n.split("/", 1)[-1] for n in names], fontsize="x-small")
        ax.invert_yaxis()
        ax.set_title(
            f"{run.label}: grey waiting, then running (green Completed, red Failed, "
            "blue other or unfinished)",
            fontsize="small",
        )
        ax.grid(alpha=0.3, axis="x")
    axes[-1, 0].set_xlabel(f"time ({unit})")
    return figure


def gantt_jobs(runs: Sequence[RunResult], chosen: Sequence[str]) -> list[str]:
    """The jobs the Gantt chart shows: those chosen (by name or namespace/name), else the first
    ``MAX_GANTT_JOBS`` to arrive."""
    jobs = runs[0].jobs
    if chosen:
        names = []
        for wanted in chosen:
            found = [j.job for j in jobs if j.job == wanted or j.job.endswith(f"/{wanted}")]
            if not found:
                raise KeyError(f"--gantt: the trace has no job {wanted!r}")
            names += found
        return names[:MAX_GANTT_JOBS]
    return [j.job for j in sorted(jobs, key=lambda j: j.arrival)[:MAX_GANTT_JOBS]]


def html_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    lines = [f"<tr>{head}</tr>"]
    for row in body:
        cells = "".join(f"<td>{html.escape(c)}</td>" for c in row)
        lines.append(f"<tr>{cells}</tr>")
    return "<table>\n" + "\n".join(lines) + "\n</table>"


def _job_row(job: JobResult) -> list[str]:
    nodes = sorted({p.node for p in job.pods})
    shown = ", ".join(nodes[:4]) + (f" (+{len(nodes) - 4})" if len(nodes) > 4 else "")
    return [
        job.job,
        job.queue,
        duration(job.arrival),
        duration(job.wait),
        duration(job.run),
        duration(job.completion),
        str(job.phase) or "-",
        str(job.restarts),
        shown,
    ]


STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 1100px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
td:first-child, th:first-child { text-align: left; }
img { max-width: 100%; }
"""


def page(report: Report, *, gantt: Sequence[str] = (), title: str = "") -> str:
    """The whole report as one HTML document."""
    runs = report.runs
    summaries = [summarize(run) for run in runs]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title or 'caldera simulate')}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title or 'Simulation')}</h1>",
        f"<p>Cluster <code>{html.escape(report.cluster)}</code>, trace "
        f"<code>{html.escape(report.trace)}</code>, written by <code>caldera simulate</code>. "
        "Times are seconds of virtual time from the first arrival.</p>",
        "<h2>Runs side by side</h2>",
        html_table(["", *(s.label for s in summaries)], [[f, *c] for f, c in rows(summaries)]),
        "<h2>Cluster utilisation</h2>",
        image("utilisation over time", utilisation_figure(runs)),
    ]
    queues = queues_figure(runs)
    if queues is not None:
        parts += ["<h2>Queue shares</h2>", image("queue shares over time", queues)]
    parts += ["<h2>Job wait times</h2>", image("wait time distribution", waits_figure(runs))]
    names = gantt_jobs(runs, gantt)
    if names:
        parts += ["<h2>Gantt chart</h2>", image("gantt chart", gantt_figure(runs, names))]
    reasons = sorted({r for run in runs for r in run.unschedulable})
    parts.append("<h2>Why pods waited</h2>")
    if reasons:
        parts += [
            "<p>Pods by reason, counted once per session in which they could not be placed.</p>",
            html_table(
                ["reason", *(run.label for run in runs)],
                [[r, *(str(run.unschedulable.get(r, 0)) for run in runs)] for r in reasons],
            ),
        ]
    else:
        parts.append("<p>No pod was left unplaced by a session.</p>")
    for run in runs:
        jobs = run.jobs[:MAX_TABLE_JOBS]
        more = len(run.jobs) - len(jobs)
        parts += [
            f"<h2>Jobs: {html.escape(run.label)}</h2>",
            f"<p>The first {len(jobs)} of {len(run.jobs)} jobs.</p>" if more > 0 else "",
            html_table(
                [
                    "job",
                    "queue",
                    "arrival",
                    "wait",
                    "run",
                    "completion",
                    "phase",
                    "restarts",
                    "nodes",
                ],
                [_job_row(job) for job in jobs],
            ),
        ]
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


def write_html(report: Report, path: Path, *, gantt: Sequence[str] = (), title: str = "") -> None:
    path.write_text(page(report, gantt=gantt, title=title))
