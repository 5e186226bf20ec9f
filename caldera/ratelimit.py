"""Client-side rate limiting and retry delays: a token bucket and jittered exponential backoff.

`TokenBucket` is the classic bucket of `burst` tokens refilled at `qps` tokens per second.
`reserve()` takes one token *now* and returns how long the caller must wait before using it; the
bucket may go into debt, so concurrent callers are queued fairly in time: the n-th caller in a
burst waits n/qps seconds, and nobody waits longer than needed. Reserving is a pure computation
over the injected clock (no sleeping, no loop), which is what the unit tests drive; `wait()` is
the one-line asyncio wrapper that sleeps the reserved delay.

`jittered_backoff` is the delay before retry number `attempt` (0-based): `base * 2**attempt`,
capped at `cap`, then shortened by up to `jitter` of itself so that many clients that failed
together do not retry in lockstep. Jitter only ever shortens the delay, so `cap` is a hard upper
bound. Both are purely computational functions with no side-effects (the clock and the random
source are parameters).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable

__all__ = ["TokenBucket", "exponential_backoff", "jittered_backoff"]


class TokenBucket:
    """A token bucket: `burst` requests at once, then `qps` per second on average.

    `qps=math.inf` disables limiting (every reservation is free). Not thread-safe; use it from
    one event loop, where each method runs without interruption.
    """

    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._qps = qps
        self._burst = burst
        self._clock = clock  # injectable so tests control time
        self._tokens = float(burst)
        self._last = clock()

    @property
    def qps(self) -> float:
        """The sustained rate, in requests per second."""
        return self._qps

    @property
    def burst(self) -> int:
        """How many requests may go at once after a quiet period."""
        return self._burst

    def reserve(self) -> float:
        """Take one token and return the delay in seconds before it may be used (0 if none)."""
        if math.isinf(self._qps):
            return 0.0
        now = self._clock()
        # A clock that steps back must neither mint tokens nor, stepping forward again, mint
        # them twice for the same interval.
        elapsed = max(0.0, now - self._last)
        self._last = max(now, self._last)
        self._tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        self._tokens -= 1.0
        if self._tokens >= 0.0:
            return 0.0
        return -self._tokens / self._qps

    async def wait(self) -> float:
        """Take one token, sleep until it may be used, and return how long that was."""
        delay = self.reserve()
        if delay > 0.0:
            await asyncio.sleep(delay)
        return delay


def jittered_backoff(
    attempt: int,
    base: float,
    cap: float,
    jitter: float = 0.2,
    rng: Callable[[], float] = random.random,
) -> float:
    """Delay before retry `attempt` (0-based): `min(cap, base * 2**attempt)` minus up to `jitter`.

    The result is uniform in `[(1 - jitter) * d, d]` for the capped delay `d`, given that `rng`
    returns values in `[0, 1)`.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter must be within [0, 1], got {jitter}")
    delay = exponential_backoff(attempt, base=base, cap=cap)
    return max(0.0, delay * (1.0 - jitter * rng()))


def exponential_backoff(failures: int, *, base: float, cap: float) -> float:
    """`base * 2**failures`, at most `cap`. Saturates instead of overflowing: a key can fail
    thousands of times over a long outage."""
    try:
        return min(math.ldexp(base, failures), cap)
    except OverflowError:
        return cap
