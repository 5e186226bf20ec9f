"""The large-gangs experiment's figures and goal (simulator/gang_waits.py), on hand-made runs:
percentiles, a gang never started counted until the run's end, utilisation over the arrivals'
span, idle reserved GPU-hours, and MET or MISS beside each goal."""

from __future__ import annotations

import math

from simulator.gang_waits import GPU, evaluate, figures, longest_run, percentile
from simulator.results import JobResult, RunResult, Series

HOUR = 3600.0
EXPECT = {"factor": 2, "points": 3, "today": "today", "bounded": ["reserved"]}


def _series(*points: tuple[float, float]) -> Series:
    series = Series()
    for when, value in points:
        series.add(when, {GPU: value})
    return series


def _run(
    gang_starts: list[float | None],
    *,
    use: float,
    held: float = 0.0,
    end: float = 20 * HOUR,
) -> RunResult:
    """Gangs arriving at 0 (started as given, running an hour); a small job arriving at 10 h
    that waits a minute and runs two hours; GPUs in use ``use`` throughout; ``held`` GPUs
    kept idle from 0 to 1 h."""
    jobs = [
        JobResult(
            job=f"default/gang-{i}",
            queue="default",
            arrival=0.0,
            started=start,
            finished=None if start is None else start + HOUR,
        )
        for i, start in enumerate(gang_starts)
    ]
    jobs.append(
        JobResult(
            job="default/small-0",
            queue="default",
            arrival=10 * HOUR,
            started=10 * HOUR + 60,
            finished=12 * HOUR + 60,
        )
    )
    return RunResult(
        mode="scheduler",
        label="",
        jobs=jobs,
        utilisation=_series((0.0, use)),
        queues={},
        unschedulable={},
        capacity={GPU: 128.0},
        held=_series((0.0, held), (HOUR, 0.0)) if held else Series(),
        end=end,
    )


def test_percentiles_are_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0], 0.99) == 3.0
    assert math.isnan(percentile([], 0.5))


def test_figures_of_a_run() -> None:
    run = _run([HOUR, None], use=0.5, held=16.0)
    found = figures("x", run, window=10 * HOUR)
    assert found.gang_waits == [HOUR, 20 * HOUR]  # never started: until the run's end
    assert found.gangs_never_started == 1
    assert found.small_waits == [60.0]
    assert found.utilisation == 0.5
    assert found.held_gpu_hours == 16.0
    assert longest_run([run]) == 2 * HOUR


def test_the_goal_holds_when_today_starves_and_reservations_bound_the_wait() -> None:
    """The longest job runs 2 h: the bound is 4 h. Today's gang waits 9 h (MISS); the
    reserved run's waits 3 h at 1.5 points less utilisation (MET, MET)."""
    runs = {"today": _run([9 * HOUR], use=0.70), "reserved": _run([3 * HOUR], use=0.685)}
    header, rows, holds, verdict, figure = evaluate(EXPECT, runs)
    assert holds
    assert len(header) == len(rows[0]) == 7
    assert rows[0][2] == "MISS (9.0 h vs 4.0 h)"
    assert rows[0][5] == "-"
    assert rows[1][2] == "MET (3.0 h vs 4.0 h)"
    assert rows[1][5] == "MET (-1.5)"
    assert "today's large gangs wait up to 9.0 h" in verdict
    assert figure is not None


def test_the_goal_fails_on_a_long_wait_or_lost_utilisation() -> None:
    long_wait = {"today": _run([9 * HOUR], use=0.7), "reserved": _run([5 * HOUR], use=0.7)}
    assert not evaluate(EXPECT, long_wait)[2]
    lost = {"today": _run([9 * HOUR], use=0.7), "reserved": _run([HOUR], use=0.66)}
    _, rows, holds, _, _ = evaluate(EXPECT, lost)
    assert not holds
    assert rows[1][5] == "MISS (-4.0)"
    no_starving = {"today": _run([3 * HOUR], use=0.7), "reserved": _run([HOUR], use=0.7)}
    assert not evaluate(EXPECT, no_starving)[2], "today must be shown starving"
