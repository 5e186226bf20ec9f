"""``Series.mean``: the time-weighted mean of a step series, as the benchmark reports the GPUs
held while jobs arrive."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.results import Series


def _series(steps: list[tuple[float, float]]) -> Series:
    series = Series()
    for when, value in steps:
        series.add(when, {"gpu": value})
    return series


def test_a_step_is_weighted_by_how_long_it_holds() -> None:
    series = _series([(10.0, 0.5), (30.0, 1.0)])
    # [0, 10): 0 (before the first sample); [10, 30): 0.5; [30, 40]: 1.0
    assert series.mean("gpu", 0.0, 40.0) == pytest.approx((0 * 10 + 0.5 * 20 + 1.0 * 10) / 40)


def test_the_span_may_start_and_end_between_samples() -> None:
    series = _series([(0.0, 0.2), (10.0, 0.6), (20.0, 0.4)])
    assert series.mean("gpu", 5.0, 15.0) == pytest.approx((0.2 * 5 + 0.6 * 5) / 10)
    assert series.mean("gpu", 25.0, 35.0) == pytest.approx(0.4)  # after the last sample


def test_an_unknown_name_and_an_empty_span_are_zero() -> None:
    series = _series([(0.0, 0.5)])
    assert series.mean("cpu", 0.0, 10.0) == 0.0
    assert series.mean("gpu", 10.0, 10.0) == 0.0
    assert series.mean("gpu", 10.0, 5.0) == 0.0


@given(
    steps=st.lists(
        st.tuples(st.integers(1, 5), st.floats(0, 1, allow_nan=False)), min_size=1, max_size=12
    ),
    start=st.integers(0, 40),
    length=st.integers(1, 40),
)
def test_mean_is_the_average_of_the_values_at_each_second(
    steps: list[tuple[int, float]], start: int, length: int
) -> None:
    """With samples at whole seconds, the series holds ``at(t)`` over each second [t, t+1)."""
    when, timed = 0, []
    for gap, value in steps:
        when += gap
        timed.append((float(when), value))
    series = _series(timed)
    end = start + length
    expected = sum(series.at(float(t), "gpu") for t in range(start, end)) / length
    assert series.mean("gpu", float(start), float(end)) == pytest.approx(expected)
