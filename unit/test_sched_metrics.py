"""A session reports what the scheduler process exports: action and plugin timings, each queue's
deserved share and Volcano's other queue figures (proportion), each job's and namespace's
dominant share (drf), waiting gangs and the jobs that got binds; SchedulerMetrics turns them
into Volcano's series under the caldera_ prefix."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from caldera.api.resources import Resources
from scheduler.api.types import QueueInfo
from scheduler.conf import DEFAULT_CONF, parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.metrics import SchedulerMetrics
from scheduler.registry import REGISTRY
from unit.sched_fixtures import T0, make_cluster, make_job, make_node


def exported_job_shares(registry: CollectorRegistry) -> dict[str, float]:
    """The ``caldera_job_share`` series as exported, by job key."""
    return {
        f"{s.labels['job_ns']}/{s.labels['job_id']}": s.value
        for family in registry.collect()
        if family.name == "caldera_job_share"
        for s in family.samples
    }


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


# --- Volcano's queue, namespace and per-job series ----------------------------------------------

GPU = "nvidia.com/gpu"


def _gpu_session(*, big: bool = True) -> tuple[SessionResult, CollectorRegistry, SchedulerMetrics]:
    """A node of 8 cpu and 4 GPUs, a queue "train" of weight 3 with a capability of 8 GPUs,
    and in it job "a" (2 pods of 1 cpu and 1 GPU), which fits, and, when ``big``, job "big" in
    namespace "other" (one pod of 1 cpu and 8 GPUs), which does not."""
    conf = parse_conf(DEFAULT_CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    node = make_node("n1", cpu="8", memory="32Gi", extra={GPU: "4"})
    queue = QueueInfo("train", weight=3, capability=Resources.from_list({GPU: "8"}))
    jobs = [make_job("a", 2, queue="train", requests={"cpu": "1", GPU: "1"})]
    if big:
        jobs.append(
            make_job("big", 1, queue="train", requests={"cpu": "1", GPU: "8"}, namespace="other")
        )
    cluster = make_cluster([node], jobs, [queue])
    result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(result, now=T0.timestamp() + 90)
    return result, registry, metrics


def test_queue_scalar_resources_request_weight_and_overused() -> None:
    """GPUs appear as Volcano's *_scalar_resources{resource} in milli-units; the queue's request
    (held plus asked), weight, capacity and overused flag are exported per queue."""
    _result, registry, _metrics = _gpu_session()
    q = {"queue_name": "train"}
    gpu = {**q, "resource": GPU}
    # "a" runs (2 GPUs); "big" asks for 8 more and does not fit on the 4-GPU node.
    assert registry.get_sample_value("caldera_queue_allocated_scalar_resources", gpu) == 2000
    assert registry.get_sample_value("caldera_queue_request_scalar_resources", gpu) == 10000
    assert registry.get_sample_value("caldera_queue_request_milli_cpu", q) == 3000
    assert registry.get_sample_value("caldera_queue_capacity_scalar_resources", gpu) == 8000
    assert registry.get_sample_value("caldera_queue_real_capacity_scalar_resources", gpu) == 4000
    assert registry.get_sample_value("caldera_queue_weight", q) == 3
    # The only queue deserves what it asks for within the cluster: it holds less: not overused.
    assert registry.get_sample_value("caldera_queue_overused", q) == 0
    # cpu and memory are not scalar resources; pods are not tracked at all.
    for resource in ("cpu", "memory", "pods"):
        labels = {**q, "resource": resource}
        assert registry.get_sample_value("caldera_queue_request_scalar_resources", labels) is None


def test_a_queue_at_its_deserved_share_is_overused() -> None:
    """A queue whose jobs all run holds what it deserves (it asked for no more): overused 1."""
    result, registry, _metrics = _gpu_session(big=False)
    assert result.queue_figures["train"].overused
    assert registry.get_sample_value("caldera_queue_overused", {"queue_name": "train"}) == 1


def test_namespace_share() -> None:
    """drf's namespace shares are exported per namespace (Volcano's namespace_share)."""
    result, registry, _metrics = _gpu_session()
    assert result.namespace_share["ns"] == 0.5  # 2 of 4 GPUs (and 2 of 8 cpu)
    assert registry.get_sample_value("caldera_namespace_share", {"namespace_name": "ns"}) == 0.5
    assert registry.get_sample_value("caldera_namespace_share", {"namespace_name": "other"}) == 0


def test_per_job_scheduling_latency_from_podgroup_creation() -> None:
    """A job whose tasks were bound gets Volcano's e2e_job_scheduling_* series: milliseconds
    from its PodGroup's creation to the session, and both times in Unix seconds."""
    result, registry, _metrics = _gpu_session()
    assert set(result.placed_jobs) == {"ns/a"}
    labels = {"job_name": "a", "queue": "train", "job_namespace": "ns"}
    assert registry.get_sample_value("caldera_e2e_job_scheduling_duration", labels) == 90_000
    assert registry.get_sample_value("caldera_e2e_job_scheduling_start_time", labels) == (
        T0.timestamp()
    )
    assert registry.get_sample_value("caldera_e2e_job_scheduling_last_time", labels) == (
        T0.timestamp() + 90
    )
    count = "caldera_e2e_job_scheduling_latency_milliseconds_count"
    assert registry.get_sample_value(count) == 1
    big = {"job_name": "big", "queue": "train", "job_namespace": "other"}
    assert registry.get_sample_value("caldera_e2e_job_scheduling_duration", big) is None


def test_unready_jobs_count_every_session_not_only_changes() -> None:
    """A gang that keeps waiting is counted in every session (unschedule_job_count stays 1,
    job_retry_counts grows), although its PodGroup status stops changing after the first."""
    result, registry, metrics = _gpu_session()
    assert result.unready_jobs == ["other/big"]
    metrics.observe(result)
    steady = SessionResult(unready_jobs=["other/big"])  # no status change, still waiting
    metrics.observe(steady)
    assert registry.get_sample_value("caldera_unschedule_job_count") == 1
    retries = {"job_ns": "other", "job_id": "big"}
    assert registry.get_sample_value("caldera_job_retry_counts_total", retries) == 3


def test_forgetting_a_job_drops_its_series() -> None:
    """A deleted PodGroup's per-job series go; a job seen in a new queue keeps one set."""
    _result, registry, metrics = _gpu_session()
    metrics.job_seen("ns/a", queue="other-queue", created=T0)
    old = {"job_name": "a", "queue": "train", "job_namespace": "ns"}
    new = {"job_name": "a", "queue": "other-queue", "job_namespace": "ns"}
    assert registry.get_sample_value("caldera_e2e_job_scheduling_start_time", old) is None
    assert registry.get_sample_value("caldera_e2e_job_scheduling_start_time", new) is not None
    metrics.forget_job("ns/a")
    metrics.forget_job("other/big")
    assert registry.get_sample_value("caldera_e2e_job_scheduling_start_time", new) is None
    retries = {"job_ns": "other", "job_id": "big"}
    assert registry.get_sample_value("caldera_job_retry_counts_total", retries) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["a/x", "a/y", "b/x", "c/z"]),
            st.floats(min_value=0, max_value=1),
            max_size=4,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_job_share_series_follow_the_latest_session(sessions: list[dict[str, float]]) -> None:
    """However the sessions' shares come and go, the exported series are exactly the latest
    session's (they are updated in step, not cleared and rebuilt)."""
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    for shares in sessions:
        metrics.observe(SessionResult(job_share=dict(shares), namespace_share=dict(shares)))
    exported = exported_job_shares(registry)
    namespaces = {
        s.labels["namespace_name"]: s.value
        for family in registry.collect()
        if family.name == "caldera_namespace_share"
        for s in family.samples
    }
    assert exported == sessions[-1]
    assert namespaces == sessions[-1]


def test_a_session_without_job_figures_leaves_the_last_reported_shares() -> None:
    """The process asks for every job's figures every few seconds (JOB_FIGURES_PERIOD); a
    session in between reports none, and the series stay those last reported, not emptied."""
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(SessionResult(job_share={"ns/a": 0.5, "ns/b": 0.25}))
    metrics.observe(SessionResult(job_share={}, job_figures=False))
    assert exported_job_shares(registry) == {"ns/a": 0.5, "ns/b": 0.25}
    metrics.observe(SessionResult(job_share={"ns/b": 0.75}))
    assert exported_job_shares(registry) == {"ns/b": 0.75}
