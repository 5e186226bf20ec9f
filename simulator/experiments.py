"""The seed experiments (``examples/experiments/<name>/``): each directory holds a cluster file,
traces, scheduler configurations and ``experiment.yaml`` (the claim, its source, the runs to
make, what the claim expects and notes on the model). This module runs them and writes the
summary (``docs/experiments.md``) and the report with plots (``docs/experiments.html``):

    .venv/bin/python -m simulator.experiments [--out docs]   # make experiments: all, written
    .venv/bin/python -m simulator.experiments --only gang,drf   # some: verdicts, nothing written
    .venv/bin/python -m simulator.experiments --only gpu-sharing --variant 1000  # larger files

Every figure comes from the simulation; a claim "holds" when the figure the experiment's
evaluator computes matches what ``experiment.yaml`` expects. The summary has no wall-clock
figures, so running it again changes nothing unless the simulation's results change.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import itertools
import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os.path import normpath
from pathlib import Path
from typing import Any

import msgspec
from matplotlib.figure import Figure

from caldera.api.names import pod_name_prefix
from simulator import cards
from simulator.baselines import Mode
from simulator.engine import Limits, Simulation
from simulator.gang_waits import evaluate as evaluate_gang_waits
from simulator.loading import conf_text, load_conf, load_scenario, read_document
from simulator.report import STYLE, gantt_figure, html_table, image, queues_figure
from simulator.results import JobResult, RunResult, evictions_without_placement
from simulator.spec import Scenario, SpecError, Strict, seconds

ROOT = Path(__file__).resolve().parent.parent / "examples" / "experiments"


class RunSpec(Strict, frozen=True):
    label: str
    mode: Mode = Mode.SCHEDULER
    conf: str = ""
    trace: str = "trace.yaml"
    cluster: str = "cluster.yaml"
    until: float | str | None = None


class ExperimentSpec(Strict, frozen=True):
    title: str
    claim: str
    source: str
    runs: tuple[RunSpec, ...]
    expect: Any = None
    notes: str = ""
    at: float | str | None = None
    penalties: tuple[float, ...] = ()


Key = tuple[str, float | None]  # (run label, network penalty or None)


@dataclass
class Finding:
    """One experiment's outcome: its figure as a table, whether the claim holds, a plot."""

    name: str
    spec: ExperimentSpec
    header: list[str]
    rows: list[list[str]]
    holds: bool
    verdict: str
    figure: Figure | None
    commands: list[str]


# ---- running --------------------------------------------------------------------------------


def load_spec(directory: Path) -> ExperimentSpec:
    where = directory / "experiment.yaml"
    try:
        spec: ExperimentSpec = msgspec.convert(read_document(where), ExperimentSpec)
    except msgspec.ValidationError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return spec


def _with_penalty(scenario: Scenario, penalty: float) -> Scenario:
    jobs = []
    for sub in scenario.jobs:
        network = sub.workload.network
        if network is not None:
            workload = dataclasses.replace(
                sub.workload, network=dataclasses.replace(network, penalty=penalty)
            )
            sub = dataclasses.replace(sub, workload=workload)
        jobs.append(sub)
    return dataclasses.replace(scenario, jobs=tuple(jobs))


def run_experiment(directory: Path, spec: ExperimentSpec) -> dict[Key, RunResult]:
    """Every run of the experiment (once per penalty when it sweeps them), over one span."""
    results: dict[Key, RunResult] = {}
    for run in spec.runs:
        cluster = directory / run.cluster
        scenario = load_scenario(cluster, directory / run.trace)
        conf_path = directory / run.conf if run.conf else None
        text, source = conf_text(conf_path, cluster, scenario.cluster.scheduler_conf)
        conf = load_conf(text, source)
        until = seconds(run.until, f"{run.label}.until") if run.until is not None else None
        for penalty in spec.penalties or (None,):
            chosen = scenario if penalty is None else _with_penalty(scenario, penalty)
            simulation = Simulation(chosen, conf=conf, mode=run.mode, limits=Limits(until=until))
            result = simulation.run()
            result.label = run.label
            results[(run.label, penalty)] = result
    horizon = max(r.end for r in results.values())
    for result in results.values():
        result.end = horizon
    return results


def command(directory: Path, run: RunSpec) -> str:
    """The ``caldera simulate`` command that makes one run (its baseline runs alongside)."""
    base = (
        directory.relative_to(ROOT.parent.parent) if directory.is_relative_to(ROOT) else directory
    )
    # normpath: a run may name another experiment's file (``../binpack/scheduler.yaml``).
    parts = ["caldera simulate", normpath(base / run.cluster), normpath(base / run.trace)]
    if run.conf:
        parts.append(f"--conf {normpath(base / run.conf)}")
    if run.mode is Mode.EASY:  # not among the baselines run by default
        parts.append("--baselines easy")
    return " ".join(parts)


# ---- figures --------------------------------------------------------------------------------


def running_at(job: JobResult, when: float) -> int:
    """Pods of the job running at ``when``."""
    return sum(
        1
        for p in job.pods
        if p.started is not None and p.started <= when and (p.ended is None or p.ended > when)
    )


def _by_label(runs: Mapping[Key, RunResult]) -> dict[str, RunResult]:
    return {label: run for (label, penalty), run in runs.items() if penalty is None}


def _bars(title: str, groups: Mapping[str, Mapping[str, float]], ylabel: str) -> Figure:
    """Grouped bars: one group per run, one bar per key."""
    keys = sorted({k for values in groups.values() for k in values})
    figure = Figure(layout="constrained", figsize=(9, 3))
    ax = figure.subplots()
    width = 0.8 / max(len(keys), 1)
    for i, key in enumerate(keys):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, [groups[label].get(key, 0) for label in groups], width, label=key)
    ax.set_xticks(
        [g + width * (len(keys) - 1) / 2 for g in range(len(groups))],
        list(groups),
        fontsize="small",
    )
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="small")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3, axis="y")
    return figure


def running_series(job: JobResult, end: float) -> tuple[list[float], list[int]]:
    """(times, pods running from then on) for a step plot of the job's running pods."""
    changes: dict[float, int] = {}
    for p in job.pods:
        if p.started is None:
            continue
        changes[p.started] = changes.get(p.started, 0) + 1
        if p.ended is not None:
            changes[p.ended] = changes.get(p.ended, 0) - 1
    times, counts, running = [0.0], [0], 0
    for when in sorted(changes):
        running += changes[when]
        times.append(when)
        counts.append(running)
    return [*times, end], [*counts, running]


def running_figure(runs: Sequence[RunResult]) -> Figure:
    """Pods running per job over time, one panel per run."""
    end = max(r.end for r in runs)
    figure = Figure(layout="constrained", figsize=(9, 2 * len(runs)))
    axes = figure.subplots(len(runs), 1, squeeze=False, sharex=True)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        for job in run.jobs:
            times, counts = running_series(job, end)
            ax.step([t / 60 for t in times], counts, where="post", label=job.job.split("/")[-1])
        ax.set_title(run.label, fontsize="small")
        ax.set_ylabel("pods running")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper right")
    axes[-1, 0].set_xlabel("time (minutes)")
    return figure


def _gang(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    by_label = _by_label(runs)
    expect: dict[str, int] = spec.expect
    rows, holds = [], True
    for label, run in by_label.items():
        done = sum(1 for j in run.jobs if j.phase == "Completed")
        finishes = [j.finished for j in run.jobs if j.finished is not None]
        makespan = f"{max(finishes) / 60:.0f} min" if finishes else "never"
        rows.append([label, f"{done} of {len(run.jobs)}", makespan])
        if label in expect:
            holds = holds and done == expect[label]
    verdict = "; ".join(f"{r[0]}: {r[1]} jobs completed" for r in rows)
    figure = gantt_figure(list(by_label.values()), [j.job for j in by_label[rows[0][0]].jobs])
    return ["run", "jobs completed", "last job done"], rows, holds, verdict, figure


def _count_at(
    spec: ExperimentSpec, runs: Mapping[Key, RunResult], group: Callable[[JobResult, str], str]
) -> Any:
    at = seconds(spec.at or 0.0, "at")
    expect: dict[str, dict[str, int]] = spec.expect
    rows, holds, groups = [], True, {}
    for label, run in _by_label(runs).items():
        counts: dict[str, int] = {}
        for job in run.jobs:
            key = group(job, label)
            counts[key] = counts.get(key, 0) + running_at(job, at)
        groups[label] = counts
        rows.append([label, ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))])
        if label in expect:
            holds = holds and counts == expect[label]
    verdict = "; ".join(f"{r[0]}: {r[1]}" for r in rows)
    figure = _bars(f"pods running {at:.0f} s in", groups, "pods")
    return ["run", f"pods running at {at:.0f} s"], rows, holds, verdict, figure


def _drf(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    return _count_at(spec, runs, lambda job, _label: job.job)


def _queue_weights(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    by_namespace = {label for label in spec.expect if "namespace" in label}

    def group(job: JobResult, label: str) -> str:
        return job.job.split("/", 1)[0] if label in by_namespace else job.queue

    found = _count_at(spec, runs, group)
    queues = queues_figure([r for (label, _), r in runs.items() if label not in by_namespace])
    return (*found[:4], queues or found[4])


def _binpack(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    expect: dict[str, dict[str, list[int]]] = spec.expect
    rows, holds, groups = [], True, {}
    for label, run in _by_label(runs).items():
        placed = {
            job.job: sorted(Counter(p.node for p in job.pods).values(), reverse=True)
            for job in run.jobs
        }
        rows.append([label, *(" + ".join(map(str, placed[j.job])) for j in run.jobs)])
        groups[label] = {
            f"{j.job.split('/')[-1]}: nodes used": len(placed[j.job]) for j in run.jobs
        }
        if label in expect:
            holds = holds and all(placed[job] == counts for job, counts in expect[label].items())
    jobs = [j.job.split("/")[-1] for j in next(iter(runs.values())).jobs]
    verdict = "; ".join(
        f"{r[0]}: " + ", ".join(f"{j} {c}" for j, c in zip(jobs, r[1:], strict=True)) for r in rows
    )
    figure = _bars("nodes each job's pods used", groups, "nodes")
    return ["run", *(f"{j}: pods per node" for j in jobs)], rows, holds, verdict, figure


def split_share(run: RunResult, first: str, second: str) -> float:
    """The share of (first, second) task pod pairs on different nodes, over the jobs' first
    placements."""
    pairs = split = 0
    for job in run.jobs:
        nodes: dict[str, list[str]] = {first: [], second: []}
        for pod in job.pods:
            if pod.attempt != 1:
                continue
            for task in (first, second):
                if pod.pod.startswith(pod_name_prefix(job.job.split("/")[-1], task)):
                    nodes[task].append(pod.node)
        for a in nodes[first]:
            for b in nodes[second]:
                pairs += 1
                split += a != b
    return split / pairs if pairs else 0.0


def crossing(curve: Sequence[tuple[float, float]], target: float) -> float | None:
    """The first x at which the piecewise-linear curve of (x, y) points reaches ``target``."""
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        if y0 >= target:
            return x0
        if y1 >= target:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0)
    if curve and curve[-1][1] >= target:
        return curve[-1][0]
    return None


def _makespan(run: RunResult) -> float:
    return max((j.finished for j in run.jobs if j.finished is not None), default=float("nan"))


def _task_topology(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    labels = [r.label for r in spec.runs]
    pairs = [
        (labels[0], labels[1], "3 nodes of 12 cpu"),
        (labels[2], labels[3], "3 nodes of 8 cpu"),
    ]
    claim = float(spec.expect["speedup"])
    rows, curves, reached = [], {}, {}
    for topology, default, cluster in pairs:
        f_topo = split_share(runs[(topology, 0.0)], "ps", "worker")
        f_default = split_share(runs[(default, 0.0)], "ps", "worker")
        curve = []
        for penalty in spec.penalties:
            t_topo, t_default = (
                _makespan(runs[(topology, penalty)]),
                _makespan(runs[(default, penalty)]),
            )
            speedup = 1 - t_topo / t_default
            curve.append((penalty, speedup))
            rows.append(
                [
                    cluster,
                    f"{penalty:g}",
                    f"{f_topo:.2f}",
                    f"{f_default:.2f}",
                    f"{t_topo / 60:.1f}",
                    f"{t_default / 60:.1f}",
                    f"{100 * speedup:.0f}%",
                ]
            )
        curves[cluster] = curve
        reached[cluster] = crossing(curve, claim)
    holds = reached[pairs[0][2]] is not None
    verdict = "; ".join(
        f"{cluster}: {int(100 * claim)}% shorter once the penalty reaches {p:.2f}"
        if p is not None
        else f"{cluster}: never {int(100 * claim)}% shorter (at best "
        f"{100 * max(s for _, s in curves[cluster]):.0f}%)"
        for cluster, p in reached.items()
    )
    figure = Figure(layout="constrained", figsize=(9, 3.2))
    ax = figure.subplots()
    for cluster, curve in curves.items():
        ax.plot([p for p, _ in curve], [100 * s for _, s in curve], marker="o", label=cluster)
    ax.axhline(100 * claim, color="0.5", linestyle="--", label=f"the claim: {int(100 * claim)}%")
    ax.set_xlabel("penalty: slowdown of a job whose ps-worker pairs are all split")
    ax.set_ylabel("shorter than default (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    header = [
        "cluster",
        "penalty",
        "split pairs, task-topology",
        "split pairs, default",
        "last job done, task-topology (min)",
        "last job done, default (min)",
        "shorter by",
    ]
    return header, rows, holds, verdict, figure


def _preemption_toleration(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    expect: dict[str, float] = spec.expect
    rows, holds = [], True
    by_label = _by_label(runs)
    for label, run in by_label.items():
        victim = run.job("victim")
        evicted = [p for p in victim.pods if p.outcome == "Evicted" and p.ended is not None]
        first = min((p.ended - p.bound for p in evicted), default=None)  # type: ignore[operator]
        waited = run.job("preemptor")
        start = "-" if waited.started is None else f"{waited.started - waited.arrival:.0f} s"
        rows.append([label, "never" if first is None else f"{first:.0f} s", start])
        if label in expect:
            holds = holds and first is not None and abs(first - expect[label]) <= 1.0
    verdict = "; ".join(f"{r[0]}: victims evicted after {r[1]}" for r in rows)
    figure = running_figure(list(by_label.values()))
    return (
        ["run", "victims scheduled for, when evicted", "preemptor waited"],
        rows,
        holds,
        verdict,
        figure,
    )


def _gang_preemption(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    """Pods evicted, of which for no placement (``evictions_without_placement``), and how long
    the high-priority gangs that fit waited."""
    expect: dict[str, int] = spec.expect
    rows, holds = [], True
    means: list[float] = []
    by_label = _by_label(runs)
    for label, run in by_label.items():
        urgent = [j for j in run.jobs if j.job.split("/")[-1].startswith(("high-", "urgent-"))]
        waits = [j.wait for j in urgent if j.wait is not None]
        wasted = evictions_without_placement(run.jobs)
        mean_wait = sum(waits) / len(waits) if waits else None
        means.append(math.inf if mean_wait is None else mean_wait)
        rows.append(
            [
                label,
                str(run.evictions),
                str(wasted),
                f"{len(waits)} of {len(urgent)}",
                "-" if mean_wait is None else f"{mean_wait / 60:.1f} min",
                "-" if not waits else f"{max(waits) / 60:.1f} min",
            ]
        )
        if label in expect:
            holds = holds and wasted == expect[label]
    # The gang actions' run (the last) must also shorten the high-priority gangs' wait.
    holds = holds and len(means) > 1 and means[-1] < means[0]
    verdict = "; ".join(
        f"{r[0]}: {r[1]} pods evicted, {r[2]} for no placement, high-priority gangs waited "
        f"{r[4]} on average"
        for r in rows
    )
    figure = _bars(
        "Pods evicted, and for no placement",
        {r[0]: {"pods evicted": float(r[1]), "for no placement": float(r[2])} for r in rows},
        "pods",
    )
    return (
        [
            "run",
            "pods evicted",
            "of which for no placement",
            "high-priority gangs started",
            "their mean wait",
            "their longest wait",
        ],
        rows,
        holds,
        verdict,
        figure,
    )


def _gpu_fragments(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    """How long the gang waited (whole minutes), and on how many nodes the other jobs' pods
    ran when it arrived: the nodes it could not have."""
    expect: dict[str, int] = spec.expect
    rows, holds = [], True
    by_label = _by_label(runs)
    for label, run in by_label.items():
        gang = run.job("whole-node-gang")
        held = {
            p.node
            for job in run.jobs
            if job is not gang
            for p in job.pods
            if p.node and p.bound <= gang.arrival and (p.ended is None or p.ended > gang.arrival)
        }
        waited = None if gang.wait is None else int(gang.wait // 60)
        rows.append([label, str(len(held)), "never started" if waited is None else f"{waited} min"])
        if label in expect:
            holds = holds and waited == expect[label]
    verdict = "; ".join(f"{r[0]}: the gang waited {r[2]}" for r in rows)
    figure = gantt_figure(
        list(by_label.values()), [j.job for j in next(iter(by_label.values())).jobs]
    )
    return (
        ["run", "nodes holding one-GPU pods when the gang came", "the gang waited"],
        rows,
        holds,
        verdict,
        figure,
    )


def _large_gangs(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    """Large gangs' and small jobs' waits, GPU utilisation and idle reserved GPUs, with issue
    45's goal judged on them (``simulator.gang_waits``)."""
    return evaluate_gang_waits(spec.expect, _by_label(runs))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _minutes(value: float | None) -> str:
    return "-" if value is None else f"{value / 60:.1f} min"


def _gpu_sharing(spec: ExperimentSpec, runs: Mapping[Key, RunResult]) -> Any:
    """Pods placed within the window ``at``, the cards' memory in use, cards in use and partly
    used (time averages over the window, ``simulator.cards``), and the jobs' waits. Runs
    without sharing hold whole cards using the memory the sharing trace asks
    (``expect.sharing`` names a run of it, ``expect.whole`` the run without)."""
    window = seconds(spec.at or 0.0, "at")
    expect: dict[str, str] = spec.expect
    directory = ROOT / "gpu-sharing"
    shared = next(r for r in spec.runs if r.label == expect["sharing"])
    scenario = load_scenario(directory / shared.cluster, directory / shared.trace)
    size, needs = cards.capacity(scenario), cards.card_needs(scenario)
    rows, figures = [], {}
    placed: dict[str, int] = {}
    partly: dict[str, float] = {}
    gang_wait: dict[str, float] = {}
    for label, run in _by_label(runs).items():
        series = cards.card_series(cards.card_uses(run, needs), size.memory)
        figures[label] = series
        pods = [p for j in run.jobs for p in j.pods if p.attempt == 1]
        placed[label] = sum(1 for p in pods if p.bound <= window)
        partly[label] = cards.time_average(series, window, "partly")
        gangs = [j.wait for j in run.jobs if "/training-" in j.job and j.wait is not None]
        small = [j.wait for j in run.jobs if "/training-" not in j.job and j.wait is not None]
        gang_wait[label] = _mean(gangs) or 0.0
        memory = cards.time_average(series, window, "memory") / size.total
        rows.append(
            [
                label,
                f"{placed[label]} of {len(pods)}",
                f"{100 * memory:.0f}%",
                f"{cards.time_average(series, window, 'used'):.0f} of {size.cards}",
                f"{partly[label]:.0f}",
                _minutes(_mean(small)),
                _minutes(_mean(gangs)),
                _minutes(max((j.wait for j in run.jobs if j.wait is not None), default=None)),
            ]
        )
    best, spread, whole = expect["binpack"], expect["spread"], expect["whole"]
    holds = (
        all(placed[label] > placed[whole] for label in placed if label != whole)
        and partly[best] < partly[spread]
        and gang_wait[best] < gang_wait[spread]
    )
    verdict = "; ".join(
        f"{r[0]}: {r[1]} pods placed in the first {window / 3600:g} h, {r[2]} of the cards' "
        f"memory in use, {r[4]} cards partly used, gangs waited {r[6]}"
        for r in rows
    )
    return (
        [
            "run",
            f"pods placed in the first {window / 3600:g} h",
            "card memory in use (mean)",
            "cards in use (mean)",
            "cards partly used (mean)",
            "fractional pods' mean wait",
            "training gangs' mean wait",
            "longest wait",
        ],
        rows,
        holds,
        verdict,
        cards_figure(figures, size),
    )


def cards_figure(series: Mapping[str, Sequence[cards.CardSample]], size: cards.Capacity) -> Figure:
    """The cards' memory in use and the cards partly used over time, one line per run."""
    figure = Figure(layout="constrained", figsize=(9, 5))
    memory_ax, partly_ax = figure.subplots(2, 1, sharex=True)
    for label, samples in series.items():
        times = [s.time / 60 for s in samples]
        memory_ax.step(
            times, [100 * s.memory / size.total for s in samples], where="post", label=label
        )
        partly_ax.step(times, [s.partly for s in samples], where="post", label=label)
    memory_ax.set_ylabel("card memory in use (%)")
    partly_ax.set_ylabel("cards partly used")
    partly_ax.set_xlabel("time (minutes)")
    for ax in (memory_ax, partly_ax):
        ax.grid(alpha=0.3)
    memory_ax.legend(fontsize="x-small", loc="upper right")
    return figure


EVALUATORS: dict[str, Callable[[ExperimentSpec, Mapping[Key, RunResult]], Any]] = {
    "gang": _gang,
    "drf": _drf,
    "queue-weights": _queue_weights,
    "binpack": _binpack,
    "gpu-fragments": _gpu_fragments,
    "task-topology": _task_topology,
    "preemption-toleration": _preemption_toleration,
    "gang-preemption": _gang_preemption,
    "large-gangs": _large_gangs,
    "gpu-sharing": _gpu_sharing,
}


def with_variant(directory: Path, spec: ExperimentSpec, variant: str) -> ExperimentSpec:
    """The spec whose runs read ``<cluster>-<variant>.yaml`` and ``<trace>-<variant>.yaml``
    instead of their files, where the experiment has them (a larger cluster and trace run by
    hand, e.g. gpu-sharing's 1,000 nodes); an error when it has neither for some run, or when
    the variant is more than a word (it names files)."""
    if not variant.replace("_", "").isalnum() or not variant.isascii():
        raise SpecError(f"variant: letters, digits and _ only, got {variant!r}")

    def swap(file: str) -> str:
        path = Path(file)
        other = path.with_name(f"{path.stem}-{variant}{path.suffix}")
        return str(other) if (directory / other).is_file() else file

    runs = []
    for run in spec.runs:
        swapped = msgspec.structs.replace(run, cluster=swap(run.cluster), trace=swap(run.trace))
        if swapped == run:
            raise SpecError(f"{directory.name}: run {run.label!r} has no variant {variant!r}")
        runs.append(swapped)
    return msgspec.structs.replace(spec, runs=tuple(runs))


def evaluate(name: str, directory: Path, variant: str = "") -> Finding:
    """Run one experiment (with ``variant``, its larger files: ``with_variant``) and judge its
    claim."""
    spec = load_spec(directory)
    if variant:
        spec = with_variant(directory, spec, variant)
    runs = run_experiment(directory, spec)
    header, rows, holds, verdict, figure = EVALUATORS[name](spec, runs)
    commands = list(dict.fromkeys(command(directory, run) for run in spec.runs))
    return Finding(name, spec, header, rows, holds, verdict, figure, commands)


# ---- writing --------------------------------------------------------------------------------


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


INTRO = (
    "The seed experiments of issue 19, run by the simulator (`caldera simulate`) on Caldera's "
    "scheduler and job controller logic. Each lives in `examples/experiments/<name>/` (cluster, "
    "traces, configurations, and `experiment.yaml` with the claim and what it expects); "
    "`make experiments` runs them and writes this summary and `docs/experiments.html` (the same "
    "with plots). Every figure below comes from the simulation; the model the simulator uses "
    "(virtual time, bind delay, progress: gang, the network model) is in "
    "[simulator.md](simulator.md). Do not edit this file: change the experiment and run "
    "`make experiments`."
)


def markdown(findings: Sequence[Finding]) -> str:
    parts = [
        "# Seed experiments",
        "",
        INTRO,
        "",
        _md_table(
            ["experiment", "the claim", "figure from the simulator"],
            [
                [f"[{f.spec.title}](#{f.name})", "holds" if f.holds else "does not hold", f.verdict]
                for f in findings
            ],
        ),
    ]
    for f in findings:
        parts += [
            "",
            f'<a id="{f.name}"></a>',
            f"## {f.spec.title}",
            "",
            f"**Claim.** {f.spec.claim}",
            "",
            f"**Source.** {f.spec.source}",
            "",
            "**Runs** (the files are in `examples/experiments/" + f.name + "/`):",
            "",
            *[f"- `{c}`" for c in f.commands],
            "",
            "**Figure.**",
            "",
            _md_table(f.header, f.rows),
            "",
            f"**Verdict: the claim {'holds' if f.holds else 'does not hold'}.** {f.verdict}.",
            "",
            f"**Notes.** {f.spec.notes}",
        ]
    return "\n".join(parts) + "\n"


def html_page(findings: Sequence[Finding]) -> str:
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>Seed experiments</title><style>{STYLE}</style></head><body>",
        "<h1>Seed experiments</h1>",
        f"<p>{html.escape(INTRO)}</p>",
    ]
    for f in findings:
        parts += [
            f'<h2 id="{f.name}">{html.escape(f.spec.title)}</h2>',
            f"<p><b>Claim.</b> {html.escape(f.spec.claim)}</p>",
            f"<p><b>Source.</b> {html.escape(f.spec.source)}</p>",
            "<ul>"
            + "".join(f"<li><code>{html.escape(c)}</code></li>" for c in f.commands)
            + "</ul>",
            html_table(f.header, f.rows),
            f"<p><b>Verdict: the claim {'holds' if f.holds else 'does not hold'}.</b> "
            f"{html.escape(f.verdict)}.</p>",
        ]
        if f.figure is not None:
            parts.append(image(f.spec.title, f.figure))
        parts.append(f"<p><b>Notes.</b> {html.escape(f.spec.notes)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the seed experiments; write the summary.")
    parser.add_argument(
        "--out",
        type=Path,
        help="where to write the summary and the report (default docs; with --only, nowhere:"
        " a summary of some experiments must not replace the committed one of all)",
    )
    parser.add_argument("--only", default="", help="experiments to run, comma-separated")
    parser.add_argument(
        "--variant",
        default="",
        help="run each experiment's <cluster>-VARIANT.yaml and <trace>-VARIANT.yaml files"
        " (with --only; e.g. --only gpu-sharing --variant 1000: 1,000 nodes)",
    )
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(EVALUATORS)
    unknown = [n for n in names if n not in EVALUATORS]
    if unknown:
        print(
            f"unknown experiment {', '.join(unknown)}; known: {', '.join(EVALUATORS)}",
            file=sys.stderr,
        )
        return 2
    if args.variant and not args.only:
        print(
            "--variant needs --only: the summary of all is of the committed files", file=sys.stderr
        )
        return 2
    findings = []
    for name in names:
        finding = evaluate(name, ROOT / name, args.variant)
        print(
            f"{name}: the claim {'holds' if finding.holds else 'does NOT hold'}: {finding.verdict}"
        )
        findings.append(finding)
    if args.only and args.out is None:
        print("wrote nothing (--only without --out)")
        return 0
    out = args.out or Path("docs")
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiments.md").write_text(markdown(findings))
    (out / "experiments.html").write_text(html_page(findings))
    print(f"wrote {out / 'experiments.md'} and {out / 'experiments.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
