"""Controllers run in-process on their own informers, wired as ``caldera controllers`` wires
them, for tests that need to reach inside a controller."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator, Callable

from prometheus_client import CollectorRegistry

from caldera.kube.client import KubeClient
from caldera.kube.events import EventRecorder
from caldera.obs.metrics import ControllerMetrics
from caldera.settings import ControllersSettings
from controllers.runtime import Controller, ControllerContext, utc_now
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics


@contextlib.asynccontextmanager
async def run_controllers(
    kube: KubeClient,
    *classes: type[Controller],
    settings: ControllersSettings | None = None,
    clock: Callable[[], dt.datetime] = utc_now,
) -> AsyncIterator[ControllerContext]:
    """Controllers on one shared informer cache, started after it synced, as the manager does."""
    registry = CollectorRegistry()
    factory = SharedInformerFactory(kube, registry=registry)
    recorder = EventRecorder(kube, "caldera-e2e", registry=registry)
    ctx = ControllerContext(
        client=kube,
        informers=factory,
        settings=settings or ControllersSettings(leader_elect=False),
        registry=registry,
        metrics=ControllerMetrics(registry),
        queue_metrics=WorkQueueMetrics(registry),
        recorder=recorder,
        clock=clock,
    )
    controllers = [cls(ctx) for cls in classes]
    for controller in controllers:
        controller.setup()
    factory.start()
    try:
        await factory.wait_for_sync()
        for controller in controllers:
            controller.start(2)
        yield ctx
    finally:
        for controller in controllers:
            await controller.shutdown(5)
        await factory.stop()
        await recorder.close()
