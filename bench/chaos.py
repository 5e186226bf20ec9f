"""The chaos run at full size: 500 seeded Volcano Jobs of mixed shapes while Caldera's processes
are killed, the API server restarts, etcd compacts, connections drop and pods are deleted; then
the invariants (docs/reliability.md, "The chaos run").

    .venv/bin/python bench/chaos.py                     # seed 1, 500 jobs, one replica each
    .venv/bin/python bench/chaos.py --replicas 2        # controllers and scheduler with a standby
    .venv/bin/python bench/chaos.py --jobs 30 --window 40 --kills 1   # a short round
    .venv/bin/python bench/chaos.py --smoke             # CI: 6 jobs, one kill each, 4 nodes
    .venv/bin/python bench/chaos.py --fencing           # a leader paused or stalled past its Lease
    .venv/bin/python bench/chaos.py --fencing --fault pause --target scheduler
    .venv/bin/python bench/chaos.py --fencing --smoke   # the CI round (short Lease timings)

It starts its own local control plane (``e2e/cluster``, in a temporary directory unless ``--dir``
is given) with fake nodes, runs the round and prints the table. By default the processes run as
the chart's ServiceAccounts (tokens through TokenRequest) so the API server's audit log shows what
each one used; ``--admin`` runs them with the admin kubeconfig instead. The exit code is 1 when an
invariant is broken.

``--fencing`` runs the fencing rounds instead (``e2e/chaos/fencing.py``): for each fault (pause:
SIGSTOP; stall: the leader's connection stops forwarding) and each elected process, the old
leader's writes after the standby took its Lease and the nodes over-committed, from the audit
log, with the chart's Lease timings (15 s / 10 s / 2 s). The processes import this checkout, or
the one ``PYTHONPATH`` names: ``PYTHONPATH=<older checkout> bench/chaos.py --fencing`` measures
the code before a change (the "before" figures of docs/reliability.md).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
from e2e.chaos.fencing import (  # noqa: E402
    FAULTS,
    SHORT,
    TARGETS,
    FencingConfig,
    run_fencing,
    table,
)
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


async def _fencing(args: argparse.Namespace, directory: Path) -> bool:
    plane = ControlPlane(directory / "cluster")
    plane.up()
    apply_crds(plane)
    faults = (args.fault,) if args.fault else FAULTS
    targets = (args.target,) if args.target else TARGETS
    config = FencingConfig(faults=faults, targets=targets, outage=args.outage)
    if args.smoke:
        config = dataclasses.replace(SHORT, faults=(args.fault,) if args.fault else SHORT.faults)
    work = directory / "run"
    work.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    try:
        rounds = await run_fencing(plane, config, work)
    finally:
        if not args.keep:
            plane.down()
    print(f"\nfencing run {started:%Y-%m-%d %H:%M} UTC, {machine()}")
    print(
        f"Lease {config.lease_duration:g} s, renew deadline {config.renew_deadline:g} s, "
        f"retry {config.retry_period:g} s; fault at least {config.outage:g} s"
    )
    print(table(rounds))
    for r in rounds:
        for w in r.writes_after:
            print(
                f"  {r.fault}/{r.target}: {w.received:%H:%M:%S.%f} {w.verb} {w.resource} "
                f"{w.namespace}/{w.name} -> {w.code}"
            )
    ok = all(r.ok for r in rounds)
    print("\nOK: no write after the Lease was lost" if ok else "\nBROKEN: see the rows above")
    return ok


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
    parser.add_argument(
        "--fencing", action="store_true", help="the fencing rounds (e2e/chaos/fencing.py)"
    )
    parser.add_argument("--fault", choices=FAULTS, help="with --fencing: only this fault")
    parser.add_argument("--target", choices=TARGETS, help="with --fencing: only this process")
    parser.add_argument(
        "--outage", type=float, default=20.0, help="with --fencing: seconds of fault at least"
    )
    args = parser.parse_args(argv)
    if args.fencing:
        configure_logging(component="chaos", level="error", fmt="console")
        if args.dir:
            return 0 if asyncio.run(_fencing(args, args.dir.resolve())) else 1
        with tempfile.TemporaryDirectory(prefix="caldera-fencing-") as tmp:
            return 0 if asyncio.run(_fencing(args, Path(tmp))) else 1
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
