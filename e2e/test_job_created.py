"""The job controller on a pod cache that lags its own creations, as a busy watch does: the
pods it created still count as the Job's, so no pod is POSTed twice (AlreadyExists)."""

from __future__ import annotations

import asyncio

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import JOB, POD
from caldera.kube.client import KubeClient
from controllers.job.controller import JobController
from e2e.apiserver_metrics import request_counts
from e2e.controller_harness import run_controllers
from e2e.job_fixtures import enqueued_only, job, task  # noqa: F401 - fixtures
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds", "enqueued_only")]

LAG = 1.5  # seconds a new pod stays out of the controller's view


class LaggingCacheJobController(JobController):
    """A JobController whose pod cache shows each new pod ``LAG`` seconds after the watch
    brought it: both the store reads and the ADDED handler wait."""

    def setup(self) -> None:
        super().setup()
        self.shown: set[str] = set()
        store = self.pods.store
        by_index, get = store.by_index, store.get

        def lagging_by_index(index: str, key: str) -> list[Pod]:
            return [p for p in by_index(index, key) if p.metadata.uid in self.shown]

        def lagging_get(key: str) -> Pod | None:
            pod: Pod | None = get(key)
            return pod if pod is not None and pod.metadata.uid in self.shown else None

        store.by_index = lagging_by_index  # type: ignore[method-assign,assignment]
        store.get = lagging_get  # type: ignore[method-assign]

    def _pod_added(self, pod: Pod) -> None:
        def show() -> None:
            self.shown.add(pod.metadata.uid)
            super(LaggingCacheJobController, self)._pod_added(pod)

        asyncio.get_running_loop().call_later(LAG, show)


async def test_pods_created_but_not_yet_cached_are_not_created_again(
    kube: KubeClient, namespace: str
) -> None:
    jobs, replicas = 4, 6
    async with run_controllers(kube, LaggingCacheJobController):
        before = await request_counts(kube, by_code=True)
        for j in range(jobs):
            body = job(f"lag-{j}", [task("worker", replicas)])
            await kube.create(JOB, body, namespace=namespace)

        async def all_pods() -> bool:
            return len((await kube.list(POD, namespace=namespace)).items) >= jobs * replicas

        await eventually(all_pods, timeout=60, what=f"{jobs * replicas} pods")
        await asyncio.sleep(LAG + 1.0)  # the reconciles the late ADDED events trigger
        after = await request_counts(kube, by_code=True)
    assert after["POST pods 201"] - before["POST pods 201"] == jobs * replicas
    assert after["POST pods 409"] - before["POST pods 409"] == 0
