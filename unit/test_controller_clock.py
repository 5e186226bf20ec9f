"""Controllers judge time by ``ControllerContext.clock``, the one wall clock: a Command for a
missing Job waits out its grace by that clock (controllers.command), so a test drives it."""

from __future__ import annotations

import datetime as dt

import pytest

from caldera.api.meta import ObjectMeta, OwnerReference, format_time
from caldera.api.volcano import BATCH_API_VERSION, Command
from controllers.command.controller import TARGET_GRACE, CommandController
from unit.offline_controllers import offline_context

CREATED = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


def command_controller(now: dt.datetime) -> CommandController:
    ctx = offline_context(clock=lambda: now)
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
