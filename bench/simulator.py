"""How fast ``caldera simulate`` runs a busy cluster's week: simulated time per wall second and
jobs per wall second, at several trace sizes, and the cost per 1,000 jobs between them.

    .venv/bin/python bench/simulator.py                  # 10,000, 50,000, 100,000 jobs, 5,000 nodes
    .venv/bin/python bench/simulator.py --smoke          # CI: 50 and 100 jobs on 10 nodes
    .venv/bin/python bench/simulator.py --sizes 10000 --profile   # and where the time goes

The trace is ``simulator.synthetic``'s (seeded): 20 jobs per node per week, so 100,000 jobs on
5,000 nodes are a week, and N jobs are N/100,000 of one; gangs and elastic GPU jobs, 70% of the
GPUs asked for, TTLs, restarts. Each size is one run of the configured scheduler (Volcano's
default configuration), no baseline modes. The baseline is the cluster itself: the trace's span
in real time. The goal (issue 19): the 100,000-job week in under 10 minutes on this machine,
cost linear in jobs. Nothing here is a test: a missed goal prints MISS with where the time went;
a run that breaks raises (exit code 1).
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

REPO: Final = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scheduler.conf import DEFAULT_CONF, parse_conf  # noqa: E402
from scheduler.registry import REGISTRY  # noqa: E402
from simulator.engine import Simulation  # noqa: E402
from simulator.results import RunResult  # noqa: E402
from simulator.spec import Scenario, parse_cluster, parse_trace  # noqa: E402
from simulator.synthetic import WEEK, cluster_document, trace_document  # noqa: E402

GOAL_SECONDS: Final = 600.0  # a week of 100,000 jobs on 5,000 nodes
GOAL_JOBS: Final = 100_000


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

    @property
    def wall(self) -> float:
        return self.run.wall_seconds


def measure(jobs: int, nodes: int, profile: bool) -> Measured:
    started = time.perf_counter()
    cluster = parse_cluster(cluster_document(nodes), source="synthetic cluster")
    submissions = parse_trace(
        trace_document(jobs, nodes),
        source="synthetic trace",
        queues=cluster.queues,
        read=lambda name: {},
    )
    parse = time.perf_counter() - started
    conf = parse_conf(DEFAULT_CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    simulation = Simulation(Scenario(cluster=cluster, jobs=submissions), conf=conf)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    run = simulation.run()
    if profiler is not None:
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print(out.getvalue())
    ended = {"Completed", "Failed", "Aborted", "Terminated"}
    unfinished = sum(1 for job in run.jobs if job.phase not in ended)
    return Measured(jobs, nodes, run.end, parse, run, unfinished)


def report(rows: list[Measured], smoke: bool) -> None:
    print(
        f"{'jobs':>8}{'nodes':>7}{'simulated':>11}{'wall s':>9}{'core s':>9}{'sessions':>10}"
        f"{'sim s/wall s':>14}{'jobs/wall s':>12}{'read s':>8}"
    )
    for m in rows:
        print(
            f"{m.jobs:>8,}{m.nodes:>7,}{m.span / 3600:>10.1f}h{m.wall:>9.1f}"
            f"{m.run.scheduler_seconds:>9.1f}{m.run.sessions:>10,}{m.span / m.wall:>14,.0f}"
            f"{m.jobs / m.wall:>12,.1f}{m.parse:>8.1f}"
        )
    print(
        "  (simulated: the trace's span; core: the scheduler's snapshot and sessions;"
        " read: decoding and admitting the trace)"
    )
    for small, large in itertools.pairwise(rows):
        slope = (large.wall - small.wall) / (large.jobs - small.jobs) * 1000
        print(f"slope {small.jobs:,} -> {large.jobs:,} jobs: {slope:.2f} wall s per 1,000 jobs")
    for m in rows:
        print(
            f"baseline: the cluster itself takes {m.span / 3600:.1f} h for the {m.jobs:,} jobs;"
            f" the simulator {m.wall:.1f} s ({m.span / m.wall:,.0f}x real time)"
        )
    week = [m for m in rows if m.jobs == GOAL_JOBS]
    if smoke:
        print(
            f"(goal: {GOAL_JOBS:,} jobs, a week on 5,000 nodes, in <= {GOAL_SECONDS:.0f} s;"
            " not judged at smoke size)"
        )
    elif week:
        m = week[0]
        met = m.wall <= GOAL_SECONDS and m.span >= 0.99 * WEEK
        share = m.run.scheduler_seconds / m.wall
        print(
            f"goal: a week of {GOAL_JOBS:,} jobs in <= {GOAL_SECONDS:.0f} s: "
            f"{m.wall:.0f} s, {'met' if met else 'MISS'} ({100 * share:.0f}% of it in the "
            "scheduler's snapshot and sessions)"
        )
    for m in rows:
        if m.unfinished:
            reasons = sorted(m.run.unschedulable.items(), key=lambda item: -item[1])[:3]
            print(
                f"note: {m.unfinished} of {m.jobs:,} jobs never finished (the scheduler left them "
                f"waiting; most frequent reasons: {', '.join(r for r, _ in reasons)})"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="two tiny traces (CI)")
    parser.add_argument("--sizes", default="", help="trace sizes in jobs, comma-separated")
    parser.add_argument("--nodes", type=int, default=0, help="nodes (default 5,000; 10 smoke)")
    parser.add_argument("--profile", action="store_true", help="profile each run (cProfile)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s] or (
        [50, 100] if args.smoke else [10_000, 50_000, 100_000]
    )
    nodes = args.nodes or (10 if args.smoke else 5000)
    print(machine())
    rows = [measure(jobs, nodes, args.profile) for jobs in sizes]
    report(rows, args.smoke)
    return 0


if __name__ == "__main__":
    sys.exit(main())
