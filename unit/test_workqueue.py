"""Tests of informers.workqueue and informers.metrics.

Rate-limit arithmetic runs on a fake clock; delayed adds use real loop timers with delays of a few
tens of milliseconds (looptime is not installed), so the whole file stays well under a second.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from informers.metrics import InformerMetrics, WorkQueueMetrics
from informers.workqueue import (
    ItemExponentialBackoff,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)

# asyncio may fire a timer up to its clock resolution early; allow a little slack.
SLACK = 0.005


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def elapsed_since(start: float) -> float:
    return asyncio.get_running_loop().time() - start


async def get_soon(queue: WorkQueue) -> str:
    async with asyncio.timeout(1.0):
        return await queue.get()


# --- the queue proper -------------------------------------------------------------------------


async def test_add_deduplicates_waiting_keys() -> None:
    """A key added several times before being taken is queued once, in first-add order."""
    q = WorkQueue("t")
    for key in ("a", "b", "a", "a", "b", "c"):
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


async def test_key_added_during_processing_is_requeued_on_done() -> None:
    """A key re-added while processed is not handed out until done, and then exactly once."""
    q = WorkQueue("t")
    q.add("a")
    key = await q.get()
    q.add("a")
    q.add("a")
    assert len(q) == 0
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not waiter.done()

    q.done(key)
    assert await asyncio.wait_for(waiter, 1) == "a"
    assert len(q) == 0


async def test_done_without_get_is_ignored() -> None:
    """done on a key that is not being processed changes nothing."""
    q = WorkQueue("t")
    q.done("never-seen")
    q.add("a")
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"


async def test_get_waits_for_add() -> None:
    """A waiting get is woken by an add."""
    q = WorkQueue("t")
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add("a")
    assert await asyncio.wait_for(waiter, 1) == "a"


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    """A getter cancelled after being woken does not strand the key: another getter gets it."""
    q = WorkQueue("t")
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it can take the key
    assert await asyncio.wait_for(second, 1) == "a"
    assert first.cancelled()


async def test_many_workers_never_process_one_key_concurrently() -> None:
    """With 8 workers and 3 hot keys, no key is ever in two workers at once and the last add of
    every key is processed."""
    q = WorkQueue("t")
    active: set[str] = set()
    overlaps: list[str] = []
    adds: dict[str, int] = {}
    seen: dict[str, int] = {}  # adds of the key that had happened when it was last taken
    processed = 0
    idle = asyncio.Event()  # set by the worker that finds nothing left to do

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            if key in active:
                overlaps.append(key)
            active.add(key)
            seen[key] = adds[key]
            for _ in range(3):  # let the producer re-add the key while it is processed
                await asyncio.sleep(0)
            active.discard(key)
            processed += 1
            q.done(key)
            if not len(q) and not active:
                idle.set()

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for i in range(300):
        key = f"k{i % 3}"
        adds[key] = adds.get(key, 0) + 1
        idle.clear()
        q.add(key)
        if i % 2:
            await asyncio.sleep(0)
    await asyncio.wait_for(idle.wait(), 1)
    q.shutdown()
    await asyncio.wait_for(asyncio.gather(*workers), 1)

    assert overlaps == []
    assert seen == adds
    assert processed < 300  # adds were coalesced


async def test_add_after_fires_in_deadline_order() -> None:
    """Delayed keys appear only after their delay, earliest deadline first."""
    q = WorkQueue("t")
    start = asyncio.get_running_loop().time()
    q.add_after("b", 0.03)
    q.add_after("a", 0.01)
    assert len(q) == 0
    assert await get_soon(q) == "a"
    assert elapsed_since(start) >= 0.01 - SLACK
    assert await get_soon(q) == "b"
    assert elapsed_since(start) >= 0.03 - SLACK


async def test_add_after_earlier_deadline_wins() -> None:
    """A second add_after with an earlier deadline replaces the pending one, which never fires."""
    q = WorkQueue("t")
    start = asyncio.get_running_loop().time()
    q.add_after("a", 0.04)
    q.add_after("a", 0.01)
    assert await get_soon(q) == "a"
    assert elapsed_since(start) < 0.04
    q.done("a")
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), 0.06)


async def test_add_after_later_deadline_is_ignored() -> None:
    """A second add_after with a later deadline does not postpone the pending one."""
    q = WorkQueue("t")
    q.add_after("a", 0.01)
    q.add_after("a", 30)
    assert await get_soon(q) == "a"


async def test_add_after_without_delay_adds_now() -> None:
    """add_after with a zero or negative delay is a plain add."""
    q = WorkQueue("t")
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2


async def test_add_rate_limited_waits_for_the_backoff() -> None:
    """add_rate_limited delays by the limiter's delay and counts requeues until forget."""
    q = WorkQueue("t", rate_limiter=ItemExponentialBackoff(base_delay=0.02))
    start = asyncio.get_running_loop().time()
    q.add_rate_limited("a")
    assert len(q) == 0
    assert await get_soon(q) == "a"
    assert elapsed_since(start) >= 0.02 - SLACK
    q.done("a")
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 2
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.shutdown()


async def test_shutdown_wakes_getters_and_rejects_work() -> None:
    """shutdown makes waiting and later gets raise ShutDown, drops queued keys, ignores adds."""
    q = WorkQueue("t")
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    q.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), 1)
    assert [type(r) for r in results] == [ShutDown] * 3

    q.add("a")
    q.add_after("b", 0.001)
    q.add_rate_limited("c")
    assert len(q) == 0
    assert q.num_requeues("c") == 0
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_drops_queued_and_delayed_keys() -> None:
    """Keys queued or delayed at shutdown are never handed out."""
    q = WorkQueue("t")
    q.add("a")
    q.add_after("b", 0.005)
    q.shutdown()
    await asyncio.sleep(0.02)
    assert len(q) == 0
    with pytest.raises(ShutDown):
        await q.get()


async def test_drain_waits_for_in_flight_keys() -> None:
    """shutdown_with_drain returns True once every in-flight key is done, not before."""
    q = WorkQueue("t")
    q.add("a")
    q.add("b")
    a, b = await q.get(), await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain(1.0))
    await asyncio.sleep(0.01)
    q.done(a)
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.done(b)
    assert await asyncio.wait_for(drain, 1) is True


async def test_drain_gives_up_after_timeout() -> None:
    """shutdown_with_drain returns False when an in-flight key outlives the timeout."""
    q = WorkQueue("t")
    q.add("a")
    await q.get()
    start = asyncio.get_running_loop().time()
    assert await q.shutdown_with_drain(0.02) is False
    assert elapsed_since(start) >= 0.02 - SLACK


async def test_drain_of_idle_queue_is_immediate() -> None:
    """shutdown_with_drain with nothing in flight returns True at once."""
    q = WorkQueue("t")
    q.add("queued-but-not-taken")
    assert await asyncio.wait_for(q.shutdown_with_drain(None), 0.1) is True


# --- rate limiters --------------------------------------------------------------------------


def test_item_backoff_grows_per_key_and_caps() -> None:
    """Per-key delays double from 5 ms, cap at 1000 s, and other keys start fresh."""
    backoff = ItemExponentialBackoff()
    delays = [backoff.when("a") for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0, 1000.0]
    assert backoff.when("b") == 0.005
    assert backoff.num_requeues("a") == 20


def test_item_backoff_forget_resets() -> None:
    """forget makes the next failure of a key start again at the base delay."""
    backoff = ItemExponentialBackoff(base_delay=1.0, max_delay=60.0)
    for _ in range(5):
        backoff.when("a")
    backoff.forget("a")
    assert backoff.num_requeues("a") == 0
    assert backoff.when("a") == 1.0


def test_default_limiter_is_max_of_backoff_and_bucket() -> None:
    """The default limiter waits for the longer of per-key backoff and the overall bucket."""
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    delays = [limiter.when(f"k{i}") for i in range(101)]
    assert delays[:100] == [0.005] * 100  # bucket has tokens: backoff decides
    assert delays[100] == pytest.approx(0.1)  # bucket empty: it decides

    clock.now += 100.0  # refill
    assert [limiter.when("x") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    assert limiter.num_requeues("x") == 3
    limiter.forget("x")
    assert limiter.num_requeues("x") == 0


# --- metrics --------------------------------------------------------------------------------


async def test_workqueue_metrics_follow_the_queue() -> None:
    """Adds, depth, queue and work durations, in-flight gauges and retries track queue activity."""
    registry = CollectorRegistry()
    clock = FakeClock()
    q = WorkQueue("jobs", metrics=WorkQueueMetrics(registry), clock=clock)

    def sample(metric: str) -> float | None:
        return registry.get_sample_value(f"caldera_workqueue_{metric}", {"name": "jobs"})

    q.add("a")
    q.add("a")
    q.add("b")
    assert sample("adds_total") == 2
    assert sample("depth") == 2

    clock.now += 1.5
    a = await q.get()
    assert sample("depth") == 1
    assert sample("queue_duration_seconds_count") == 1
    assert sample("queue_duration_seconds_sum") == pytest.approx(1.5)

    clock.now += 2.0
    assert sample("unfinished_work_seconds") == pytest.approx(2.0)
    assert sample("longest_running_processor_seconds") == pytest.approx(2.0)
    b = await q.get()
    clock.now += 1.0
    assert sample("unfinished_work_seconds") == pytest.approx(3.0 + 1.0)
    assert sample("longest_running_processor_seconds") == pytest.approx(3.0)

    q.add("a")  # dirty while processing: counts in depth, not in len()
    assert (sample("depth"), len(q)) == (1, 0)
    q.done(a)
    q.done(b)
    assert sample("work_duration_seconds_count") == 2
    assert sample("work_duration_seconds_sum") == pytest.approx(3.0 + 1.0)
    assert sample("unfinished_work_seconds") == 0
    assert sample("longest_running_processor_seconds") == 0

    q.add_rate_limited("c")
    q.add_after("d", 0)
    assert sample("retries_total") == 2
    q.shutdown()
    assert sample("depth") == 0


def test_metric_families_need_their_own_registry() -> None:
    """Metrics register only in the registry given, so two sets cannot share one registry."""
    registry = CollectorRegistry()
    WorkQueueMetrics(registry)
    WorkQueueMetrics(CollectorRegistry())
    with pytest.raises(ValueError, match="Duplicated"):
        WorkQueueMetrics(registry)


def test_informer_metrics_names_and_labels() -> None:
    """The informer metrics are exposed under the caldera_informer_* names with their labels."""
    registry = CollectorRegistry()
    metrics = InformerMetrics(registry)
    metrics.events.labels(resource="pods", type="ADDED").inc()
    metrics.watch_restarts.labels(resource="pods").inc()
    metrics.relists.labels(resource="pods").inc(2)
    metrics.objects.labels(resource="pods").set(7)
    pods = {"resource": "pods"}
    assert (
        registry.get_sample_value("caldera_informer_events_total", {**pods, "type": "ADDED"}) == 1
    )
    assert registry.get_sample_value("caldera_informer_watch_restarts_total", pods) == 1
    assert registry.get_sample_value("caldera_informer_relists_total", pods) == 2
    assert registry.get_sample_value("caldera_informer_objects", pods) == 7
