"""The nodes' load from the custom metrics API (Volcano's ``prometheus_adaptor`` metrics source):
the paths asked through the API server and the answers read, without I/O
(``scheduler.node_load_poller`` asks).

Volcano (pkg/scheduler/metrics/source/metrics_client_prometheus_adapt.go) lists two root-scoped
metrics of every node from ``custom.metrics.k8s.io``, ``node_cpu_usage_avg`` and
``node_memory_usage_avg``, which a Prometheus adapter's rules define (Volcano's
docs/design/usage-based-scheduling.md: the 10-minute averages of the cpu and memory use, as
fractions). Each value is a quantity (``"350m"`` is 0.35, 35%). The load's time is the
metric's own ``timestamp`` (the memory metric's when the node has both, as Volcano reads the
memory list last), so an adapter serving old values is ignored by the five-minute rule; a
timestamp ahead of the poll counts as the poll's time, so a skewed clock cannot keep a load
fresh for ever. A node with only one of the two metrics counts 0 for the other, as in Volcano.
Caldera asks version ``v1beta2`` (the version Volcano's client prefers; prometheus-adapter
serves it since 0.8).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Final

from caldera.api.meta import parse_time
from caldera.api.quantity import QuantityError, parse_quantity
from scheduler.api.types import NodeUsage

GROUP_VERSION: Final = "custom.metrics.k8s.io/v1beta2"
CPU_METRIC: Final = "node_cpu_usage_avg"
MEMORY_METRIC: Final = "node_memory_usage_avg"
METRICS: Final = (CPU_METRIC, MEMORY_METRIC)
# At most this many items are read from one answer (a node each).
MAX_ITEMS: Final = 100_000
# Longer strings are no quantity or timestamp an adapter writes (and are not parsed).
_MAX_FIELD: Final = 64


def metric_path(metric: str) -> str:
    """Every node's value of ``metric`` (the root-scoped ``*`` name)."""
    return f"/apis/{GROUP_VERSION}/nodes/*/{metric}"


def metric_values(answer: object, now: dt.datetime) -> dict[str, tuple[float, dt.datetime]]:
    """A MetricValueList's value (a fraction) and time per node; ValueError when it is none.
    Items that do not describe a node by name, or whose value or timestamp does not parse,
    are left out."""
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise ValueError("the answer is not a metric value list")
    values: dict[str, tuple[float, dt.datetime]] = {}
    # An adapter stamps a list's items alike, and writes few distinct values: each is parsed once.
    times: dict[str, dt.datetime] = {}
    numbers: dict[str, float] = {}
    for item in answer["items"][:MAX_ITEMS]:
        if not isinstance(item, dict):
            continue
        described, value, stamp = (
            item.get("describedObject"),
            item.get("value"),
            item.get("timestamp"),
        )
        name = described.get("name") if isinstance(described, dict) else None
        if not isinstance(name, str) or not name:
            continue
        if not isinstance(value, str) or not isinstance(stamp, str):
            continue
        if len(value) > _MAX_FIELD or len(stamp) > _MAX_FIELD:
            continue
        try:
            number = numbers.get(value)
            if number is None:
                number = numbers[value] = float(parse_quantity(value))
            measured = times.get(stamp)
            if measured is None:
                measured = times[stamp] = min(parse_time(stamp), now)
        except (QuantityError, ValueError, OverflowError):
            continue
        if math.isfinite(number):
            values[name] = (number, measured)
    return values


def node_usage(
    cpu: Mapping[str, tuple[float, dt.datetime]], memory: Mapping[str, tuple[float, dt.datetime]]
) -> dict[str, NodeUsage]:
    """Each node either list names, in percent."""
    usage: dict[str, NodeUsage] = {}
    for name in cpu.keys() | memory.keys():
        cpu_value, cpu_time = cpu.get(name, (0.0, None))
        memory_value, memory_time = memory.get(name, (0.0, None))
        measured = memory_time or cpu_time
        assert measured is not None  # the node is in one of the two
        usage[name] = NodeUsage(cpu_value * 100, memory_value * 100, measured)
    return usage
