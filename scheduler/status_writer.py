"""Status writes apart from the session loop: PodGroup and Queue statuses and pods'
``PodScheduled=False`` conditions, coalesced by object, a bounded number in flight.

A session decides statuses; the loop hands them to the writer and starts the next session
without waiting for the API server (Volcano's job updater writes at session close, and the
session waits; on a busy API server that held pods back for several sessions). The writer keeps
at most one pending write per object (``key``):

- a newer decision for an object whose write has not started REPLACES the waiting one in its
  place in line (latest wins: a PodGroup that went Inqueue and then Running while its first
  write waited is written once, as Running, and no later than the first would have been);
- a decision for an object whose write is in flight waits for that write to end, then goes
  (never two writes of one object at once, so they land in the order decided);
- a decision equal to the one waiting, in flight or last written (until ``forget``: the cache
  has caught up) is dropped: sessions that run before the cache shows a write repeat it;
- ``lanes``: lane 0 before lane 1 (PodGroups and Queues, which the job controller and the
  queue's users wait for, before thousands of pods' conditions);
- a write that fails transiently is tried again with the latest decision after a backoff
  (0.5 s doubling to 8 s, at most ``MAX_ATTEMPTS`` tries; then dropped: the next session that
  still finds the cache different decides it again), never in a hot loop; a write the API
  server refuses for good (the object gone, replaced, invalid) is dropped;
- after ``stop`` nothing more is sent: a leader that lost its Lease writes nothing, and a
  FencedError from a write stops the writer and is kept for the loop to raise.

``scheduler.status_queue.PendingWrites`` is the bookkeeping, a pure state machine with no I/O
and no clock of its own; ``StatusWriter`` runs it with ``slots`` workers on the event loop.
Memory: one entry per object with a write waiting, in flight or remembered, so it is bounded by
the objects the scheduler sees, not by the sessions run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import structlog

from caldera.kube.errors import (
    ApiConnectionError,
    ApiError,
    Conflict,
    NotFound,
    ServerError,
    TooManyRequests,
)
from caldera.kube.fence import FencedError
from scheduler.status_queue import Outcome, PendingWrites

log = structlog.get_logger("scheduler.status")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def classify(exc: BaseException) -> Outcome:
    """How a failed write ended: transient failures are tried again, the rest dropped."""
    if isinstance(exc, ServerError | TooManyRequests | TimeoutError):
        return Outcome.FAILED
    if isinstance(exc, ApiConnectionError):
        return Outcome.FAILED if exc.transient else Outcome.REFUSED
    return Outcome.REFUSED


class StatusWriter(Generic[K, V]):
    """Runs ``PendingWrites`` with ``slots`` workers: ``send(key, value)`` makes one write
    (and raises the client's errors); ``on_outcome(key, value, outcome)`` is told how each
    ended, ``on_fenced()`` when a write was fenced (the loop then raises ``fenced``)."""

    def __init__(
        self,
        send: Callable[[K, V], Awaitable[None]],
        *,
        slots: int,
        on_outcome: Callable[[K, V, Outcome], None] | None = None,
        on_fenced: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,  # a seam for tests
    ) -> None:
        self.pending: PendingWrites[K, V] = PendingWrites(limit=slots)
        self._send, self._on_outcome, self._on_fenced = send, on_outcome, on_fenced
        self._clock = clock
        self._slots = slots
        self._work = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self.fenced: FencedError | None = None

    def submit(self, key: K, value: V, *, lane: int = 0) -> bool:
        """Queue ``value`` for ``key`` (see ``PendingWrites.submit``); True when queued."""
        queued = self.pending.submit(key, value, lane=lane)
        if queued:
            self._work.set()
        return queued

    def forget(self, key: K) -> None:
        self.pending.forget(key)

    def start(self) -> None:
        if self._workers or self.pending.stopped:
            return
        self._workers = [
            asyncio.create_task(self._worker(), name=f"status writer {i}")
            for i in range(self._slots)
        ]

    def raise_if_fenced(self) -> None:
        if self.fenced is not None:
            raise self.fenced

    async def _worker(self) -> None:
        pending = self.pending
        while not pending.stopped:
            item = pending.take(self._clock())
            if item is None:
                self._work.clear()
                due = pending.next_due()
                timeout = None if due is None else max(0.0, due - self._clock())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._work.wait()
                continue
            key, value = item
            try:
                await self._send(key, value)
            except FencedError as exc:
                # The Lease may have passed: write nothing more; the loop raises it.
                self.fenced = exc
                pending.done(key, Outcome.REFUSED, now=self._clock())
                pending.stop()
                self._work.set()  # the other workers see the stop
                if self._on_fenced is not None:
                    self._on_fenced()
                return
            except (ApiError, ApiConnectionError, TimeoutError) as exc:
                outcome = classify(exc)
                again = pending.done(key, outcome, now=self._clock())
                self._report(key, value, outcome)
                if again:
                    log.info("status write failed; trying again", object=str(key), error=str(exc))
                elif not isinstance(exc, NotFound | Conflict):  # gone or replaced: expected
                    log.warning("status write failed", object=str(key), error=str(exc))
            except Exception:  # a bug in send: logged, and the worker keeps its slot
                log.exception("status write failed unexpectedly", object=str(key))
                pending.done(key, Outcome.REFUSED, now=self._clock())
                self._report(key, value, Outcome.REFUSED)
            else:
                pending.done(key, Outcome.WRITTEN, now=self._clock())
                self._report(key, value, Outcome.WRITTEN)
            self._work.set()  # a slot is free; a held decision may be due

    def _report(self, key: K, value: V, outcome: Outcome) -> None:
        if self._on_outcome is not None:
            self._on_outcome(key, value, outcome)

    async def drain(self, grace: float) -> None:
        """Send what waits (up to ``grace`` seconds; backoffs included), then stop."""
        deadline = self._clock() + grace
        while self._workers and not self.pending.idle and not self.pending.stopped:
            left = deadline - self._clock()
            if left <= 0:
                break
            await asyncio.sleep(min(0.05, left))
        await self.close()

    def stop(self) -> None:
        """Send nothing more and cancel the workers (a write in flight is abandoned)."""
        dropped = self.pending.stop()
        if dropped:
            log.info("status writes dropped at stop", dropped=dropped)
        for task in self._workers:
            task.cancel()

    async def close(self) -> None:
        """``stop`` and wait for the workers to end."""
        self.stop()
        workers, self._workers = self._workers, []
        await asyncio.gather(*workers, return_exceptions=True)
