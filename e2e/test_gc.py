"""The gc controller: a finished Job with ttlSecondsAfterFinished disappears about that long after
it finished, with its pods, PodGroup and PVCs (the garbage collector follows the owner refs)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import JOB, POD, PODGROUP, PVC
from caldera.api.meta import parse_time
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.standin_scheduler import standin_scheduler
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def controllers(cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[CalderaProcess]:
    proc = CalderaProcess(
        "controllers",
        ["--controllers=job,gc", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield proc
    assert proc.stop() == 0, proc.log()[-3000:]


@pytest.fixture
async def scheduled(kube: KubeClient, namespace: str, cluster: Cluster) -> AsyncIterator[None]:
    async with standin_scheduler(kube, namespace, cluster.nodes):
        yield


def _job(ttl: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "short"},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "ttlSecondsAfterFinished": ttl,
            "tasks": [
                {
                    "name": "w",
                    "replicas": 2,
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ],
                    "template": {
                        "metadata": {
                            "annotations": {
                                "kwok.caldera.io/exit-code": "0",
                                "kwok.caldera.io/run-for": "2s",
                            }
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox"}],
                        },
                    },
                }
            ],
        },
    }


async def test_finished_job_is_collected_after_its_ttl(
    kube: KubeClient, namespace: str, controllers: CalderaProcess, scheduled: None
) -> None:
    """ttlSecondsAfterFinished=5: the Job is deleted about 5 s after its Completed transition,
    and its pods, PodGroup and PVCs go with it."""
    await kube.create(JOB, _job(5), namespace=namespace)

    async def completed() -> str | None:
        job = await kube.get(JOB, "short", namespace=namespace)
        state = job.status.state
        return state.last_transition_time if state.phase == "Completed" else None

    finished_at = parse_time(
        await eventually(completed, timeout=60, interval=0.2, what="Completed")
    )
    pvcs = (await kube.list(PVC, namespace=namespace)).items
    assert sorted(p.metadata.name for p in pvcs) == ["data-short-w-0", "data-short-w-1"]

    async def deleting() -> bool:
        try:
            job = await kube.get(JOB, "short", namespace=namespace)
        except NotFound:
            return True
        return job.metadata.deletion_timestamp is not None

    await eventually(deleting, timeout=30, interval=0.1, what="the Job's deletion")
    deleted_after = time.time() - finished_at.timestamp()
    # lastTransitionTime has whole seconds, so up to 1 s early is expected.
    assert 4.0 <= deleted_after <= 7.0, f"deleted {deleted_after:.1f}s after finishing (ttl 5s)"

    async def gone() -> bool:
        try:
            await kube.get(JOB, "short", namespace=namespace)
        except NotFound:
            return True
        return False

    # Foreground deletion: the Job goes once its dependents are gone.
    await eventually(gone, timeout=90, what="the Job to be gone")

    async def dependents_gone() -> bool:
        pods = (await kube.list(POD, namespace=namespace)).items
        pgs = (await kube.list(PODGROUP, namespace=namespace)).items
        claims = (await kube.list(PVC, namespace=namespace)).items
        live_claims = [c for c in claims if not c.metadata.deletion_timestamp]
        return not pods and not pgs and not live_claims

    await eventually(dependents_gone, timeout=60, what="pods, PodGroup and PVCs to be collected")
