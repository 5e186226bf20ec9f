"""``bench/simulator.py`` refuses options that would make a meaningless trace, naming the flag."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "simulator.py"


def _bench(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    # With the checkout on PYTHONPATH too (as the e2e tests set it): bench/scheduler.py must
    # not shadow the scheduler package.
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent.parent)}
    return subprocess.run(
        [sys.executable, str(BENCH), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--load", "0"], "--load must be above 0, got 0"),
        (["--load", "-0.5"], "--load must be above 0, got -0.5"),
        (["--period", "0"], "--period must be above 0, got 0"),
        (["--sizes", "100,0"], "--sizes must be above 0, got 0"),
        (["--sizes", "ten"], "--sizes: whole numbers of jobs, comma-separated; got 'ten'"),
        (["--hours", "-1"], "--hours must be 0 or more, got -1"),
    ],
)
def test_bad_options_are_refused_by_name(arguments: list[str], message: str) -> None:
    done = _bench(arguments)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""  # refused before any run starts


def test_a_configuration_the_scheduler_refuses_is_refused_with_its_reason(tmp_path: Path) -> None:
    unknown = tmp_path / "scheduler.yaml"
    unknown.write_text('actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: nosuch\n')
    missing = tmp_path / "absent.yaml"
    for path, message in (
        (unknown, "--conf: line 4: unknown plugin nosuch"),
        (missing, "--conf: [Errno 2] No such file or directory"),
    ):
        done = _bench(["--conf", str(path)])
        assert done.returncode == 2
        assert message in done.stderr
        assert done.stdout == ""


def test_the_configuration_given_is_the_one_run() -> None:
    """The smoke traces under the chart's configuration (binpack beside nodeorder) are placed
    otherwise than under the built-in default: the busy lines (waits) differ, and each run
    names its configuration. A file gives its own."""
    binpack = BENCH.parent.parent / "examples" / "experiments" / "binpack" / "scheduler.yaml"
    chart = _bench(["--smoke"])
    builtin = _bench(["--smoke", "--conf", "builtin"])
    packed = _bench(["--smoke", "--conf", str(binpack)])
    assert chart.returncode == builtin.returncode == packed.returncode == 0
    assert "scheduler configuration: the chart's configuration (Volcano's Helm" in chart.stdout
    assert "scheduler configuration: the built-in default" in builtin.stdout
    assert f"scheduler configuration: {binpack}" in packed.stdout

    def busy(out: str) -> list[str]:
        return [line for line in out.splitlines() if line.startswith("busy ")]

    assert len(busy(chart.stdout)) == 2
    assert busy(chart.stdout) != busy(builtin.stdout)
    assert busy(packed.stdout) != busy(builtin.stdout)
