"""The usage plugin on the real API server with kwok nodes, its load read from a small
Prometheus-compatible endpoint the test serves: pods keep off the node whose measured cpu use is
over the threshold, and follow the load when it moves to the other node. The same with Volcano's
two other sources: a small Elasticsearch-like search endpoint (the search the scheduler sends is
checked), and the custom metrics API (custom.metrics.k8s.io) served by a small HTTPS server
behind an APIService, read through the API server."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from caldera.kube.client import KubeClient
from caldera.kube.errors import Forbidden
from e2e.cluster.caldera_processes import aggregated_api_registration
from e2e.cluster.control_plane import free_port, run_kubectl
from e2e.cluster.identities import helm_binary, render_chart, write_token_kubeconfig
from e2e.cluster.pki import write_serving_pair
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF
from scheduler.node_load import CPU_QUERY, MEMORY_QUERY
from scheduler.node_load_custom_metrics import CPU_METRIC, GROUP_VERSION, MEMORY_METRIC, metric_path
from scheduler.node_load_elasticsearch import search_body

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


async def _keep_off_the_hot_node(
    exp: Experiment,  # noqa: F811
    conf: str,
    asked: Callable[[], int],
    polls: int,
    hot: str,
    cool: str,
) -> None:
    """A scheduler with ``conf`` places a group of pods on ``cool`` only, once the source has
    been asked ``polls`` times."""
    scheduler = exp.scheduler(conf)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def polled() -> bool:
        return asked() >= polls

    await eventually(polled, timeout=30, what="the first poll")
    await asyncio.sleep(1)  # the answer reaches the scheduler
    await exp.podgroup("a", 1)
    await exp.pods([f"a-{i}" for i in range(4)], "a")

    async def placed() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed()).items()))

    first = dict(await exp.settle(placed, 3))
    assert sorted(first.values()) == [cool] * 4, scheduler.log()[-3000:]


# ---- elasticsearch -------------------------------------------------------------------------------


class Elasticsearch:
    """Answers the scheduler's search from ``cpu`` and ``memory`` (fractions by host), keeping
    each search's index, body and Authorization header."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.memory: dict[str, float] = {}
        self.searches: list[tuple[str, Any, str | None]] = []

    async def search(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        self.searches.append(
            (request.match_info["index"], body, request.headers.get("Authorization"))
        )
        buckets = [
            {
                "key": host,
                "doc_count": 20,
                "cpu": {"value": self.cpu[host]},
                "mem": {"value": self.memory[host]},
            }
            for host in self.cpu
        ]
        return web.json_response(
            {"took": 2, "timed_out": False, "aggregations": {"hosts": {"buckets": buckets}}}
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


async def test_elasticsearch_pods_keep_off_the_loaded_node(
    exp: Experiment,  # noqa: F811
    elasticsearch: tuple[Elasticsearch, str],
) -> None:
    es, address = elasticsearch
    hot, cool = exp.make_nodes(2, cpu=8)
    es.cpu, es.memory = {hot: 0.95, cool: 0.05}, {hot: 0.1, cool: 0.1}
    conf = (
        DEFAULT_CONF
        + "  - name: usage\n"
        + f"metrics:\n  type: elasticsearch\n  address: {address}\n  interval: 5s\n"
        + "  elasticsearch.index: nodes-*\n  elasticsearch.hostnameFieldName: agent.name\n"
        + "  elasticsearch.username: volcano\n  elasticsearch.password: secret\n"
    )
    await _keep_off_the_hot_node(exp, conf, lambda: len(es.searches), 1, hot, cool)
    index, body, auth = es.searches[0]
    assert index == "nodes-*"
    assert body == search_body("agent.name")
    assert auth == "Basic dm9sY2FubzpzZWNyZXQ="  # volcano:secret


# ---- prometheus_adaptor: the custom metrics API --------------------------------------------------


class CustomMetrics:
    """Serves ``custom.metrics.k8s.io/v1beta2``'s two node metrics from ``cpu`` and ``memory``
    (fractions by node), dated ten seconds ago; counts the lists asked."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.memory: dict[str, float] = {}
        self.asked: list[str] = []

    async def discovery(self, request: web.Request) -> web.Response:
        resources = [
            {
                "name": f"nodes/{metric}",
                "singularName": "",
                "namespaced": False,
                "kind": "MetricValueList",
                "verbs": ["get"],
            }
            for metric in (CPU_METRIC, MEMORY_METRIC)
        ]
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": GROUP_VERSION,
                "resources": resources,
            }
        )

    async def metric(self, request: web.Request) -> web.Response:
        metric, name = request.match_info["metric"], request.match_info["name"]
        values = {CPU_METRIC: self.cpu, MEMORY_METRIC: self.memory}.get(metric)
        if values is None or name != "*":
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        self.asked.append(metric)
        stamp = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
        items = [
            {
                "describedObject": {"kind": "Node", "name": node, "apiVersion": "/v1"},
                "metric": {"name": metric},
                "timestamp": stamp,
                "windowSeconds": 600,
                "value": f"{round(value * 1000)}m",
            }
            for node, value in values.items()
        ]
        return web.json_response(
            {"kind": "MetricValueList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}
        )


@pytest.fixture
async def custom_metrics(
    exp: Experiment,  # noqa: F811
) -> AsyncIterator[CustomMetrics]:
    """The fake adapter on HTTPS behind an APIService, once the API server finds it Available."""
    served = CustomMetrics()
    service, namespace = "custom-metrics", exp.namespace
    crt, key = write_serving_pair(
        exp.plane.pki, exp.tmp / "custom-metrics", [f"{service}.{namespace}.svc"]
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(crt, key)
    app = web.Application()
    app.router.add_get(f"/apis/{GROUP_VERSION}", served.discovery)
    app.router.add_get(f"/apis/{GROUP_VERSION}/nodes/{{name}}/{{metric}}", served.metric)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    group, version = GROUP_VERSION.split("/")
    registration = aggregated_api_registration(
        port,
        exp.plane.pki.ca_crt.read_bytes(),
        group,
        version,
        namespace=namespace,
        service=service,
    )
    apiservice = registration[1]["metadata"]["name"]
    kubeconfig = exp.plane.kubeconfig
    items = {"apiVersion": "v1", "kind": "List", "items": registration}
    run_kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps(items))
    try:

        async def available() -> bool:
            text = await asyncio.to_thread(
                run_kubectl, kubeconfig, "get", "apiservice", apiservice, "-o", "json"
            )
            conditions = json.loads(text).get("status", {}).get("conditions", [])
            return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

        await eventually(available, timeout=60, what="the custom metrics APIService Available")
        yield served
    finally:
        # First: an unavailable aggregated API would hold namespace deletion back.
        run_kubectl(kubeconfig, "delete", "apiservice", apiservice, "--wait=false")
        await runner.cleanup()


async def test_prometheus_adaptor_pods_keep_off_the_loaded_node(
    exp: Experiment,  # noqa: F811
    custom_metrics: CustomMetrics,
) -> None:
    hot, cool = exp.make_nodes(2, cpu=8)
    custom_metrics.cpu = {hot: 0.95, cool: 0.05}
    custom_metrics.memory = {hot: 0.1, cool: 0.1}
    conf = (
        DEFAULT_CONF
        + "  - name: usage\n"
        + "metrics:\n  type: prometheus_adaptor\n  interval: 5s\n"
    )
    await _keep_off_the_hot_node(exp, conf, lambda: len(custom_metrics.asked), 2, hot, cool)
    assert custom_metrics.asked[:2] == [CPU_METRIC, MEMORY_METRIC]


def _scheduler_rules(tmp: Path, metrics: str) -> list[dict[str, Any]]:
    """The chart's ClusterRole rules for the scheduler with ``metrics`` as its ``metrics:``."""
    values = {"scheduler": {"conf": DEFAULT_CONF + "  - name: usage\n" + metrics}}
    path = tmp / f"values-{len(list(tmp.glob('values-*')))}.yaml"
    path.write_text(yaml.safe_dump(values))
    objects = render_chart(helm_binary(), path, release="rel", namespace="caldera-system")
    return [
        rule
        for obj in objects
        if obj["kind"] == "ClusterRole" and obj["metadata"]["name"].endswith("-scheduler")
        for rule in obj["rules"]
    ]


async def test_the_charts_role_grants_the_custom_metrics_the_scheduler_reads(
    exp: Experiment,  # noqa: F811
    custom_metrics: CustomMetrics,
) -> None:
    """The rule the chart adds for prometheus_adaptor (and only for it), applied to a
    ServiceAccount of its own, lets the scheduler's two reads through the real authorizer."""
    rules = _scheduler_rules(exp.tmp, "metrics:\n  type: 'prometheus_adaptor'\n")
    extra = [r for r in rules if "custom.metrics.k8s.io" in r["apiGroups"]]
    assert extra, rules
    assert not [
        r
        for r in _scheduler_rules(exp.tmp, "metrics:\n  type: prometheus\n  address: http://p\n")
        if "custom.metrics.k8s.io" in r["apiGroups"]
    ]
    account, name = "metrics-reader", f"{exp.namespace}-metrics-reader"
    kubeconfig = exp.plane.kubeconfig
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": exp.namespace}],
    }
    objects = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": exp.namespace},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": extra,
        },
    ]
    apply = {"apiVersion": "v1", "kind": "List", "items": objects}
    run_kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps(apply))
    try:
        token = run_kubectl(
            kubeconfig, "-n", exp.namespace, "create", "token", account, "--duration=10m"
        ).strip()
        reader = write_token_kubeconfig(
            kubeconfig, exp.tmp / "reader.kubeconfig", user=account, token=token
        )
        async with KubeClient.from_kubeconfig(reader) as client:
            with pytest.raises(Forbidden):  # not bound yet
                await client.request("GET", metric_path(CPU_METRIC))
            run_kubectl(kubeconfig, "apply", "-f", "-", input=json.dumps(binding))

            async def allowed() -> bool:
                try:
                    for metric in (CPU_METRIC, MEMORY_METRIC):
                        await client.request("GET", metric_path(metric))
                except Forbidden:
                    return False
                return True

            await eventually(allowed, timeout=30, what="the bound rule allowing both reads")
    finally:
        for kind in ("clusterrolebinding", "clusterrole"):
            run_kubectl(kubeconfig, "delete", kind, name, "--ignore-not-found")
