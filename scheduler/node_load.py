"""The nodes' measured load for the usage plugin: Volcano's ``metrics:`` section of the scheduler
configuration and the answers of a Prometheus-compatible query API, read without I/O (the
process's ``scheduler.node_load_poller`` asks).

Volcano's section (pkg/scheduler/metrics/source)::

    metrics:
      type: prometheus              # Volcano's other types, elasticsearch and
      address: http://prom:9090     # prometheus_adaptor, are accepted and read nothing here
      interval: 30s                 # how often to ask (Go duration; 5s at least here)
      tls.insecureSkipVerify: "false"

The load is what Volcano's Prometheus client asks for, the average over Volcano's 10-minute
period of each node's cpu use and memory use in percent, with the series' ``instance`` label
as the node's name. Volcano asks twice per node; Caldera asks the same two expressions once
for all nodes (grouped by ``instance``), so a poll costs two requests whatever the cluster's
size.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from caldera.api.duration import DurationError, parse_duration
from scheduler.api.types import NodeUsage

PROMETHEUS: Final = "prometheus"
# Volcano's other metrics sources: accepted in the configuration, not read by Caldera.
UNREAD_TYPES: Final = frozenset({"elasticsearch", "prometheus_adaptor"})
KEYS: Final = frozenset(
    {
        "type",
        "address",
        "interval",
        "tls.insecureSkipVerify",
        # elasticsearch's, accepted and not read
        "elasticsearch.index",
        "elasticsearch.username",
        "elasticsearch.password",
        "elasticsearch.hostnameFieldName",
    }
)
DEFAULT_INTERVAL: Final = dt.timedelta(seconds=30)
MIN_INTERVAL: Final = dt.timedelta(seconds=5)
# Volcano's period and sub-query resolution (NODE_METRICS_PERIOD).
PERIOD: Final = "10m"
CPU_QUERY: Final = (
    "avg_over_time(clamp_min(100 - (avg by (instance) "
    f'(rate(node_cpu_seconds_total{{mode="idle"}}[5m])) * 100), 0)[{PERIOD}:30s])'
)
MEMORY_QUERY: Final = (
    "100 * avg by (instance) (avg_over_time((1 - node_memory_MemAvailable_bytes"
    f" / node_memory_MemTotal_bytes)[{PERIOD}:30s]))"
)
# At most this many series are read from one answer (a node each).
MAX_SERIES: Final = 100_000


@dataclass(frozen=True, slots=True)
class MetricsSource:
    """Where and how often to read the nodes' load."""

    address: str
    interval: dt.timedelta = DEFAULT_INTERVAL
    insecure_skip_verify: bool = False

    def query_url(self) -> str:
        return self.address.rstrip("/") + "/api/v1/query"


def metrics_source(section: Mapping[str, Any]) -> MetricsSource | None:
    """The configured source, None when there is none Caldera reads (no ``type``, or one of
    Volcano's other types); ValueError naming the key for a section Volcano would not accept
    either."""
    unknown = sorted(set(section) - KEYS)
    if unknown:
        raise ValueError(f"metrics: unknown key {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    for key, value in section.items():
        if not isinstance(value, str):
            raise ValueError(f"metrics.{key} must be a string, got {value!r}")
    kind = section.get("type", "")
    if not kind or kind in UNREAD_TYPES:
        return None
    if kind != PROMETHEUS:
        raise ValueError(
            f"metrics.type {kind!r} is not a metrics source; use prometheus "
            "(elasticsearch and prometheus_adaptor are accepted and not read)"
        )
    address = section.get("address", "")
    parts = urlsplit(address)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"metrics.address must be an http(s) URL, got {address!r}")
    interval = DEFAULT_INTERVAL
    if "interval" in section:
        try:
            seconds = parse_duration(section["interval"])
        except DurationError as exc:
            raise ValueError(f"metrics.interval: {exc}") from None
        interval = max(dt.timedelta(seconds=seconds), MIN_INTERVAL)
    insecure = section.get("tls.insecureSkipVerify", "false")
    if insecure not in ("true", "false"):
        raise ValueError(f"metrics.tls.insecureSkipVerify must be true or false, got {insecure!r}")
    return MetricsSource(address, interval, insecure == "true")


def vector_values(answer: object) -> dict[str, float]:
    """A query answer's value per ``instance``; ValueError when it is no successful instant
    vector. Series without an instance label or with a value that is no finite number are
    left out."""
    if not isinstance(answer, Mapping) or answer.get("status") != "success":
        raise ValueError("the query did not succeed")
    data = answer.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "vector":
        raise ValueError("the answer is not an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("the answer has no result list")
    values: dict[str, float] = {}
    for series in result[:MAX_SERIES]:
        if not isinstance(series, Mapping):
            continue
        metric, sample = series.get("metric"), series.get("value")
        instance = metric.get("instance") if isinstance(metric, Mapping) else None
        if not isinstance(instance, str) or not isinstance(sample, list) or len(sample) != 2:
            continue
        try:
            value = float(sample[1])
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            values[instance] = value
    return values


def node_usage(
    cpu: Mapping[str, float], memory: Mapping[str, float], measured: dt.datetime
) -> dict[str, NodeUsage]:
    """Each node either answer names; a dimension the other answer lacks counts 0, as in
    Volcano."""
    return {
        name: NodeUsage(cpu.get(name, 0.0), memory.get(name, 0.0), measured)
        for name in cpu.keys() | memory.keys()
    }
