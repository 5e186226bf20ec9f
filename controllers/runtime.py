"""The controller base every Caldera controller builds on (controller-runtime's contract).

A controller registers informer handlers that only map events to keys ("namespace/name") and put
them on its own work queue. Workers take keys and call ``reconcile(key)``, which reads everything
it needs from the shared cache, decides with pure functions, and writes. The outcome contract:

- return ``None`` or ``Result()``: done; the key's failure count is reset;
- return ``Result(requeue_after=s)``: done for now, look again in ``s`` (> 0) seconds;
- raise ``TerminalError``: a permanent failure; logged and counted, never retried;
- a write dropped by the leader's fence (``FencedError``): the Lease may have passed; the queue
  shuts down and nothing is retried (the elector ends the work);
- raise anything else: a transient failure; retried with per-key exponential backoff.

The queue never hands one key to two workers, so a reconcile never races itself. Workers start
only after the shared informers have synced, so nothing acts on an empty cache.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import structlog
from prometheus_client import CollectorRegistry

from caldera.api.kinds import KindInfo
from caldera.api.meta import ObjectMeta, controller_of
from caldera.kube.client import KubeClient
from caldera.kube.errors import Conflict, NotFound
from caldera.kube.events import EventRecorder
from caldera.kube.fence import FencedError
from caldera.kube.requests import PropagationPolicy
from caldera.obs.metrics import ControllerMetrics
from caldera.settings import ControllersSettings
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics
from informers.store import HandlerFuncs, KubeObject, meta_namespace_key
from informers.workqueue import ShutDown, WorkQueue

T = TypeVar("T", bound=KubeObject)


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for besides success: a later look at the same key."""

    requeue_after: float | None = None


class TerminalError(Exception):
    """A failure that retrying cannot fix (bad spec, missing permission the user must grant)."""


def utc_now() -> dt.datetime:
    """The wall clock, in UTC: the default ``ControllerContext.clock``."""
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class ControllerContext:
    """Everything a controller gets from the process that runs it."""

    client: KubeClient
    informers: SharedInformerFactory
    settings: ControllersSettings
    registry: CollectorRegistry
    metrics: ControllerMetrics
    queue_metrics: WorkQueueMetrics
    recorder: EventRecorder
    # The one wall clock every time-dependent decision reads (cron schedules, TTLs), so tests
    # drive it instead of sleeping. Delays the work queue waits stay in real loop time.
    clock: Callable[[], dt.datetime] = field(default=utc_now)


def controller_key(meta: ObjectMeta, kind: str, api_version: str) -> str | None:
    """``namespace/name`` of the object's controller (its owner reference with ``controller:
    true``) when that is a ``kind`` of ``api_version``, else None."""
    ref = controller_of(meta)
    if ref is None or ref.kind != kind or ref.api_version != api_version:
        return None
    return f"{meta.namespace}/{ref.name}"


def enqueue_keys(queue: WorkQueue, key_of: Callable[[T], str | None]) -> HandlerFuncs[T]:
    """Informer handlers that put ``key_of(obj)`` on ``queue`` (when it is not None) for every
    add, update and delete; an update whose key changed queues the old key too, so the object
    it left is looked at as well."""

    def changed(obj: T) -> None:
        key = key_of(obj)
        if key is not None:
            queue.add(key)

    def updated(old: T, new: T) -> None:
        changed(new)
        if key_of(old) != key_of(new):
            changed(old)

    return HandlerFuncs(add=changed, update=updated, delete=changed)


async def delete_child(client: KubeClient, kind: KindInfo[Any], meta: ObjectMeta) -> bool:
    """Delete the object ``meta`` describes and no other: its UID is a precondition, so a new
    object under the same name is left alone; propagation is Background (the garbage collector
    removes what it owns). False when it was gone or replaced already; other API errors raise."""
    try:
        await client.delete(
            kind,
            meta.name,
            namespace=meta.namespace or None,
            uid=meta.uid,
            propagation_policy=PropagationPolicy.BACKGROUND,
        )
    except (NotFound, Conflict):
        return False
    return True


class Controller(abc.ABC):
    """A named reconcile loop over one work queue."""

    name: ClassVar[str]

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.queue = WorkQueue(self.name, metrics=ctx.queue_metrics)
        self.log = structlog.get_logger("controller").bind(controller=self.name)
        self._workers: list[asyncio.Task[None]] = []

    @abc.abstractmethod
    def setup(self) -> None:
        """Ask the informer factory for the informers this controller reads; add handlers."""

    @abc.abstractmethod
    async def reconcile(self, key: str) -> Result | None:
        """Bring the world in line with the object named ``key``; see the module docstring."""

    def enqueue(self, obj: KubeObject) -> None:
        self.queue.add(meta_namespace_key(obj))

    @property
    def working(self) -> bool:
        """Whether this replica's workers run: only the leader's do (a standby keeps its cache
        warm and its handlers queue keys, but it must not act, not even record an Event)."""
        return bool(self._workers)

    def start(self, workers: int) -> None:
        for i in range(workers):
            task = asyncio.create_task(self._worker(), name=f"{self.name} worker {i}")
            self._workers.append(task)

    async def shutdown(self, grace: float) -> bool:
        """Stop taking keys, let reconciles in flight finish within ``grace`` seconds, then
        cancel the workers. True if everything in flight finished."""
        self.queue.shutdown()
        drained = await self.queue.shutdown_with_drain(grace)
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers.clear()
        return drained

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self._process(key)
            finally:
                self.queue.done(key)

    async def _process(self, key: str) -> None:
        metrics = self.ctx.metrics
        started = time.monotonic()
        metrics.workers.labels(controller=self.name).inc()
        with structlog.contextvars.bound_contextvars(
            controller=self.name, key=key, reconcile_id=uuid.uuid4().hex[:12]
        ):
            try:
                result = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except FencedError as exc:
                # The Lease may have passed: not a failure to retry. Stop taking keys; the
                # elector ends the work and the successor reconciles from its own cache.
                self.queue.shutdown()
                self.log.warning("leadership lost: reconciles stop", error=str(exc))
                outcome = "fenced"
            except TerminalError as exc:
                self.queue.forget(key)
                self.log.error("reconcile failed permanently", error=str(exc))
                outcome = "terminal_error"
            except Exception as exc:
                self.queue.add_rate_limited(key)
                retries = self.queue.num_requeues(key)
                self.log.warning("reconcile failed, will retry", error=repr(exc), retries=retries)
                outcome = "error"
            else:
                self.queue.forget(key)
                # As in controller-runtime, a zero or negative delay means no requeue (a
                # computed 0 must not spin the key).
                if (
                    result is not None
                    and result.requeue_after is not None
                    and result.requeue_after > 0
                ):
                    self.queue.add_after(key, result.requeue_after)
                    outcome = "requeue_after"
                else:
                    outcome = "success"
            finally:
                metrics.workers.labels(controller=self.name).dec()
            elapsed = time.monotonic() - started
            metrics.reconcile_time.labels(controller=self.name).observe(elapsed)
            metrics.reconcile_total.labels(controller=self.name, result=outcome).inc()
            if outcome in ("error", "terminal_error"):
                metrics.reconcile_errors.labels(controller=self.name).inc()
            self.log.debug("reconciled", result=outcome, seconds=round(elapsed, 4))
