"""Reads the nodes' load from the configured metrics source in the background, for the usage
plugin (what is asked and how answers are read: ``scheduler.node_load`` for prometheus,
``scheduler.node_load_elasticsearch`` and ``scheduler.node_load_custom_metrics`` for Volcano's
two other sources).

Off the sessions' path: a session takes the last load read (``latest``), never waits for one.
Bounded: one poll per ``metrics.interval`` (5s at least): two queries for prometheus, one
search for elasticsearch, two lists through the API server for prometheus_adaptor (the
process's own client: its rate limiter, retries and credentials), each request with a 10-second
timeout and an answer of at most 16 MiB. A failed poll is logged and keeps the last load, which
the plugin ignores once it is five minutes old; nothing is asked unless a configuration names
both a source and a plugin that reads it (usage, rescheduling).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json

import aiohttp
import structlog

from caldera.kube.client import KubeClient, read_bounded
from caldera.kube.errors import KubeError
from scheduler import node_load_custom_metrics as custom_metrics
from scheduler import node_load_elasticsearch as elasticsearch
from scheduler.api.types import NodeUsage
from scheduler.node_load import (
    CPU_QUERY,
    ELASTICSEARCH,
    MEMORY_QUERY,
    PROMETHEUS_ADAPTOR,
    MetricsSource,
    node_usage,
    vector_values,
)

log = structlog.get_logger("caldera.scheduler")

REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=10)
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class NodeLoadPoller:
    """Keeps ``latest`` up to date from one source at a time (``configure``)."""

    def __init__(self, client: KubeClient | None = None) -> None:
        self.latest: dict[str, NodeUsage] = {}
        self._client = client  # for prometheus_adaptor: the API server serves the metrics
        self._source: MetricsSource | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def source(self) -> MetricsSource | None:
        """The source polled, None when there is none."""
        return self._source

    def configure(self, source: MetricsSource | None) -> None:
        """Poll ``source`` from now on (None: stop polling and forget the load)."""
        if source == self._source:
            return
        self._stop()
        self._source = source
        self.latest = {}
        if source is not None:
            self._task = asyncio.create_task(self._poll(source), name="node-load-poller")

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        task = self._task
        self._stop()
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _poll(self, source: MetricsSource) -> None:
        # ssl=False skips certificate checks (tls.insecureSkipVerify); True checks them.
        connector = aiohttp.TCPConnector(ssl=not source.insecure_skip_verify, limit=2)
        where = source.address or custom_metrics.GROUP_VERSION
        async with aiohttp.ClientSession(timeout=REQUEST_TIMEOUT, connector=connector) as http:
            while True:
                try:
                    self.latest = await self._read(http, source)
                except (aiohttp.ClientError, TimeoutError, ValueError, KubeError) as exc:
                    log.warning("cannot read the nodes' load", address=where, error=str(exc))
                except Exception:  # never let the poller die: the load would just go stale
                    log.exception("reading the nodes' load failed", address=where)
                await asyncio.sleep(source.interval.total_seconds())

    async def _read(
        self, http: aiohttp.ClientSession, source: MetricsSource
    ) -> dict[str, NodeUsage]:
        if source.kind == ELASTICSEARCH:
            return await search_once(http, source)
        if source.kind == PROMETHEUS_ADAPTOR:
            if self._client is None:
                raise ValueError("no API client to read the custom metrics API with")
            return await list_custom_metrics_once(self._client)
        return await poll_once(http, source)


async def poll_once(http: aiohttp.ClientSession, source: MetricsSource) -> dict[str, NodeUsage]:
    """Both queries once; the load of each node they name, measured now."""
    cpu = await _query(http, source, CPU_QUERY)
    memory = await _query(http, source, MEMORY_QUERY)
    return node_usage(cpu, memory, dt.datetime.now(dt.UTC))


async def search_once(http: aiohttp.ClientSession, source: MetricsSource) -> dict[str, NodeUsage]:
    """One search for every host's load, measured now (as Volcano dates it)."""
    body = json.dumps(elasticsearch.search_body(source.hostname_field)).encode()
    headers = elasticsearch.search_headers(source)
    async with http.post(elasticsearch.search_url(source), data=body, headers=headers) as response:
        if response.status != 200:
            raise ValueError(f"the search API answered {response.status}")
        answer = _json(await read_bounded(response, MAX_ANSWER_BYTES))
    return elasticsearch.host_usage(answer, dt.datetime.now(dt.UTC))


async def list_custom_metrics_once(client: KubeClient) -> dict[str, NodeUsage]:
    """Both metrics of every node through the API server, each dated by the adapter."""
    values = []
    for metric in custom_metrics.METRICS:
        body = await client.request(
            "GET",
            custom_metrics.metric_path(metric),
            timeout=REQUEST_TIMEOUT.total,
            max_bytes=MAX_ANSWER_BYTES,
        )
        values.append(custom_metrics.metric_values(_json(body), dt.datetime.now(dt.UTC)))
    return custom_metrics.node_usage(*values)


async def _query(
    http: aiohttp.ClientSession, source: MetricsSource, query: str
) -> dict[str, float]:
    async with http.get(source.query_url(), params={"query": query}) as response:
        if response.status != 200:
            raise ValueError(f"the query API answered {response.status}")
        body = await read_bounded(response, MAX_ANSWER_BYTES)
    return vector_values(_json(body))


def _json(body: bytes) -> object:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"the answer is not JSON: {exc}") from None
    except RecursionError:  # nested deeper than any answer of ours
        raise ValueError("the answer is nested too deeply") from None
