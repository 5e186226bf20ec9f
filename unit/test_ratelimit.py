"""Tests of caldera.ratelimit: the token bucket's delays and the jittered backoff's bounds."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.ratelimit import TokenBucket, exponential_backoff, jittered_backoff


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_burst_is_free_then_requests_are_spaced_by_one_over_qps() -> None:
    """The first `burst` reservations cost nothing; the next ones queue 1/qps apart."""
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    delays = [bucket.reserve() for _ in range(6)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:] == pytest.approx([0.1, 0.2, 0.3])


def test_tokens_refill_with_time_up_to_burst() -> None:
    """Waiting refills tokens at qps, but never beyond the burst size."""
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=2, clock=clock)
    assert [bucket.reserve(), bucket.reserve()] == [0.0, 0.0]
    clock.now += 0.5  # one token back
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(0.5)
    clock.now += 1000.0  # a long quiet period refills only `burst` tokens
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]


def test_debt_is_paid_back_by_elapsed_time() -> None:
    """A caller that waited its reserved delay leaves the next caller only 1/qps to wait."""
    clock = FakeClock()
    bucket = TokenBucket(qps=4, burst=1, clock=clock)
    assert bucket.reserve() == 0.0
    delay = bucket.reserve()
    assert delay == pytest.approx(0.25)
    clock.now += delay
    assert bucket.reserve() == pytest.approx(0.25)


def test_clock_going_backwards_mints_no_tokens() -> None:
    """A clock step backwards is treated as no time passing."""
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    bucket.reserve()
    clock.now -= 50.0
    assert bucket.reserve() == pytest.approx(1.0)


def test_infinite_qps_never_limits() -> None:
    """qps=inf disables limiting."""
    bucket = TokenBucket(qps=math.inf, burst=1, clock=FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_invalid_settings_are_rejected(qps: float, burst: int) -> None:
    """Non-positive qps or a burst below 1 cannot work and are refused."""
    with pytest.raises(ValueError, match=r"qps|burst"):
        TokenBucket(qps=qps, burst=burst)


async def test_wait_sleeps_the_reserved_delay() -> None:
    """wait() returns at once within the burst, and sleeps about 1/qps beyond it."""
    bucket = TokenBucket(qps=50, burst=1)
    loop = asyncio.get_running_loop()
    assert await bucket.wait() == 0.0
    start = loop.time()
    waited = await bucket.wait()
    assert waited == pytest.approx(0.02, abs=0.01)
    assert loop.time() - start >= waited * 0.9


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (10_000, 5.0)],
)
def test_backoff_doubles_until_the_cap(attempt: int, expected: float) -> None:
    """Without jitter the delay is base * 2**attempt, capped (even for huge attempt numbers)."""
    assert jittered_backoff(attempt, base=0.5, cap=5.0, jitter=0.0) == expected


def test_jitter_only_shortens() -> None:
    """rng=0 gives the full delay, rng close to 1 shortens it by the jitter fraction."""
    assert jittered_backoff(2, 1.0, 60.0, jitter=0.25, rng=lambda: 0.0) == 4.0
    assert jittered_backoff(2, 1.0, 60.0, jitter=0.25, rng=lambda: 0.999999) == pytest.approx(3.0)


@given(
    attempt=st.integers(min_value=0, max_value=200),
    base=st.floats(min_value=0.001, max_value=10),
    cap=st.floats(min_value=0.001, max_value=600),
    jitter=st.floats(min_value=0, max_value=1),
    r=st.floats(min_value=0, max_value=1, exclude_max=True),
)
def test_backoff_stays_within_bounds(
    attempt: int, base: float, cap: float, jitter: float, r: float
) -> None:
    """Every delay lies within [(1 - jitter) * d, d] for the capped delay d, so never above cap."""
    delay = jittered_backoff(attempt, base, cap, jitter, rng=lambda: r)
    capped = min(cap, base * 2.0**attempt)
    assert (1 - jitter) * capped - 1e-9 <= delay <= capped <= cap


@pytest.mark.parametrize(("attempt", "jitter"), [(-1, 0.2), (0, -0.1), (0, 1.5)])
def test_backoff_rejects_nonsense(attempt: int, jitter: float) -> None:
    """A negative attempt or a jitter outside [0, 1] is a programming error."""
    with pytest.raises(ValueError, match=r"attempt|jitter"):
        jittered_backoff(attempt, 1.0, 10.0, jitter=jitter)


def test_exponential_backoff_saturates_instead_of_overflowing() -> None:
    """Huge failure counts yield the cap rather than an OverflowError."""
    assert exponential_backoff(5000, base=0.005, cap=1000.0) == 1000.0
    assert exponential_backoff(0, base=0.005, cap=1000.0) == 0.005
    assert exponential_backoff(3, base=0.005, cap=1000.0) == 0.04


def test_token_bucket_ignores_clock_going_back() -> None:
    """A clock stepping backwards neither refills the bucket nor, stepping forward again,
    refills it twice for the same interval."""
    now = [10.0]
    bucket = TokenBucket(1.0, 1, clock=lambda: now[0])
    assert bucket.reserve() == 0.0
    now[0] = 5.0
    assert bucket.reserve() == pytest.approx(1.0)
    now[0] = 12.0
    assert bucket.reserve() == pytest.approx(0.0)
