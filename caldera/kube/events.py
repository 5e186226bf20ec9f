"""Kubernetes Events (core/v1) about Caldera's objects: "why is my job pending?".

`EventRecorder.record` is synchronous and never raises: it updates an in-memory entry and queues
it; a few background workers (bounded concurrency) write to the API server. Failures are logged
and counted, never propagated, because an Event is a courtesy to the user and must not fail a
reconcile.

Aggregation. Events are keyed by (involved object, type, reason, message). A repeat of a key whose
last occurrence is less than `window` seconds old does not create a new Event: it raises the count
of the existing one (a merge PATCH of `count` and `lastTimestamp`), as `kubectl describe` users
expect ("x3 over 2m"). The keys live in a bounded LRU (`cache_size`); a key pushed out, or seen
again after the window, starts a new Event. When the PATCH finds the Event gone (Events expire
after an hour), a new one is created.

Budget per object. As client-go's recorder (kube-scheduler's and Volcano's), each involved
object may have 25 events, then one per 5 minutes; the rest are counted as filtered. A scheduler
re-records a waiting PodGroup's reason every session, so without it thousands of waiting
PodGroups would make thousands of Event writes a second, beside the binds.

Ordering and coalescing. Each entry is queued at most once and sent by one worker at a time (the
work-queue discipline of `informers.workqueue`): repeats recorded while the entry waits only raise
its count, and repeats recorded while it is being sent mark it dirty so it is queued again when
the send finishes. So a burst of identical events costs one create plus at most one patch in
flight, and the count on the server only grows. At most `max_pending` entries wait; more are
dropped (and counted) rather than growing memory without bound.

`flush()` waits until everything recorded so far is sent (tests, shutdown); `close()` flushes with a
timeout and stops the workers.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import structlog
from prometheus_client import CollectorRegistry, Counter

from caldera.api.core import Event, EventSource
from caldera.api.kinds import EVENT
from caldera.api.meta import ObjectMeta, ObjectReference, format_time
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, NotFound
from caldera.kube.requests import PatchType

__all__ = ["EventRecorder", "event_name", "events_about"]

EVENT_TYPES: Final = frozenset({"Normal", "Warning"})
MAX_MESSAGE: Final = 1024  # what events.k8s.io/v1 accepts for a note; longer says nothing more
_MAX_NAME: Final = 253
DROP_LOG_INTERVAL: Final = 10.0  # seconds between warnings that events are being dropped
# client-go's EventSourceObjectSpamFilter, which Volcano's and kube-scheduler's recorders use:
# per involved object, a burst of 25 events, then one per 5 minutes. A scheduler re-records a
# waiting PodGroup's reason every session; without this, 10,000 waiting PodGroups make 10,000
# events a second.
SPAM_BURST: Final = 25
SPAM_REFILL_SECONDS: Final = 300.0
_SPAM_OBJECTS: Final = 65536  # objects whose budgets are kept (the least recent forgotten)

_Key = tuple[str, str, str, str, str, str, str]


async def events_about(
    client: KubeClient, namespace: str, uids: Sequence[str], *, limit: asyncio.Semaphore
) -> list[Event]:
    """The Events of ``namespace`` whose involvedObject is one of ``uids``, each object's read
    with a field selector (the namespace's other Events are never fetched), at most ``limit``
    lists at a time. Errors propagate."""

    async def of(uid: str) -> list[Event]:
        async with limit:
            found = await client.list(
                EVENT, namespace=namespace, field_selector=f"involvedObject.uid={uid}"
            )
            return list(found.items)

    found = await asyncio.gather(*(of(uid) for uid in dict.fromkeys(uids)))
    return [event for events in found for event in events]


def event_name(involved_name: str, nanos: int) -> str:
    """A unique Event name from the object's name and a timestamp, as kubectl shows them
    ("<object>.<hex nanoseconds>"), cut to a valid DNS subdomain. Pure."""
    suffix = f".{nanos:x}"
    base = involved_name[: _MAX_NAME - len(suffix)].rstrip(".-") or "event"
    return base + suffix


@dataclasses.dataclass(eq=False)
class _Entry:
    """One aggregated Event: what the server should show, and where it is in the send cycle."""

    involved: ObjectReference
    namespace: str
    type: str
    reason: str
    message: str
    name: str
    first_timestamp: str
    last_timestamp: str
    last_seen: float  # monotonic seconds, for the aggregation window
    count: int = 1
    created: bool = False  # the Event exists on the server
    queued: bool = False
    sending: bool = False
    dirty: bool = False  # recorded again while being sent


class EventRecorder:
    """Records Events for one component (e.g. "caldera-controllers") on one host.

    One recorder per process: its `caldera_events_recorded_total` counter is registered in
    `registry` (a private registry when none is given). Call `close()` at shutdown.
    """

    def __init__(
        self,
        client: KubeClient,
        component: str,
        host: str | None = None,
        *,
        window: float = 600.0,
        cache_size: int = 4096,
        concurrency: int = 4,
        max_pending: int = 1000,
        registry: CollectorRegistry | None = None,
        logger: Any = None,
        # Seams for tests: the wall clock stamps Events, the monotonic clock measures the window.
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._source = EventSource(component=component, host=host or "")
        self._window = window
        self._cache_size = cache_size
        self._concurrency = concurrency
        self._max_pending = max_pending
        self._log = logger if logger is not None else structlog.get_logger("caldera.events")
        self._now = now
        self._clock = clock
        self._cache: collections.OrderedDict[_Key, _Entry] = collections.OrderedDict()
        self._queue: asyncio.Queue[_Entry] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._last_nanos = 0
        self._closed = False
        self._dropped = 0  # events dropped since the last warning about it
        # involved object -> (events left in its budget, when last taken): the spam filter
        self._budgets: collections.OrderedDict[tuple[str, str, str, str], tuple[float, float]] = (
            collections.OrderedDict()
        )
        self._last_drop_log = -math.inf
        self._results = Counter(
            "caldera_events_recorded_total",
            "Kubernetes Events by outcome: created, updated (count raised), failed, dropped, "
            "filtered (over the object's budget: 25, then one per 5 minutes).",
            ["result"],
            registry=registry if registry is not None else CollectorRegistry(),
        )

    # ---- recording (synchronous, never raises) ----------------------------------------------

    def record(self, involved: ObjectReference, type: str, reason: str, message: str) -> None:
        """Record that `reason: message` happened to `involved` (type Normal or Warning)."""
        try:
            self._record(involved, type, reason, message)
        except Exception:  # an Event must never break its caller
            self._results.labels("failed").inc()
            self._log.exception("recording an event failed", reason=reason)

    def _record(self, involved: ObjectReference, type: str, reason: str, message: str) -> None:
        if self._closed:
            self._results.labels("dropped").inc()
            return
        if type not in EVENT_TYPES:
            self._results.labels("dropped").inc()
            self._log.error("event type must be Normal or Warning", type=type, reason=reason)
            return
        if not self._within_budget(involved):
            self._results.labels("filtered").inc()
            return
        message = message[:MAX_MESSAGE]
        key: _Key = (
            involved.kind,
            involved.namespace,
            involved.name,
            involved.uid,
            type,
            reason,
            message,
        )
        now = self._clock()
        stamp = format_time(self._now())
        entry = self._cache.get(key)
        if entry is not None and now - entry.last_seen <= self._window:
            entry.count += 1
            entry.last_timestamp = stamp
            entry.last_seen = now
            self._cache.move_to_end(key)
        else:
            entry = _Entry(
                involved=involved,
                # Events about cluster-scoped objects (nodes, queues) live in "default".
                namespace=involved.namespace or "default",
                type=type,
                reason=reason,
                message=message,
                name=self._new_name(involved.name),
                first_timestamp=stamp,
                last_timestamp=stamp,
                last_seen=now,
            )
            self._cache[key] = entry
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)  # a queued entry keeps its reference and is sent
        self._enqueue(entry)

    def _within_budget(self, involved: ObjectReference) -> bool:
        """Take one event from ``involved``'s budget (``SPAM_BURST``, refilled one per
        ``SPAM_REFILL_SECONDS``); False when it is spent."""
        key = (involved.kind, involved.namespace, involved.name, involved.uid)
        now = self._clock()
        budgets = self._budgets
        found = budgets.get(key)
        if found is None:
            tokens = float(SPAM_BURST)
            if len(budgets) >= _SPAM_OBJECTS:
                budgets.popitem(last=False)
        else:
            tokens = min(float(SPAM_BURST), found[0] + (now - found[1]) / SPAM_REFILL_SECONDS)
            budgets.move_to_end(key)
        if tokens < 1.0:
            budgets[key] = (tokens, now)
            return False
        budgets[key] = (tokens - 1.0, now)
        return True

    def _new_name(self, involved_name: str) -> str:
        # Strictly increasing nanoseconds: two events in the same tick still get distinct names.
        nanos = max(time.time_ns(), self._last_nanos + 1)
        self._last_nanos = nanos
        return event_name(involved_name, nanos)

    def _enqueue(self, entry: _Entry) -> None:
        if entry.sending:
            entry.dirty = True
            return
        if entry.queued:
            return  # the worker will send the latest count
        queue = self._ensure_workers()
        if queue.qsize() >= self._max_pending:
            self._results.labels("dropped").inc()
            self._dropped += 1
            now = self._clock()
            # One line per interval, not one per event: a flood would log millions of lines.
            if now - self._last_drop_log >= DROP_LOG_INTERVAL:
                self._log.warning(
                    "too many events pending; dropping",
                    dropped=self._dropped,
                    reason=entry.reason,
                    interval_seconds=DROP_LOG_INTERVAL,
                )
                self._dropped, self._last_drop_log = 0, now
            return
        entry.queued = True
        queue.put_nowait(entry)

    def _ensure_workers(self) -> asyncio.Queue[_Entry]:
        if self._queue is None:
            self._queue = asyncio.Queue()
        if not self._workers:
            # Needs a running loop: record() is called from coroutines and loop callbacks.
            asyncio.get_running_loop()
            self._workers = [
                asyncio.create_task(self._work(), name=f"caldera-event-recorder-{i}")
                for i in range(self._concurrency)
            ]
            for task in self._workers:
                task.add_done_callback(self._worker_exited)
        return self._queue

    def _worker_exited(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        self._log.error("event recorder worker exited", task=task.get_name(), error=repr(exc))

    # ---- sending (background) ---------------------------------------------------------------

    async def _work(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            entry = await queue.get()
            entry.queued = False
            entry.sending = True
            try:
                await self._send(entry)
            except Exception as exc:  # logged and counted; the caller never sees it
                self._results.labels("failed").inc()
                self._log.warning(
                    "writing an event failed",
                    reason=entry.reason,
                    object=f"{entry.involved.kind}/{entry.involved.name}",
                    namespace=entry.namespace,
                    error=str(exc),
                )
            finally:
                entry.sending = False
                if entry.dirty:
                    entry.dirty = False
                    self._enqueue(entry)  # before task_done, so flush() waits for it too
                queue.task_done()

    async def _send(self, entry: _Entry) -> None:
        if entry.created:
            patch = {"count": entry.count, "lastTimestamp": entry.last_timestamp}
            try:
                await self._client.patch(
                    EVENT, entry.name, patch, namespace=entry.namespace, patch_type=PatchType.MERGE
                )
            except NotFound:
                # The Event expired (or was deleted) while we kept counting: start a new one.
                entry.created = False
                entry.name = self._new_name(entry.involved.name)
            else:
                self._results.labels("updated").inc()
                return
        try:
            await self._create(entry)
        except AlreadyExists:
            entry.name = self._new_name(entry.involved.name)  # a name clash with another process
            await self._create(entry)

    async def _create(self, entry: _Entry) -> None:
        event = Event(
            metadata=ObjectMeta(name=entry.name, namespace=entry.namespace),
            involved_object=entry.involved,
            reason=entry.reason,
            message=entry.message,
            type=entry.type,
            count=entry.count,
            first_timestamp=entry.first_timestamp,
            last_timestamp=entry.last_timestamp,
            source=self._source,
            reporting_component=self._source.component,
            reporting_instance=self._source.host,
        )
        await self._client.create(EVENT, event, namespace=entry.namespace)
        entry.created = True
        self._results.labels("created").inc()

    # ---- lifecycle ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Wait until every event recorded so far has been written (or has failed)."""
        if self._queue is not None:
            await self._queue.join()

    async def close(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - a drain deadline
        """Stop accepting events, flush for up to `timeout` seconds, then stop the workers."""
        self._closed = True
        try:
            async with asyncio.timeout(timeout):
                await self.flush()
        except TimeoutError:
            self._log.warning("event recorder closed with events unsent", seconds=timeout)
        for task in self._workers:
            task.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
