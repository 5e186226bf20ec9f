"""The reservation plugin on the real API server with kwok nodes: a large gang that waits
behind a steady stream of small jobs starts with it and starves without it; a scheduler
restarted while a reservation is held keeps it (its PodGroup annotation) and the gang starts.

Two 4-cpu nodes; the gang is two 4-cpu pods, so it needs both nodes empty at once. Small
jobs (1 cpu, running a few seconds through kwok) arrive faster than the nodes finish them:
whenever a cpu frees up, a small job takes it, unless a reservation holds it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from caldera.api.kinds import POD, PODGROUP, QUEUE
from caldera.api.reservation import RESERVATION_ANNOTATION, decode_reservation
from caldera.api.why import WHY_ANNOTATION
from e2e.test_scheduler_experiments import (
    EXIT_CODE,
    RUN_FOR,
    Experiment,
    _by_group,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

TIERS = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
{reservation}
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
WITH = TIERS.format(
    reservation="  - name: reservation\n    arguments: {wait: 3s, min-wait: 1s, min-remaining: 1s}"
)
# A gang reserves at once: its first wait record (written again at most every 30 s) tells it.
AT_ONCE = TIERS.format(
    reservation="  - name: reservation\n    arguments: {wait: 0s, min-wait: 0s, min-remaining: 1s}"
)
WITHOUT = TIERS.format(reservation="")


async def cluster_of(exp: Experiment) -> str:  # noqa: F811
    """Two 4-cpu nodes and a queue of the test's own (the default queue holds other tests'
    jobs, which could come first in its order); the queue's name."""
    exp.make_nodes(2, 4)
    return await exp.make_queue("q")


async def small_job(exp: Experiment, name: str, run_for: str, queue: str) -> None:  # noqa: F811
    """A PodGroup of one 1-cpu pod that kwok runs for ``run_for``."""
    await exp.podgroup(name, 1, queue=queue)
    body = exp.pod_body(f"{name}-0", name)
    body["metadata"]["annotations"].update({RUN_FOR: run_for, EXIT_CODE: "0"})
    await exp.kube.create(POD, body, namespace=exp.namespace)


@contextlib.asynccontextmanager
async def stream(
    exp: Experiment,  # noqa: F811
    queue: str,
    *,
    every: float,
    run_for: str,
    prefix: str = "small",
) -> AsyncIterator[list[int]]:
    """Small jobs arriving every ``every`` seconds while the block runs; yields the count so
    far (one element)."""
    count = [0]

    async def arrive() -> None:
        while True:
            await small_job(exp, f"{prefix}-{count[0]}", run_for, queue)
            count[0] += 1
            await asyncio.sleep(every)

    task = asyncio.create_task(arrive())
    try:
        yield count
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def big_gang(exp: Experiment, queue: str, *, pods_first: bool = False) -> None:  # noqa: F811
    """The gang's PodGroup and its two 4-cpu pods; with ``pods_first`` the pods come first,
    so that no session sees the PodGroup without them (its first wait record then already
    tells the reservation; a record is written again at most every 30 s)."""
    if not pods_first:
        await exp.podgroup("big", 2, queue=queue)
    await exp.pods(["big-0", "big-1"], "big", cpu="4")
    if pods_first:
        await exp.podgroup("big", 2, queue=queue)


async def reservation(exp: Experiment) -> str | None:  # noqa: F811
    """The big gang's reservation record when it holds two nodes."""
    pg = await exp.kube.get(PODGROUP, "big", namespace=exp.namespace)
    text = pg.metadata.annotations.get(RESERVATION_ANNOTATION)
    found = decode_reservation(text)
    return text if found is not None and len(found.nodes) == 2 else None


async def big_placed(exp: Experiment) -> bool:  # noqa: F811
    return _by_group(await exp.placed(), ["big"]) == {"big": 2}


async def busy(exp: Experiment) -> bool:  # noqa: F811
    """Both nodes have small jobs on them."""
    nodes = {node for name, node in (await exp.placed()).items() if name.startswith("small-")}
    return len(nodes) == 2


async def test_a_large_gang_starves_behind_small_jobs_without_reservation(
    exp: Experiment,  # noqa: F811
) -> None:
    """Volcano's behaviour, the control: with the stream running, the gang waits 30 s and
    more while small jobs keep taking every cpu that frees up."""
    queue = await cluster_of(exp)
    scheduler = exp.scheduler(WITHOUT)
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    async with stream(exp, queue, every=0.4, run_for="4s") as count:
        await eventually(lambda: busy(exp), timeout=30, what="small jobs on both nodes")
        await big_gang(exp, queue)
        for _ in range(60):
            await asyncio.sleep(0.5)
            assert not await big_placed(exp), "the gang started without a reservation"
        assert count[0] > 50


async def test_a_large_gang_starts_under_a_stream_of_small_jobs_with_reservation(
    exp: Experiment,  # noqa: F811
) -> None:
    """With the reservation plugin, the gang waits its 3 s, reserves both nodes, holds each
    cpu as it frees up, and starts while small jobs are still arriving; its reservation
    record goes once the gang runs."""
    queue = await cluster_of(exp)
    scheduler = exp.scheduler(WITH)
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    async with stream(exp, queue, every=0.4, run_for="4s") as count:
        await eventually(lambda: busy(exp), timeout=30, what="small jobs on both nodes")
        await big_gang(exp, queue)
        arrived = count[0]
        await eventually(lambda: reservation(exp), timeout=30, what="the reservation record")
        await eventually(lambda: big_placed(exp), timeout=40, what="the gang started")
        assert count[0] > arrived  # small jobs kept arriving meanwhile

        async def released() -> bool:
            pg = await exp.kube.get(PODGROUP, "big", namespace=exp.namespace)
            return RESERVATION_ANNOTATION not in pg.metadata.annotations

        await eventually(released, timeout=20, what="the reservation record removed")


async def test_a_restarted_scheduler_keeps_the_reservation(
    exp: Experiment,  # noqa: F811
) -> None:
    """The reservation is held while the nodes' pods run 25 s (`caldera job why`'s record
    tells it); the scheduler stops and a new one starts: the PodGroup's record is the same
    (nodes, since, expiry), the small jobs that came meanwhile get no held cpu, and the gang
    starts when the long pods end."""
    queue = await cluster_of(exp)
    scheduler = exp.scheduler(AT_ONCE)
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    for i in range(6):
        await small_job(exp, f"long-{i}", "25s", queue)

    async def six_running() -> bool:
        return _by_group(await exp.placed(), ["long"]) == {"long": 6}

    await eventually(six_running, timeout=30, what="six long pods placed")
    await big_gang(exp, queue, pods_first=True)

    before = await eventually(lambda: reservation(exp), timeout=30, what="the reservation")

    seen: list[str] = []

    async def told() -> str | None:
        pg = await exp.kube.get(PODGROUP, "big", namespace=exp.namespace)
        text = pg.metadata.annotations.get(WHY_ANNOTATION, "")
        seen.append(text)
        return text if "reserved 2 nodes" in text else None

    try:
        why = json.loads(await eventually(told, timeout=15, what="the why record's reservation"))
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the record: {seen[-1:]}") from None
    line = next(d for d in why["details"] if "reserved 2 nodes" in d)
    assert "2 of 8 cpu held; expected start in" in line
    assert scheduler.stop() == 0
    restarted = exp.scheduler(AT_ONCE)
    await eventually(lambda: _ready(restarted), timeout=30, what="the new scheduler's readiness")
    async with stream(exp, queue, every=1.0, run_for="3s", prefix="late"):
        await asyncio.sleep(5)
        assert await reservation(exp) == before
        assert _by_group(await exp.placed(), ["late"]) == {"late": 0}
        assert not await big_placed(exp)
        await eventually(lambda: big_placed(exp), timeout=60, what="the gang started")


PREEMPT = """\
actions: "enqueue, allocate, backfill, reservation-preempt"
configurations:
- name: reservation-preempt
  arguments: {after: 3s}
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: reservation
    arguments: {wait: 0s, min-wait: 0s}
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def test_reservation_preempt_takes_back_a_queue_s_reclaimable_pods(
    exp: Experiment,  # noqa: F811
) -> None:
    """Queue 'a' fills both nodes with eight 1-cpu pods that run until deleted, then its
    capability is cut to 4 cpu (its deserved share with it: the shared cluster has room
    elsewhere); queue 'b''s gang of two 2-cpu pods reserves, and after 3 s
    reservation-preempt takes back what queue 'a' holds beyond its share: four pods are
    evicted, the other four keep running, and the gang runs."""
    exp.make_nodes(2, 4)
    a = await exp.make_queue("a")
    b = await exp.make_queue("b")
    for i in range(8):
        await exp.podgroup(f"a{i}", 1, queue=a)
        await exp.kube.create(POD, exp.pod_body(f"a{i}-0", f"a{i}"), namespace=exp.namespace)
    scheduler = exp.scheduler(PREEMPT)
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")

    async def full() -> bool:
        return sum(1 for n in await exp.placed() if n.startswith("a")) == 8

    await eventually(full, timeout=30, what="queue a's eight pods placed")
    await exp.kube.patch(QUEUE, a, {"spec": {"capability": {"cpu": "4"}}})
    await exp.pods(["big-0", "big-1"], "big", cpu="2")
    await exp.podgroup("big", 2, queue=b)
    await eventually(lambda: big_placed(exp), timeout=60, what="the gang placed after evictions")
    assert sum(1 for n in await exp.placed() if n.startswith("a")) == 4
