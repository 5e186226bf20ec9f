"""The usage plugin's node load: Volcano's ``metrics:`` section checked at load, Prometheus
answers read (bad ones refused, odd series skipped), and the poller against a small real
Prometheus-compatible endpoint (its load reaches ``latest``; a broken endpoint never crashes it
and leaves the last load to go stale)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from scheduler.conf import ConfError, parse_conf
from scheduler.node_load import (
    CPU_QUERY,
    MEMORY_QUERY,
    MIN_INTERVAL,
    MetricsSource,
    metrics_source,
    node_usage,
    vector_values,
)
from scheduler.node_load_poller import NodeLoadPoller
from scheduler.process import _load_source
from scheduler.registry import REGISTRY


def vector(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"instance": name}, "value": [1700000000.0, str(value)]}
                for name, value in values.items()
            ],
        },
    }


# ---- the configuration ---------------------------------------------------------------------------


def test_a_prometheus_source_is_read_with_its_interval_and_tls_switch() -> None:
    source = metrics_source(
        {
            "type": "prometheus",
            "address": "https://prom:9090/",
            "interval": "1m",
            "tls.insecureSkipVerify": "true",
        }
    )
    assert source == MetricsSource("https://prom:9090/", dt.timedelta(minutes=1), True)
    assert source.query_url() == "https://prom:9090/api/v1/query"
    fast = metrics_source({"type": "prometheus", "address": "http://p", "interval": "1s"})
    assert fast is not None
    assert fast.interval == MIN_INTERVAL


def test_no_type_reads_nothing() -> None:
    assert metrics_source({}) is None


@pytest.mark.parametrize(
    ("section", "named"),
    [
        pytest.param({"type": "influx"}, "metrics.type", id="type"),
        pytest.param({"type": "prometheus"}, "metrics.address", id="no-address"),
        pytest.param({"type": "prometheus", "address": "file:///x"}, "metrics.address", id="url"),
        pytest.param(
            {"type": "prometheus", "address": "http://p", "interval": "soon"},
            "metrics.interval",
            id="interval",
        ),
        pytest.param({"type": "prometheus", "adress": "http://p"}, "adress", id="typo"),
        pytest.param({"type": "prometheus", "interval": 30}, "metrics.interval", id="not-str"),
    ],
)
def test_a_bad_section_is_refused_naming_the_key(section: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        metrics_source(section)


CONF = """\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: usage}]
metrics:
  %s
"""


def test_the_configuration_keeps_the_section_and_refuses_a_bad_one_at_load() -> None:
    conf = parse_conf(
        CONF % "{type: prometheus, address: 'http://p:9090'}",
        actions=REGISTRY.actions,
        plugins=REGISTRY.plugins,
    )
    assert _load_source(conf) == MetricsSource("http://p:9090")
    with pytest.raises(ConfError, match=r"line 5: metrics\.address"):
        parse_conf(CONF % "{type: prometheus}", actions=REGISTRY.actions, plugins=REGISTRY.plugins)


def test_rescheduling_alone_polls_the_source_too() -> None:
    text = CONF.replace("{name: usage}", "{name: rescheduling}") % "{type: prometheus_adaptor}"
    conf = parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    source = _load_source(conf)
    assert source is not None
    assert source.kind == "prometheus_adaptor"


def test_nothing_is_polled_unless_usage_is_configured() -> None:
    text = CONF.replace("{name: usage}", "{name: gang}") % "{type: prometheus, address: 'http://p'}"
    conf = parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    assert conf.metrics
    assert _load_source(conf) is None


# ---- answers -------------------------------------------------------------------------------------


def test_an_answer_gives_each_instances_value() -> None:
    assert vector_values(vector({"n1": 12.5, "n2": 80})) == {"n1": 12.5, "n2": 80.0}


def test_odd_series_are_skipped() -> None:
    answer = vector({"n1": "NaN", "n2": "+Inf", "n3": "x", "n4": 1})
    answer["data"]["result"] += [
        {"metric": {}, "value": [0, "5"]},
        "junk",
        {"metric": {"instance": "n5"}},
    ]
    assert vector_values(answer) == {"n4": 1.0}


@pytest.mark.parametrize(
    "answer",
    [
        {"status": "error", "error": "bad query"},
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        {"status": "success", "data": {"resultType": "vector"}},
        [],
    ],
)
def test_a_failed_or_odd_answer_is_an_error(answer: object) -> None:
    with pytest.raises(ValueError, match=r"succeed|vector|result"):
        vector_values(answer)


def test_a_dimension_one_answer_lacks_counts_zero() -> None:
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    usage = node_usage({"a": 10.0, "b": 20.0}, {"b": 30.0, "c": 40.0}, when)
    assert {n: (u.cpu, u.memory) for n, u in usage.items()} == {
        "a": (10.0, 0.0),
        "b": (20.0, 30.0),
        "c": (0.0, 40.0),
    }
    assert all(u.measured == when for u in usage.values())


# ---- the poller against a real endpoint ----------------------------------------------------------


class Prometheus:
    """A Prometheus-compatible query API answering the two queries from ``cpu`` and ``memory``;
    ``broken`` makes it answer 500."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {"n1": 90.0, "n2": 10.0}
        self.memory: dict[str, float] = {"n1": 50.0, "n2": 20.0}
        self.broken = False
        self.asked: list[str] = []

    async def query(self, request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        self.asked.append(query)
        if self.broken:
            return web.Response(status=500, text="down")
        values = {CPU_QUERY: self.cpu, MEMORY_QUERY: self.memory}.get(query)
        if values is None:
            return web.json_response({"status": "error", "error": "unknown query"}, status=400)
        return web.json_response(vector(values))


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


async def _until(condition: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def test_the_poller_reads_the_endpoints_load(prometheus: tuple[Prometheus, str]) -> None:
    prom, address = prometheus
    poller = NodeLoadPoller()
    poller.configure(MetricsSource(address, interval=dt.timedelta(seconds=5)))
    try:
        await _until(lambda: len(poller.latest) == 2)
        loads = {n: (u.cpu, u.memory) for n, u in poller.latest.items()}
        assert loads == {"n1": (90.0, 50.0), "n2": (10.0, 20.0)}
        assert sorted(prom.asked[:2]) == sorted([CPU_QUERY, MEMORY_QUERY])
    finally:
        await poller.close()
    assert poller._task is None


async def test_a_broken_endpoint_keeps_the_last_load_and_the_poller_alive(
    prometheus: tuple[Prometheus, str],
) -> None:
    prom, address = prometheus
    prom.broken = True
    poller = NodeLoadPoller()
    source = MetricsSource(address, interval=dt.timedelta(seconds=5))
    poller.configure(source)
    try:
        await _until(lambda: len(prom.asked) >= 1)
        await asyncio.sleep(0.1)
        assert poller.latest == {}
        assert poller._task is not None
        assert not poller._task.done()
    finally:
        await poller.close()


async def test_configuring_none_stops_polling_and_forgets_the_load(
    prometheus: tuple[Prometheus, str],
) -> None:
    _, address = prometheus
    poller = NodeLoadPoller()
    poller.configure(MetricsSource(address, interval=dt.timedelta(seconds=5)))
    await _until(lambda: len(poller.latest) == 2)
    poller.configure(None)
    assert poller.latest == {}
    assert poller._task is None
    await poller.close()


async def test_an_unreachable_endpoint_times_out_without_a_crash() -> None:
    poller = NodeLoadPoller()
    poller.configure(MetricsSource("http://127.0.0.1:9", interval=dt.timedelta(seconds=5)))
    await asyncio.sleep(0.3)
    assert poller.latest == {}
    assert poller._task is not None
    assert not poller._task.done()
    await poller.close()
