"""Volcano's metric names, read from the processes' /metrics on the real API server: with
``--volcano-metrics`` the scheduler serves the queue (GPUs included), namespace and per-job
series under ``volcano_*`` beside Caldera's, with the same values, and the controllers serve
Volcano's PodGroup counts per queue."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import POD, PODGROUP, QUEUE
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e
GPU = "nvidia.com/gpu"


@pytest.fixture
async def queue(kube: KubeClient, crds: Path) -> AsyncIterator[str]:
    """A queue of weight 3 of the test's own, deleted afterwards."""
    name = f"vmetrics-{secrets.token_hex(3)}"
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 3, "reclaimable": True},
    }
    await kube.create(QUEUE, body)
    yield name
    with contextlib.suppress(NotFound):
        await kube.delete(QUEUE, name)


def _podgroup(name: str, queue: str, members: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members, "queue": queue},
    }


def _pod(name: str, group: str, gpus: int) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "64Mi", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": requests, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }


def _both(proc: CalderaProcess, suffix: str, labels: dict[str, str]) -> tuple[float | None, ...]:
    """(caldera_<suffix>, volcano_<suffix>) as served."""
    return proc.metric(f"caldera_{suffix}", labels), proc.metric(f"volcano_{suffix}", labels)


async def test_volcano_names_on_metrics(
    kube: KubeClient, cluster: Cluster, namespace: str, queue: str, tmp_path: Path
) -> None:
    """A gang of two 1-GPU pods runs in the queue and a 100-GPU gang waits: the scheduler's
    /metrics carries, under both prefixes and with equal values, the queue's GPUs allocated and
    requested (milli-units, Volcano's *_scalar_resources), its weight, the namespace's share,
    the placed job's e2e_job_scheduling_* series, the waiting gang in unschedule_job_count and
    job_retry_counts; the controllers' carries the queue's PodGroup counts."""
    common = ["--leader-elect=false", "--volcano-metrics=true"]
    scheduler = CalderaProcess(
        "scheduler",
        [*common, "--schedule-period=0.5s"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    controllers = CalderaProcess(
        "controllers",
        [*common, "--controllers=queue"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    try:
        await kube.create(PODGROUP, _podgroup("fits", queue, 2), namespace=namespace)
        await kube.create(PODGROUP, _podgroup("huge", queue, 1), namespace=namespace)
        for i in range(2):
            await kube.create(POD, _pod(f"fits-{i}", "fits", 1), namespace=namespace)
        await kube.create(POD, _pod("huge-0", "huge", 100), namespace=namespace)

        gpu = {"queue_name": queue, "resource": GPU}
        q = {"queue_name": queue}

        async def allocated() -> bool:
            return _both(scheduler, "queue_allocated_scalar_resources", gpu) == (2000.0, 2000.0)

        await eventually(allocated, timeout=60, what="2 GPUs allocated, under both names")
        assert _both(scheduler, "queue_request_scalar_resources", gpu) == (102000.0, 102000.0)
        assert _both(scheduler, "queue_weight", q) == (3.0, 3.0)
        share = _both(scheduler, "namespace_share", {"namespace_name": namespace})
        assert share[0] is not None
        assert share[0] > 0
        assert share[0] == share[1]

        job = {"job_name": "fits", "queue": queue, "job_namespace": namespace}
        duration = _both(scheduler, "e2e_job_scheduling_duration", job)
        assert duration[0] is not None
        assert duration[0] > 0
        assert duration[0] == duration[1]
        start = _both(scheduler, "e2e_job_scheduling_start_time", job)
        last = _both(scheduler, "e2e_job_scheduling_last_time", job)
        assert start[0] is not None
        assert last[0] is not None
        assert start[0] <= last[0]
        waiting = _both(scheduler, "e2e_job_scheduling_start_time", {**job, "job_name": "huge"})
        assert waiting[0] is not None  # set when the PodGroup is seen, bound or not
        assert scheduler.metric("volcano_e2e_job_scheduling_latency_milliseconds_count") == (
            scheduler.metric("caldera_e2e_job_scheduling_latency_milliseconds_count")
        )

        retries = {"job_ns": namespace, "job_id": "huge"}
        counted = scheduler.metric("caldera_job_retry_counts_total", retries)
        assert counted is not None
        assert counted >= 1
        # Volcano's counter has no _total; the copy is read right after, so it may be higher.
        volcano_retries = scheduler.metric("volcano_job_retry_counts", retries)
        assert volcano_retries is not None
        assert volcano_retries >= counted
        unready = _both(scheduler, "unschedule_job_count", {})
        assert unready[0] is not None
        assert unready[0] >= 1

        async def running_count() -> bool:
            served = _both(controllers, "queue_pod_group_running_count", q)
            return served == (1.0, 1.0)

        await eventually(running_count, timeout=30, what="the queue's running PodGroup count")
        # Caldera's eviction counter is not Volcano's pod_preemption_victims gauge: no copy.
        assert scheduler.metric("volcano_pod_preemption_victims") is None
    finally:
        codes = {"scheduler": scheduler.stop(), "controllers": controllers.stop()}
    assert codes == {"scheduler": 0, "controllers": 0}, scheduler.log()[-3000:]
