"""The process's Prometheus registry and the metrics every Caldera process exports.

One registry per process, created by its entry point and handed to every component that records
metrics (no module-level global, so tests build their own). Names are prefixed ``caldera_``;
where Volcano or controller-runtime have a metric with the same meaning its suffix is kept.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from caldera import __version__


def new_registry() -> CollectorRegistry:
    """A registry with the standard process, platform and GC collectors and build info."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    Gauge("caldera_build_info", "Caldera version", ["version"], registry=registry).labels(
        version=__version__
    ).set(1)
    return registry


class ControllerMetrics:
    """controller-runtime's reconcile metrics, labelled by controller."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.reconcile_total = Counter(
            "caldera_controller_reconcile",
            "Reconciles by controller and result "
            "(success, requeue_after, error, terminal_error, fenced)",
            ["controller", "result"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "caldera_controller_reconcile_errors",
            "Reconciles that raised, by controller",
            ["controller"],
            registry=registry,
        )
        self.reconcile_time = Histogram(
            "caldera_controller_reconcile_time_seconds",
            "Time of one reconcile, by controller",
            ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=registry,
        )
        self.workers = Gauge(
            "caldera_controller_active_workers",
            "Workers currently reconciling, by controller",
            ["controller"],
            registry=registry,
        )
