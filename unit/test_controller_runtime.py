"""Tests of controllers.runtime: the reconcile outcome contract (success, transient error,
TerminalError, Result(requeue_after)), one key never reconciled twice at once, graceful shutdown,
and the reconcile metrics. A small Controller subclass runs a scripted reconcile on real workers
and a real work queue; delays are a few milliseconds (the default backoff starts at 5 ms)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import structlog
from prometheus_client import CollectorRegistry

from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import Job, Queue
from caldera.kube.fence import FencedError
from caldera.obs.metrics import ControllerMetrics
from caldera.settings import ControllersSettings
from controllers.runtime import (
    Controller,
    ControllerContext,
    Result,
    TerminalError,
    controller_key,
    enqueue_keys,
)
from informers.metrics import WorkQueueMetrics
from informers.store import HandlerFuncs
from informers.workqueue import WorkQueue

NAME = "scripted"
# asyncio may fire a timer up to its clock resolution early; allow a little slack.
SLACK = 0.003

Script = Callable[[str, int], Awaitable[Result | None]]


@dataclass
class Call:
    """One reconcile as the controller saw it when it started."""

    key: str
    attempt: int
    at: float
    requeues: int
    context: dict[str, Any] = field(default_factory=dict)


class Scripted(Controller):
    """A controller whose reconcile is a script of (key, attempt) -> outcome."""

    name = NAME

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.script: Script = done
        self.calls: list[Call] = []
        self._attempts: collections.Counter[str] = collections.Counter()

    def setup(self) -> None:
        pass

    async def reconcile(self, key: str) -> Result | None:
        attempt = self._attempts[key]
        self._attempts[key] += 1
        self.calls.append(
            Call(
                key,
                attempt,
                asyncio.get_running_loop().time(),
                self.queue.num_requeues(key),
                structlog.contextvars.get_contextvars(),
            )
        )
        return await self.script(key, attempt)

    def calls_of(self, key: str) -> list[Call]:
        return [c for c in self.calls if c.key == key]


async def done(_key: str, _attempt: int) -> Result | None:
    return None


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def controller(registry: CollectorRegistry) -> AsyncIterator[Scripted]:
    ctx = ControllerContext(
        # The runtime's own code paths never touch the API client, informers or recorder.
        client=cast(Any, None),
        informers=cast(Any, None),
        settings=ControllersSettings(),
        registry=registry,
        metrics=ControllerMetrics(registry),
        queue_metrics=WorkQueueMetrics(registry),
        recorder=cast(Any, None),
    )
    ctl = Scripted(ctx)
    ctl.setup()
    yield ctl
    await ctl.shutdown(0.2)


def reconciles(registry: CollectorRegistry, result: str) -> float:
    value = registry.get_sample_value(
        "caldera_controller_reconcile_total", {"controller": NAME, "result": result}
    )
    return value or 0.0


async def until(condition: Callable[[], bool], *, timeout: float = 1.0) -> None:  # noqa: ASYNC109
    """Poll `condition` every millisecond; fail the test after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        # Polling is the point: the conditions are plain state of the controller under test.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.001)


def worker_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(f"{NAME} worker")]


# --- the outcome contract -----------------------------------------------------------------------


async def test_success_forgets_the_failure_count(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """A reconcile that returns None after a failure resets the key's requeue count, and the key
    is not reconciled again."""

    async def fail_once(_key: str, attempt: int) -> Result | None:
        if attempt == 0:
            raise RuntimeError("transient")
        return None

    controller.script = fail_once
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    assert [c.requeues for c in controller.calls] == [0, 1]
    assert controller.queue.num_requeues("ns/a") == 0
    await asyncio.sleep(0.03)
    assert len(controller.calls) == 2


async def test_default_result_is_success(controller: Scripted, registry: CollectorRegistry) -> None:
    """Returning Result() (no requeue_after) is the same as returning None: done."""

    async def plain(_key: str, _attempt: int) -> Result | None:
        return Result()

    controller.script = plain
    controller.start(1)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    await asyncio.sleep(0.03)
    assert len(controller.calls) == 1
    assert reconciles(registry, "requeue_after") == 0


async def test_exception_requeues_with_growing_backoff(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """Each exception re-adds the key rate-limited: the requeue count grows by one per failure
    and the wait doubles from the 5 ms base (5, 10, 20, 40 ms) until the reconcile succeeds."""

    async def fail_four_times(_key: str, attempt: int) -> Result | None:
        if attempt < 4:
            raise ConnectionError(f"attempt {attempt}")
        return None

    controller.script = fail_four_times
    controller.start(3)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    calls = controller.calls
    assert [c.requeues for c in calls] == [0, 1, 2, 3, 4]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(calls)]
    for gap, backoff in zip(gaps, [0.005, 0.010, 0.020, 0.040], strict=True):
        assert gap >= backoff - SLACK
    assert reconciles(registry, "error") == 4
    assert controller.queue.num_requeues("ns/a") == 0


async def test_terminal_error_is_not_retried(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """TerminalError ends the key's retries: it is not re-added, its failure count is forgotten,
    and it is counted as a terminal error."""

    async def then_give_up(_key: str, attempt: int) -> Result | None:
        if attempt == 0:
            raise RuntimeError("transient")
        raise TerminalError("spec.tasks is empty")

    controller.script = then_give_up
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "terminal_error") == 1)
    await asyncio.sleep(0.05)  # ten times the next backoff: a retry would have happened
    assert len(controller.calls) == 2
    assert controller.queue.num_requeues("ns/a") == 0
    assert reconciles(registry, "error") == 1
    errors = registry.get_sample_value(
        "caldera_controller_reconcile_errors_total", {"controller": NAME}
    )
    assert errors == 2


async def test_a_fenced_write_stops_the_workers_instead_of_retrying(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """A write dropped by the leader's fence (caldera.kube.fence) means the Lease may have
    passed: the key is not requeued, the queue stops handing out keys, nothing spins."""

    async def fenced(_key: str, _attempt: int) -> Result | None:
        raise FencedError("POST", "/api/v1/namespaces/ns/pods", 0.5)

    controller.script = fenced
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "fenced") == 1)
    controller.queue.add("ns/b")
    await asyncio.sleep(0.05)  # ten times the first backoff: a retry would have happened
    assert len(controller.calls) == 1
    assert reconciles(registry, "error") == 0


async def test_a_terminal_key_is_reconciled_again_when_it_changes(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """TerminalError only stops retries: a later add (the object changed) reconciles again."""

    async def terminal_first(_key: str, attempt: int) -> Result | None:
        if attempt == 0:
            raise TerminalError("bad")
        return None

    controller.script = terminal_first
    controller.start(1)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "terminal_error") == 1)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    assert [c.attempt for c in controller.calls] == [0, 1]


async def test_requeue_after_re_adds_after_the_delay(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """Result(requeue_after=s) is a success (the failure count is forgotten) that looks at the
    key again no sooner than s seconds later, once."""

    async def poll(_key: str, attempt: int) -> Result | None:
        if attempt == 0:
            raise RuntimeError("transient")
        if attempt == 1:
            return Result(requeue_after=0.05)
        return None

    controller.script = poll
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    first_poll, second_poll = controller.calls[1], controller.calls[2]
    assert second_poll.at - first_poll.at >= 0.05 - SLACK
    assert second_poll.requeues == 0  # forgotten by the requeue_after outcome
    assert reconciles(registry, "requeue_after") == 1
    await asyncio.sleep(0.06)
    assert len(controller.calls) == 3


@pytest.mark.parametrize("delay", [0.0, -1.0])
async def test_zero_or_negative_requeue_after_does_not_requeue(
    controller: Scripted, registry: CollectorRegistry, delay: float
) -> None:
    """Result(requeue_after<=0) is a plain success: the key is not reconciled again."""

    async def zero(_key: str, _attempt: int) -> Result | None:
        return Result(requeue_after=delay)

    controller.script = zero
    controller.start(1)
    controller.queue.add("ns/a")
    await until(lambda: reconciles(registry, "success") == 1)
    await asyncio.sleep(0.05)
    assert len(controller.calls) == 1


async def test_requeue_after_does_not_delay_a_change(controller: Scripted) -> None:
    """A key waiting for its requeue_after is still reconciled at once when it is added."""

    async def wait_long(_key: str, attempt: int) -> Result | None:
        return Result(requeue_after=10.0) if attempt == 0 else None

    controller.script = wait_long
    controller.start(1)
    controller.queue.add("ns/a")
    await until(lambda: len(controller.calls) == 1)
    await asyncio.sleep(0.005)
    controller.queue.add("ns/a")
    await until(lambda: len(controller.calls) == 2)
    assert controller.calls[1].at - controller.calls[0].at < 1.0


# --- concurrency --------------------------------------------------------------------------------


async def test_one_key_is_never_reconciled_by_two_workers_at_once(controller: Scripted) -> None:
    """With many workers, a slow reconcile and keys re-added while they are processed, a key is
    never in two reconciles at once, while different keys do run in parallel; an add during a
    reconcile is not lost (the key's last reconcile starts after its last add)."""
    keys = ["ns/a", "ns/b", "ns/c"]
    running: collections.Counter[str] = collections.Counter()
    max_per_key: collections.Counter[str] = collections.Counter()
    max_total = 0

    async def slow(key: str, _attempt: int) -> Result | None:
        nonlocal max_total
        running[key] += 1
        max_per_key[key] = max(max_per_key[key], running[key])
        max_total = max(max_total, sum(running.values()))
        try:
            await asyncio.sleep(0.01)
        finally:
            running[key] -= 1
        return None

    controller.script = slow
    controller.start(8)
    last_add: dict[str, float] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 0.12
    while loop.time() < deadline:
        for key in keys:
            controller.queue.add(key)
            last_add[key] = loop.time()
        await asyncio.sleep(0.002)
    await until(lambda: all(last_call_of(controller, k).at > last_add[k] for k in keys))
    await until(lambda: sum(running.values()) == 0)

    assert max(max_per_key.values()) == 1
    assert max_total >= 2
    for key in keys:
        assert len(controller.calls_of(key)) >= 3


def last_call_of(controller: Scripted, key: str) -> Call:
    return controller.calls_of(key)[-1]


# --- shutdown -----------------------------------------------------------------------------------


async def test_shutdown_waits_for_reconciles_in_flight(controller: Scripted) -> None:
    """shutdown(grace) lets a reconcile in flight finish (not cancelled) and returns True;
    afterwards no worker is left and new adds are ignored."""
    finished: list[str] = []

    async def slow(key: str, _attempt: int) -> Result | None:
        await asyncio.sleep(0.05)
        finished.append(key)
        return None

    controller.script = slow
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: len(controller.calls) == 1)
    started = time.monotonic()
    assert await controller.shutdown(1.0) is True
    assert time.monotonic() - started < 0.5
    assert finished == ["ns/a"]
    assert worker_tasks() == []

    controller.queue.add("ns/b")
    await asyncio.sleep(0.02)
    assert [c.key for c in controller.calls] == ["ns/a"]


async def test_shutdown_cancels_reconciles_that_overrun_the_grace(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """A reconcile still running when the grace period ends is cancelled, shutdown returns
    False soon after the grace, and the active-workers gauge goes back to 0."""
    cancelled: list[str] = []

    async def stuck(key: str, _attempt: int) -> Result | None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(key)
            raise
        return None

    controller.script = stuck
    controller.start(2)
    controller.queue.add("ns/a")
    await until(lambda: len(controller.calls) == 1)
    started = time.monotonic()
    assert await controller.shutdown(0.05) is False
    elapsed = time.monotonic() - started
    assert 0.05 - SLACK <= elapsed < 0.5
    assert cancelled == ["ns/a"]
    assert worker_tasks() == []
    active = registry.get_sample_value("caldera_controller_active_workers", {"controller": NAME})
    assert active == 0


async def test_shutdown_of_idle_workers_is_immediate(controller: Scripted) -> None:
    """Workers waiting for keys stop at once: shutdown returns True without waiting the grace."""
    controller.start(4)
    await asyncio.sleep(0)
    assert len(worker_tasks()) == 4
    started = time.monotonic()
    assert await controller.shutdown(5.0) is True
    assert time.monotonic() - started < 0.5
    assert worker_tasks() == []


async def test_nothing_is_reconciled_before_start(controller: Scripted) -> None:
    """Keys queued before start() wait for the workers (which start after the cache synced)."""
    controller.queue.add("ns/a")
    await asyncio.sleep(0.02)
    assert controller.calls == []
    controller.start(1)
    await until(lambda: len(controller.calls) == 1)


# --- keys, context and metrics ------------------------------------------------------------------


async def test_enqueue_uses_namespace_slash_name(controller: Scripted) -> None:
    """enqueue(obj) queues "namespace/name", or just "name" for a cluster-scoped object."""
    controller.enqueue(Job(metadata=ObjectMeta(name="j", namespace="ns")))
    controller.enqueue(Queue(metadata=ObjectMeta(name="q")))
    controller.start(1)
    await until(lambda: len(controller.calls) == 2)
    assert sorted(c.key for c in controller.calls) == ["ns/j", "q"]


async def test_reconcile_runs_with_controller_key_and_reconcile_id_bound(
    controller: Scripted,
) -> None:
    """Every log line of a reconcile carries controller, key and a fresh reconcile_id (bound
    as structlog contextvars), and nothing of it leaks out of the reconcile."""

    async def fail_once(_key: str, attempt: int) -> Result | None:
        if attempt == 0:
            raise RuntimeError("again")
        return None

    controller.script = fail_once
    controller.start(1)
    controller.queue.add("ns/a")
    await until(lambda: len(controller.calls) == 2)
    first, second = (c.context for c in controller.calls)
    for context in (first, second):
        assert context["controller"] == NAME
        assert context["key"] == "ns/a"
        assert len(context["reconcile_id"]) == 12
    assert first["reconcile_id"] != second["reconcile_id"]
    assert "key" not in structlog.contextvars.get_contextvars()


async def test_reconcile_metrics_count_each_outcome(
    controller: Scripted, registry: CollectorRegistry
) -> None:
    """caldera_controller_reconcile_total{controller,result} counts success, error,
    terminal_error and requeue_after; errors and reconcile time are recorded; the queue's
    adds are counted under the controller's name."""

    async def by_key(key: str, attempt: int) -> Result | None:
        if key == "ns/error" and attempt == 0:
            raise RuntimeError("transient")
        if key == "ns/terminal":
            raise TerminalError("permanent")
        if key == "ns/later" and attempt == 0:
            return Result(requeue_after=0.01)
        return None

    controller.script = by_key
    controller.start(4)
    for key in ("ns/ok", "ns/error", "ns/terminal", "ns/later"):
        controller.queue.add(key)
    await until(lambda: reconciles(registry, "success") == 3)

    assert reconciles(registry, "success") == 3  # ok, error's retry, later's second look
    assert reconciles(registry, "error") == 1
    assert reconciles(registry, "terminal_error") == 1
    assert reconciles(registry, "requeue_after") == 1
    labels = {"controller": NAME}
    assert registry.get_sample_value("caldera_controller_reconcile_errors_total", labels) == 2
    assert registry.get_sample_value("caldera_controller_reconcile_time_seconds_count", labels) == 6
    assert registry.get_sample_value("caldera_controller_active_workers", labels) == 0
    adds = registry.get_sample_value("caldera_workqueue_adds_total", {"name": NAME})
    assert adds == 6


def _owned(name: str, kind: str, api_version: str, *, controller: bool = True) -> Job:
    ref = OwnerReference(
        api_version=api_version, kind=kind, name=name, uid="u", controller=controller
    )
    return Job(metadata=ObjectMeta(name="j", namespace="ns", owner_references=(ref,)))


def test_controller_key_names_the_controller_of_the_asked_kind() -> None:
    """Only an owner with controller: true, of that kind and apiVersion, gives a key."""
    flow = "flow.volcano.sh/v1alpha1"
    assert controller_key(_owned("pipe", "JobFlow", flow).metadata, "JobFlow", flow) == "ns/pipe"
    assert controller_key(_owned("pipe", "CronJob", flow).metadata, "JobFlow", flow) is None
    assert controller_key(_owned("pipe", "JobFlow", "v1").metadata, "JobFlow", flow) is None
    plain = _owned("pipe", "JobFlow", flow, controller=False)
    assert controller_key(plain.metadata, "JobFlow", flow) is None


async def test_enqueue_keys_queues_old_and_new_keys() -> None:
    """Adds and deletes queue the object's key; an update queues the new key, and the old one
    when it changed; an object without a key queues nothing."""
    queue = WorkQueue("keys")
    keys = {"a": "ns/one", "b": "ns/two", "c": None}
    handlers: HandlerFuncs[Job] = enqueue_keys(queue, lambda job: keys[job.metadata.name])

    def job(name: str) -> Job:
        return Job(metadata=ObjectMeta(name=name, namespace="ns"))

    async def drain() -> list[str]:
        got = []
        while len(queue):
            key = await queue.get()
            queue.done(key)
            got.append(key)
        return sorted(got)

    handlers.on_add(job("a"))
    handlers.on_delete(job("c"))
    assert await drain() == ["ns/one"]
    handlers.on_update(job("a"), job("a"))
    assert await drain() == ["ns/one"]
    handlers.on_update(job("a"), job("b"))
    assert await drain() == ["ns/one", "ns/two"]
    handlers.on_update(job("c"), job("c"))
    assert await drain() == []
