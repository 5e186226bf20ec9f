"""deviceshare's MIG mode on the real API server: a kwok node whose register annotation names
an A30 card in ``mig`` mode, the device ConfigMap with its geometries, and the fake device plugin
(e2e/fake_device_plugin.py) taking the instances over. Pods get MIG instances named
``uuid[group-position]`` in the bind annotations, a pod the card's geometry cannot hold waits
with the reason in its wait record, and once the card is empty it is partitioned again for it
(dynamic MIG)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import CONFIGMAP, NODE, POD, PODGROUP
from caldera.api.mig import CONFIG_KEY
from caldera.api.vgpu import BIND_PHASE, IDS, MIG, PHASE_SUCCESS, REGISTER, TO_ALLOCATE, Card
from caldera.api.vgpu import encode_register as register_of
from caldera.api.why import WHY_ANNOTATION, decode_record
from e2e.cluster.control_plane import NodeSpec
from e2e.fake_device_plugin import FakeDevicePlugin
from e2e.test_chart import FULLNAME, find, helm, render  # noqa: F401  (helm: fixture)
from e2e.test_scheduler_deviceshare import cards_held, make
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

A30_MEMORY = 24576
GEOMETRIES = """
nvidia:
  knownMigGeometries:
  - models: ["A30"]
    allowedGeometries:
    - group: group1
      geometries:
      - {name: 1g.6gb, memory: 6144, count: 4}
    - group: group2
      geometries:
      - {name: 2g.12gb, memory: 12288, count: 2}
    - group: group3
      geometries:
      - {name: 4g.24gb, memory: 24576, count: 1}
"""


def mig_conf(namespace: str) -> str:
    return DEFAULT_CONF + (
        "  - name: deviceshare\n"
        "    arguments:\n"
        "      deviceshare.VGPUEnable: true\n"
        "      deviceshare.SchedulePolicy: binpack\n"
        "      deviceshare.KnownGeometriesCMName: mig-geometries\n"
        f"      deviceshare.KnownGeometriesCMNamespace: {namespace}\n"
    )


async def mig_node(exp: Experiment) -> str:  # noqa: F811
    """A node as HAMi's device plugin leaves it in MIG mode: one A30 registered as ``mig``."""
    spec = NodeSpec(cpu="16", memory="64Gi", labels={NODE_LABEL: exp.namespace})
    (name,) = exp.plane.create_nodes(1, spec, prefix=f"{exp.namespace}-mig-")
    exp.nodes.append(name)
    card = Card(0, f"GPU-{name}-0", 7, A30_MEMORY, "NVIDIA-A30", True, MIG)
    totals = {
        "volcano.sh/vgpu-number": "7",
        "volcano.sh/vgpu-memory": str(A30_MEMORY),
        "volcano.sh/vgpu-cores": "100",
    }
    status = json.dumps({"status": {"capacity": totals, "allocatable": totals}})
    exp.plane.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", status)
    await exp.kube.patch(NODE, name, {"metadata": {"annotations": {REGISTER: register_of([card])}}})
    return name


async def handed_over(exp: Experiment, count: int) -> bool:  # noqa: F811
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    done = [p for p in pods if p.metadata.annotations.get(BIND_PHASE) == PHASE_SUCCESS]
    return len(done) == count


async def test_mig_instances_through_the_handshake(exp: Experiment) -> None:  # noqa: F811
    """Two 5000 MiB pods get two 1g.6gb instances of group1 (uuid[group1-0] and [group1-1]);
    an 8000 MiB pod waits, its record saying the card is partitioned as group1; once the two
    are deleted the empty card is partitioned as group2 for it."""
    node = await mig_node(exp)
    await exp.kube.create(
        CONFIGMAP,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "mig-geometries", "namespace": exp.namespace},
            "data": {CONFIG_KEY: GEOMETRIES},
        },
        namespace=exp.namespace,
    )
    card = f"GPU-{node}-0"
    async with FakeDevicePlugin(exp.kube, exp.namespace) as plugin:
        scheduler = exp.scheduler(mig_conf(exp.namespace))
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
        await make(exp, "a", {"a-0": {"number": 1, "memory": 5000}})
        await make(exp, "b", {"b-0": {"number": 1, "memory": 5000}})
        await eventually(lambda: handed_over(exp, 2), timeout=60, what="two pods handed over")
        held = await cards_held(exp)
        assert sorted(cards[0][0] for cards in held.values()) == [
            f"{card}[group1-0]",
            f"{card}[group1-1]",
        ]
        assert all(cards[0][1:] == (5000, 0) for cards in held.values())
        assert plugin.failed == []
        a0 = await exp.kube.get(POD, "a-0", namespace=exp.namespace)
        assert plugin.handed["a-0"] == a0.metadata.annotations[IDS]
        assert a0.metadata.annotations[TO_ALLOCATE] == ""  # the device plugin took them

        await make(exp, "c", {"c-0": {"number": 1, "memory": 8000}})

        async def c_record() -> bool:
            pg = await exp.kube.get(PODGROUP, "c", namespace=exp.namespace)
            text = pg.metadata.annotations.get(WHY_ANNOTATION, "")
            record = decode_record(text) if text else None
            details = "\n".join(record.details) if record is not None else ""
            return "partitioned as group1: no free MIG instance of 8000 MiB" in details

        await eventually(c_record, timeout=30, what="c's wait record naming the MIG card")
        assert "c-0" not in await cards_held(exp)

        for name in ("a-0", "b-0"):
            await exp.kube.delete(POD, name, namespace=exp.namespace, grace_period_seconds=0)
        await eventually(lambda: handed_over(exp, 1), timeout=60, what="c handed over")
        held = await cards_held(exp)
        assert held == {"c-0": [(f"{card}[group2-0]", 8000, 0)]}
        assert plugin.failed == []


def test_the_chart_grants_reading_the_geometries_configmap_by_name(
    helm: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """With deviceshare.VGPUEnable the scheduler's ClusterRole gets ``get`` on the configured
    ConfigMap (Volcano's default name without the argument) and on no other; without it,
    no ConfigMap at all."""

    def configmap_rules(conf: str | None) -> list[dict[str, Any]]:
        values = {"scheduler": {"conf": conf}} if conf is not None else {}
        rules = find(render(helm, tmp_path, values), "ClusterRole", f"{FULLNAME}-scheduler")
        return [r for r in rules["rules"] if "configmaps" in r["resources"]]

    named = configmap_rules(mig_conf("gpu").replace("mig-geometries", '"my-geometries"'))
    assert named == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["my-geometries"],
            "verbs": ["get"],
        }
    ]
    default = configmap_rules(
        mig_conf("gpu").replace("      deviceshare.KnownGeometriesCMName: mig-geometries\n", "")
    )
    assert default[0]["resourceNames"] == ["volcano-vgpu-device-config"]
    assert configmap_rules(None) == []
