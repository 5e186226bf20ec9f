"""The nodes' load from Elasticsearch (Volcano's ``elasticsearch`` metrics source): the search
sent and its answer read, without I/O (``scheduler.node_load_poller`` sends it).

Volcano (pkg/scheduler/metrics/source/metrics_client_elasticsearch.go) searches the configured
index (``metricbeat-*`` by default) once per node: the documents of the last 10 minutes
(``@timestamp`` from ``now-10m`` to ``now``) whose host field (``host.hostname`` by default)
is the node's name, averaging metricbeat's ``host.cpu.usage`` and
``system.memory.actual.used.pct`` (fractions, times 100 for percent). Caldera sends one search
for all nodes: the same time range and averages, per host in a ``terms`` aggregation on the
host field, so a poll is one request whatever the cluster's size. A host with no value for a
field counts 0 there, as in Volcano (its JSON null reads as 0); a node the index does not name
has no load (ignored by the plugin, as for prometheus).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from typing import Any, Final
from urllib.parse import quote

from scheduler.api.types import NodeUsage
from scheduler.node_load import PERIOD, MetricsSource

CPU_FIELD: Final = "host.cpu.usage"
MEMORY_FIELD: Final = "system.memory.actual.used.pct"
# At most this many hosts per answer: Elasticsearch's default search.max_buckets.
MAX_HOSTS: Final = 65_536


def search_url(source: MetricsSource) -> str:
    """The index's search endpoint; the index name is escaped so that it stays one path
    segment (wildcards and comma-separated lists kept, as Elasticsearch reads them)."""
    return f"{source.address.rstrip('/')}/{quote(source.index, safe='*,')}/_search"


def search_headers(source: MetricsSource) -> dict[str, str]:
    """JSON, and basic authentication when a user or password is configured (as Volcano's
    client sends it; UTF-8, as Go sends a string's bytes)."""
    headers = {"Content-Type": "application/json"}
    if source.username or source.password:
        pair = f"{source.username}:{source.password}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return headers


def search_body(hostname_field: str) -> dict[str, Any]:
    """Volcano's per-node search, for every host at once."""
    return {
        "size": 0,
        "query": {
            "bool": {
                "must": [{"range": {"@timestamp": {"gte": f"now-{PERIOD}", "lt": "now"}}}],
            },
        },
        "aggs": {
            "hosts": {
                "terms": {"field": hostname_field, "size": MAX_HOSTS},
                "aggs": {
                    "cpu": {"avg": {"field": CPU_FIELD}},
                    "mem": {"avg": {"field": MEMORY_FIELD}},
                },
            },
        },
    }


def host_usage(answer: object, measured: dt.datetime) -> dict[str, NodeUsage]:
    """Each host's load in percent, measured at ``measured``; ValueError when the answer has no
    ``hosts`` aggregation. A bucket without a string key, or whose average is neither null nor a
    finite number, is left out."""
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    aggregations = answer.get("aggregations")
    hosts = aggregations.get("hosts") if isinstance(aggregations, dict) else None
    buckets = hosts.get("buckets") if isinstance(hosts, dict) else None
    if not isinstance(buckets, list):
        raise ValueError("the answer has no aggregations.hosts.buckets list")
    usage: dict[str, NodeUsage] = {}
    for bucket in buckets[:MAX_HOSTS]:
        if not isinstance(bucket, dict) or not isinstance(bucket.get("key"), str):
            continue
        cpu, memory = _average(bucket.get("cpu")), _average(bucket.get("mem"))
        if cpu is not None and memory is not None:
            usage[bucket["key"]] = NodeUsage(cpu * 100, memory * 100, measured)
    return usage


def _average(aggregation: object) -> float | None:
    """An avg aggregation's value; 0 for null (no document had the field), None when bad."""
    if not isinstance(aggregation, dict):
        return None
    value = aggregation.get("value")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer JSON spelt with hundreds of digits
        return None
    return number if math.isfinite(number) else None
