"""Volcano's two other metrics sources for the usage plugin: the configuration of each, the
Elasticsearch search built and its answer read, the custom metrics API's lists read (bad or
hostile answers skipped or refused, never a crash), and the poller against a small real
Elasticsearch-like endpoint and a fake API client (the load reaches ``latest``; a broken or
oversized answer keeps the poller alive with the last load)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import strategies as st

from scheduler.api.types import NodeUsage
from scheduler.node_load import (
    DEFAULT_HOSTNAME_FIELD,
    DEFAULT_INDEX,
    ELASTICSEARCH,
    PROMETHEUS_ADAPTOR,
    MetricsSource,
    metrics_source,
)
from scheduler.node_load_custom_metrics import (
    CPU_METRIC,
    MEMORY_METRIC,
    metric_path,
    metric_values,
)
from scheduler.node_load_custom_metrics import node_usage as custom_node_usage
from scheduler.node_load_elasticsearch import (
    CPU_FIELD,
    MAX_HOSTS,
    MEMORY_FIELD,
    host_usage,
    search_body,
    search_url,
)
from scheduler.node_load_poller import MAX_ANSWER_BYTES, NodeLoadPoller

NOW = dt.datetime(2026, 8, 1, 12, 0, tzinfo=dt.UTC)

# ---- the configuration ---------------------------------------------------------------------------


def test_an_elasticsearch_source_takes_volcanos_keys_and_defaults() -> None:
    source = metrics_source(
        {
            "type": "elasticsearch",
            "address": "https://es:9200",
            "elasticsearch.index": "nodes-*",
            "elasticsearch.hostnameFieldName": "agent.name",
            "elasticsearch.username": "elastic",
            "elasticsearch.password": "s3cret",
            "tls.insecureSkipVerify": "true",
        }
    )
    assert source == MetricsSource(
        "https://es:9200",
        insecure_skip_verify=True,
        kind=ELASTICSEARCH,
        index="nodes-*",
        hostname_field="agent.name",
        username="elastic",
        password="s3cret",
    )
    assert "s3cret" not in repr(source)  # the source is logged now and then
    plain = metrics_source({"type": "elasticsearch", "address": "http://es:9200"})
    assert plain is not None
    assert (plain.index, plain.hostname_field) == (DEFAULT_INDEX, DEFAULT_HOSTNAME_FIELD)
    # Empty keeps Volcano's default, as in Volcano.
    empty = metrics_source(
        {"type": "elasticsearch", "address": "http://es", "elasticsearch.index": ""}
    )
    assert empty is not None
    assert empty.index == DEFAULT_INDEX


def test_a_prometheus_adaptor_source_needs_no_address() -> None:
    source = metrics_source({"type": "prometheus_adaptor", "interval": "10s"})
    assert source == MetricsSource("", dt.timedelta(seconds=10), kind=PROMETHEUS_ADAPTOR)


@pytest.mark.parametrize(
    ("section", "named"),
    [
        pytest.param({"type": "elasticsearch"}, "metrics.address", id="no-address"),
        pytest.param(
            {"type": "elasticsearch", "address": "http://es", "elasticsearch.index": "a\nb"},
            "metrics.elasticsearch.index",
            id="control-character",
        ),
        pytest.param(
            {
                "type": "elasticsearch",
                "address": "http://es",
                "elasticsearch.hostnameFieldName": "x" * 300,
            },
            "metrics.elasticsearch.hostnameFieldName",
            id="too-long",
        ),
        pytest.param({"type": "influxdb"}, "prometheus_adaptor", id="unknown-type"),
    ],
)
def test_a_bad_section_is_refused_naming_the_key(section: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        metrics_source(section)


# ---- elasticsearch: the search -------------------------------------------------------------------


def test_the_search_is_volcanos_for_every_host_at_once() -> None:
    body = search_body("host.hostname")
    assert body["size"] == 0
    assert body["query"]["bool"]["must"] == [
        {"range": {"@timestamp": {"gte": "now-10m", "lt": "now"}}}
    ]
    hosts = body["aggs"]["hosts"]
    assert hosts["terms"] == {"field": "host.hostname", "size": MAX_HOSTS}
    assert hosts["aggs"] == {
        "cpu": {"avg": {"field": CPU_FIELD}},
        "mem": {"avg": {"field": MEMORY_FIELD}},
    }


def test_the_index_stays_one_path_segment() -> None:
    source = MetricsSource("http://es:9200/", kind=ELASTICSEARCH, index="metricbeat-*,logs")
    assert search_url(source) == "http://es:9200/metricbeat-*,logs/_search"
    hostile = MetricsSource("http://es:9200", kind=ELASTICSEARCH, index="../_cluster/x?y#")
    assert search_url(hostile) == "http://es:9200/..%2F_cluster%2Fx%3Fy%23/_search"


# ---- elasticsearch: the answer -------------------------------------------------------------------


def buckets(*items: Any) -> dict[str, Any]:
    return {"took": 3, "aggregations": {"hosts": {"buckets": list(items)}}}


def bucket(key: object, cpu: object, mem: object) -> dict[str, Any]:
    return {"key": key, "doc_count": 4, "cpu": {"value": cpu}, "mem": {"value": mem}}


def test_each_hosts_fractions_are_read_in_percent() -> None:
    usage = host_usage(buckets(bucket("n1", 0.35, 0.45), bucket("n2", 1, 0)), NOW)
    assert usage == {"n1": NodeUsage(35.0, 45.0, NOW), "n2": NodeUsage(100.0, 0.0, NOW)}


def test_a_null_average_counts_zero_as_in_volcano() -> None:
    assert host_usage(buckets(bucket("n1", None, 0.5)), NOW) == {"n1": NodeUsage(0.0, 50.0, NOW)}


def test_odd_buckets_are_skipped() -> None:
    answer = buckets(
        bucket("ok", 0.1, 0.2),
        bucket(7, 0.1, 0.2),
        bucket("text", "0.1", 0.2),
        bucket("bool", True, 0.2),
        bucket("inf", float("inf"), 0.2),
        bucket("huge", 10**400, 0.2),
        {"key": "no-aggs", "doc_count": 1},
        "junk",
        None,
    )
    assert set(host_usage(answer, NOW)) == {"ok"}


@pytest.mark.parametrize(
    "answer",
    [
        {"error": {"type": "index_not_found_exception"}, "status": 404},
        {"aggregations": {"cpu": {"value": 0.3}}},
        {"aggregations": {"hosts": {"buckets": {}}}},
        [],
        "x",
    ],
)
def test_an_answer_without_host_buckets_is_an_error(answer: object) -> None:
    with pytest.raises(ValueError, match=r"JSON object|buckets"):
        host_usage(answer, NOW)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.floats()
        | st.integers()
        | st.just(10**400)
        | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(["aggregations", "hosts", "buckets", "key", "cpu", "mem", "value"]),
                inner,
                max_size=4,
            )
        ),
        max_leaves=30,
    )
)
def test_any_answer_reads_as_finite_loads_or_a_value_error(answer: object) -> None:
    try:
        usage = host_usage(answer, NOW)
    except ValueError:
        return
    for load in usage.values():
        assert math.isfinite(load.cpu)
        assert math.isfinite(load.memory)


# ---- the custom metrics API ----------------------------------------------------------------------


def item(node: object, value: object, stamp: object = "2026-08-01T11:59:00Z") -> dict[str, Any]:
    return {
        "describedObject": {"kind": "Node", "name": node, "apiVersion": "/v1"},
        "metric": {"name": CPU_METRIC},
        "timestamp": stamp,
        "windowSeconds": 600,
        "value": value,
    }


def value_list(*items: Any) -> dict[str, Any]:
    return {
        "kind": "MetricValueList",
        "apiVersion": "custom.metrics.k8s.io/v1beta2",
        "items": list(items),
    }


def test_the_paths_are_the_root_scoped_node_metrics() -> None:
    assert (
        metric_path(CPU_METRIC) == "/apis/custom.metrics.k8s.io/v1beta2/nodes/*/node_cpu_usage_avg"
    )
    assert metric_path(MEMORY_METRIC).endswith("/nodes/*/node_memory_usage_avg")


def test_each_nodes_quantity_and_timestamp_are_read() -> None:
    values = metric_values(value_list(item("n1", "350m"), item("n2", "1")), NOW)
    at = dt.datetime(2026, 8, 1, 11, 59, tzinfo=dt.UTC)
    assert values == {"n1": (0.35, at), "n2": (1.0, at)}


def test_a_timestamp_ahead_of_the_poll_counts_as_the_poll() -> None:
    values = metric_values(value_list(item("n1", "500m", "2099-01-01T00:00:00Z")), NOW)
    assert values == {"n1": (0.5, NOW)}


def test_odd_items_are_skipped() -> None:
    answer = value_list(
        item("ok", "100m"),
        item("", "100m"),
        item(5, "100m"),
        item("float", 0.5),
        item("garbage", "lots"),
        item("huge", "9" * 100),
        item("no-time", "100m", None),
        item("bad-time", "100m", "yesterday"),
        {"describedObject": "n"},
        "junk",
    )
    assert set(metric_values(answer, NOW)) == {"ok"}


@pytest.mark.parametrize("answer", [{"kind": "Status", "code": 404}, {"items": {}}, [], None])
def test_an_answer_that_is_no_list_is_an_error(answer: object) -> None:
    with pytest.raises(ValueError, match="metric value list"):
        metric_values(answer, NOW)


def test_a_node_with_one_metric_counts_zero_for_the_other_dated_by_memory_first() -> None:
    early, late = NOW - dt.timedelta(minutes=2), NOW - dt.timedelta(minutes=1)
    usage = custom_node_usage(
        {"a": (0.1, early), "b": (0.2, early)}, {"b": (0.3, late), "c": (0.4, late)}
    )
    assert usage == {
        "a": NodeUsage(10.0, 0.0, early),
        "b": NodeUsage(20.0, 30.0, late),
        "c": NodeUsage(0.0, 40.0, late),
    }


# ---- the poller against a real Elasticsearch-like endpoint ---------------------------------------


class Elasticsearch:
    """Answers searches from ``cpu`` and ``memory`` (fractions by host); ``answer`` replaces the
    answer (bytes sent as they are)."""

    def __init__(self) -> None:
        self.cpu = {"n1": 0.9, "n2": 0.1}
        self.memory = {"n1": 0.5, "n2": 0.2}
        self.answer: bytes | None = None
        self.bodies: list[Any] = []
        self.paths: list[str] = []
        self.auth: list[str | None] = []

    async def search(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        self.auth.append(request.headers.get("Authorization"))
        self.bodies.append(json.loads(await request.read()))
        if self.answer is not None:
            return web.Response(body=self.answer, content_type="application/json")
        return web.json_response(
            buckets(*(bucket(n, self.cpu[n], self.memory[n]) for n in self.cpu))
        )


@pytest.fixture
async def elasticsearch() -> AsyncIterator[tuple[Elasticsearch, str]]:
    es = Elasticsearch()
    app = web.Application()
    app.router.add_post("/{index}/_search", es.search)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield es, str(server.make_url("/"))
    finally:
        await server.close()


async def _until(condition: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def _es(address: str, **kw: Any) -> MetricsSource:
    return MetricsSource(address, dt.timedelta(seconds=5), kind=ELASTICSEARCH, **kw)


async def test_the_poller_searches_once_with_basic_auth(
    elasticsearch: tuple[Elasticsearch, str],
) -> None:
    es, address = elasticsearch
    poller = NodeLoadPoller()
    poller.configure(_es(address, username="elastic", password="pw"))
    try:
        await _until(lambda: len(poller.latest) == 2)
        loads = {n: (u.cpu, u.memory) for n, u in poller.latest.items()}
        assert loads == {"n1": (90.0, 50.0), "n2": (10.0, 20.0)}
        assert es.paths == ["/metricbeat-*/_search"]
        assert es.bodies == [search_body(DEFAULT_HOSTNAME_FIELD)]
        assert es.auth == ["Basic ZWxhc3RpYzpwdw=="]  # elastic:pw
    finally:
        await poller.close()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested"),
        pytest.param(b'{"a": "' + b"x" * (MAX_ANSWER_BYTES + 1) + b'"}', id="oversized"),
        pytest.param(b'{"error": "no index"}', id="no-buckets"),
    ],
)
async def test_a_bad_answer_is_logged_and_read_no_further_without_a_hot_loop(
    elasticsearch: tuple[Elasticsearch, str],
    answer: bytes,
    capsys: pytest.CaptureFixture[str],
) -> None:
    es, address = elasticsearch
    es.answer = answer
    poller = NodeLoadPoller()
    poller.configure(_es(address))
    try:
        await _until(lambda: len(es.paths) >= 1)
        await asyncio.sleep(0.3)
        assert poller.latest == {}
        assert len(es.paths) == 1  # the next try waits for the interval
        assert poller._task is not None
        assert not poller._task.done()
    finally:
        await poller.close()
    assert "cannot read the nodes' load" in capsys.readouterr().out


# ---- the poller through a fake API client --------------------------------------------------------


class FakeClient:
    """``KubeClient.request`` answering the custom metrics API's paths from ``answers``."""

    def __init__(self, answers: Mapping[str, object]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int | None]] = []

    async def request(self, method: str, path: str, **kw: Any) -> bytes:
        self.asked.append((path, kw.get("max_bytes")))
        return json.dumps(self.answers[path]).encode()


async def test_the_poller_lists_both_metrics_through_the_api_client() -> None:
    stamp = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=30)).replace(microsecond=0)
    text = stamp.isoformat().replace("+00:00", "Z")
    client = FakeClient(
        {
            metric_path(CPU_METRIC): value_list(item("n1", "800m", text)),
            metric_path(MEMORY_METRIC): value_list(item("n1", "250m", text)),
        }
    )
    poller = NodeLoadPoller(client)  # type: ignore[arg-type]
    poller.configure(metrics_source({"type": "prometheus_adaptor"}))
    try:
        await _until(lambda: len(poller.latest) == 1)
        assert poller.latest == {"n1": NodeUsage(80.0, 25.0, stamp)}
        assert client.asked == [
            (metric_path(CPU_METRIC), MAX_ANSWER_BYTES),
            (metric_path(MEMORY_METRIC), MAX_ANSWER_BYTES),
        ]
    finally:
        await poller.close()


async def test_without_a_client_the_adaptor_reads_nothing_and_the_poller_lives() -> None:
    poller = NodeLoadPoller()
    poller.configure(metrics_source({"type": "prometheus_adaptor"}))
    await asyncio.sleep(0.1)
    assert poller.latest == {}
    assert poller._task is not None
    assert not poller._task.done()
    await poller.close()
