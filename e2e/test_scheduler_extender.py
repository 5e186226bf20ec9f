"""The extender plugin (Volcano's HTTP scheduler extender) on the real API server with kwok
nodes, against small extender servers this test serves: one that filters and scores nodes,
and one that takes connections and never answers; and its HTTP transport's bounds against a
server that trickles its answer and one that refuses."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from e2e.test_scheduler_experiments import (
    Experiment,
    _by_group,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF
from scheduler.extender_http import HttpTransport
from scheduler.framework.plugin import Arguments
from scheduler.plugins.extender import ExtenderError, parse_config

pytestmark = pytest.mark.e2e


def _conf(url: str, **arguments: str) -> str:
    """Volcano's default configuration with the extender last in the last tier."""
    args = ", ".join(f"extender.{k}: {v}" for k, v in {"urlPrefix": url, **arguments}.items())
    return DEFAULT_CONF + f"  - name: extender\n    arguments: {{{args}}}\n"


@contextlib.asynccontextmanager
async def _filter_server(allowed: set[str], best: str) -> AsyncIterator[tuple[str, list[Any]]]:
    """An extender on 127.0.0.1 whose `filter` passes only the `allowed` nodes and whose
    `score` gives `best` 100 and the others 0; yields its URL prefix and the requests."""
    seen: list[Any] = []

    async def filter_(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(("filter", body))
        fits = body["node"]["Name"] in allowed
        return web.json_response({"status": "" if fits else "not this node", "code": 0})

    async def score(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(("score", body))
        scores = {n["Name"]: 100 if n["Name"] == best else 0 for n in body["nodes"]}
        return web.json_response({"nodeScore": scores, "errorMessage": ""})

    app = web.Application()
    app.add_routes([web.post("/ext/filter", filter_), web.post("/ext/score", score)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/ext", seen
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _silent_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A server that accepts every connection, reads the request and never answers; yields
    its URL prefix and a list growing by one per connection."""
    calls: list[int] = []
    release = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        calls.append(len(calls))
        writers.append(writer)
        with contextlib.suppress(ConnectionError):
            await reader.read(65536)
        await release.wait()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", calls
    finally:
        release.set()
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_the_extender_filters_and_scores_nodes(exp: Experiment) -> None:  # noqa: F811
    """Three nodes; the extender passes two and scores the second best: the gang's pods all
    run there, and the extender was sent Volcano's task and node fields."""
    nodes = exp.make_nodes(3, 4)
    async with _filter_server({nodes[0], nodes[1]}, nodes[1]) as (url, seen):
        conf = _conf(url, predicateVerb="filter", prioritizeVerb="score", httpTimeout="2s")
        scheduler = exp.scheduler(conf)
        await eventually(
            lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness"
        )
        await exp.podgroup("steer", 2)
        await exp.pods(["steer-0", "steer-1"], "steer")

        async def placed() -> dict[str, str] | None:
            found = await exp.placed("steer-")
            return found if len(found) == 2 else None

        assert set((await eventually(placed, timeout=60, what="2 pods placed")).values()) == {
            nodes[1]
        }
        filtered = [body for verb, body in seen if verb == "filter"]
        assert {b["task"]["Name"] for b in filtered} == {"steer-0", "steer-1"}
        assert {b["task"]["Namespace"] for b in filtered} == {exp.namespace}
        assert filtered[0]["task"]["Resreq"]["MilliCPU"] == 1000.0
        scored = [body for verb, body in seen if verb == "score"]
        assert scored
        assert set(nodes) <= {n["Name"] for n in scored[0]["nodes"]}  # every node of the session


async def test_an_extender_that_never_answers_costs_a_timeout_per_session(
    exp: Experiment,  # noqa: F811
) -> None:
    """An extender that takes the connection and never answers, httpTimeout 200ms. Not
    ignorable: the pods stay unplaced, the scheduler keeps running sessions (one call each,
    each given up after the timeout) and stays ready. Ignorable: the pods run as without it."""
    exp.make_nodes(1, 4)
    async with _silent_server() as (url, calls):
        strict = exp.scheduler(_conf(url, predicateVerb="filter", httpTimeout="200ms"))
        await eventually(lambda: _ready(strict), timeout=READY_TIMEOUT, what="scheduler readiness")
        await exp.podgroup("held", 1)
        await exp.pods(["held-0"], "held")

        async def several_sessions() -> bool:
            return len(calls) >= 5

        await eventually(several_sessions, timeout=30, what="calls from several sessions")
        assert await exp.placed("held-") == {}
        assert await _ready(strict)
        assert strict.proc.poll() is None
        assert strict.stop() == 0
        exp.processes.remove(strict)

        lenient = exp.scheduler(
            _conf(url, predicateVerb="filter", httpTimeout="200ms", ignorable="true")
        )
        await eventually(lambda: _ready(lenient), timeout=READY_TIMEOUT, what="scheduler readiness")

        async def runs() -> bool:
            return _by_group(await exp.placed(), ["held"]) == {"held": 1}

        await eventually(runs, timeout=60, what="the pod placed in spite of the extender")


@contextlib.asynccontextmanager
async def _trickle_server() -> AsyncIterator[str]:
    """A server that answers `200 OK` and then one header byte every 100 ms, forever."""
    tasks: list[asyncio.Task[None]] = []

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)
            writer.write(b"HTTP/1.1 200 OK\r\n")
            while True:
                writer.write(b"X")
                await writer.drain()
                await asyncio.sleep(0.1)
        except ConnectionError:
            pass
        finally:
            writer.close()

    def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.append(asyncio.ensure_future(trickle(reader, writer)))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.close()
        await server.wait_closed()


def _transport(url: str, **arguments: str) -> HttpTransport:
    raw = {"extender.urlPrefix": url, **{f"extender.{k}": v for k, v in arguments.items()}}
    return HttpTransport(parse_config(Arguments("extender", raw)))


async def test_one_call_never_outlasts_the_timeout() -> None:
    """A call to an extender that trickles its answer a byte at a time ends at httpTimeout;
    once the session's budget is spent, calls fail at once."""
    async with _trickle_server() as url:
        transport = _transport(url, httpTimeout="300ms", sessionBudget="500ms")
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(ExtenderError, match=r"no whole answer within 0\.3s"):
                await asyncio.to_thread(transport, "filter", b"{}")
            assert time.monotonic() - started < 1.5
        started = time.monotonic()
        with pytest.raises(ExtenderError, match=r"budget of 0\.5s"):
            await asyncio.to_thread(transport, "filter", b"{}")
        assert time.monotonic() - started < 0.1


async def test_a_refusal_names_the_verb_url_and_code() -> None:
    """A status other than 200 is a failure with Volcano's words."""

    async def refuse(request: web.Request) -> web.Response:
        return web.Response(status=503)

    app = web.Application()
    app.add_routes([web.post("/ext/filter", refuse)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        transport = _transport(f"http://127.0.0.1:{port}/ext/")
        with pytest.raises(ExtenderError) as info:
            await asyncio.to_thread(transport, "filter", b"{}")
        assert str(info.value) == (
            f"failed filter with extender at URL http://127.0.0.1:{port}/ext/filter, code 503"
        )
    finally:
        await runner.cleanup()
