"""Network-topology-aware gang scheduling on the real API server with kwok nodes in racks under
spines: the hypernode controller discovers the racks and spines from node labels and keeps
them as nodes change; the scheduler places hard-mode gangs in one rack or one spine, makes a
gang wait rather than span spines and places it once a spine frees up, and places a soft-mode
gang anyway; the PodGroup says where the job sits and why a gang waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import HYPERNODE, POD, PODGROUP
from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY, NETWORK_TOPOLOGY_SOURCE_KEY
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import RACK_LABEL, SPINE_LABEL
from e2e.conftest import Cluster
from e2e.kwok_tasks import gang_pod
from e2e.topology_fixtures import topology_nodes, topology_processes  # noqa: F401 - fixture
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

CALDERA = str(Path(sys.prefix) / "bin" / "caldera")


@pytest.fixture
def processes(
    cluster: Cluster, tmp_path: Path, topology: dict[str, tuple[str, str]]
) -> Iterator[tuple[CalderaProcess, CalderaProcess]]:
    """The hypernode controller with the label discovery, and the scheduler with the
    network-topology-aware plugin."""
    yield from topology_processes(cluster, tmp_path, "hypernode")


async def _ours(kube: KubeClient, prefix: str) -> dict[str, Any]:
    """The discovered HyperNodes of this test's nodes, by the label value they stand for."""
    out = {}
    for hn in (await kube.list(HYPERNODE)).items:
        labels = hn.metadata.labels
        if labels.get(NETWORK_TOPOLOGY_SOURCE_KEY) != "label":
            continue
        value = labels.get(RACK_LABEL) or labels.get(SPINE_LABEL) or ""
        if value.startswith(prefix):
            out[value[len(prefix) :]] = hn
    return out


async def _discovered(kube: KubeClient, prefix: str, count: int) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        found = await _ours(kube, prefix)
        complete = len(found) == count and all(hn.status.node_count > 0 for hn in found.values())
        return found if complete else None

    return await eventually(probe, timeout=40, what=f"{count} discovered hypernodes")


def _group(name: str, pods: int, topology: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": pods, "queue": "default", "networkTopology": topology},
    }


async def _gang(
    kube: KubeClient,
    namespace: str,
    name: str,
    pods: int,
    topology: dict[str, Any],
    selector: dict[str, str] | None = None,
) -> None:
    await kube.create(PODGROUP, _group(name, pods, topology), namespace=namespace)
    for i in range(pods):
        pod = gang_pod(f"{name}-{i}", name, "4", {"e2e-topology": namespace, **(selector or {})})
        await kube.create(POD, pod, namespace=namespace)


async def _placed(kube: KubeClient, namespace: str, group: str, pods: int) -> dict[str, str]:
    async def probe() -> dict[str, str] | None:
        listed = (await kube.list(POD, namespace=namespace)).items
        nodes = {
            p.metadata.name: p.spec.node_name
            for p in listed
            if p.metadata.name.startswith(f"{group}-") and p.spec.node_name
        }
        return nodes if len(nodes) == pods else None

    return await eventually(probe, timeout=40, what=f"{pods} pods of {group} bound")


async def test_hard_mode_racks_spines_wait_and_land(
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    topology: dict[str, tuple[str, str]],
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """A 4-pod gang of tier 1 fills one rack; a second one, whose pods select a rack of the
    other spine, fills that rack; an 8-pod gang of tier <= 2 then waits with the reason on
    its PodGroup, although 32 cpu are free (16 in each spine), instead of spanning spines;
    once the second gang goes, it lands within the spine that freed up, and its PodGroup
    names that spine."""
    prefix = f"{namespace}-"
    found = await _discovered(kube, prefix, 6)
    assert {hn.spec.tier for hn in found.values()} == {1, 2}
    assert found["s0"].status.node_count == 4
    assert found["r0"].status.node_count == 2

    await _gang(kube, namespace, "a", 4, {"mode": "hard", "highestTierAllowed": 1})
    a = await _placed(kube, namespace, "a", 4)
    assert len({topology[n][0] for n in a.values()}) == 1, a
    spine_a = topology[next(iter(a.values()))][1]
    other_rack, other_spine = next(
        (rack, spine) for rack, spine in topology.values() if spine != spine_a
    )
    await _gang(
        kube,
        namespace,
        "b",
        4,
        {"mode": "hard", "highestTierAllowed": 1},
        selector={RACK_LABEL: other_rack},
    )
    b = await _placed(kube, namespace, "b", 4)
    assert {topology[n][0] for n in b.values()} == {other_rack}

    await _gang(kube, namespace, "d", 8, {"mode": "hard", "highestTierName": SPINE_LABEL})

    async def waits() -> str | None:
        pg = await kube.get(PODGROUP, "d", namespace=namespace)
        for cond in pg.status.conditions:
            if cond.type == "Unschedulable" and "no hypernode of tier" in cond.message:
                return cond.message
        return None

    message = await eventually(waits, timeout=30, what="d to wait for a whole spine")
    assert "fits 8 pods" in message

    # The CLI draws a spine's tree (its racks under it, with their free resources).
    shown = await asyncio.to_thread(
        subprocess.run,
        [
            CALDERA,
            "hypernode",
            "get",
            found["s0"].metadata.name,
            f"--kubeconfig={cluster.kubeconfig}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "TIER", "TIERNAME", "NODES"]
    assert lines[1].split()[:4] == [found["s0"].metadata.name, "2", SPINE_LABEL, "4"]
    assert any(found["r0"].metadata.name in line for line in lines[2:])
    listed = (await kube.list(POD, namespace=namespace)).items
    assert not [p for p in listed if p.metadata.name.startswith("d-") and p.spec.node_name]

    # b finishes: its spine is whole again, and d lands in it.
    for i in range(4):
        await kube.delete(POD, f"b-{i}", namespace=namespace, grace_period_seconds=0)
    d = await _placed(kube, namespace, "d", 8)
    assert {topology[n][1] for n in d.values()} == {other_spine}

    async def remembered() -> str | None:
        pg = await kube.get(PODGROUP, "d", namespace=namespace)
        return pg.metadata.annotations.get(JOB_ALLOCATED_HYPERNODE_KEY)

    where = await eventually(remembered, timeout=20, what="d's HyperNode on its PodGroup")
    assert where == found[other_spine[len(prefix) :]].metadata.name


async def test_soft_mode_prefers_a_rack_and_spans_when_none_fits(
    kube: KubeClient,
    namespace: str,
    topology: dict[str, tuple[str, str]],
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """Soft mode: a gang that fits a rack gets one rack; one that fits no rack (six 4-cpu
    pods, 24 cpu) is placed anyway, across racks."""
    await _discovered(kube, f"{namespace}-", 6)
    await _gang(kube, namespace, "small", 4, {"mode": "soft", "highestTierAllowed": 1})
    small = await _placed(kube, namespace, "small", 4)
    assert len({topology[n][0] for n in small.values()}) == 1
    await _gang(kube, namespace, "big", 6, {"mode": "soft", "highestTierAllowed": 1})
    big = await _placed(kube, namespace, "big", 6)
    assert len({topology[n][0] for n in big.values()}) >= 2


async def test_discovery_follows_node_changes(
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    topology: dict[str, tuple[str, str]],
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """A node moved to another rack changes both racks' members and counts; a new rack
    label makes a new HyperNode; a rack whose last node leaves is deleted; a HyperNode the
    discovery did not create is never touched (its nodeCount is kept)."""
    assert cluster.plane is not None
    prefix = f"{namespace}-"
    manual = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": f"{namespace}-manual"},
        "spec": {
            "tier": 1,
            "members": [
                {
                    "type": "Node",
                    "selector": {"labelMatch": {"matchLabels": {"e2e-topology": namespace}}},
                }
            ],
        },
    }
    await kube.create(HYPERNODE, manual)
    try:
        found = await _discovered(kube, prefix, 6)
        moved = next(n for n, (rack, _) in topology.items() if rack == f"{prefix}r0")
        # Move one node of r0 to a new rack r9 of the same spine.
        cluster.plane.kubectl("label", "node", moved, f"{RACK_LABEL}={prefix}r9", "--overwrite")

        async def relabelled() -> dict[str, Any] | None:
            now = await _ours(kube, prefix)
            ok = (
                "r9" in now
                and now["r9"].status.node_count == 1
                and now["r0"].status.node_count == 1
                and now["r0"].metadata.uid == found["r0"].metadata.uid
                # the spine's members are updated after the racks: waited for, not raced
                and len(now["s0"].spec.members) == 3
            )
            return now if ok else None

        now = await eventually(relabelled, timeout=40, what="r9 discovered, r0 shrunk, s0 grown")
        assert len(now["s0"].spec.members) == 3
        # The other node of r0 leaves: r0 is deleted.
        other = next(n for n, (rack, _) in topology.items() if rack == f"{prefix}r0" and n != moved)
        cluster.plane.kubectl("delete", "node", other)

        async def r0_gone() -> bool:
            return "r0" not in await _ours(kube, prefix)

        await eventually(r0_gone, timeout=40, what="r0 deleted with its last node")

        async def manual_counted() -> int | None:
            hn = await kube.get(HYPERNODE, f"{namespace}-manual")
            return hn.status.node_count if hn.status.node_count == 7 else None

        await eventually(manual_counted, timeout=40, what="the manual HyperNode's nodeCount")
        kept = await kube.get(HYPERNODE, f"{namespace}-manual")
        assert NETWORK_TOPOLOGY_SOURCE_KEY not in kept.metadata.labels
        assert len(kept.spec.members) == 1
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(HYPERNODE, f"{namespace}-manual")
