"""Partitions (Volcano v1.14 ``partitionPolicy``) on the real API server with kwok nodes in racks
under spines: the job controller labels each pod with its partition and gives the PodGroup a
subGroupPolicy; the scheduler places each partition whole in one rack (hard mode, tier named
by the rack label); a failed pod's ``RestartPartition`` restarts its partition only, which
lands in one rack again; ``caldera job view`` shows the partitions; and a job whose second
partition finds no rack places neither, its PodGroup naming that partition.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import JOB, PODGROUP
from caldera.api.volcano import PARTITION_ID_KEY
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import RACK_LABEL
from e2e.conftest import Cluster
from e2e.job_fixtures import finish_pod, get_job, job, pods_of, task
from e2e.topology_fixtures import topology_nodes, topology_processes  # noqa: F401 - fixture
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

CALDERA = str(Path(sys.prefix) / "bin" / "caldera")
PARTITIONS, SIZE = 3, 4  # a partition of four 4-cpu pods fills a rack (2 nodes of 8 cpu)


@pytest.fixture
def processes(
    cluster: Cluster, tmp_path: Path, topology: dict[str, tuple[str, str]]
) -> Iterator[tuple[CalderaProcess, CalderaProcess]]:
    """The job and hypernode controllers (label discovery), and the scheduler with the
    network-topology-aware plugin."""
    yield from topology_processes(cluster, tmp_path, "job,hypernode")


def _partitioned_job(
    namespace: str, name: str = "train", partitions: int = PARTITIONS
) -> dict[str, Any]:
    worker = task(
        "worker",
        partitions * SIZE,
        cpu="4",
        partitionPolicy={
            "totalPartitions": partitions,
            "partitionSize": SIZE,
            "networkTopology": {"mode": "hard", "highestTierName": RACK_LABEL},
        },
        policies=[{"event": "PodFailed", "action": "RestartPartition"}],
    )
    spec = worker["template"]["spec"]
    spec["nodeSelector"] = {"e2e-topology": namespace}
    spec["tolerations"] = [{"operator": "Exists"}]
    return job(name, [worker])


async def _live_running(kube: KubeClient, namespace: str, count: int) -> dict[str, Pod] | None:
    """Train's live pods if exactly ``count`` of them run on a node (for ``eventually``)."""
    pods = await pods_of(kube, namespace, "train")
    live = {n: p for n, p in pods.items() if p.metadata.deletion_timestamp is None}
    ok = len(live) == count and all(
        p.status.phase == "Running" and p.spec.node_name for p in live.values()
    )
    return live if ok else None


def _racks(pods: dict[str, Pod], where: dict[str, tuple[str, str]]) -> dict[str, set[str]]:
    """Partition -> the racks its pods run in."""
    out: dict[str, set[str]] = {}
    for pod in pods.values():
        out.setdefault(pod.metadata.labels[PARTITION_ID_KEY], set()).add(
            where[pod.spec.node_name][0]
        )
    return out


async def test_partitions_land_one_per_rack_and_restart_alone(
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    topology: dict[str, tuple[str, str]],
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """Three 4-pod partitions of a hard-mode rack tier run one per rack; a pod of partition 1
    fails, and RestartPartition recreates partition 1's pods only (the others keep their
    UIDs), which run in one rack again; the job view counts the partitions placed. A second
    job of two rack-sized partitions, with one rack left, places neither (one whole partition
    is not enough) and its PodGroup says which partition has no rack."""
    await kube.create(JOB, _partitioned_job(namespace), namespace=namespace)
    pods = await eventually(
        lambda: _live_running(kube, namespace, PARTITIONS * SIZE), timeout=60, what="all running"
    )
    racks = _racks(pods, topology)
    assert sorted(racks) == ["0", "1", "2"]
    assert all(len(r) == 1 for r in racks.values()), racks
    assert len(set().union(*racks.values())) == PARTITIONS

    pg_name = next(iter(pods.values())).metadata.annotations["scheduling.k8s.io/group-name"]
    pg = await kube.get(PODGROUP, pg_name, namespace=namespace)
    assert [(p.name, p.sub_group_size, p.match_label_keys) for p in pg.spec.sub_group_policy] == [
        ("worker", SIZE, (PARTITION_ID_KEY,))
    ]

    before = {n: p.metadata.uid for n, p in pods.items()}
    await finish_pod(kube, namespace, "train-worker-5", 1)  # partition 1 (pods 4..7)

    async def restarted() -> dict[str, Pod] | None:
        live = await _live_running(kube, namespace, PARTITIONS * SIZE)
        if live is None:
            return None
        changed = {n for n, p in live.items() if p.metadata.uid != before[n]}
        return live if changed == {f"train-worker-{i}" for i in range(4, 8)} else None

    after = await eventually(restarted, timeout=90, what="partition 1 recreated and running")
    assert all(len(r) == 1 for r in _racks(after, topology).values())
    assert (await get_job(kube, namespace, "train")).status.retry_count == 1

    shown = await asyncio.to_thread(
        subprocess.run,
        [CALDERA, "job", "view", "train", "-n", namespace, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Partitions worker: 3 of 3 placed (minSubGroups 0, 4 pods each)" in shown.stdout

    # One rack is left: a job of two rack-sized partitions places neither.
    await kube.create(JOB, _partitioned_job(namespace, "second", 2), namespace=namespace)

    async def waits() -> str | None:
        for pg in (await kube.list(PODGROUP, namespace=namespace)).items:
            if not pg.metadata.name.startswith("second-"):
                continue
            for cond in pg.status.conditions:
                if cond.type == "Unschedulable" and "partition 2 of 2" in cond.message:
                    return cond.message
        return None

    message = await eventually(waits, timeout=30, what="second to wait for a rack")
    assert f"(task worker, partition-id 1, 4 pods) has no {RACK_LABEL} with room" in message
    second = await pods_of(kube, namespace, "second")
    assert len(second) == 4 * 2
    assert not [p for p in second.values() if p.spec.node_name]
