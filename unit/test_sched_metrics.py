"""A session reports what the scheduler process exports: action and plugin timings, each queue's
deserved share (proportion) and each job's dominant share (drf)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from caldera.api.resources import Resources
from scheduler.conf import DEFAULT_CONF, parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.metrics import SchedulerMetrics
from scheduler.registry import REGISTRY
from unit.sched_fixtures import make_cluster, make_job, make_node


def _session() -> SessionResult:
    """One session of Volcano's default configuration (it has drf and proportion)."""
    conf = parse_conf(DEFAULT_CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    cluster = make_cluster([make_node("n1", cpu="4", memory="8Gi")], [make_job("j", 2)])
    return run_session(Session(cluster, conf.tiers), conf, REGISTRY)


def test_session_reports_timings_and_shares() -> None:
    """Every configured action and every plugin's open and close are timed; proportion reports
    the default queue's deserved share and drf the job's dominant share."""
    result = _session()
    assert set(result.action_seconds) == {"enqueue", "allocate", "backfill"}
    assert {
        ("gang", "OnSessionOpen"),
        ("proportion", "OnSessionClose"),
        ("drf", "OnSessionOpen"),
    } <= set(result.plugin_seconds)
    assert all(seconds >= 0 for seconds in result.action_seconds.values())
    assert "default" in result.queue_deserved
    assert result.queue_deserved["default"].get("cpu") > 0
    assert 0 < result.queue_share["default"] <= 1
    assert result.job_share["ns/j"] > 0


def test_metrics_export_queue_and_job_shares() -> None:
    """The process's gauges carry the session's figures in Volcano's units (milli-cpu, bytes)."""
    result = _session()
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(result)
    allocated = result.queue_allocated["default"]
    assert registry.get_sample_value(
        "caldera_queue_allocated_milli_cpu", {"queue_name": "default"}
    ) == allocated.get("cpu")
    assert (
        registry.get_sample_value("caldera_queue_deserved_memory_bytes", {"queue_name": "default"})
        == result.queue_deserved["default"].get("memory") // 1000
    )
    assert (
        registry.get_sample_value("caldera_job_share", {"job_ns": "ns", "job_id": "j"})
        == (result.job_share["ns/j"])
    )
    assert (
        registry.get_sample_value(
            "caldera_action_scheduling_latency_milliseconds_count", {"action": "allocate"}
        )
        == 1
    )
    # A later session without the job drops its series.
    result.job_share.clear()
    metrics.observe(result)
    assert registry.get_sample_value("caldera_job_share", {"job_ns": "ns", "job_id": "j"}) is None
    assert allocated != Resources()


def test_capacity_limits_are_exported_per_resource() -> None:
    """capacity's capability and real capability go out in Volcano's series (milli-cpu,
    bytes, other resources in thousandths); an unlimited resource has no series, and a queue
    gone from the next session loses its series."""
    text = DEFAULT_CONF.replace("- name: proportion", "- name: capacity")
    conf = parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    node = make_node("n1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "2"})
    cluster = make_cluster([node], [make_job("j", 2)])
    cluster.queues["default"].capability = Resources.from_list({"nvidia.com/gpu": "1"})
    cluster.queues["default"].deserved = Resources.from_list({"cpu": "2"})
    result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(result)
    labels = {"queue_name": "default"}
    gpu = {**labels, "resource": "nvidia.com/gpu"}
    assert registry.get_sample_value("caldera_queue_capacity_scalar_resources", gpu) == 1000
    assert registry.get_sample_value("caldera_queue_capacity_milli_cpu", labels) is None
    assert registry.get_sample_value("caldera_queue_real_capacity_milli_cpu", labels) == 4000
    assert registry.get_sample_value("caldera_queue_real_capacity_memory_bytes", labels) == 8 << 30
    assert registry.get_sample_value("caldera_queue_real_capacity_scalar_resources", gpu) == 1000
    assert registry.get_sample_value("caldera_queue_deserved_milli_cpu", labels) == 2000
    result.queue_capability.clear()
    result.queue_real_capability.clear()
    metrics.observe(result)
    assert registry.get_sample_value("caldera_queue_real_capacity_milli_cpu", labels) is None
