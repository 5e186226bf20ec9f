"""Reads the nodes' load from the configured Prometheus-compatible endpoint in the background, for
the usage plugin (what is asked and how answers are read: ``scheduler.node_load``).

Off the sessions' path: a session takes the last load read (``latest``), never waits for one.
Bounded: one poll (two queries) per ``metrics.interval`` (5s at least), each request with a
10-second timeout and an answer of at most 16 MiB. A failed poll is logged and keeps the last
load, which the plugin ignores once it is five minutes old; nothing is asked unless a
configuration names both a source and the usage plugin.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json

import aiohttp
import structlog

from scheduler.api.types import NodeUsage
from scheduler.node_load import CPU_QUERY, MEMORY_QUERY, MetricsSource, node_usage, vector_values

log = structlog.get_logger("caldera.scheduler")

REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=10)
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class NodeLoadPoller:
    """Keeps ``latest`` up to date from one source at a time (``configure``)."""

    def __init__(self) -> None:
        self.latest: dict[str, NodeUsage] = {}
        self._source: MetricsSource | None = None
        self._task: asyncio.Task[None] | None = None

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
        async with aiohttp.ClientSession(timeout=REQUEST_TIMEOUT, connector=connector) as http:
            while True:
                try:
                    self.latest = await poll_once(http, source)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    log.warning(
                        "cannot read the nodes' load", address=source.address, error=str(exc)
                    )
                except Exception:  # never let the poller die: the load would just go stale
                    log.exception("reading the nodes' load failed", address=source.address)
                await asyncio.sleep(source.interval.total_seconds())


async def poll_once(http: aiohttp.ClientSession, source: MetricsSource) -> dict[str, NodeUsage]:
    """Both queries once; the load of each node they name, measured now."""
    cpu = await _query(http, source, CPU_QUERY)
    memory = await _query(http, source, MEMORY_QUERY)
    return node_usage(cpu, memory, dt.datetime.now(dt.UTC))


async def _query(
    http: aiohttp.ClientSession, source: MetricsSource, query: str
) -> dict[str, float]:
    async with http.get(source.query_url(), params={"query": query}) as response:
        if response.status != 200:
            raise ValueError(f"the query API answered {response.status}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise ValueError(f"the answer is over {MAX_ANSWER_BYTES} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
    try:
        answer = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not JSON: {exc}") from None
    return vector_values(answer)
