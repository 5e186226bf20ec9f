"""Tests of caldera.obs: the probe and metrics endpoints, the structlog configuration, the
per-process registry and the controller metrics."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, Counter, generate_latest

from caldera import __version__
from caldera.obs.logging import configure_logging
from caldera.obs.metrics import ControllerMetrics, new_registry
from caldera.obs.server import HealthServer

# --- HealthServer -------------------------------------------------------------------------------


@pytest.fixture
def registry() -> CollectorRegistry:
    return new_registry()


@pytest.fixture
def health(registry: CollectorRegistry) -> HealthServer:
    return HealthServer(registry, host="127.0.0.1", port=0)


@pytest.fixture
async def http(health: HealthServer) -> AsyncIterator[TestClient[Any, Any]]:
    async with TestClient(TestServer(health.app(), host="127.0.0.1")) as client:
        yield client


@pytest.mark.parametrize("path", ["/healthz", "/livez"])
async def test_liveness_answers_ok(http: TestClient[Any, Any], path: str) -> None:
    """/healthz (and its alias /livez) answer 200 "ok" while the loop runs."""
    response = await http.get(path)
    assert response.status == 200
    assert await response.text() == "ok"


async def test_ready_without_checks(http: TestClient[Any, Any]) -> None:
    """With no readiness check registered, /readyz is 200."""
    response = await http.get("/readyz")
    assert response.status == 200
    assert await response.text() == "ok"


async def test_readyz_lists_failing_checks_until_they_pass(
    health: HealthServer, http: TestClient[Any, Any]
) -> None:
    """/readyz is 503 naming exactly the failing checks (evaluated on every request), and 200
    once all of them pass; /healthz stays 200 throughout."""
    state = {"informers-synced": False, "leader": False, "webhook-certs": True}
    for name in state:
        health.add_readiness_check(name, lambda name=name: state[name])  # type: ignore[misc]

    response = await http.get("/readyz")
    assert response.status == 503
    body = await response.text()
    assert body == "not ready: informers-synced, leader\n"
    assert health.failing_checks() == ["informers-synced", "leader"]
    assert (await http.get("/healthz")).status == 200

    state["informers-synced"] = True
    response = await http.get("/readyz")
    assert response.status == 503
    assert await response.text() == "not ready: leader\n"

    state["leader"] = True
    response = await http.get("/readyz")
    assert response.status == 200
    assert await response.text() == "ok"
    assert health.failing_checks() == []


async def test_a_readiness_check_that_raises_counts_as_failing(
    health: HealthServer, http: TestClient[Any, Any]
) -> None:
    """A check that raises makes /readyz 503 naming it, not a 500."""

    def broken() -> bool:
        raise RuntimeError("cache gone")

    health.add_readiness_check("broken", broken)
    response = await http.get("/readyz")
    assert response.status == 503
    assert await response.text() == "not ready: broken\n"


async def test_readiness_check_registered_again_replaces_the_old_one(
    health: HealthServer, http: TestClient[Any, Any]
) -> None:
    """Checks are keyed by name: adding one with the same name replaces it."""
    health.add_readiness_check("synced", lambda: False)
    assert (await http.get("/readyz")).status == 503
    health.add_readiness_check("synced", lambda: True)
    assert (await http.get("/readyz")).status == 200


async def test_metrics_exposes_registered_metrics_and_build_info(
    registry: CollectorRegistry, http: TestClient[Any, Any]
) -> None:
    """/metrics serves the process registry in Prometheus text format: a metric a component
    registered (with its current value) and caldera_build_info{version}."""
    things = Counter("caldera_test_things", "Things counted by the test", registry=registry)
    things.inc(3)
    response = await http.get("/metrics")
    assert response.status == 200
    # Without an Accept header prometheus_client picks the classic text format 0.0.4.
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    body = await response.text()
    assert "caldera_test_things_total 3.0" in body.splitlines()
    assert f'caldera_build_info{{version="{__version__}"}} 1.0' in body.splitlines()
    assert "# TYPE caldera_test_things_total counter" in body

    things.inc()
    assert "caldera_test_things_total 4.0" in (await (await http.get("/metrics")).text())


async def test_metrics_negotiates_openmetrics(http: TestClient[Any, Any]) -> None:
    """A scraper asking for OpenMetrics gets that format (it ends with "# EOF")."""
    response = await http.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    body = await response.text()
    assert body.endswith("# EOF\n")
    assert "caldera_build_info" in body


async def test_metrics_serves_only_its_own_registry(http: TestClient[Any, Any]) -> None:
    """A metric in another registry (another process's, or a test's) does not leak in."""
    Counter("caldera_elsewhere", "Not ours", registry=CollectorRegistry()).inc()
    assert "caldera_elsewhere" not in await (await http.get("/metrics")).text()


async def test_unknown_path_is_404(http: TestClient[Any, Any]) -> None:
    """Paths other than the probes and /metrics are 404."""
    assert (await http.get("/nope")).status == 404


async def test_start_on_port_zero_serves_and_stop_closes(registry: CollectorRegistry) -> None:
    """start() binds the requested address; with port 0 it returns the port chosen by the
    kernel, which then serves the endpoints until stop() closes it (stop is idempotent)."""
    server = HealthServer(registry, host="127.0.0.1", port=0)
    port = await server.start()
    try:
        assert port > 0
        assert server.port == port
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
            async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                assert "caldera_build_info" in await response.text()
    finally:
        await server.stop()
    await server.stop()
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with session.get(f"http://127.0.0.1:{port}/healthz"):
                pass


# --- configure_logging --------------------------------------------------------------------------


# structlog and the root logger are put back after every test by the root conftest.py.


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_component_level_event_timestamp() -> None:
    """In JSON format every line is one JSON object with the component, the level, the event,
    an ISO 8601 UTC timestamp and the key-value pairs logged."""
    out = io.StringIO()
    configure_logging(component="controllers", level="info", fmt="json", stream=out)
    structlog.get_logger().info("started", workers=5)
    [line] = lines(out)
    assert line["component"] == "controllers"
    assert line["level"] == "info"
    assert line["event"] == "started"
    assert line["workers"] == 5
    assert line["timestamp"].endswith("Z")
    assert line["timestamp"][:4].isdigit()
    assert line["timestamp"][10] == "T"


def test_bound_contextvars_are_on_every_line_inside_the_block() -> None:
    """Values bound with bound_contextvars (controller, key, reconcile_id) appear on every line
    logged inside the block, and no longer after it; the component stays."""
    out = io.StringIO()
    configure_logging(component="controllers", fmt="json", stream=out)
    log = structlog.get_logger("controller")
    with structlog.contextvars.bound_contextvars(
        controller="job", key="ns/j", reconcile_id="abc123"
    ):
        log.info("creating pods")
        log.warning("quota low")
    log.info("idle")
    first, second, third = lines(out)
    for line in (first, second):
        assert line["controller"] == "job"
        assert line["key"] == "ns/j"
        assert line["reconcile_id"] == "abc123"
        assert line["component"] == "controllers"
    assert second["level"] == "warning"
    assert "key" not in third
    assert third["component"] == "controllers"


def test_level_filters_lower_levels() -> None:
    """Lines below the configured level are dropped."""
    out = io.StringIO()
    configure_logging(component="scheduler", level="warning", fmt="json", stream=out)
    log = structlog.get_logger()
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    assert [line["event"] for line in lines(out)] == ["w", "e"]


def test_debug_level_keeps_debug_lines() -> None:
    """At debug level, debug lines are written; the level name is case-insensitive."""
    out = io.StringIO()
    configure_logging(component="scheduler", level="DEBUG", fmt="json", stream=out)
    structlog.get_logger().debug("detail")
    assert [line["level"] for line in lines(out)] == ["debug"]


def test_unknown_level_raises_a_clear_value_error() -> None:
    """An unknown level is a ValueError naming the value and the accepted levels."""
    with pytest.raises(ValueError, match=r"unknown log level 'verbose': use debug, info"):
        configure_logging(component="x", level="verbose", stream=io.StringIO())


def test_exceptions_are_rendered_into_the_json_line() -> None:
    """log.exception puts the formatted traceback in the line's "exception" field."""
    out = io.StringIO()
    configure_logging(component="webhook", fmt="json", stream=out)
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        structlog.get_logger().exception("handler failed")
    [line] = lines(out)
    assert line["event"] == "handler failed"
    assert line["level"] == "error"
    assert "ZeroDivisionError" in line["exception"]


def test_stdlib_loggers_go_through_the_same_renderer() -> None:
    """Library logs (aiohttp, asyncio) come out as the same JSON lines, with the component;
    below warning they are dropped even at info level."""
    out = io.StringIO()
    configure_logging(component="webhook", level="info", fmt="json", stream=out)
    logging.getLogger("aiohttp.server").error("bad request from %s", "10.0.0.1")
    logging.getLogger("aiohttp.access").info("GET /healthz 200")
    [line] = lines(out)
    assert line["event"] == "bad request from 10.0.0.1"
    assert line["level"] == "error"
    assert line["component"] == "webhook"
    assert "timestamp" in line


class TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_format_is_console_on_a_terminal_and_json_otherwise() -> None:
    """fmt="auto" renders for humans on a terminal and JSON on anything else."""
    tty = TerminalStream()
    configure_logging(component="cli", fmt="auto", stream=tty)
    structlog.get_logger().info("hello", n=1)
    text = tty.getvalue()
    assert "hello" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])

    pipe = io.StringIO()
    configure_logging(component="cli", fmt="auto", stream=pipe)
    structlog.get_logger().info("hello")
    assert lines(pipe)[0]["event"] == "hello"


def test_explicit_format_wins_over_the_terminal_check() -> None:
    """fmt="json" is JSON even on a terminal; fmt="console" is not JSON even on a pipe."""
    tty = TerminalStream()
    configure_logging(component="cli", fmt="json", stream=tty)
    structlog.get_logger().info("hello")
    assert lines(tty)[0]["event"] == "hello"

    pipe = io.StringIO()
    configure_logging(component="cli", fmt="console", stream=pipe)
    structlog.get_logger().info("hello")
    with pytest.raises(json.JSONDecodeError):
        json.loads(pipe.getvalue().splitlines()[0])


def test_reconfiguring_resets_the_bound_context() -> None:
    """A second configure_logging starts from a clean context with the new component."""
    out = io.StringIO()
    configure_logging(component="first", fmt="json", stream=out)
    structlog.contextvars.bind_contextvars(stale="yes")
    configure_logging(component="second", fmt="json", stream=out)
    structlog.get_logger().info("x")
    [line] = lines(out)
    assert line["component"] == "second"
    assert "stale" not in line


# --- registry and controller metrics ------------------------------------------------------------


def test_new_registry_has_process_platform_gc_and_build_info() -> None:
    """A new registry carries the standard process, platform and GC collectors and
    caldera_build_info{version} = 1."""
    registry = new_registry()
    assert registry.get_sample_value("caldera_build_info", {"version": __version__}) == 1.0
    text = generate_latest(registry).decode()
    assert "process_cpu_seconds_total" in text
    assert "python_info{" in text
    assert "python_gc_objects_collected_total" in text


def test_registries_are_independent() -> None:
    """Each call builds a separate registry (no global): metrics of one are not in the other,
    and the same names can be registered in both."""
    first, second = new_registry(), new_registry()
    ControllerMetrics(first).reconcile_total.labels(controller="job", result="success").inc()
    ControllerMetrics(second)
    labels = {"controller": "job", "result": "success"}
    assert first.get_sample_value("caldera_controller_reconcile_total", labels) == 1.0
    assert second.get_sample_value("caldera_controller_reconcile_total", labels) is None


def test_controller_metrics_names_and_labels() -> None:
    """ControllerMetrics exports controller-runtime's reconcile metrics with the caldera_
    prefix, labelled by controller (and result)."""
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    metrics.reconcile_total.labels(controller="job", result="success").inc(2)
    metrics.reconcile_total.labels(controller="job", result="error").inc()
    metrics.reconcile_errors.labels(controller="job").inc()
    metrics.reconcile_time.labels(controller="job").observe(0.02)
    metrics.workers.labels(controller="job").set(3)

    def value(metric: str, **labels: str) -> float | None:
        return registry.get_sample_value(metric, labels)

    assert value("caldera_controller_reconcile_total", controller="job", result="success") == 2
    assert value("caldera_controller_reconcile_total", controller="job", result="error") == 1
    assert value("caldera_controller_reconcile_errors_total", controller="job") == 1
    assert value("caldera_controller_reconcile_time_seconds_count", controller="job") == 1
    assert (
        value("caldera_controller_reconcile_time_seconds_bucket", controller="job", le="0.025") == 1
    )
    assert (
        value("caldera_controller_reconcile_time_seconds_bucket", controller="job", le="0.01") == 0
    )
    assert value("caldera_controller_active_workers", controller="job") == 3


def test_controller_metrics_twice_on_one_registry_fails_loudly() -> None:
    """A second ControllerMetrics on the same registry is a duplicate-name error, not two
    silently diverging sets of series."""
    registry = CollectorRegistry()
    ControllerMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        ControllerMetrics(registry)
