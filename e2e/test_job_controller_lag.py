"""A pod that finishes while the job controller is writing for an earlier request (found by the
full chaos run, docs/reliability.md): its request waits for the next batch, but the cache already
shows it finished. Before the fix, the sync left in the running batch judged the Job by it first:
an ``exitCode: 3 -> AbortJob`` job whose pods both exited 3 ended Failed (minAvailable), not
Aborted.

The controller runs in-process so the test can hold it between two requests of one batch (where
it awaits its writes) while the pods fail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

import pytest

from caldera.api.core import PodPhase
from caldera.api.kinds import JOB
from caldera.api.volcano import Event, Job
from caldera.kube.client import KubeClient
from controllers.job.controller import JobController
from controllers.job.events import Request
from controllers.job.policy import Decision
from controllers.runtime import ControllerContext
from e2e.controller_harness import run_controllers
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    finish_pod,
    in_phase,
    job,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("scheduled")]


class HeldJobController(JobController):
    """The job controller, held after one request's writes while ``hold`` is armed."""

    instances: ClassVar[list[HeldJobController]] = []

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.hold: asyncio.Event | None = None  # armed: the next execution waits for it
        self.held = asyncio.Event()
        HeldJobController.instances.append(self)

    async def _execute(self, job: Job, decision: Decision) -> Job:
        written = await super()._execute(job, decision)
        gate, self.hold = self.hold, None
        if gate is not None:
            self.held.set()
            await gate.wait()
        return written


@pytest.mark.parametrize("pending_first", [False, True], ids=["next-batch", "same-batch"])
async def test_a_sync_does_not_judge_pods_whose_events_wait(
    kube: KubeClient, namespace: str, crds: Path, pending_first: bool
) -> None:
    """next-batch: the pods' PodFailed requests wait for the next batch while the held batch's
    sync is still to run. same-batch: a PodPending (whose policy is a sync) is also posted
    before they fail, so the next batch holds it ahead of the PodFailed requests, as a lagging
    controller's batch does."""
    body = job("abort", [task("worker", 2, policies=[{"exitCode": 3, "action": "AbortJob"}])])
    HeldJobController.instances.clear()
    async with run_controllers(kube, HeldJobController):
        (controller,) = HeldJobController.instances
        await kube.create(JOB, body, namespace=namespace)
        await eventually(lambda: running_pods(kube, namespace, "abort", 2), timeout=60)
        await eventually(lambda: in_phase(kube, namespace, "abort", "Running"), timeout=60)

        # One batch of two requests: a pod event (a SyncJob by the policies), then a sync.
        release = asyncio.Event()
        controller.hold = release
        key = f"{namespace}/abort"
        controller._post(Request(namespace, "abort", event=Event.POD_PENDING, pod_name="x"), key)
        controller._post(Request(namespace, "abort"), key)
        await asyncio.wait_for(controller.held.wait(), 30)

        # While the batch is held between its two requests, both pods exit 3.
        if pending_first:
            controller._post(
                Request(namespace, "abort", event=Event.POD_PENDING, pod_name="y"), key
            )
        for i in range(2):
            await finish_pod(kube, namespace, f"abort-worker-{i}", 3)

        async def both_failed_in_cache() -> bool:
            pods = [controller.pods.store.get(f"{namespace}/abort-worker-{i}") for i in range(2)]
            return all(p is not None and p.status.phase == PodPhase.FAILED for p in pods)

        await eventually(both_failed_in_cache, timeout=30, what="both pods Failed in the cache")
        release.set()
        await eventually(lambda: in_phase(kube, namespace, "abort", "Aborted"), timeout=60)
