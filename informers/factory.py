"""Shared informers: one list/watch per resource type per process, however many consumers.

Every controller in a process asks the factory for the informer of a kind; the first request
creates it and later ones get the same object, so N controllers watching pods cost one watch and
one cache. Handlers and indexers are added before ``start``; a handler added to a running,
synced informer first receives an add for every cached object, so it never misses the past.

A periodic resync re-delivers every cached object to the handlers as an update with old == new
(local only, no API call): insurance against a lost event or a reconcile bug, as in client-go.

Each informer may transform the objects it caches (client-go's ``SetTransform``, controller-
runtime's ``ByObject.Transform``). By default the pod informer shares the parts equal across pods
(`informers.interning`): with the slim pod models, a cached pod of a Volcano job weighs about
1.8 KB instead of 6.4 KB (docs/benchmarks.md). Every process gets it without asking;
``transforms={}`` turns it off.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from caldera.api.kinds import POD, KindInfo
from caldera.kube.client import KubeClient
from informers.interning import PodInterner
from informers.metrics import InformerMetrics
from informers.reflector import Reflector
from informers.store import KubeObject, ResourceEventHandler, Store

T = TypeVar("T", bound=KubeObject)
log = structlog.get_logger("informers")

TransformFactory = Callable[[], Callable[[Any], Any]]
"""Makes the transform of one informer: each informer gets its own, so state such as an
interner's tables is never shared between caches."""


def default_transforms() -> dict[KindInfo[Any], TransformFactory]:
    """The transforms every factory applies unless told otherwise: pods share equal parts."""
    return {POD: PodInterner}


class SharedInformer(Generic[T]):
    """The cache of one kind and the handlers fed from it."""

    def __init__(
        self,
        client: KubeClient,
        kind: KindInfo[T],
        *,
        namespace: str | None,
        metrics: InformerMetrics | None,
        resync_period: float | None,
        transform: Callable[[T], T] | None = None,
    ) -> None:
        self.kind = kind
        self.store: Store[T] = Store()
        self._handlers: list[ResourceEventHandler[T]] = []
        self._reflector = Reflector(
            client=client,
            kind=kind,
            store=self.store,
            handlers=self._handlers,
            namespace=namespace,
            metrics=metrics,
            transform=transform,
        )
        self._resync_period = resync_period
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def has_synced(self) -> bool:
        return self._reflector.has_synced

    async def wait_synced(self) -> None:
        await self._reflector.wait_synced()

    def add_handler(self, handler: ResourceEventHandler[T]) -> None:
        self._handlers.append(handler)
        if self.has_synced:
            for obj in self.store.list():
                handler.on_add(obj)

    def add_indexer(self, name: str, fn: Callable[[T], Iterable[str]]) -> None:
        self.store.add_indexer(name, fn)

    def start(self) -> None:
        if self._tasks:
            return
        name = self._reflector.resource
        self._tasks.append(_guarded(self._reflector.run(), f"reflector {name}"))
        if self._resync_period:
            self._tasks.append(_guarded(self._resync(self._resync_period), f"resync {name}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _resync(self, period: float) -> None:
        await self.wait_synced()
        while True:
            await asyncio.sleep(period * (0.9 + 0.2 * random.random()))  # noqa: S311 - jitter
            for obj in self.store.list():
                for handler in self._handlers:
                    try:
                        handler.on_update(obj, obj)
                    except Exception:
                        log.exception("resync handler failed", kind=self.kind.kind)


class SharedInformerFactory:
    """Creates at most one informer per kind and starts and stops them together."""

    def __init__(
        self,
        client: KubeClient,
        *,
        registry: CollectorRegistry | None = None,
        namespace: str | None = None,
        resync_period: float | None = None,
        transforms: Mapping[KindInfo[Any], TransformFactory] | None = None,
    ) -> None:
        """`transforms`: per kind, what makes its informer's transform; None means
        `default_transforms()`."""
        self.client = client
        self.namespace = namespace
        self.resync_period = resync_period
        self.transforms = dict(default_transforms() if transforms is None else transforms)
        self.metrics = InformerMetrics(registry) if registry is not None else None
        self._informers: dict[tuple[str, str], SharedInformer[Any]] = {}
        self._started = False

    def informer(self, kind: KindInfo[T]) -> SharedInformer[T]:
        key = (kind.group, kind.plural)
        existing = self._informers.get(key)
        if existing is None:
            make_transform = self.transforms.get(kind)
            existing = SharedInformer(
                self.client,
                kind,
                namespace=self.namespace if kind.namespaced else None,
                metrics=self.metrics,
                resync_period=self.resync_period,
                transform=make_transform() if make_transform is not None else None,
            )
            self._informers[key] = existing
            if self._started:
                existing.start()
        informer: SharedInformer[T] = existing
        return informer

    def start(self) -> None:
        """Start every informer requested so far (and any requested later)."""
        self._started = True
        for informer in self._informers.values():
            informer.start()

    def has_synced(self) -> bool:
        return all(informer.has_synced for informer in self._informers.values())

    async def wait_for_sync(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self._informers.values()))
        self._started = False


def _guarded(coro: Any, name: str) -> asyncio.Task[None]:
    """A task whose unexpected end is logged at once instead of vanishing silently."""
    task: asyncio.Task[None] = asyncio.create_task(coro, name=name)

    def done(t: asyncio.Task[None]) -> None:
        if t.cancelled():
            return
        exc = t.exception()
        if exc is not None:
            log.error("background task failed", task=name, error=repr(exc))
        else:
            log.error("background task ended unexpectedly", task=name)

    task.add_done_callback(done)
    return task
