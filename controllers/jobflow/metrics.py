"""JobFlows that reached Succeed and Failed, per namespace: Volcano's
``volcano_jobflow_succeed_phase_count`` and ``volcano_jobflow_failed_phase_count``
(pkg/controllers/jobflow/state/metrics.go) under Caldera's prefix.

Volcano's are counters without the ``_total`` suffix; prometheus_client appends ``_total`` to every
counter's name, so these are gauges that only ever grow, and the series names stay Volcano's but
for the prefix. Like Volcano's counters they start at zero in a new process.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from caldera.api.flow import FlowPhase

__all__ = ["JobFlowMetrics"]


class JobFlowMetrics:
    """The two counts, labelled ``jobflow_namespace``, in the process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._gauges = {
            phase: Gauge(
                f"caldera_jobflow_{phase.lower()}_phase_count",
                f"JobFlows that reached phase {phase}, per namespace, since the process started",
                ["jobflow_namespace"],
                registry=registry,
            )
            for phase in (FlowPhase.SUCCEED, FlowPhase.FAILED)
        }

    def reached(self, phase: str, namespace: str) -> None:
        """Count one JobFlow of ``namespace`` that reached ``phase`` (Succeed or Failed)."""
        gauge = self._gauges.get(phase)  # type: ignore[call-overload]
        if gauge is not None:
            gauge.labels(jobflow_namespace=namespace).inc()
