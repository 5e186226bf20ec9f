"""The fake DRA driver on the real API server: it publishes slices the API server accepts,
reports the claims allocated on its nodes prepared (the API server validates those entries
against the allocation), and cleans up; also as a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

import pytest

from caldera.kube.client import KubeClient
from e2e.conftest import Cluster
from e2e.dra_kinds import (
    DEVICE_CLASS,
    POD_JSON,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    Json,
    claim_template,
    pod_with_claims,
)
from e2e.fake_dra_driver import DRIVER_LABEL, FakeDraDriver, NodeGpus, device_class
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
async def driver(kube: KubeClient, cluster: Cluster) -> AsyncIterator[FakeDraDriver]:
    """A driver of its own name (tests share the cluster) over the session's kwok nodes."""
    name = f"gpu-{os.getpid()}.e2e.caldera.dev"
    fake = FakeDraDriver.uniform(kube, cluster.nodes, NodeGpus(gpus=4), driver=name)
    await fake.publish()
    try:
        yield fake
    finally:
        await fake.cleanup(with_class=True)


async def _slices(kube: KubeClient, driver: str) -> list[Json]:
    listed = await kube.list(RESOURCE_SLICE, label_selector=f"{DRIVER_LABEL}={driver}")
    return list(listed.items)


async def test_publishes_a_slice_per_node_and_a_class(
    kube: KubeClient, cluster: Cluster, driver: FakeDraDriver
) -> None:
    slices = await _slices(kube, driver.driver)
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(cluster.nodes)
    assert {len(s["spec"]["devices"]) for s in slices} == {4}
    klass = await kube.get(DEVICE_CLASS, driver.driver)
    assert klass["spec"] == device_class(driver.driver)["spec"]
    await driver.publish()  # again: server-side apply, no conflict, nothing doubled
    assert len(await _slices(kube, driver.driver)) == len(cluster.nodes)


async def test_prepares_an_allocated_reserved_claim(
    kube: KubeClient, namespace: str, cluster: Cluster, driver: FakeDraDriver
) -> None:
    """A claim allocated (here by the test, as a scheduler would) on one of the driver's nodes
    and reserved for its pod gets Ready entries for exactly its devices, once."""
    await kube.create(
        RESOURCE_CLAIM_TEMPLATE, claim_template("g", driver.driver, 2), namespace=namespace
    )
    pod = await kube.create(
        POD_JSON, pod_with_claims("p", "nobody", {"gpu": "g"}), namespace=namespace
    )

    async def claim_name() -> str | None:
        got = await kube.get(POD_JSON, "p", namespace=namespace)
        statuses = got.get("status", {}).get("resourceClaimStatuses") or []
        return str(statuses[0]["resourceClaimName"]) if statuses else None

    name = await eventually(claim_name, what="the generated claim")
    node = cluster.nodes[0]
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": driver.driver, "pool": node, "device": f"gpu-{i}"}
                for i in (1, 2)
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    reserved = [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]
    await kube.patch_status(
        RESOURCE_CLAIM,
        name,
        {"status": {"allocation": allocation}},
        namespace=namespace,
    )
    assert await driver.prepare_once() == 0  # allocated, but no pod holds it yet
    await kube.patch_status(
        RESOURCE_CLAIM, name, {"status": {"reservedFor": reserved}}, namespace=namespace
    )
    assert await driver.prepare_once() == 1
    claim = await kube.get(RESOURCE_CLAIM, name, namespace=namespace)
    entries = claim["status"]["devices"]
    assert [(e["pool"], e["device"]) for e in entries] == [(node, "gpu-1"), (node, "gpu-2")]
    assert all(e["conditions"][0]["type"] == "Ready" for e in entries)
    assert driver.prepared == {
        f"{namespace}/{name}": [(driver.driver, node, "gpu-1"), (driver.driver, node, "gpu-2")]
    }
    assert await driver.prepare_once() == 0  # prepared once


async def test_runs_as_a_process_and_cleans_up(kube: KubeClient, cluster: Cluster) -> None:
    """``python -m e2e.fake_dra_driver`` publishes, keeps running, and on SIGTERM deletes its
    slices and class."""
    name = f"proc-{os.getpid()}.e2e.caldera.dev"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "e2e.fake_dra_driver",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--nodes={','.join(cluster.nodes[:2])}",
        f"--driver={name}",
        "--gpus=2",
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def published() -> bool:
            return len(await _slices(kube, name)) == 2

        await eventually(published, what="the process's two slices")
        assert proc.returncode is None
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert await proc.wait() == 0, err
        assert "deleted 2 ResourceSlices" in err.decode()
        assert await _slices(kube, name) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
