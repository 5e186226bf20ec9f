"""The chaos run's fault plan: which fault, on what, when, drawn from the seed.

Pure: the run (``e2e/chaos/run.py``) carries the plan out. Faults are spread at random over a
window that starts when the burst of jobs does; a killed process is restarted after its own pause,
so several faults may be under way at once, as in a bad hour on a real cluster.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

__all__ = ["PROCESSES", "Fault", "FaultCounts", "FaultKind", "plan_faults"]

PROCESSES = ("controllers", "scheduler", "webhook")


class FaultKind(enum.StrEnum):
    KILL = "kill -9"  # target: a process (with replicas, its leader); restarted after `pause`
    APISERVER_RESTART = "kube-apiserver restart"
    COMPACTION = "etcd compaction"  # then every watch is cut, so resuming ones meet 410 Gone
    DROP_CONNECTIONS = "dropped connections"  # target: a process; its watches are cut
    EVICTIONS = "pod deletions"  # `count` running pods deleted at once


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the burst starts
    kind: FaultKind
    target: str = ""
    pause: float = 0.0
    count: int = 0


@dataclass(frozen=True)
class FaultCounts:
    """How many of each fault a run gets."""

    kills_per_process: int = 3
    apiserver_restarts: int = 1
    compactions: int = 1
    drops: int = 2
    eviction_bursts: int = 2
    evictions_per_burst: int = 10


def plan_faults(seed: int, window: float, counts: FaultCounts) -> list[Fault]:
    """The faults of a run, in time order, each at a moment in [0, window) drawn from ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - a seeded plan, not secrets

    def at() -> float:
        # Rounded to hundredths, but never past the window (1.609 would round to 1.61).
        return min(round(rng.uniform(0, window), 2), window)

    faults = [
        Fault(at(), FaultKind.KILL, target, pause=round(rng.uniform(0.5, 5), 2))
        for target in PROCESSES
        for _ in range(counts.kills_per_process)
    ]
    faults += [Fault(at(), FaultKind.APISERVER_RESTART) for _ in range(counts.apiserver_restarts)]
    faults += [Fault(at(), FaultKind.COMPACTION) for _ in range(counts.compactions)]
    faults += [
        Fault(at(), FaultKind.DROP_CONNECTIONS, rng.choice(PROCESSES)) for _ in range(counts.drops)
    ]
    faults += [
        Fault(at(), FaultKind.EVICTIONS, count=counts.evictions_per_burst)
        for _ in range(counts.eviction_bursts)
    ]
    return sorted(faults, key=lambda f: (f.at, f.kind, f.target))
