"""A deduplicating, rate-limited, delaying work queue for asyncio, with client-go's semantics.

Informer handlers put keys (`namespace/name`) in; a controller's workers take them out, reconcile,
and call `done`. Three collections carry the state, and every method changes them without
awaiting, so on one event loop each method is atomic and no lock is needed (the queue must only
be used from the thread running its loop):

- `_queue`: keys ready to hand out, FIFO;
- `_dirty`: keys that need processing: every key in `_queue`, plus keys that were added again
  while being processed;
- `_processing`: keys handed out by `get` and not yet `done`, with their start times.

Invariants, which give the "stingy" guarantees of client-go's queue:

- a key is in `_queue` at most once, and only if it is in `_dirty` and not in `_processing`;
  so a key is waiting at most once however often it is added (the queue's size is bounded by
  the number of distinct objects), and never processed by two workers at the same time;
- a key added while it is processed stays in `_dirty` only, and `done` puts it back in
  `_queue`: the change that came in during processing is never lost.

Delayed adds (`add_after`, and `add_rate_limited` which is `add_after` with the rate limiter's
delay) are loop timers (`loop.call_at`); per key only the earliest pending deadline is kept.

Shutdown stops accepting adds, drops queued and delayed keys, and makes every `get`, waiting or
future, raise `ShutDown`; keys already handed out are left to finish. `shutdown_with_drain` also
waits, up to a timeout, for those in-flight keys to be `done`. Queued keys are dropped rather than
drained because the controller is level-based: the next process lists everything again, and a
shutting-down (or demoted) controller should not start new work.

The rate limiters are pure bookkeeping: `ItemExponentialBackoff` counts failures per key and the
overall limit is `caldera.ratelimit.TokenBucket` (the same one the API client uses) read through
an injectable clock; neither touches the event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from caldera.ratelimit import TokenBucket, exponential_backoff
from informers.metrics import NoQueueMetrics, QueueMetricsRecorder, WorkQueueMetrics

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialBackoff",
    "MaxOfRateLimiter",
    "RateLimiter",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
]

Clock = Callable[[], float]


class ShutDown(Exception):  # noqa: N818 - named after client-go's `shutdown` result, not an error
    """Raised by `WorkQueue.get` once the queue is shut down: the worker should return."""


# --- rate limiters (pure) -------------------------------------------------------------------


class RateLimiter(Protocol):
    """Decides how long a key waits before its next retry (client-go's `RateLimiter`)."""

    def when(self, key: str) -> float:
        """Record one more failure of `key` and return the delay in seconds before retrying."""
        ...

    def forget(self, key: str) -> None:
        """Stop tracking `key` (it succeeded): its next failure starts from scratch."""
        ...

    def num_requeues(self, key: str) -> int:
        """How many failures of `key` are being tracked."""
        ...


class ItemExponentialBackoff:
    """Per-key exponential backoff: base, 2*base, 4*base, ... capped (5 ms .. 1000 s by default).

    Holds only failure counts; a key's entry lives until `forget`, as in client-go.
    """

    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError(f"need 0 < base_delay <= max_delay, got {base_delay}, {max_delay}")
        self._base = base_delay
        self._cap = max_delay
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return exponential_backoff(failures, base=self._base, cap=self._cap)

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall rate limit shared by all keys: one `TokenBucket`."""

    def __init__(self, bucket: TokenBucket) -> None:
        self._bucket = bucket

    def when(self, key: str) -> float:
        return self._bucket.reserve()

    def forget(self, key: str) -> None:
        pass

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfRateLimiter:
    """Asks every limiter (so each records the failure) and waits for the longest delay."""

    def __init__(self, limiters: Iterable[RateLimiter]) -> None:
        self._limiters = tuple(limiters)
        if not self._limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")

    def when(self, key: str) -> float:
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: str) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(
    *,
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    clock: Clock = time.monotonic,
) -> RateLimiter:
    """client-go's `DefaultControllerRateLimiter`: per-key backoff, max-of an overall bucket.

    The backoff protects the apiserver from one broken object; the bucket from many failing at
    once (a webhook down, say), which per-key backoff alone would retry in a burst.
    """
    return MaxOfRateLimiter(
        [
            ItemExponentialBackoff(base_delay=base_delay, max_delay=max_delay),
            BucketRateLimiter(TokenBucket(qps, burst, clock=clock)),
        ]
    )


# --- the queue ------------------------------------------------------------------------------


class WorkQueue:
    """A keyed work queue; see the module docstring for the design and invariants.

    `clock` is the test seam: it times the rate limiter's token bucket (when `rate_limiter` is not
    given) and the metrics' durations, so tests can move time without sleeping. Delays of
    `add_after` always run on the event loop's own clock, which is what its timers use.
    """

    def __init__(
        self,
        name: str,
        *,
        rate_limiter: RateLimiter | None = None,
        metrics: WorkQueueMetrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._name = name
        self._clock = clock
        self._rate_limiter = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=clock)
        )
        self._queue: collections.deque[str] = collections.deque()
        self._dirty: set[str] = set()
        self._processing: dict[str, float] = {}  # key -> clock() when handed out
        self._added_at: dict[str, float] = {}  # key -> clock() when it became dirty
        self._waiting: dict[str, tuple[float, asyncio.TimerHandle]] = {}  # key -> (deadline, timer)
        self._getters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._shutting_down = False
        self._drained = asyncio.Event()
        self._metrics: QueueMetricsRecorder = (
            metrics.for_queue(name, in_flight=self._in_flight)
            if metrics is not None
            else NoQueueMetrics()
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys ready to be handed out now (client-go's `Len`); excludes delayed keys and keys
        that went dirty while being processed. The depth metric counts the latter too."""
        return len(self._queue)

    # --- adding ---

    def add(self, key: str) -> None:
        """Queue `key` unless it is already waiting; if it is being processed, queue it again
        when that processing is `done`. Ignored after shutdown (handlers may still fire then)."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._added_at.setdefault(key, self._clock())
        self._metrics.added()
        self._metrics.set_depth(len(self._dirty))
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: str, delay: float) -> None:
        """Add `key` after `delay` seconds; `delay <= 0` adds now.

        If the key already has a pending delayed add, the earlier deadline wins and the other is
        dropped. A pending delayed add is independent of the key being queued or processed
        meanwhile: it still fires (harmless, reconcile is idempotent). Needs a running loop.
        """
        if self._shutting_down:
            return
        self._metrics.retried()  # as client-go: every delayed add counts as a retry
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= deadline:
                return
            pending[1].cancel()
        self._waiting[key] = (deadline, loop.call_at(deadline, self._fire, key))

    def _fire(self, key: str) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> None:
        """Add `key` after the rate limiter's delay: call this when processing `key` failed."""
        if self._shutting_down:
            return
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: str) -> None:
        """Reset `key`'s failure count: call this when processing `key` succeeded.

        It does not cancel a pending delayed add of `key`."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        """How many times `key` was rate-limited since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)

    # --- processing ---

    async def get(self) -> str:
        """Wait for a key and mark it as being processed; the caller must call `done(key)`.

        Raises `ShutDown` once the queue is shut down, even if keys were still queued.
        Cancelling a waiting `get` loses no key: the wake-up passes to the next getter.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                # Absent if the wake-up we are now abandoning already popped it.
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._queue and not getter.cancelled():
                    # We were woken for a key and cancelled before taking it: hand the
                    # wake-up on, or a key would sit queued while other getters sleep.
                    self._wake_one()
                raise
        if self._shutting_down:
            raise ShutDown
        key = self._queue.popleft()
        now = self._clock()
        self._dirty.discard(key)
        self._processing[key] = now
        self._metrics.set_depth(len(self._dirty))
        self._metrics.started(now - self._added_at.pop(key, now))
        return key

    def done(self, key: str) -> None:
        """Mark `key` as processed; if it was added meanwhile, queue it again.

        A key that is not being processed is ignored, as in client-go.
        """
        started = self._processing.pop(key, None)
        if started is None:
            return
        self._metrics.finished(self._clock() - started)
        if key in self._dirty and not self._shutting_down:
            self._queue.append(key)
            self._wake_one()
        if self._shutting_down and not self._processing:
            self._drained.set()

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _in_flight(self) -> tuple[float, float]:
        # Snapshot first: a scrape may run on another thread while the loop mutates the dict.
        started = list(self._processing.values())
        if not started:
            return 0.0, 0.0
        now = self._clock()
        return sum(now - s for s in started), now - min(started)

    # --- shutdown ---

    def shutdown(self) -> None:
        """Stop accepting adds, drop queued and delayed keys, and make every `get` raise
        `ShutDown`. In-flight keys may still be `done`. Idempotent."""
        if self._shutting_down:
            return
        self._shutting_down = True
        for _, timer in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
        self._queue.clear()
        self._dirty.clear()
        self._added_at.clear()
        self._metrics.set_depth(0)
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)  # it re-checks and raises ShutDown
        if not self._processing:
            self._drained.set()

    # The timeout is a parameter (not the caller's asyncio.timeout) because running out of it is
    # an expected outcome reported as False, after which shutdown goes on to cancel the workers.
    async def shutdown_with_drain(self, timeout: float | None) -> bool:  # noqa: ASYNC109
        """Shut down, then wait up to `timeout` seconds (None: forever) for in-flight keys to be
        `done`. Returns True if they all were. Must not be awaited by a worker holding a key."""
        self.shutdown()
        try:
            async with asyncio.timeout(timeout):
                await self._drained.wait()
        except TimeoutError:
            return False
        return True
