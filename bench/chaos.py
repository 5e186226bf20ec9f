"""The chaos run at full size: 500 seeded Volcano Jobs of mixed shapes while Caldera's processes
are killed, the API server restarts, etcd compacts, connections drop and pods are deleted; then
the invariants (docs/reliability.md, "The chaos run").

    .venv/bin/python bench/chaos.py                     # seed 1, 500 jobs, one replica each
    .venv/bin/python bench/chaos.py --replicas 2        # controllers and scheduler with a standby
    .venv/bin/python bench/chaos.py --jobs 30 --window 40 --kills 1   # a short round
    .venv/bin/python bench/chaos.py --smoke             # CI: 6 jobs, one kill each, 4 nodes

It starts its own local control plane (``e2e/cluster``, in a temporary directory unless ``--dir``
is given) with fake nodes, runs the round and prints the table. By default the processes run as
the chart's ServiceAccounts (tokens through TokenRequest) so the API server's audit log shows what
each one used; ``--admin`` runs them with the admin kubeconfig instead. The exit code is 1 when an
invariant is broken.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import sys
import tempfile
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from caldera.obs.logging import configure_logging  # noqa: E402
from e2e.chaos.faults import FaultCounts  # noqa: E402
from e2e.chaos.run import ChaosConfig, Report, run_chaos  # noqa: E402
from e2e.cluster.caldera_processes import apply_crds  # noqa: E402
from e2e.cluster.control_plane import ControlPlane, NodeSpec  # noqa: E402


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), load {load}"


def print_report(report: Report, started: dt.datetime) -> None:
    print(f"\nchaos run {started:%Y-%m-%d %H:%M} UTC, {machine()}")
    print(report.details())
    print()
    print(report.table())
    if report.rights:
        print("\n" + report.rights)
    print("\nOK: every invariant holds" if report.ok else "\nBROKEN: see the details above")


async def _main(args: argparse.Namespace, directory: Path) -> Report:
    plane = ControlPlane(directory / "cluster")
    plane.up()
    apply_crds(plane)
    plane.create_nodes(args.nodes, NodeSpec(cpu="8", memory="32Gi", pods="110"))
    config = ChaosConfig(
        seed=args.seed,
        jobs=args.jobs,
        replicas=args.replicas,
        window=args.window,
        faults=FaultCounts(kills_per_process=args.kills),
        service_accounts=not args.admin,
    )
    work = directory / "run"
    work.mkdir(parents=True, exist_ok=True)
    try:
        return await run_chaos(plane, config, work)
    finally:
        if not args.keep:
            plane.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--replicas", type=int, default=1, choices=[1, 2])
    parser.add_argument("--window", type=float, default=150.0, help="seconds of faults")
    parser.add_argument("--kills", type=int, default=3, help="kill -9 per process")
    parser.add_argument("--nodes", type=int, default=16, help="fake nodes of 8 cpu / 32Gi")
    parser.add_argument("--admin", action="store_true", help="run the processes as admin")
    parser.add_argument("--dir", type=Path, help="keep the cluster and logs here")
    parser.add_argument("--keep", action="store_true", help="leave the control plane running")
    parser.add_argument(
        "--smoke", action="store_true", help="a tiny round (6 jobs, 20 s of faults, 4 nodes): CI"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.window, args.kills, args.nodes = 6, 20.0, 1, 4
    configure_logging(component="chaos", level="error", fmt="console")
    started = dt.datetime.now(dt.UTC)
    if args.dir:
        report = asyncio.run(_main(args, args.dir.resolve()))
    else:
        with tempfile.TemporaryDirectory(prefix="caldera-chaos-") as tmp:
            report = asyncio.run(_main(args, Path(tmp)))
    print_report(report, started)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
