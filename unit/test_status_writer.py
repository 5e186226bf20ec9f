"""The status writer: its coalescing bookkeeping (scheduler.status_queue), pure and under any
interleaving (hypothesis), and the workers that run it on the event loop
(scheduler.status_writer)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.status_queue as status_queue
from caldera.kube.errors import ApiConnectionError, Invalid, NotFound, ServerError
from caldera.kube.fence import FencedError
from scheduler.status_queue import MAX_ATTEMPTS, Outcome, PendingWrites, backoff
from scheduler.status_writer import StatusWriter, classify

# ---- the bookkeeping ----------------------------------------------------------------------------


def test_a_newer_decision_replaces_the_waiting_one_in_its_place() -> None:
    """Inqueue then Running decided for a PodGroup whose write has not started: one write, of
    Running, in the first decision's place in line."""
    pending: PendingWrites[str, str] = PendingWrites(limit=4)
    assert pending.submit("pg-a", "Inqueue")
    assert pending.submit("pg-b", "Inqueue")
    assert pending.submit("pg-a", "Running")
    assert pending.waiting == 2
    assert pending.take(0) == ("pg-a", "Running")
    assert pending.take(0) == ("pg-b", "Inqueue")
    assert pending.take(0) is None


def test_a_decision_for_an_object_in_flight_waits_for_its_write() -> None:
    """Never two writes of one object at once: the newer goes when the first has ended, and a
    decision back to the value in flight needs no second write."""
    pending: PendingWrites[str, str] = PendingWrites(limit=4)
    pending.submit("pg", "Inqueue")
    assert pending.take(0) == ("pg", "Inqueue")
    assert pending.submit("pg", "Running")
    assert pending.take(0) is None  # held while the first flies
    assert pending.done("pg", Outcome.WRITTEN, now=0) is False
    assert pending.take(0) == ("pg", "Running")
    pending.done("pg", Outcome.WRITTEN, now=0)
    pending.submit("other", "x")
    pending.take(0)
    assert pending.submit("other", "y")
    assert not pending.submit("other", "x")  # back to what flies: y is void
    pending.done("other", Outcome.WRITTEN, now=0)
    assert pending.idle


def test_the_same_decision_again_is_not_written_twice_until_the_cache_shows_it() -> None:
    """Sessions that run before the cache shows a write decide it again: no second write;
    once forgotten (the cache caught up), a decision is compared afresh."""
    pending: PendingWrites[str, str] = PendingWrites(limit=1)
    pending.submit("q", "cpu=1")
    assert not pending.submit("q", "cpu=1")  # waiting
    pending.take(0)
    assert not pending.submit("q", "cpu=1")  # in flight
    pending.done("q", Outcome.WRITTEN, now=0)
    assert not pending.submit("q", "cpu=1")  # written, the cache lags
    pending.forget("q")
    assert pending.submit("q", "cpu=1")


def test_lane_zero_goes_first_and_the_limit_holds() -> None:
    """PodGroups (lane 0) before pods' conditions (lane 1), whatever the order decided; no
    more than ``limit`` in flight."""
    pending: PendingWrites[str, int] = PendingWrites(limit=2)
    pending.submit("pod-1", 1, lane=1)
    pending.submit("pod-2", 1, lane=1)
    pending.submit("pg", 1, lane=0)
    assert pending.take(0) == ("pg", 1)
    assert pending.take(0) == ("pod-1", 1)
    assert pending.take(0) is None
    assert pending.in_flight == 2
    pending.done("pg", Outcome.WRITTEN, now=0)
    assert pending.take(0) == ("pod-2", 1)


def test_a_transient_failure_is_tried_again_with_the_latest_decision_after_a_backoff() -> None:
    """A failed write waits its backoff, then goes with the newest decision; after
    MAX_ATTEMPTS failures it is dropped."""
    pending: PendingWrites[str, str] = PendingWrites(limit=4)
    pending.submit("pg", "Inqueue")
    pending.take(0)
    assert pending.submit("pg", "Running")
    assert pending.done("pg", Outcome.FAILED, now=10) is True
    assert pending.next_due() == 10 + backoff(1)
    assert pending.take(10) is None  # not before the backoff
    assert pending.take(10 + backoff(1)) == ("pg", "Running")
    now = 10.0
    for attempt in range(2, MAX_ATTEMPTS):
        assert pending.done("pg", Outcome.FAILED, now=now) is True
        now += backoff(attempt)
        assert pending.take(now) == ("pg", "Running")
    assert pending.done("pg", Outcome.FAILED, now=now) is False
    assert pending.idle


def test_a_refused_write_is_dropped_and_a_newer_decision_still_goes() -> None:
    pending: PendingWrites[str, str] = PendingWrites(limit=4)
    pending.submit("pg", "Inqueue")
    pending.take(0)
    pending.submit("pg", "Running")
    assert pending.done("pg", Outcome.REFUSED, now=0) is False
    assert pending.take(0) == ("pg", "Running")
    assert pending.done("pg", Outcome.REFUSED, now=0) is False
    assert pending.idle


def test_nothing_is_taken_after_stop() -> None:
    pending: PendingWrites[str, int] = PendingWrites(limit=4)
    pending.submit("a", 1)
    pending.submit("b", 1)
    pending.take(0)
    assert pending.stop() == 1
    assert pending.take(0) is None
    assert not pending.submit("c", 1)
    assert pending.done("a", Outcome.FAILED, now=0) is False
    assert pending.take(100) is None


def test_backoff_doubles_to_its_cap() -> None:
    assert [backoff(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_transient_failures_are_told_from_refusals() -> None:
    assert classify(ServerError(500, "InternalError", "etcd")) is Outcome.FAILED
    assert classify(ApiConnectionError("reset", sent=True)) is Outcome.FAILED
    assert classify(ApiConnectionError("bad cert", sent=False, transient=False)) is (
        Outcome.REFUSED
    )
    assert classify(TimeoutError()) is Outcome.FAILED
    assert classify(NotFound(404, "NotFound", "gone")) is Outcome.REFUSED
    assert classify(Invalid(422, "Invalid", "uid")) is Outcome.REFUSED


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        PendingWrites(limit=0)


# ---- any interleaving ---------------------------------------------------------------------------

KEYS = ("a", "b", "c")
_step = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from(KEYS), st.integers(0, 2)),
    st.tuples(st.just("take"), st.just(""), st.just(0)),
    st.tuples(
        st.just("done"), st.integers(0, 7).map(str), st.sampled_from([0, 0, 1, 2])
    ),  # which in-flight write (modulo), and WRITTEN / WRITTEN / FAILED / REFUSED
    st.tuples(st.just("tick"), st.just(""), st.integers(0, 10)),
    st.tuples(st.just("forget"), st.sampled_from(KEYS), st.just(0)),
)
_OUTCOMES = (Outcome.WRITTEN, Outcome.FAILED, Outcome.REFUSED)


@settings(max_examples=400)  # an interleaving that loses a decision is a few steps deep
@given(steps=st.lists(_step, max_size=60), limit=st.integers(1, 3), stop_at=st.integers(0, 300))
def test_any_interleaving_writes_the_latest_decision_of_every_object(
    steps: list[tuple[str, str, int]], limit: int, stop_at: int
) -> None:
    """For any interleaving of decisions, takes, write outcomes and time: never more than
    ``limit`` in flight nor one object twice at once; once every write succeeds, the last value
    written for each object is the last decided, unless that very value was refused or given
    up (then nothing is owed); after ``stop`` nothing more is taken."""
    pending: PendingWrites[str, int] = PendingWrites(limit=limit)
    now = 0.0
    flying: list[tuple[str, int]] = []
    written: dict[str, int] = {}
    owed: dict[str, int] = {}  # the last decision per object, while it may still be written

    def finish(index: int, outcome: Outcome) -> None:
        key, value = flying.pop(index)
        again = pending.done(key, outcome, now=now)
        if outcome is Outcome.WRITTEN:
            written[key] = value
        elif not again and owed.get(key) == value:
            del owed[key]  # refused or given up: the next session decides again

    for i, (op, arg, n) in enumerate(steps):
        if i == stop_at:
            pending.stop()
            owed.clear()
        if op == "submit":
            pending.submit(arg, n, lane=KEYS.index(arg) % 2)
            if not pending.stopped:
                owed[arg] = n
        elif op == "take":
            item = pending.take(now)
            if item is not None:
                assert not pending.stopped
                assert item[0] not in {k for k, _ in flying}, "one object twice in flight"
                flying.append(item)
            assert len(flying) <= limit
        elif op == "done" and flying:
            finish(int(arg) % len(flying), _OUTCOMES[n])
        elif op == "tick":
            now += n
        elif op == "forget":
            pending.forget(arg)
        assert pending.in_flight == len(flying) <= limit
    stopped = pending.stopped
    # Then the API server answers every write: drive to the end.
    for _ in range(1000):
        while flying:
            finish(0, Outcome.WRITTEN)
        now += 10
        item = pending.take(now)
        if item is None and pending.next_due() is None:
            break
        if item is not None:
            assert not stopped, "written after stop"
            flying.append(item)
    assert pending.idle or stopped
    for key, value in owed.items():
        assert written.get(key) == value, f"{key}: decided {value}, last written {written.get(key)}"


# ---- the workers ---------------------------------------------------------------------------------


class _Server:
    """Answers writes: fails the first ``fail`` of each key, holds them while ``hold`` is
    clear, records what was written and the most in flight."""

    def __init__(self, *, fail: int = 0, error: Exception | None = None) -> None:
        self.fail, self.error = fail, error
        self.failed: dict[str, int] = {}
        self.written: list[tuple[str, int]] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.in_flight = self.most = 0

    async def send(self, key: str, value: int) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.hold.wait()
            await asyncio.sleep(0.001)
            if self.failed.get(key, 0) < self.fail:
                self.failed[key] = self.failed.get(key, 0) + 1
                raise self.error or ServerError(503, "ServiceUnavailable", "busy")
            self.written.append((key, value))
        finally:
            self.in_flight -= 1


async def test_workers_write_everything_bounded_and_drain_on_stop() -> None:
    """200 decisions: all written, several at once, never more than the slots; drain waits for
    them; outcomes are reported."""
    server = _Server()
    outcomes: list[Outcome] = []
    writer: StatusWriter[str, int] = StatusWriter(
        server.send, slots=8, on_outcome=lambda _k, _v, o: outcomes.append(o)
    )
    writer.start()
    for i in range(200):
        writer.submit(f"pg-{i}", i)
    await writer.drain(grace=5)
    assert sorted(server.written) == sorted((f"pg-{i}", i) for i in range(200))
    assert 1 < server.most <= 8
    assert outcomes == [Outcome.WRITTEN] * 200


async def test_a_transient_failure_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A write refused twice with 503 lands on its third try, with the latest decision."""
    monkeypatch.setattr(status_queue, "FIRST_BACKOFF", 0.01)
    server = _Server(fail=2)
    writer: StatusWriter[str, int] = StatusWriter(server.send, slots=2)
    writer.start()
    writer.submit("pg", 1)
    await asyncio.sleep(0.005)
    writer.submit("pg", 2)  # decided while the first try fails
    await writer.drain(grace=5)
    assert server.written == [("pg", 2)]
    assert server.failed == {"pg": 2}


async def test_a_fenced_write_stops_the_writer_and_is_kept_for_the_loop() -> None:
    """The Lease may have passed: nothing more is sent, the loop is told, and
    ``raise_if_fenced`` raises the FencedError."""
    fenced = FencedError("PATCH", "/apis/x", 1.0)
    server = _Server(fail=1, error=fenced)
    told: list[bool] = []
    writer: StatusWriter[str, int] = StatusWriter(
        server.send, slots=1, on_fenced=lambda: told.append(True)
    )
    writer.start()
    writer.submit("a", 1)
    writer.submit("b", 1)
    for _ in range(100):
        if told:
            break
        await asyncio.sleep(0.005)
    assert told == [True]
    with pytest.raises(FencedError):
        writer.raise_if_fenced()
    assert not writer.submit("c", 1)
    await writer.drain(grace=1)
    assert server.written == []


async def test_stop_drops_what_waits_and_cancels_what_flies() -> None:
    """Leadership lost: the writes in flight are abandoned and nothing waiting is sent."""
    server = _Server()
    server.hold.clear()
    writer: StatusWriter[str, int] = StatusWriter(server.send, slots=1)
    writer.start()
    writer.submit("a", 1)
    writer.submit("b", 1)
    await asyncio.sleep(0.01)
    assert server.in_flight == 1
    await writer.close()
    server.hold.set()
    await asyncio.sleep(0.01)
    assert server.written == []
    assert writer.pending.stopped
