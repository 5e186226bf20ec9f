"""Executed instructions of the benches' measured parts, side by side for several checkouts.

    .venv/bin/python bench/instructions.py CHECKOUT [CHECKOUT...]
    .venv/bin/python bench/instructions.py /work/before .      # before and after, and the change

Timing on this shared machine drifts by more than the changes a refactor makes, so this counts
the instructions the interpreter executes (callgrind, a deterministic figure with
``PYTHONHASHSEED=0``) for each checkout's own bench code, one part each:

- ``core``: bench/scheduler.py's session, 10,000 pending pods in 500 gangs on 1,000 nodes;
- ``scale``: bench/scheduler_scale.py's backlog cycle, 6,000 pods on 200 nodes (the live
  snapshot's update and a session with reclaim and preempt), the cycle after the backlog arrives;
- ``sim``: bench/simulator.py's ``Simulation.run`` of its synthetic trace, ``--sim-jobs`` jobs
  on ``--sim-nodes`` nodes under the chart's configuration.

The part is reached through the bench module's own functions, wrapped, so each checkout's bench
decides what is measured; it is delimited by two ``os.getppid()`` calls, where callgrind dumps
its counters (``--dump-before=getppid``): the middle dump is the part, nothing subtracted. Needs
valgrind (Debian's package). The parts of all checkouts run at once, one process each.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

PARTS = {
    "core": "scheduler.py core session, 10,000 pods / 1,000 nodes",
    "scale": "scheduler_scale.py backlog cycle, 6,000 pods / 200 nodes",
    "sim": "simulator.py Simulation.run, {jobs} jobs / {nodes} nodes",
}


class _PartRanError(Exception):
    """Raised out of the bench once its measured part ran."""


def _load_bench(checkout: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"_bench_{name}", checkout / "bench" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _marked(call: Callable[[], Any]) -> Any:
    """Run ``call`` between the two marks callgrind dumps at."""
    os.getppid()
    result = call()
    os.getppid()
    return result


def _core(checkout: Path) -> None:
    bench = _load_bench(checkout, "scheduler")
    original = bench.run_session

    def run_session(*args: Any, **kwargs: Any) -> Any:
        _marked(lambda: original(*args, **kwargs))
        raise _PartRanError

    setattr(bench, "run_session", run_session)  # noqa: B010 (a module's function, replaced)
    try:
        bench.bench_core(False)
    except _PartRanError:
        return
    raise SystemExit("bench/scheduler.py ran no session")


def _scale(checkout: Path) -> None:
    bench = _load_bench(checkout, "scheduler_scale")
    original = bench.Cache.timed_cycle
    calls = 0

    def timed_cycle(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the cycle after the backlog arrives (the first derives everything)
            return _marked(lambda: original(self, *args, **kwargs))
        return original(self, *args, **kwargs)

    bench.Cache.timed_cycle = timed_cycle
    objects = bench.cluster_objects(nodes=200, running=0, pending=6000, queues=10)
    bench.cycle(*bench.split(objects), bench.conf_of(bench.FULL))
    if calls < 2:
        raise SystemExit("bench/scheduler_scale.py ran fewer than two cycles")


def _sim(checkout: Path, jobs: int, nodes: int) -> None:
    bench = _load_bench(checkout, "simulator")
    original = bench.Simulation.run
    bench.Simulation.run = lambda self: _marked(lambda: original(self))
    _, text = bench.configuration(bench.CHART)
    conf = bench.parse_conf(text, actions=bench.REGISTRY.actions, plugins=bench.REGISTRY.plugins)
    bench.measure(
        jobs, nodes, profile=False, hours=None, period=1.0, load=bench.GOAL_LOAD, conf=conf
    )


def run_part(checkout: Path, part: str, jobs: int, nodes: int) -> None:
    """The child's side: run ``part`` of ``checkout``'s benches with its marks."""
    sys.path.insert(0, str(checkout))
    if part == "core":
        _core(checkout)
    elif part == "scale":
        _scale(checkout)
    else:
        _sim(checkout, jobs, nodes)
    import scheduler  # the checkout's code ran, not another copy

    where = Path(scheduler.__file__).resolve()
    if not where.is_relative_to(checkout):
        raise SystemExit(f"measured {where}, not {checkout}")


def _instructions(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


def measure(
    checkouts: list[Path], parts: list[str], jobs: int, nodes: int
) -> dict[Path, dict[str, int]]:
    """Instructions of each part of each checkout, all run at once under callgrind."""
    work = Path(tempfile.mkdtemp(prefix="instructions."))
    running = []
    for i, checkout in enumerate(checkouts):
        for part in parts:
            out = work / f"cg.{i}.{part}"
            command = [
                "valgrind", "--tool=callgrind", "--dump-before=getppid",
                f"--callgrind-out-file={out}", sys.executable, __file__, "--child", part,
                "--sim-jobs", str(jobs), "--sim-nodes", str(nodes), str(checkout),
            ]  # fmt: skip
            env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(checkout)}
            log = (work / f"log.{i}.{part}").open("w")
            running.append(
                (
                    checkout,
                    part,
                    out,
                    subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=work),
                )
            )
    figures: dict[Path, dict[str, int]] = {c: {} for c in checkouts}
    for checkout, part, out, process in running:
        if process.wait() != 0 or not Path(f"{out}.2").exists() or Path(f"{out}.3").exists():
            failed = out.parent / out.name.replace("cg.", "log.")
            raise SystemExit(f"{part} of {checkout} failed:\n{failed.read_text()[-2000:]}")
        figures[checkout][part] = _instructions(Path(f"{out}.2"))
    return figures


def _commit(checkout: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(checkout), *args], capture_output=True, text=True
        ).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + (
        "+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkouts", nargs="*", type=Path, default=[Path(".")])
    parser.add_argument(
        "--parts", default="core,scale,sim", help="comma-separated: core, scale, sim"
    )
    parser.add_argument("--sim-jobs", type=int, default=300)
    parser.add_argument("--sim-nodes", type=int, default=20)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="run each part once without callgrind, the simulator's small (CI: the plumbing)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkouts]
    if args.child:
        run_part(checkouts[0], args.child, args.sim_jobs, args.sim_nodes)
        return
    if args.smoke:
        for part in PARTS:
            command = [sys.executable, __file__, "--child", part, "--sim-jobs", "20"]
            subprocess.run([*command, "--sim-nodes", "5", str(checkouts[0])], check=True)
            print(f"smoke: {part} ran (no instructions counted)")
        return
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown part(s) {', '.join(unknown)}; known: {', '.join(PARTS)}")
    figures = measure(checkouts, parts, args.sim_jobs, args.sim_nodes)
    print(
        f"{'part (M instructions)':<58}"
        + "".join(f"{_commit(c):>16}" for c in checkouts)
        + ("   change" if len(checkouts) == 2 else "")
    )
    for part in parts:
        name = PARTS[part].format(jobs=args.sim_jobs, nodes=args.sim_nodes)
        values = [figures[c][part] / 1e6 for c in checkouts]
        row = f"{name:<58}" + "".join(f"{v:>16,.1f}" for v in values)
        if len(values) == 2:
            row += f"{(values[1] - values[0]) / values[0]:>+9.2%}"
        print(row)


if __name__ == "__main__":
    main()
