"""Fencing: a leader's writes stop as soon as its Lease may have passed to another replica.

A `Fence` is owned by the `LeaderElector` and consulted by `KubeClient` at the last moment before
every mutating request (and before each retry of one). It opens when the Lease is taken and is
extended by each successful renewal, from the moment the renew request was *sent* (its answer
may come late; the API server may have written the Lease at any moment after the send, so the
send is the safe base). Writes are allowed only while

    now <= last successful renewal sent + renew_deadline

on this process's monotonic clock. Once a write attempt (or the elector) finds that moment past,
the fence is closed for good: a renewal that was sent after it closed cannot reopen it, so a
process paused past its deadline (SIGSTOP, a long GC, a VM migration) never resumes writing,
whatever its requests and timers were doing. The elector then stops leading and the process
exits to rejoin as a candidate.

Since renew_deadline < lease_duration and a standby waits lease_duration from the moment *it*
saw the last renewal (which is after we sent it), a write that passes the fence goes out before
any standby may take the Lease; the difference covers the write's time on the wire.

The decision is pure (the clock is a parameter); the only state is the deadline and the latch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from caldera.kube.errors import ApiConnectionError

__all__ = ["Fence", "FencedError", "LeadershipLostError"]


class LeadershipLostError(RuntimeError):
    """The Lease could not be renewed in time; another replica may lead now."""


class FencedError(ApiConnectionError, LeadershipLostError):
    """A write was dropped before it was sent: this process may no longer hold its Lease.

    An `ApiConnectionError` (never sent, not transient) so that code handling request failures
    treats it as one that cannot be retried, and a `LeadershipLostError` so that the process
    machinery treats it as "stop leading": never a failure to retry."""

    def __init__(self, method: str, path: str, late: float | None) -> None:
        if late is None:
            why = "no Lease held"
        elif late <= 0:
            why = "the Lease was released"
        else:
            why = f"the Lease may have passed {late:.3f}s ago (renew deadline missed)"
        super().__init__(
            f"write dropped, not sent: {why}",
            sent=False,
            transient=False,
            method=method,
            path=path,
        )


class Fence:
    """Whether this process may still write; see the module docstring."""

    __slots__ = ("_clock", "_deadline", "_lost", "renew_deadline")

    def __init__(
        self, renew_deadline: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not renew_deadline > 0:
            raise ValueError(f"renew_deadline must be positive, got {renew_deadline}")
        self.renew_deadline = renew_deadline
        self._clock = clock
        self._deadline: float | None = None  # None: never held
        self._lost = False

    @property
    def deadline(self) -> float | None:
        """The last moment (monotonic) a write may be sent; None before the Lease is held."""
        return self._deadline

    @property
    def lost(self) -> bool:
        """Closed for good: the deadline passed while held, or the Lease was released."""
        return self._lost

    def renewed(self, sent_at: float) -> bool:
        """A take or renewal sent at ``sent_at`` succeeded: extend the deadline from it. False
        (and nothing changes) when the fence had already closed by then."""
        if self._lost or (self._deadline is not None and sent_at > self._deadline):
            self._lost = True
            return False
        self._deadline = max(self._deadline or sent_at, sent_at + self.renew_deadline)
        return True

    def close(self) -> None:
        """Close for good now (the Lease is being released: a successor may start at once)."""
        self._lost = True

    def allows(self, now: float) -> bool:
        """Whether a write may be sent at ``now``; closes the fence for good if it is late."""
        if self._deadline is None or self._lost:
            return False
        if now > self._deadline:
            self._lost = True
            return False
        return True

    def remaining(self, now: float) -> float:
        """Seconds until the fence closes (0 or less when closed)."""
        if self._deadline is None or self._lost:
            return 0.0
        return self._deadline - now

    def check(self, method: str, path: str) -> None:
        """Raise `FencedError` unless a write may be sent now, by the fence's own clock."""
        now = self._clock()
        if not self.allows(now):
            late = None if self._deadline is None else now - self._deadline
            raise FencedError(method, path, late)
