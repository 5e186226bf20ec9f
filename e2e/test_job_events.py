"""Events the job controller records on a Job, on the real API server: Volcano's PodGroupPending
Warning when the Job's PodGroup is Unschedulable, once per message, not once per sync; and a Job
stored with a template the API server refuses as a pod (no webhook was there to refuse it):
one FailedCreate Warning naming the field, status.state naming it, Terminated, no retry loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caldera.api.core import Event
from caldera.api.kinds import EVENT, JOB, PODGROUP
from caldera.api.volcano import PodGroup
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    get_job,
    in_phase,
    job,
    job_controller,
    pods_of,
    scheduled,
    task,
)
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


async def _terminated_once(kube: KubeClient, namespace: str, name: str, field: str) -> None:
    """The Job ends Terminated with reason InvalidPodTemplate naming `field`, one FailedCreate
    Event naming it, and stays so: no further create attempts, no further Events."""
    done = await eventually(
        lambda: in_phase(kube, namespace, name, "Terminated"), timeout=60, what="Terminated"
    )
    phases = [c.status for c in done.status.conditions]
    assert phases.index("Terminating") < phases.index("Terminated"), phases
    events = await eventually(
        lambda: _count(kube, namespace, name, "FailedCreate", 1), timeout=30, what="FailedCreate"
    )
    await asyncio.sleep(3)  # a hot loop of creates would add Events or raise the count here
    again = await _events(kube, namespace, name, "FailedCreate")
    assert [(e.type, e.count) for e in again] == [("Warning", 1)]
    assert field in events[0].message
    assert "the job is terminated" in events[0].message
    state = (await get_job(kube, namespace, name)).status.state
    assert (state.phase, state.reason) == ("Terminated", "InvalidPodTemplate")
    assert field in state.message
    assert not {
        n
        for n, p in (await pods_of(kube, namespace, name)).items()
        if p.metadata.deletion_timestamp is None
    }


async def test_stored_job_with_negative_request_is_terminated_once(
    kube: KubeClient, namespace: str
) -> None:
    """cpu "-1" (the webhook would refuse it): no pod is ever created; the Job is terminated with
    the field in a Warning Event and in status.state, once."""
    bad = task("w", 2)
    bad["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    await kube.create(JOB, job("neg", [bad]), namespace=namespace)
    field = (
        'spec.task[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0"
    )

    await _terminated_once(kube, namespace, "neg", field)
    assert not await pods_of(kube, namespace, "neg")
    state = (await get_job(kube, namespace, "neg")).status.state
    assert state.message == field


@pytest.mark.usefixtures("scheduled")
async def test_pod_refused_as_invalid_terminates_the_job_once(
    kube: KubeClient, namespace: str
) -> None:
    """A template rule Caldera does not check (a probe without a handler): the API server refuses
    the pod create with 422; the Job is terminated with its message once, not retried."""
    bad = task("w", 1)
    bad["template"]["spec"]["containers"][0]["livenessProbe"] = {"periodSeconds": 5}
    await kube.create(JOB, job("probe", [bad]), namespace=namespace)
    await _terminated_once(kube, namespace, "probe", "spec.containers[0].livenessProbe")
