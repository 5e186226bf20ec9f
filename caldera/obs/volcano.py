"""Volcano's metric names beside Caldera's: the opt-in ``--volcano-metrics``.

Caldera names its metrics ``caldera_<suffix>`` and keeps Volcano's suffix wherever a metric means
what Volcano's does. With ``--volcano-metrics`` the process's ``/metrics`` also serves each such
family a second time as ``volcano_<suffix>``, so dashboards and alerts written for Volcano keep
working unchanged while new ones move to Caldera's names. Nothing is recorded twice: the copy is
made when ``/metrics`` is read, from the same samples.

Only metrics with the same meaning are copied (docs/migrating-from-volcano.md lists them and the
differences of labels); a Caldera metric with no Volcano counterpart, or with a different meaning
under a similar name (``caldera_pod_preemption_victims`` counts every eviction; Volcano's is the
size of the last preemption), is not. Counters keep Volcano's exact names: client_golang does not
append ``_total``, so ``job_retry_counts`` stays without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["VOLCANO_COUNTERS", "VOLCANO_SUFFIXES", "VolcanoNames", "volcano_copy"]

_QUEUE_RESOURCES: Final = tuple(
    f"queue_{figure}_{unit}"
    for figure in ("allocated", "deserved", "request", "inqueue", "capacity", "real_capacity")
    for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
)
# Gauges and histograms copied as volcano_<suffix>, the suffix unchanged.
VOLCANO_SUFFIXES: Final = frozenset(
    {
        # scheduler (pkg/scheduler/metrics)
        "e2e_scheduling_latency_milliseconds",
        "e2e_job_scheduling_latency_milliseconds",
        "e2e_job_scheduling_duration",
        "e2e_job_scheduling_start_time",
        "e2e_job_scheduling_last_time",
        "plugin_scheduling_latency_milliseconds",
        "action_scheduling_latency_milliseconds",
        "unschedule_job_count",
        "unschedule_task_count",
        *_QUEUE_RESOURCES,
        "queue_share",
        "queue_weight",
        "queue_overused",
        "job_share",
        "namespace_share",
        # deviceshare (pkg/scheduler/api/devices/nvidia/vgpu/metrics.go)
        "vgpu_device_shared_number",
        "vgpu_device_allocated_memory",
        "vgpu_device_allocated_cores",
        "vgpu_device_memory_limit",
        # controllers (pkg/controllers/metrics)
        *(
            f"queue_pod_group_{phase}_count"
            for phase in ("inqueue", "pending", "running", "unknown", "completed")
        ),
    }
)
# Counters (by their family name, as prometheus_client reports it, without "_total"): the name
# Volcano exposes.
VOLCANO_COUNTERS: Final = {
    "schedule_attempts": "schedule_attempts_total",
    "job_retry_counts": "job_retry_counts",
}
_CALDERA: Final = "caldera_"
_VOLCANO: Final = "volcano_"
_TOTAL: Final = "_total"


def volcano_copy(family: Metric) -> Metric | None:
    """The family under Volcano's name, or None when Volcano has no such metric. Counters'
    ``_created`` samples (an OpenMetrics addition Volcano does not have) are left out."""
    if not family.name.startswith(_CALDERA):
        return None
    suffix = family.name.removeprefix(_CALDERA)
    if family.type == "counter" and suffix in VOLCANO_COUNTERS:
        exposed = _VOLCANO + VOLCANO_COUNTERS[suffix]
        if exposed.endswith(_TOTAL):
            copy = Metric(exposed.removesuffix(_TOTAL), family.documentation, "counter")
        else:
            # A counter named without _total: served untyped, as the text format allows.
            copy = Metric(exposed, family.documentation, "unknown")
        for sample in family.samples:
            if sample.name == family.name + _TOTAL:
                copy.samples.append(sample._replace(name=exposed))
        return copy
    if family.type in ("gauge", "histogram") and suffix in VOLCANO_SUFFIXES:
        copy = Metric(_VOLCANO + suffix, family.documentation, family.type)
        copy.samples = [
            sample._replace(name=_VOLCANO + sample.name.removeprefix(_CALDERA))
            for sample in family.samples
            if not sample.name.endswith("_created")
        ]
        return copy
    return None


class VolcanoNames:
    """A collector that serves every family of ``source`` and, after each family that has a
    Volcano counterpart, its copy under Volcano's name."""

    def __init__(self, source: Collector) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        for family in self.source.collect():
            yield family
            copy = volcano_copy(family)
            if copy is not None:
                yield copy
