"""The bookkeeping of the status writer (``scheduler.status_writer``): the writes waiting, in
flight and last written, one per object, as a purely computational state machine with no I/O
and no clock of its own (``now`` is a parameter). The rules are in ``status_writer``'s
docstring; ``PendingWrites`` keeps them under any interleaving of decisions and answers.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

MAX_ATTEMPTS: Final = 5  # tries of one write that keeps failing transiently
FIRST_BACKOFF: Final = 0.5  # seconds before the second try; doubled each try after
MAX_BACKOFF: Final = 8.0


class Outcome(enum.Enum):
    """How a write ended."""

    WRITTEN = "written"
    REFUSED = "refused"  # for good: the object gone, replaced, or the write invalid
    FAILED = "failed"  # transiently: tried again (the latest decision) after a backoff


def backoff(attempts: int) -> float:
    """Seconds to wait before the next try of a write that failed ``attempts`` times."""
    return float(min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (attempts - 1)))


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V
    lane: int
    attempts: int = 0  # failed tries so far
    not_before: float = 0.0  # no try before this moment (a backoff)


class PendingWrites(Generic[K, V]):
    """The writes waiting, in flight and last written, by object; a purely computational
    state machine (the rules: ``scheduler.status_writer``'s docstring)."""

    def __init__(self, *, limit: int, lanes: int = 2) -> None:
        if limit < 1 or lanes < 1:
            raise ValueError(f"limit and lanes must be >= 1 (got {limit}, {lanes})")
        self.limit = limit
        self._lines: list[OrderedDict[K, _Entry[V]]] = [OrderedDict() for _ in range(lanes)]
        self._later: dict[K, _Entry[V]] = {}  # failed, waiting for their backoff
        self._flying: dict[K, _Entry[V]] = {}
        self._next: dict[K, _Entry[V]] = {}  # decided while the object's write is in flight
        self._written: dict[K, V] = {}  # the last value written, until forgotten
        self.stopped = False

    # ---- what the loop asks -------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Writes decided and not in flight (the queue length)."""
        return sum(map(len, self._lines)) + len(self._later) + len(self._next)

    @property
    def in_flight(self) -> int:
        return len(self._flying)

    @property
    def idle(self) -> bool:
        """Nothing waiting and nothing in flight."""
        return not self.waiting and not self._flying

    def latest(self, key: K) -> V | None:
        """The newest value decided for ``key`` and not known to be in the cache: waiting, in
        flight, or written and not yet forgotten."""
        for held in (self._next, self._later, *self._lines, self._flying):
            entry = held.get(key)
            if entry is not None:
                return entry.value
        return self._written.get(key)

    def holds(self, key: K) -> bool:
        """Whether a write of ``key`` waits or flies."""
        return any(key in held for held in (self._flying, self._next, self._later, *self._lines))

    def next_due(self) -> float | None:
        """The earliest moment a write held back by a backoff may go; None without any."""
        return min((e.not_before for e in self._later.values()), default=None)

    # ---- changes ------------------------------------------------------------------------------

    def submit(self, key: K, value: V, *, lane: int = 0) -> bool:
        """Decide ``value`` for ``key``; False when nothing new is to be written (stopped, or
        the same value already waits, flies or was written)."""
        if self.stopped:
            return False
        flying = self._flying.get(key)
        if flying is not None:
            if flying.value == value:
                # Back to what is being written: a decision in between is void.
                self._next.pop(key, None)
                return False
            held = self._next.get(key)
            if held is not None and held.value == value:
                return False
            self._next[key] = _Entry(value, lane)
            return True
        if self._waits(key, value):
            return False
        # Only remembered while nothing waits (a submission forgets it): the cache lags a
        # write that landed, and the same decision again needs no second write.
        if key in self._written and self._written[key] == value:
            return False
        later = self._later.get(key)
        if later is not None:
            later.value = value  # the backoff stands: the API server was failing
            return True
        line = self._lines[lane]
        waiting = line.get(key)
        if waiting is not None:
            waiting.value = value  # keeps its place in line
        else:
            line[key] = _Entry(value, lane)
        self._written.pop(key, None)
        return True

    def _waits(self, key: K, value: V) -> bool:
        """Whether exactly ``value`` already waits for ``key`` (in line or in a backoff)."""
        for held in (self._later, *self._lines):
            entry = held.get(key)
            if entry is not None:
                return entry.value == value
        return False

    def take(self, now: float) -> tuple[K, V] | None:
        """The next write to send (now in flight), or None: stopped, ``limit`` in flight, or
        nothing due."""
        if self.stopped or len(self._flying) >= self.limit:
            return None
        if self._later:
            for key in [k for k, e in self._later.items() if e.not_before <= now]:
                entry = self._later.pop(key)
                self._lines[entry.lane][key] = entry
        for line in self._lines:
            if line:
                key, entry = line.popitem(last=False)
                self._flying[key] = entry
                return key, entry.value
        return None

    def done(self, key: K, outcome: Outcome, *, now: float) -> bool:
        """The write of ``key`` taken last ended so; True when it will be tried again."""
        entry = self._flying.pop(key)
        newer = self._next.pop(key, None)
        if outcome is Outcome.WRITTEN:
            self._written[key] = entry.value
        else:
            self._written.pop(key, None)
        if self.stopped:
            return False
        if outcome is Outcome.FAILED:
            attempts = entry.attempts + 1
            if attempts >= MAX_ATTEMPTS:
                if newer is not None:  # a fresh decision gets its own tries
                    self._lines[newer.lane][key] = newer
                return False
            retry = newer if newer is not None else entry
            retry.attempts, retry.not_before = attempts, now + backoff(attempts)
            self._later[key] = retry
            return True
        if newer is not None:
            self._lines[newer.lane][key] = newer
        return False

    def forget(self, key: K) -> None:
        """The cache now shows ``key``'s object as it is: its last written value no longer
        tells whether a decision is new."""
        self._written.pop(key, None)

    def stop(self) -> int:
        """Send nothing more; returns how many waiting writes were dropped."""
        dropped = self.waiting
        self.stopped = True
        for line in self._lines:
            line.clear()
        self._later.clear()
        self._next.clear()
        self._written.clear()
        return dropped
