"""Controllers judge time by ``ControllerContext.clock``, the one wall clock: a Command for a
missing Job waits out its grace by that clock (controllers.command), so a test drives it."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from caldera.api.meta import ObjectMeta, OwnerReference, format_time
from caldera.api.volcano import BATCH_API_VERSION, Command
from caldera.obs.metrics import ControllerMetrics
from caldera.settings import ControllersSettings
from controllers.command.controller import TARGET_GRACE, CommandController
from controllers.runtime import ControllerContext
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics

CREATED = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


def command_controller(now: dt.datetime) -> CommandController:
    registry = CollectorRegistry()
    ctx = ControllerContext(
        # Informers are only asked for (never started) and the client is never called here.
        client=cast(Any, None),
        informers=SharedInformerFactory(cast(Any, None), registry=registry),
        settings=ControllersSettings(),
        registry=registry,
        metrics=ControllerMetrics(registry),
        queue_metrics=WorkQueueMetrics(registry),
        recorder=cast(Any, None),
        clock=lambda: now,
    )
    controller = CommandController(ctx)
    controller.setup()
    return controller


@pytest.mark.parametrize(
    ("elapsed", "removed", "left"),
    [(0.0, False, TARGET_GRACE), (2.0, False, TARGET_GRACE - 2.0), (TARGET_GRACE, True, 0.0)],
    ids=["new", "within-grace", "grace-over"],
)
def test_a_command_for_a_missing_job_waits_its_grace_by_the_context_clock(
    elapsed: float, removed: bool, left: float
) -> None:
    """The Command's age is the context clock's now minus its creationTimestamp."""
    controller = command_controller(CREATED + dt.timedelta(seconds=elapsed))
    command = Command(
        metadata=ObjectMeta(name="c", namespace="ns", creation_timestamp=format_time(CREATED)),
        action="AbortJob",
        target=OwnerReference(api_version=BATCH_API_VERSION, kind="Job", name="gone"),
    )
    why, wait = controller._missing_job(command)
    assert (why is not None) == removed
    assert wait == pytest.approx(left)
