"""How fast ``caldera simulate`` runs a busy cluster's week: simulated time per wall second and
jobs per wall second, at several trace sizes, and the cost per 1,000 jobs between them.

    .venv/bin/python bench/simulator.py                  # 10,000, 50,000, 100,000 jobs, 5,000 nodes
                                                         # (whole: an hour or more, see below)
    .venv/bin/python bench/simulator.py --smoke          # CI: 50 and 100 jobs on 10 nodes
    .venv/bin/python bench/simulator.py --sizes 10000 --profile   # and where the time goes
    .venv/bin/python bench/simulator.py --sizes 100000 --hours 2  # the week's first 2 hours
    .venv/bin/python bench/simulator.py --period 10               # sessions every 10 s, not 1 s
    .venv/bin/python bench/simulator.py --load 0.5                # half the GPUs asked for, not 70%
    .venv/bin/python bench/simulator.py --conf builtin   # the scheduler's built-in default
    .venv/bin/python bench/simulator.py --conf examples/experiments/binpack/scheduler.yaml
                                                         # another scheduler configuration

The trace is ``simulator.synthetic``'s (seeded): 20 jobs per node per week, so 100,000 jobs on
5,000 nodes are a week, and N jobs are N/100,000 of one; gangs and elastic GPU jobs, 70% of the
GPUs asked for, TTLs, restarts. Each size is one run of one scheduler configuration, no
baseline modes: by default the one Caldera's chart installs (``scheduler.conf`` in
charts/caldera/values.yaml, read from there: Volcano's Helm configuration, the built-in
default plus binpack), ``--conf builtin`` for the built-in default (what the scheduler runs
with no file), or ``--conf PATH``. The baseline is the cluster itself: the trace's span in
real time. The goal (issue 19): the 100,000-job week in under 10 minutes on this machine,
cost linear in jobs; the goal line names the configuration it judges. Nothing here is a test:
a missed goal prints MISS with where the time went; a run that breaks raises (exit code 1).

``--hours H`` stops each run after H simulated hours (the trace's later jobs never arrive): for
when a whole run takes longer than there is. The week's figure is then an extrapolation from
the simulated hours' rate, and is printed as one (``extrapolated``), never as a measurement.
Under the chart's configuration the 10,000-job run takes about 50 CPU seconds, the 50,000-job
one about 4 minutes and the week 8.5 to 10, with the machine's speed (docs/benchmarks.md,
"Simulator").

The backlog is the configuration's doing, not the trace's load. The built-in default's node
order spreads pods (least requested first): one-GPU pods leave a few GPUs free on most GPU
nodes, the whole-node gangs find no whole node, they wait for hours and every session retries
them (``--conf builtin``: the week takes about half an hour, and its later hours cost more
than its first, so an extrapolation from a short run understates it). Binpack's score offsets
least-requested's, so under the chart's configuration pods spread far less, some GPU nodes
stay whole and the backlog stays near zero (a mean of 0.5 jobs over the week). Each run
prints the GPUs held while jobs arrived and how long jobs waited (``busy``) beside its backlog.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import itertools
import os
import platform
import pstats
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from scheduler.conf import DEFAULT_CONF, SchedulerConf, parse_conf  # noqa: E402
from scheduler.registry import REGISTRY  # noqa: E402
from simulator.engine import Limits, Simulation  # noqa: E402
from simulator.results import RunResult, mean  # noqa: E402
from simulator.spec import Scenario, parse_cluster, parse_trace  # noqa: E402
from simulator.summary import GPU, duration  # noqa: E402
from simulator.synthetic import LOAD, WEEK, cluster_document, trace_document  # noqa: E402

GOAL_SECONDS: Final = 600.0  # a week of 100,000 jobs on 5,000 nodes
GOAL_JOBS: Final = 100_000
GOAL_LOAD: Final = LOAD  # the share of the GPUs the goal's trace asks for


def machine() -> str:
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}, {dt.date.today()}"
    )


@dataclass
class Measured:
    jobs: int
    nodes: int
    span: float  # virtual seconds from the first arrival to the end
    parse: float  # wall seconds to read the trace (admission included)
    run: RunResult
    unfinished: int
    cut: bool  # stopped at --hours, before the trace's end
    cpu: float  # the process's CPU seconds for the run (the machine is shared: wall > cpu)

    @property
    def wall(self) -> float:
        return self.run.wall_seconds


def measure(
    jobs: int,
    nodes: int,
    *,
    profile: bool,
    hours: float | None,
    period: float,
    load: float,
    conf: SchedulerConf,
) -> Measured:
    started = time.perf_counter()
    document = cluster_document(nodes) | {"timing": {"schedulePeriod": period}}
    cluster = parse_cluster(document, source="synthetic cluster")
    submissions = parse_trace(
        trace_document(jobs, nodes, load=load),
        source="synthetic trace",
        queues=cluster.queues,
        read=lambda name: {},
    )
    parse = time.perf_counter() - started
    until = hours * 3600 if hours else None
    simulation = Simulation(
        Scenario(cluster=cluster, jobs=submissions), conf=conf, limits=Limits(until=until)
    )
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    cpu = time.process_time()
    run = simulation.run()
    cpu = time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())
    ended = {"Completed", "Failed", "Aborted", "Terminated"}
    unfinished = sum(1 for job in run.jobs if job.phase not in ended)
    cut = until is not None and run.end >= until
    return Measured(jobs, nodes, run.end, parse, run, unfinished, cut, cpu)


GOAL_NODES: Final = 5000


def report(rows: list[Measured], smoke: bool, load: float, conf: str) -> None:
    print(
        f"{'jobs':>8}{'nodes':>7}{'simulated':>11}{'wall s':>9}{'cpu s':>9}{'core s':>9}"
        f"{'sessions':>10}{'ms/session':>11}{'sim s/wall s':>14}{'jobs/wall s':>12}{'read s':>8}"
    )
    for m in rows:
        per_session = 1000 * m.run.scheduler_seconds / max(1, m.run.sessions)
        print(
            f"{m.jobs:>8,}{m.nodes:>7,}{m.span / 3600:>10.1f}h{m.wall:>9.1f}{m.cpu:>9.1f}"
            f"{m.run.scheduler_seconds:>9.1f}{m.run.sessions:>10,}{per_session:>11.1f}"
            f"{m.span / m.wall:>14,.0f}{m.jobs / m.wall:>12,.1f}{m.parse:>8.1f}"
            + ("  (cut at --hours)" if m.cut else "")
        )
    print(
        "  (simulated: the trace's span, or the --hours cut; cpu: the process's CPU time, below"
        " wall when the machine is shared; core: the scheduler's snapshot and sessions, wall;"
        " read: decoding and admitting the trace)"
    )
    for m in rows:
        print(f"backlog {m.jobs:,} jobs: {backlog(m.run)}")
        print(f"busy {m.jobs:,} jobs: {busy(m.run)}")
    whole = [m for m in rows if not m.cut]
    for small, large in itertools.pairwise(whole):
        slope = (large.wall - small.wall) / (large.jobs - small.jobs) * 1000
        cpu = (large.cpu - small.cpu) / (large.jobs - small.jobs) * 1000
        print(
            f"slope {small.jobs:,} -> {large.jobs:,} jobs: {slope:.2f} wall s ({cpu:.2f} CPU s)"
            " per 1,000 jobs"
        )
    for m in rows:
        print(
            f"baseline: the cluster itself takes {m.span / 3600:.1f} h"
            f"{' (cut)' if m.cut else f' for the {m.jobs:,} jobs'};"
            f" the simulator {m.wall:.1f} s ({m.span / m.wall:,.0f}x real time)"
        )
    if load != GOAL_LOAD:
        print(
            f"goal: not judged (the trace asks for {load:.0%} of the GPUs; the goal's, "
            f"{GOAL_LOAD:.0%})"
        )
    elif smoke:
        print(
            f"(goal: {GOAL_JOBS:,} jobs, a week on {GOAL_NODES:,} nodes,"
            f" in <= {GOAL_SECONDS:.0f} s; not judged at smoke size)"
        )
    else:
        goal(rows, conf)
    for m in rows:
        if m.unfinished and not m.cut:
            reasons = sorted(m.run.unschedulable.items(), key=lambda item: -item[1])[:3]
            print(
                f"note: {m.unfinished} of {m.jobs:,} jobs never finished (the scheduler left them "
                f"waiting; most frequent reasons: {', '.join(r for r, _ in reasons)})"
            )


def backlog(run: RunResult) -> str:
    """The jobs waiting (arrived, not started) at each simulated hour, summed up: a session
    retries every waiting gang, so a backlog that grows with the trace makes the cost per job
    grow too (the slope)."""
    hours = range(int(run.end // 3600) + 1)
    counts = run.waiting([3600.0 * h for h in hours])
    peak = max(range(len(counts)), key=counts.__getitem__)
    quarters = [counts[len(counts) * q // 4] for q in (1, 2, 3)]
    return (
        f"jobs waiting at each simulated hour: mean {sum(counts) / len(counts):.1f}, peak "
        f"{counts[peak]} at hour {peak}; at a quarter, half and three quarters of the run: "
        f"{', '.join(map(str, quarters))}"
    )


def busy(run: RunResult) -> str:
    """The share of the cluster's GPUs that pods held while jobs arrived (time-weighted, from
    the first arrival to the last) and how long jobs waited to start: a backlog that grows
    while GPUs are free is the configuration's packing (whole-node gangs find no whole node),
    not the trace's load."""
    arrivals = [job.arrival for job in run.jobs]
    waits = [job.wait for job in run.jobs if job.wait is not None]
    if not arrivals or not waits:
        return "no job arrived and started"
    held = run.utilisation.mean(GPU, min(arrivals), max(arrivals))
    return (
        f"GPUs held while jobs arrived: {held:.0%} of the cluster's; jobs waited to start "
        f"{duration(mean(waits))} on average, the longest {duration(max(waits))}"
    )


def goal(rows: list[Measured], conf: str) -> None:
    """The week's figure beside the goal: measured when the 100,000-job run is whole, else
    extrapolated from the longest run on the goal's cluster (the trace's arrival rate depends
    on the nodes only, so every size on 5,000 nodes is a stretch of the same week)."""
    week = [m for m in rows if m.jobs == GOAL_JOBS and not m.cut]
    if week:
        m = week[0]
        met = m.wall <= GOAL_SECONDS and m.span >= 0.99 * WEEK
        share = m.run.scheduler_seconds / m.wall
        print(
            f"goal: a week of {GOAL_JOBS:,} jobs in <= {GOAL_SECONDS:.0f} s under {conf}: "
            f"{m.wall:.0f} s, {'met' if met else 'MISS'} ({100 * share:.0f}% of it in the "
            "scheduler's snapshot and sessions)"
        )
        return
    same = [m for m in rows if m.nodes == GOAL_NODES]
    if not same:
        print(f"goal: not judged (no run on {GOAL_NODES:,} nodes)")
        return
    m = max(same, key=lambda m: m.span)
    estimate, cpu = m.wall * WEEK / m.span, m.cpu * WEEK / m.span
    share = m.run.scheduler_seconds / m.wall
    print(
        f"goal: a week of {GOAL_JOBS:,} jobs in <= {GOAL_SECONDS:.0f} s under {conf}:"
        f" {estimate:,.0f} s ({cpu:,.0f} CPU s) extrapolated from {m.span / 3600:.1f} simulated"
        f" hours in {m.wall:.0f} s, {'met' if estimate <= GOAL_SECONDS else 'MISS'} by that"
        f" estimate ({estimate / GOAL_SECONDS:.1f}x the goal; {100 * share:.0f}% of the time in the"
        " scheduler's snapshot and sessions)"
    )


CHART: Final = "chart"
BUILTIN: Final = "builtin"
CHART_VALUES: Final = REPO / "charts" / "caldera" / "values.yaml"


def configuration(given: str) -> tuple[str, str]:
    """The name and text of the configuration ``--conf`` gives: the chart's ``scheduler.conf``
    (read from the chart itself, so the bench runs what an install runs), the built-in default,
    or a file's."""
    if given == CHART:
        values = yaml.safe_load(CHART_VALUES.read_text())
        text = values["scheduler"]["conf"]
        if not isinstance(text, str):
            raise TypeError(f"{CHART_VALUES}: scheduler.conf is not a string")
        return "the chart's configuration (Volcano's Helm one, charts/caldera/values.yaml)", text
    if given == BUILTIN:
        return (
            "the built-in default configuration (Volcano's, for a scheduler with no file)",
            DEFAULT_CONF,
        )
    return given, Path(given).read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="two tiny traces (CI)")
    parser.add_argument("--sizes", default="", help="trace sizes in jobs, comma-separated")
    parser.add_argument("--nodes", type=int, default=0, help="nodes (default 5,000; 10 smoke)")
    parser.add_argument("--profile", action="store_true", help="profile each run (cProfile)")
    parser.add_argument(
        "--hours", type=float, default=0.0, help="stop each run after this many simulated hours"
    )
    parser.add_argument(
        "--period", type=float, default=1.0, help="the schedule period, s (default 1, Volcano's)"
    )
    parser.add_argument(
        "--load",
        type=float,
        default=GOAL_LOAD,
        help=f"share of the cluster's GPUs the trace asks for (default {GOAL_LOAD:g}, the goal's)",
    )
    parser.add_argument(
        "--conf",
        default=CHART,
        help=f"the scheduler configuration: {CHART!r} (default: what Caldera's chart installs),"
        f" {BUILTIN!r} (the scheduler's built-in default) or a file in Volcano's format",
    )
    args = parser.parse_args()
    try:
        conf_name, text = configuration(args.conf)
        conf = parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    except (OSError, ValueError, KeyError, TypeError) as err:
        parser.error(f"--conf: {err}")
    try:
        given = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        parser.error(f"--sizes: whole numbers of jobs, comma-separated; got {args.sizes!r}")
    for flag, value, least in (
        ("--load", args.load, 0.0),
        ("--period", args.period, 0.0),
        ("--nodes", args.nodes, -1),
        ("--hours", args.hours, -1.0),
        *(("--sizes", size, 0) for size in given),
    ):
        if not value > least:
            above = "above 0" if least == 0 else "0 or more"
            parser.error(f"{flag} must be {above}, got {value:g}")
    sizes = given or ([50, 100] if args.smoke else [10_000, 50_000, 100_000])
    nodes = args.nodes or (10 if args.smoke else 5000)
    print(machine())
    print(f"schedule period {args.period:g} s; GPUs asked for: {args.load:.0%} of the cluster's")
    print(f"scheduler configuration: {conf_name}")
    rows = []
    for jobs in sizes:
        rows.append(
            measure(
                jobs,
                nodes,
                profile=args.profile,
                hours=args.hours or None,
                period=args.period,
                load=args.load,
                conf=conf,
            )
        )
        if len(sizes) > 1:  # a whole run can take an hour: each size's figures as they come
            m = rows[-1]
            print(
                f"done: {m.jobs:,} jobs, {m.span / 3600:.1f} simulated h in {m.wall:.1f} s"
                f" ({m.cpu:.1f} CPU s, {m.run.sessions:,} sessions)",
                flush=True,
            )
    report(rows, args.smoke, args.load, conf_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
