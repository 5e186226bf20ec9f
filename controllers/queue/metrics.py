"""PodGroup counts per phase per queue, exported as Prometheus gauges.

Volcano stopped writing these counts to ``Queue.status`` in v1.11 and exports them as
``volcano_queue_pod_group_<phase>_count{queue_name}``; Caldera keeps the suffixes under its own
prefix, so dashboards port by changing the prefix. A PodGroup without a phase (created, not yet
seen by the scheduler) counts as pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Final

from prometheus_client import CollectorRegistry, Gauge

from caldera.api.volcano import PodGroup, PodGroupPhase

PHASES: Final = (
    PodGroupPhase.PENDING,
    PodGroupPhase.RUNNING,
    PodGroupPhase.UNKNOWN,
    PodGroupPhase.INQUEUE,
    PodGroupPhase.COMPLETED,
)


def count_phases(podgroups: Iterable[PodGroup]) -> dict[PodGroupPhase, int]:
    """PodGroups by phase, every phase present (a purely computational function)."""
    counts = dict.fromkeys(PHASES, 0)
    for pg in podgroups:
        phase = pg.status.phase or PodGroupPhase.PENDING
        if phase in counts:
            counts[PodGroupPhase(phase)] += 1
    return counts


class QueueMetrics:
    """The five gauges, labelled by queue name, in the process's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._gauges = {
            phase: Gauge(
                f"caldera_queue_pod_group_{phase.lower()}_count",
                f"PodGroups in phase {phase} per queue",
                ["queue_name"],
                registry=registry,
            )
            for phase in PHASES
        }

    def set(self, queue: str, counts: dict[PodGroupPhase, int]) -> None:
        """Publish the counts of one queue."""
        for phase, gauge in self._gauges.items():
            gauge.labels(queue_name=queue).set(counts.get(phase, 0))

    def forget(self, queue: str) -> None:
        """Drop a deleted queue's series."""
        for gauge in self._gauges.values():
            with contextlib.suppress(KeyError):
                gauge.remove(queue)
