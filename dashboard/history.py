"""A queue's shares over time: what it held (``status.allocated``) against what it deserves
(``spec.deserved``) and may take (``spec.capability``), sampled from the informer cache while
the dashboard runs, and drawn as a small chart per resource on the queue's page.

The dashboard keeps no database: the history starts when the process does and holds the last
``MAX_POINTS`` samples of each queue (at the sampler's default period of a minute, six hours),
for at most ``MAX_QUEUES`` queues, so memory stays bounded whatever the cluster holds. A
sample repeats the last one's amounts only when they changed or a period passed, so a quiet
queue costs one point per period. Pure: the sampler around it (``dashboard.server``) reads the
cache and the clock.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from caldera.api.quantity import QuantityLike
from caldera.api.volcano import Queue
from dashboard.format import amount
from dashboard.overview import GPU, milli_amounts

__all__ = [
    "CHART_HEIGHT",
    "CHART_WIDTH",
    "MAX_POINTS",
    "MAX_QUEUES",
    "Chart",
    "Sample",
    "ShareHistory",
    "charts",
]

MAX_POINTS: Final = 360
MAX_QUEUES: Final = 1000
# The resources charted, in this order, when the queue holds or is promised any of them.
CHARTED: Final = ("cpu", "memory", GPU)
CHART_WIDTH: Final = 320
CHART_HEIGHT: Final = 64


@dataclass(frozen=True, slots=True)
class Sample:
    """One queue's amounts at one time, in thousandths per resource."""

    at: dt.datetime
    allocated: Mapping[str, int]
    deserved: Mapping[str, int]
    capability: Mapping[str, int]


def _amounts(values: Mapping[str, QuantityLike]) -> dict[str, int]:
    found = milli_amounts(values)
    return {r: found[r] for r in CHARTED if r in found}


class ShareHistory:
    """The last ``max_points`` samples of each of at most ``max_queues`` queues."""

    def __init__(self, *, max_points: int = MAX_POINTS, max_queues: int = MAX_QUEUES) -> None:
        self.max_points = max_points
        self.max_queues = max_queues
        self._samples: dict[str, deque[Sample]] = {}

    def record(self, at: dt.datetime, queues: Iterable[Queue]) -> None:
        """Sample every queue at ``at``; a queue gone from the cache is forgotten, and queues
        beyond ``max_queues`` (by name) are not kept."""
        seen: set[str] = set()
        for queue in sorted(queues, key=lambda q: q.metadata.name):
            name = queue.metadata.name
            if len(seen) >= self.max_queues:
                break
            seen.add(name)
            sample = Sample(
                at,
                _amounts(queue.status.allocated),
                _amounts(queue.spec.deserved),
                _amounts(queue.spec.capability),
            )
            kept = self._samples.setdefault(name, deque(maxlen=self.max_points))
            kept.append(sample)
        for name in [n for n in self._samples if n not in seen]:
            del self._samples[name]

    def samples(self, name: str) -> tuple[Sample, ...]:
        return tuple(self._samples.get(name, ()))


@dataclass(frozen=True, slots=True)
class Chart:
    """One resource of one queue over time, ready to draw: SVG polyline points in a
    ``CHART_WIDTH`` x ``CHART_HEIGHT`` box (allocated; the deserved and capability steps when
    set), the scale's top, and a sentence saying the same for those who cannot see it."""

    resource: str
    allocated: str
    deserved: str
    capability: str
    top: str
    summary: str


def _points(
    samples: Iterable[Sample], pick: str, resource: str, start: float, span: float, top: int
) -> str:
    points = []
    for s in samples:
        # Nothing allocated is 0; no deserved or capability set is no line.
        value = getattr(s, pick).get(resource, 0 if pick == "allocated" else None)
        if value is None:
            continue
        x = (s.at.timestamp() - start) / span * CHART_WIDTH if span > 0 else CHART_WIDTH
        y = CHART_HEIGHT - value / top * CHART_HEIGHT
        points.append(f"{x:.1f},{y:.1f}")
    if len(points) == 1:  # one sample: a level line across the chart
        y = points[0].split(",")[1]
        points = [f"0.0,{y}", f"{CHART_WIDTH:.1f},{y}"]
    return " ".join(points)


def charts(samples: tuple[Sample, ...]) -> tuple[Chart, ...]:
    """A chart per resource the queue held or was promised over ``samples``."""
    if not samples:
        return ()
    start, end = samples[0].at.timestamp(), samples[-1].at.timestamp()
    out = []
    for resource in CHARTED:
        held = [s.allocated.get(resource, 0) for s in samples]
        bounds = [
            v for s in samples for v in (s.deserved.get(resource), s.capability.get(resource)) if v
        ]
        if not any(held) and not bounds:
            continue
        top = max([*held, *bounds, 1])
        last = samples[-1]
        minutes = round((end - start) / 60)
        words = [
            f"{resource} held over the last {minutes} min: from {amount(held[0], resource)} "
            f"to {amount(held[-1], resource)}, at most {amount(max(held), resource)}"
        ]
        if resource in last.deserved:
            words.append(f"deserved {amount(last.deserved[resource], resource)}")
        if resource in last.capability:
            words.append(f"capability {amount(last.capability[resource], resource)}")
        span = end - start
        out.append(
            Chart(
                resource,
                _points(samples, "allocated", resource, start, span, top),
                _points(samples, "deserved", resource, start, span, top),
                _points(samples, "capability", resource, start, span, top),
                amount(top, resource),
                "; ".join(words),
            )
        )
    return tuple(out)
