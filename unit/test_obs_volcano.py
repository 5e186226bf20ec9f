"""caldera.obs.volcano: with --volcano-metrics, /metrics also serves the families that have a
Volcano counterpart under Volcano's exact names, from the same samples, and nothing else."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from caldera.obs.metrics import new_registry
from caldera.obs.volcano import VOLCANO_COUNTERS, VOLCANO_SUFFIXES, VolcanoNames
from controllers.queue.metrics import QueueMetrics
from scheduler.framework.session import SessionResult
from scheduler.metrics import SchedulerMetrics
from unit.test_chart_values import _exported_series

# Volcano's metric names (pkg/scheduler/metrics and pkg/controllers/metrics, all prefixed
# volcano_), as docs/migrating-from-volcano.md ("Metrics under Volcano's names") lists them.
VOLCANO_NAMES = {
    "e2e_scheduling_latency_milliseconds",
    "open_session_duration_milliseconds",
    "e2e_job_scheduling_latency_milliseconds",
    "e2e_job_scheduling_duration",
    "e2e_job_scheduling_start_time",
    "e2e_job_scheduling_last_time",
    "plugin_scheduling_latency_milliseconds",
    "action_scheduling_latency_milliseconds",
    "task_scheduling_latency_milliseconds",
    "scheduling_stage_duration_milliseconds",
    "schedule_attempts_total",
    "pod_preemption_victims",
    "total_preemption_attempts",
    "eviction_transactions_total",
    "unschedule_task_count",
    "unschedule_job_count",
    "goroutines",
    "job_share",
    "job_retry_counts",
    "namespace_share",
    "namespace_weight",
    "namespace_weighted_share",
    *(
        f"queue_{figure}_{unit}"
        for figure in ("allocated", "request", "deserved", "capacity", "real_capacity", "inqueue")
        for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
    ),
    "queue_share",
    "queue_weight",
    "queue_overused",
    "controller_job_to_pod_creation_latency_milliseconds",
    *(
        f"queue_pod_group_{phase}_count"
        for phase in ("inqueue", "pending", "running", "unknown", "completed")
    ),
    "job_completed_phase_count",
    "job_failed_phase_count",
    # pkg/scheduler/api/devices/nvidia/vgpu/metrics.go
    "vgpu_device_shared_number",
    "vgpu_device_allocated_memory",
    "vgpu_device_allocated_cores",
    "vgpu_device_memory_limit",
}


def test_every_copied_name_is_volcanos_and_every_source_is_calderas() -> None:
    """The mapping names only metrics Volcano defines, and only families Caldera exports (a
    renamed Caldera metric would otherwise silently lose its Volcano copy)."""
    assert VOLCANO_SUFFIXES <= VOLCANO_NAMES
    assert set(VOLCANO_COUNTERS.values()) <= VOLCANO_NAMES
    exported = _exported_series()
    for suffix in VOLCANO_SUFFIXES:
        name = f"caldera_{suffix}"
        assert name in exported or f"{name}_bucket" in exported, suffix
    for family in VOLCANO_COUNTERS:
        assert f"caldera_{family}_total" in exported, family


def _served(volcano: bool) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """/metrics as served (text format, parsed back), after one session's figures."""
    registry = new_registry()
    metrics = SchedulerMetrics(registry)
    queues = QueueMetrics(registry)
    metrics.e2e_latency.observe(12)
    metrics.attempts.labels(result="scheduled").inc(3)
    metrics.evictions.inc()
    metrics.observe(SessionResult(unready_jobs=["ns/big", "ns/big2"], job_share={"ns/a": 0.5}))
    queues.set("q", {})
    source: CollectorRegistry | VolcanoNames = VolcanoNames(registry) if volcano else registry
    text = generate_latest(source).decode()
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = sample.value
    return samples


def test_volcano_names_are_served_beside_calderas_with_the_same_values() -> None:
    """Gauges, histograms (with their buckets) and counters appear under Volcano's names with
    the values of Caldera's; Caldera's own series are unchanged."""
    plain, both = _served(False), _served(True)
    assert not [name for name in plain if name.startswith("volcano_")]
    for name, series in plain.items():
        if name.startswith("caldera_") and not name.endswith("_created"):
            assert both[name] == series  # Caldera's names untouched
    assert both["volcano_unschedule_job_count"] == plain["caldera_unschedule_job_count"]
    assert both["volcano_job_share"] == plain["caldera_job_share"]
    assert (
        both["volcano_e2e_scheduling_latency_milliseconds_bucket"]
        == plain["caldera_e2e_scheduling_latency_milliseconds_bucket"]
    )
    assert both["volcano_schedule_attempts_total"] == plain["caldera_schedule_attempts_total"]
    assert (
        both["volcano_queue_pod_group_pending_count"]
        == (plain["caldera_queue_pod_group_pending_count"])
    )
    # Volcano's counter without _total keeps its name exactly.
    retries = (("job_id", "big"), ("job_ns", "ns"))
    assert both["volcano_job_retry_counts"][retries] == 1.0
    assert "volcano_job_retry_counts_total" not in both


def test_only_metrics_with_a_volcano_meaning_are_copied() -> None:
    """Caldera's eviction counter is not Volcano's pod_preemption_victims (a gauge of the last
    preemption's size), and process or client metrics have no Volcano counterpart: no copies;
    nor are the OpenMetrics _created samples."""
    both = _served(True)
    volcano = {name for name in both if name.startswith("volcano_")}
    assert "caldera_pod_preemption_victims_total" in both
    assert "volcano_pod_preemption_victims" not in volcano
    assert "volcano_pod_preemption_victims_total" not in volcano
    assert not [name for name in volcano if name.endswith("_created")]
    assert not [name for name in volcano if "process" in name or "build_info" in name]
