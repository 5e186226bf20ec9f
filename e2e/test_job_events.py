"""Events the job controller records on a Job, on the real API server: Volcano's PodGroupPending
Warning when the Job's PodGroup is Unschedulable, once per message, not once per sync."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caldera.api.core import Event
from caldera.api.kinds import EVENT, JOB, PODGROUP
from caldera.api.volcano import PodGroup
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.job_fixtures import get_job, job, job_controller, task  # noqa: F401 - fixtures
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("job_controller")]

GANG = "1/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"


async def _events(kube: KubeClient, namespace: str, name: str, reason: str) -> list[Event]:
    listed = await kube.list(
        EVENT, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    return [e for e in listed.items if e.reason == reason and e.involved_object.kind == "Job"]


async def _count(
    kube: KubeClient, namespace: str, name: str, reason: str, n: int
) -> list[Event] | None:
    """The Job's Events of `reason` once there are exactly `n` of them (for `eventually`)."""
    got = await _events(kube, namespace, name, reason)
    return got if len(got) == n else None


async def _podgroup(kube: KubeClient, namespace: str, name: str) -> PodGroup | None:
    try:
        return await kube.get(PODGROUP, name, namespace=namespace)
    except NotFound:
        return None


def _status(message: str, at: str, *, running: int = 0) -> dict[str, Any]:
    """What a scheduler writes: PodGroup status with an Unschedulable condition (the CRD has no
    status subresource, so a merge patch of the object writes it)."""
    condition = {
        "type": "Unschedulable",
        "status": "True",
        "reason": "NotEnoughResources",
        "message": message,
        "transitionID": at,
        "lastTransitionTime": at,
    }
    return {"status": {"phase": "Pending", "running": running, "conditions": [condition]}}


async def test_podgroup_pending_event_once_per_message(kube: KubeClient, namespace: str) -> None:
    """The PodGroup turns Unschedulable: one Warning PodGroupPending on the Job with Volcano's
    text; rewrites of the same condition add nothing; a new message is a new Event."""
    await kube.create(JOB, job("gang", [task("w", 2)]), namespace=namespace)
    created = await get_job(kube, namespace, "gang")
    group = f"gang-{created.metadata.uid}"
    await eventually(lambda: _podgroup(kube, namespace, group), timeout=30, what="PodGroup")

    await kube.patch(PODGROUP, group, _status(GANG, "2026-01-01T10:00:00Z"), namespace=namespace)
    want = f"PodGroup {namespace}:gang unschedulable, reason: {GANG}"
    first = await eventually(
        lambda: _count(kube, namespace, "gang", "PodGroupPending", 1), timeout=30, what="event"
    )
    assert [(e.type, e.message) for e in first] == [("Warning", want)]

    # The scheduler rewrites the same condition (new time, other fields): no new Event.
    for i in range(3):
        at = f"2026-01-01T10:0{i + 1}:00Z"
        await kube.patch(PODGROUP, group, _status(GANG, at, running=i), namespace=namespace)
    later = "0/2 tasks in gang unschedulable: pod group is not ready, 2 minAvailable"
    await kube.patch(PODGROUP, group, _status(later, "2026-01-01T10:09:00Z"), namespace=namespace)

    await eventually(
        lambda: _count(kube, namespace, "gang", "PodGroupPending", 2), timeout=30, what="second"
    )
    await asyncio.sleep(2)  # room for a wrongly recorded repeat to reach the server
    events = await _events(kube, namespace, "gang", "PodGroupPending")
    by_message = {e.message: e.count for e in events}
    assert by_message == {
        want: 1,
        f"PodGroup {namespace}:gang unschedulable, reason: {later}": 1,
    }
