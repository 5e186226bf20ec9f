"""A ControllerContext for unit tests of one controller's handlers and reconcile decisions,
without an API server: its informers are only asked for (never started) and its client is never
called; the recorder and the clock are the test's."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, cast

from prometheus_client import CollectorRegistry

from caldera.obs.metrics import ControllerMetrics
from caldera.settings import ControllersSettings
from controllers.runtime import ControllerContext, utc_now
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics


def offline_context(
    *, recorder: object = None, clock: Callable[[], dt.datetime] = utc_now
) -> ControllerContext:
    """A context whose informers and client are never started or called (see the module)."""
    registry = CollectorRegistry()
    return ControllerContext(
        client=cast(Any, None),
        informers=SharedInformerFactory(cast(Any, None), registry=registry),
        settings=ControllersSettings(),
        registry=registry,
        metrics=ControllerMetrics(registry),
        queue_metrics=WorkQueueMetrics(registry),
        recorder=cast(Any, recorder),
        clock=clock,
    )
