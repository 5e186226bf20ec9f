"""Fixtures and helpers shared by the job-controller e2e tests: the controller process, the
stand-in scheduler, small Job manifests whose pods kwok finishes on cue, and status probes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import JOB, POD
from caldera.api.volcano import Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster

# Re-exported: the job-controller tests import them from here.
from e2e.kwok_tasks import EXIT_CODE as EXIT_CODE
from e2e.kwok_tasks import RUN_FOR as RUN_FOR
from e2e.kwok_tasks import task as task
from e2e.standin_scheduler import standin_scheduler


def controllers_process(cluster: Cluster, tmp_path: Path, *names: str) -> Iterator[CalderaProcess]:
    """``caldera controllers --controllers=<names>`` for one test; it must exit cleanly."""
    proc = CalderaProcess(
        "controllers",
        [f"--controllers={','.join(names)}", "--leader-elect=false", "--log-level=debug"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield proc
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]


@pytest.fixture
def job_controller(cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[CalderaProcess]:
    """``caldera controllers --controllers=job`` for one test."""
    yield from controllers_process(cluster, tmp_path, "job")


@pytest.fixture
async def scheduled(kube: KubeClient, namespace: str, cluster: Cluster) -> AsyncIterator[None]:
    """The stand-in scheduler: PodGroups to Inqueue, pods bound to kwok nodes."""
    async with standin_scheduler(kube, namespace, cluster.nodes):
        yield


@pytest.fixture
async def enqueued_only(kube: KubeClient, namespace: str, cluster: Cluster) -> AsyncIterator[None]:
    """The stand-in scheduler's enqueue only: pods are created but never bound (stay Pending)."""
    async with standin_scheduler(kube, namespace, cluster.nodes, bind=False):
        yield


def job(name: str, tasks: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A Volcano Job of ``tasks``; ``spec`` adds fields (camelCase). minAvailable defaults to
    the total replicas, maxRetry and queue as the webhook would default them."""
    body: dict[str, Any] = {
        "minAvailable": sum(t["replicas"] for t in tasks),
        "schedulerName": "volcano",
        "queue": "default",
        "maxRetry": 3,
        "tasks": tasks,
    }
    body.update(spec)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": body,
    }


async def get_job(kube: KubeClient, namespace: str, name: str) -> Job:
    return await kube.get(JOB, name, namespace=namespace)


async def in_phase(kube: KubeClient, namespace: str, name: str, phase: str) -> Job | None:
    """The Job if it is in ``phase``, else None (for `eventually`)."""
    current = await get_job(kube, namespace, name)
    return current if current.status.state.phase == phase else None


async def pods_of(kube: KubeClient, namespace: str, job_name: str) -> dict[str, Pod]:
    """The Job's pods by name (including terminating ones)."""
    listed = await kube.list(POD, namespace=namespace)
    return {
        p.metadata.name: p
        for p in listed.items
        if p.metadata.annotations.get("volcano.sh/job-name") == job_name
    }


async def get_pod(kube: KubeClient, namespace: str, name: str) -> Pod | None:
    try:
        return await kube.get(POD, name, namespace=namespace)
    except NotFound:
        return None


async def finish_pod(kube: KubeClient, namespace: str, name: str, exit_code: int) -> None:
    """Make a running pod exit with ``exit_code`` now (kwok's finish stage)."""
    await kube.patch(
        POD,
        name,
        {"metadata": {"annotations": {EXIT_CODE: str(exit_code), RUN_FOR: "0s"}}},
        namespace=namespace,
    )


async def running_pods(
    kube: KubeClient, namespace: str, job_name: str, count: int
) -> dict[str, Pod] | None:
    """The Job's live pods if exactly ``count`` of them are Running (none terminating)."""
    pods = await pods_of(kube, namespace, job_name)
    live = {n: p for n, p in pods.items() if p.metadata.deletion_timestamp is None}
    if len(live) == count and all(p.status.phase == "Running" for p in live.values()):
        return live
    return None
