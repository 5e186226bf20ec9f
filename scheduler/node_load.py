"""The nodes' measured load for the usage and rescheduling plugins: Volcano's ``metrics:``
section of the scheduler configuration and the answers of a Prometheus-compatible query API,
read without I/O (the process's ``scheduler.node_load_poller`` asks; Volcano's two other
sources are read by ``scheduler.node_load_elasticsearch`` and
``scheduler.node_load_custom_metrics``).

Volcano's section (pkg/scheduler/metrics/source)::

    metrics:
      type: prometheus              # or elasticsearch, or prometheus_adaptor
      address: http://prom:9090     # prometheus and elasticsearch (the adaptor is read
                                    # through the API server)
      interval: 30s                 # how often to ask (Go duration; 5s at least here)
      tls.insecureSkipVerify: "false"
      elasticsearch.index: metricbeat-*             # elasticsearch's: the index searched,
      elasticsearch.hostnameFieldName: host.hostname  # the field naming the node,
      elasticsearch.username: ""                    # and basic authentication
      elasticsearch.password: ""

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
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from caldera.api.duration import DurationError, parse_duration
from scheduler.api.types import NodeUsage

PROMETHEUS: Final = "prometheus"
ELASTICSEARCH: Final = "elasticsearch"
# The custom metrics API (custom.metrics.k8s.io), as a Prometheus adapter serves it.
PROMETHEUS_ADAPTOR: Final = "prometheus_adaptor"
TYPES: Final = (PROMETHEUS, ELASTICSEARCH, PROMETHEUS_ADAPTOR)
# Volcano's defaults for elasticsearch (metricbeat's index and host field).
DEFAULT_INDEX: Final = "metricbeat-*"
DEFAULT_HOSTNAME_FIELD: Final = "host.hostname"
# A configured name that goes into a URL path or a query: bounded, no control characters.
MAX_NAME_LENGTH: Final = 255
KEYS: Final = frozenset(
    {
        "type",
        "address",
        "interval",
        "tls.insecureSkipVerify",
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

    address: str  # "" for prometheus_adaptor (read through the API server)
    interval: dt.timedelta = DEFAULT_INTERVAL
    insecure_skip_verify: bool = False
    kind: str = PROMETHEUS
    index: str = DEFAULT_INDEX
    hostname_field: str = DEFAULT_HOSTNAME_FIELD
    username: str = ""
    password: str = field(default="", repr=False)  # never in a log line

    def query_url(self) -> str:
        return self.address.rstrip("/") + "/api/v1/query"


def metrics_source(section: Mapping[str, Any]) -> MetricsSource | None:
    """The configured source, None when there is none (no ``type``); ValueError naming the key
    for a section Volcano would not accept either."""
    unknown = sorted(set(section) - KEYS)
    if unknown:
        raise ValueError(f"metrics: unknown key {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    for key, value in section.items():
        if not isinstance(value, str):
            raise ValueError(f"metrics.{key} must be a string, got {value!r}")
    kind = section.get("type", "")
    if not kind:
        return None
    if kind not in TYPES:
        raise ValueError(f"metrics.type {kind!r} is not a metrics source; use {', '.join(TYPES)}")
    address = section.get("address", "")
    if kind != PROMETHEUS_ADAPTOR:  # Volcano's adaptor client ignores the address
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
    if kind == PROMETHEUS_ADAPTOR:
        return MetricsSource("", interval, kind=kind)
    if kind == PROMETHEUS:
        return MetricsSource(address, interval, insecure == "true")
    return MetricsSource(
        address,
        interval,
        insecure == "true",
        kind=kind,
        # Empty keeps Volcano's default, as in Volcano.
        index=_name(section, "elasticsearch.index") or DEFAULT_INDEX,
        hostname_field=_name(section, "elasticsearch.hostnameFieldName") or DEFAULT_HOSTNAME_FIELD,
        username=section.get("elasticsearch.username", ""),
        password=section.get("elasticsearch.password", ""),
    )


def _name(section: Mapping[str, str], key: str) -> str:
    value = section.get(key, "")
    if len(value) > MAX_NAME_LENGTH or not value.isprintable():
        raise ValueError(
            f"metrics.{key} must be printable and at most {MAX_NAME_LENGTH} characters, "
            f"got {value[:40]!r}"
        )
    return value


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
