"""PVC creation against the real API server: a burst of 50 jobs' PVCs goes no faster than the
configured rate and is interleaved across jobs."""

from __future__ import annotations

import asyncio
import time

import pytest

from caldera.api.kinds import PVC
from caldera.kube.client import KubeClient
from controllers.job.pvc_throttle import PvcCreator

pytestmark = pytest.mark.e2e


def _pvc(name: str, namespace: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


async def test_burst_of_50_jobs_is_paced_and_interleaved(kube: KubeClient, namespace: str) -> None:
    """50 jobs x 2 PVCs at 25/s (burst 5): at least (100-5)/25 s, every job's first PVC before
    any job's second, and every PVC exists on the server."""
    order: list[tuple[float, str]] = []
    creator = PvcCreator(
        kube,
        qps=25,
        burst=5,
        on_created=lambda owner, name: order.append((time.monotonic(), owner)),
    )
    creator.start()
    started = time.monotonic()
    try:
        waits = [
            creator.submit(f"{namespace}/job-{j}", _pvc(f"data-job-{j}-w-{i}", namespace))
            for i in range(2)
            for j in range(50)
        ]
        await asyncio.wait_for(asyncio.gather(*waits), 60)
    finally:
        await creator.stop()
    elapsed = time.monotonic() - started
    assert elapsed >= (100 - 5) / 25 * 0.95, f"100 PVCs took only {elapsed:.2f}s at 25/s"
    firsts = [owner for _, owner in order[:50]]
    assert len(set(firsts)) == 50, "every job got its first PVC before any job got its second"
    listed = await kube.list(PVC, namespace=namespace)
    assert len([p for p in listed.items if p.metadata.name.startswith("data-job-")]) == 100
    rate = 100 / elapsed
    print(f"100 PVCs in {elapsed:.2f}s: {rate:.1f}/s (limit 25/s, burst 5)")
