"""``caldera simulate CLUSTER TRACE``: run a trace of Volcano Jobs on a virtual cluster, under the
scheduler configuration given and the baselines, and compare them (docs/simulator.md).

It prints the comparison table; ``--json`` writes every figure (per job, per queue over time,
utilisation, why pods waited) and ``--html`` the report with plots. The simulator is imported
only when the command runs, so the other commands do not pay for it (nor for matplotlib).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.errors import fail

BASELINES = ("pod-by-pod", "fifo")  # the default
KNOWN_BASELINES = (*BASELINES, "easy")  # easy: EASY backfill with the trace's run times


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``caldera simulate``."""
    p = sub.add_parser(
        "simulate",
        help="run a trace of jobs on a virtual cluster and compare schedulers",
        description=(
            "Run a trace of Volcano Jobs (manifests with an arrival time and run times) on a "
            "virtual cluster, in virtual time, with Caldera's scheduler and job controller "
            "logic, under the configuration given and the baselines; print the comparison."
        ),
    )
    p.add_argument("cluster", type=Path, help="the cluster file (nodes, queues, ...)")
    p.add_argument("trace", type=Path, help="the trace file (jobs and when they arrive)")
    p.add_argument(
        "--conf",
        type=Path,
        help="scheduler configuration in Volcano's format (default: the cluster file's "
        "schedulerConf, else Volcano's default)",
    )
    p.add_argument(
        "--baselines",
        default=",".join(BASELINES),
        help="baselines to run beside it, comma-separated: pod-by-pod, fifo, easy (EASY "
        "backfill with the trace's run times), or none (default: %(default)s)",
    )
    p.add_argument("--json", type=Path, help="write every figure as JSON to this file")
    p.add_argument("--html", type=Path, help="write the report with plots to this file")
    p.add_argument("--title", default="", help="the HTML report's title")
    p.add_argument(
        "--gantt",
        default="",
        help="jobs for the report's Gantt chart, comma-separated (default: the first 40)",
    )
    p.add_argument(
        "--until", default="", help="stop at this virtual time (seconds or a Go duration)"
    )
    p.add_argument(
        "--idle-limit",
        default="24h",
        help="with a clock-reading plugin, stop after this long without a change "
        "(default: %(default)s)",
    )
    p.set_defaults(handler=_simulate)


def _modes(text: str) -> list[str]:
    chosen = [m.strip() for m in text.split(",") if m.strip()]
    if chosen == ["none"]:
        return []
    unknown = [m for m in chosen if m not in KNOWN_BASELINES]
    if unknown:
        raise ValueError(
            f"--baselines: unknown {', '.join(unknown)}; use {', '.join(KNOWN_BASELINES)} or none"
        )
    return list(dict.fromkeys(chosen))


def _simulate(args: argparse.Namespace) -> int:
    from simulator.baselines import Mode
    from simulator.engine import Limits, simulate
    from simulator.loading import conf_text, load_conf, load_scenario
    from simulator.results import Report, to_json
    from simulator.spec import SpecError, seconds
    from simulator.summary import summarize, text_table

    try:
        baselines = _modes(args.baselines)
        limits = Limits(
            until=seconds(args.until, "--until") if args.until else None,
            idle_limit=seconds(args.idle_limit, "--idle-limit"),
        )
        scenario = load_scenario(args.cluster, args.trace)
        text, source = conf_text(args.conf, args.cluster, scenario.cluster.scheduler_conf)
        conf = load_conf(text, source)
    except (SpecError, ValueError) as exc:
        return fail(str(exc))
    modes = (Mode.SCHEDULER, *(Mode(m) for m in baselines))
    runs = simulate(scenario, conf, modes, limits)
    report = Report(cluster=str(args.cluster), trace=str(args.trace), runs=runs)
    print(f"{len(scenario.jobs)} jobs on {len(scenario.cluster.nodes)} nodes; scheduler: {source}")
    print(text_table([summarize(run) for run in runs]))
    if args.json is not None:
        try:
            args.json.write_bytes(to_json(report))
        except OSError as exc:
            return fail(f"--json: cannot write {args.json}: {exc.strerror or exc}")
        print(f"wrote {args.json}")
    if args.html is not None:
        try:
            from simulator.report import write_html
        except ImportError:
            return fail("the HTML report needs matplotlib: pip install 'caldera[simulate]'")
        gantt = [g.strip() for g in args.gantt.split(",") if g.strip()]
        try:
            write_html(report, args.html, gantt=gantt, title=args.title or args.trace.stem)
        except KeyError as exc:
            return fail(str(exc.args[0]))
        except OSError as exc:
            return fail(f"--html: cannot write {args.html}: {exc.strerror or exc}")
        print(f"wrote {args.html}")
    sys.stdout.flush()
    return 0
