"""The reflector: keeps a Store equal to the API server's view of one resource type.

Protocol (the Kubernetes list/watch contract):

1. LIST (paginated, a consistent snapshot) and ``Store.replace`` it. The store computes the
   difference with what it held, so after a relist handlers get exactly the adds, updates and
   deletes they missed (a delete found this way carries the last known object).
2. WATCH from the list's resourceVersion with bookmarks. Every event, bookmarks included,
   advances the store's resourceVersion, so a watch that ends (server timeout, cut connection,
   API server restart) resumes from the last event seen: nothing is lost, nothing repeated.
3. A watch answered with 410 Gone (the resourceVersion fell out of etcd's history) goes back to
   step 1 with a quorum LIST.
4. Failures back off exponentially with jitter (0.8 s up to 30 s), reset after a healthy minute.

An optional transform (client-go's ``SetTransform``) maps every listed or watched object before
it enters the store and reaches the handlers: the pod informer uses it to share the parts equal
across pods (`informers.interning`). It must return an object equal to its input for everything
the cache's readers look at, and must not raise.

Event handlers run synchronously on the loop in the order events arrive; they must only enqueue
keys. A handler that raises is logged and does not stop the reflector or the other handlers.
An event whose resourceVersion the store already holds for that object is dropped, so a resumed
watch never delivers the same change twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import structlog

from caldera.api.codec import UndecodableError
from caldera.api.kinds import KindInfo
from caldera.api.meta import Status, WatchEvent, WatchEventType
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Gone, error_from_status
from caldera.ratelimit import jittered_backoff
from informers.metrics import InformerMetrics
from informers.store import Delta, DeltaKind, KubeObject, ResourceEventHandler, Store, dispatch

T = TypeVar("T", bound=KubeObject)

BACKOFF_BASE = 0.8
BACKOFF_CAP = 30.0
HEALTHY_AFTER = 60.0  # seconds of a working watch after which the backoff starts over
WATCH_MIN_SECONDS = 300  # client-go's range: a jittered timeout spreads re-watches over time


class Reflector(Generic[T]):
    """List and watch one resource type into ``store``, notifying ``handlers`` of each change."""

    def __init__(
        self,
        *,
        client: KubeClient,
        kind: KindInfo[T],
        store: Store[T],
        handlers: Sequence[ResourceEventHandler[T]],
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        metrics: InformerMetrics | None = None,
        transform: Callable[[T], T] | None = None,
        rng: Callable[[], float] = random.random,  # seam for tests of the jitter
    ) -> None:
        self.client, self.kind, self.store = client, kind, store
        self.transform = transform
        self.handlers = handlers
        self.namespace = namespace
        self.label_selector, self.field_selector = label_selector, field_selector
        self.page_size = page_size
        self.metrics = metrics
        self.rng = rng
        self.resource = kind.plural if not kind.group else f"{kind.plural}.{kind.group}"
        self.log = structlog.get_logger("reflector").bind(resource=self.resource)
        self._synced = asyncio.Event()

    @property
    def has_synced(self) -> bool:
        return self.store.has_synced

    async def wait_synced(self) -> None:
        await self._synced.wait()

    async def run(self) -> None:
        """Run until cancelled."""
        # A store that already holds a synced snapshot resumes watching from its resourceVersion
        # (a restarted informer, or a test of the 410 path); an empty one lists first.
        need_list = not self.store.has_synced
        failures = 0
        while True:
            started = time.monotonic()
            try:
                if need_list:
                    await self._list()
                    need_list = False
                await self._watch()
                failures = 0  # a watch that ran to its timeout is healthy
                continue
            except Gone:
                self.log.info("resourceVersion too old, listing again")
                need_list = True
                continue  # a relist is the remedy; no need to wait
            except (ApiError, ApiConnectionError, TimeoutError, OSError) as exc:
                error: BaseException = exc
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not silently end the informer
                self.log.exception("reflector error")
                error = exc
            if time.monotonic() - started > HEALTHY_AFTER:
                failures = 0
            failures += 1
            delay = jittered_backoff(failures, BACKOFF_BASE, BACKOFF_CAP, rng=self.rng)
            self.log.warning(
                "list/watch failed, retrying", error=str(error), retry_in=round(delay, 2)
            )
            if self.metrics:
                self.metrics.watch_restarts.labels(resource=self.resource).inc()
            await asyncio.sleep(delay)

    async def _list(self) -> None:
        result = await self.client.list(
            self.kind,
            namespace=self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=self.page_size,
        )
        first = not self.store.has_synced
        items: Sequence[T] = result.items
        if self.transform is not None:
            items = await self._transformed(items, self.transform)
        deltas = self.store.replace(items, result.resource_version)
        for delta in deltas:
            self._notify(delta)
        if self.metrics:
            if not first:
                self.metrics.relists.labels(resource=self.resource).inc()
            self.metrics.objects.labels(resource=self.resource).set(len(self.store))
        self.log.debug(
            "listed", objects=len(self.store), changes=len(deltas), rv=result.resource_version
        )
        self._synced.set()

    async def _transformed(self, items: Sequence[T], transform: Callable[[T], T]) -> list[T]:
        """`items` transformed, a page at a time with the loop let run in between: a relist of
        50,000 pods is about half a second of transforms, too long to hold the loop."""
        out: list[T] = []
        step = max(self.page_size, 1)
        for start in range(0, len(items), step):
            if start:
                await asyncio.sleep(0)
            out.extend(map(transform, items[start : start + step]))
        return out

    async def _watch(self) -> None:
        timeout = int(WATCH_MIN_SECONDS * (1 + self.rng()))
        async with self.client.watch(
            self.kind,
            namespace=self.namespace,
            resource_version=self.store.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
        ) as events:
            try:
                async for event in events:
                    self._handle(event)
            except UndecodableError as exc:
                # Skip it, or every re-watch would fail on the same event forever; the next
                # relist or update of the object brings it back if the model can take it then.
                self.log.error("skipped an undecodable watch event", error=str(exc))
                if exc.resource_version:
                    self.store.set_resource_version(exc.resource_version)

    def _handle(self, event: WatchEvent[T] | WatchEvent[Status]) -> None:
        if isinstance(event.object, Status):
            raise error_from_status(event.object)
        if event.type == WatchEventType.BOOKMARK:
            rv = _resource_version(event.object)
            if rv:
                self.store.set_resource_version(rv)
            return
        if event.object is not None:
            self._apply(event.type, event.object)

    def _apply(self, event_type: str, obj: T) -> None:
        if self.transform is not None:
            obj = self.transform(obj)
        key = self.store.key_of(obj)
        rv = _resource_version(obj)
        if event_type == WatchEventType.DELETED:
            self.store.remove(key, resource_version=rv)
            # The watch's copy is the final state: handlers get it rather than the cached one.
            delta: Delta[T] = Delta(DeltaKind.DELETED, key, obj, None)
        else:
            current = self.store.get(key)
            if current is not None and _resource_version(current) == rv:
                self.store.set_resource_version(rv)
                return  # already applied (a resumed watch replaying its first event)
            old = self.store.upsert(obj)
            delta = (
                Delta(DeltaKind.ADDED, key, None, obj)
                if old is None
                else Delta(DeltaKind.MODIFIED, key, old, obj)
            )
        if self.metrics:
            self.metrics.events.labels(resource=self.resource, type=event_type).inc()
            self.metrics.objects.labels(resource=self.resource).set(len(self.store))
        self._notify(delta)

    def _notify(self, delta: Delta[T]) -> None:
        try:
            dispatch(delta, self.handlers)
        except ExceptionGroup as group:
            for exc in group.exceptions:
                self.log.error("event handler failed", key=delta.key, error=repr(exc))


def _resource_version(obj: object) -> str:
    meta = getattr(obj, "metadata", None)
    return getattr(meta, "resource_version", None) or ""
