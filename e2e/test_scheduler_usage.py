"""The usage plugin on the real API server with kwok nodes, its load read from a small
Prometheus-compatible endpoint the test serves: pods keep off the node whose measured cpu use is
over the threshold, and follow the load when it moves to the other node."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF
from scheduler.node_load import CPU_QUERY, MEMORY_QUERY

pytestmark = pytest.mark.e2e


class Prometheus:
    """Answers the scheduler's two queries from ``cpu`` and ``memory`` (percent by node)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.memory: dict[str, float] = {}
        self.asked = 0

    async def query(self, request: web.Request) -> web.Response:
        values = {CPU_QUERY: self.cpu, MEMORY_QUERY: self.memory}.get(request.query["query"])
        if values is None:
            return web.json_response({"status": "error", "error": "unknown query"}, status=400)
        self.asked += 1
        result = [
            {"metric": {"instance": node}, "value": [0, str(value)]}
            for node, value in values.items()
        ]
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[Prometheus, str]]:
    prom = Prometheus()
    app = web.Application()
    app.router.add_get("/api/v1/query", prom.query)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield prom, str(server.make_url("/"))
    finally:
        await server.close()


async def test_pods_keep_off_the_loaded_node_and_follow_the_load(
    exp: Experiment,  # noqa: F811
    prometheus: tuple[Prometheus, str],
) -> None:
    prom, address = prometheus
    hot, cool = exp.make_nodes(2, cpu=8)
    prom.cpu, prom.memory = {hot: 95.0, cool: 5.0}, {hot: 10.0, cool: 10.0}
    conf = (
        DEFAULT_CONF
        + "  - name: usage\n"
        + f"metrics:\n  type: prometheus\n  address: {address}\n  interval: 5s\n"
    )
    scheduler = exp.scheduler(conf)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def polled(times: int) -> bool:
        return prom.asked >= times

    await eventually(lambda: polled(2), timeout=30, what="the first poll")
    await asyncio.sleep(1)  # the answer reaches the scheduler
    await exp.podgroup("a", 1)
    await exp.pods([f"a-{i}" for i in range(4)], "a")

    async def placed() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed()).items()))

    first = dict(await exp.settle(placed, 3))
    assert sorted(first.values()) == [cool] * 4

    # The load moves: after the next poll, new pods go to the node that was hot.
    prom.cpu = {hot: 5.0, cool: 95.0}
    asked = prom.asked
    await eventually(lambda: polled(asked + 2), timeout=30, what="the next poll")
    await asyncio.sleep(1)
    await exp.podgroup("b", 1)
    await exp.pods([f"b-{i}" for i in range(2)], "b")

    async def second() -> bool:
        now = await exp.placed("b-")
        return len(now) == 2

    await eventually(second, timeout=30, what="the second group placed")
    assert set((await exp.placed("b-")).values()) == {hot}
