"""The deviceshare plugin on the real API server with kwok nodes that carry HAMi's register
annotation and the vGPU allocatable (no GPU needed), and a fake device plugin
(e2e/fake_device_plugin.py) that takes the cards over as HAMi's does: vGPU pods share cards
with Volcano's annotations written at bind, the whole handshake ends in the success phase,
nothing is over-committed, a whole-card pod gets a card alone, a pod no card fits waits with
the card in its wait record, a gang of vGPU pods binds whole, and a queue caps vGPU memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from caldera.api.kinds import NODE, POD, PODGROUP
from caldera.api.vgpu import (
    ASSIGNED_NODE,
    BIND_PHASE,
    IDS,
    NODE_LOCK,
    PHASE_SUCCESS,
    REGISTER,
    Card,
    decode_pod_devices,
    encode_register,
)
from caldera.api.why import WHY_ANNOTATION, decode_record
from e2e.cluster.control_plane import NodeSpec
from e2e.fake_device_plugin import FakeDevicePlugin
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

CARD_MEMORY = 8000
DEVICESHARE_CONF = DEFAULT_CONF + (
    "  - name: deviceshare\n"
    "    arguments:\n"
    "      deviceshare.VGPUEnable: true\n"
    "      deviceshare.SchedulePolicy: binpack\n"
    "      deviceshare.ScheduleWeight: 10\n"
    "      deviceshare.NodeLockEnable: true\n"
)


async def gpu_nodes(
    exp: Experiment,  # noqa: F811
    tag: str,
    count: int = 1,
    cards: int = 2,
    split: int = 4,
) -> list[str]:
    """Nodes as HAMi's device plugin leaves them: cards registered, vGPU totals allocatable."""
    spec = NodeSpec(cpu="16", memory="64Gi", labels={NODE_LABEL: exp.namespace})
    names = exp.plane.create_nodes(count, spec, prefix=f"{exp.namespace}-{tag}-")
    exp.nodes += names
    for name in names:
        registered = [
            Card(i, f"GPU-{name}-{i}", split, CARD_MEMORY, "NVIDIA-A100", True, "hami-core")
            for i in range(cards)
        ]
        totals = {
            "volcano.sh/vgpu-number": str(cards * split),
            "volcano.sh/vgpu-memory": str(cards * CARD_MEMORY),
            "volcano.sh/vgpu-cores": str(cards * 100),
        }
        status = json.dumps({"status": {"capacity": totals, "allocatable": totals}})
        exp.plane.kubectl(
            "patch", "node", name, "--subresource=status", "--type=merge", "-p", status
        )
        await exp.kube.patch(
            NODE, name, {"metadata": {"annotations": {REGISTER: encode_register(registered)}}}
        )
    return names


def vgpu_pod(exp: Experiment, name: str, group: str, **limits: int) -> dict[str, Any]:  # noqa: F811
    """A pod whose limits ask ``number``/``memory``/``cores`` of vGPU."""
    body = exp.pod_body(name, group)
    asked = {"cpu": "1", **{f"volcano.sh/vgpu-{k}": str(v) for k, v in limits.items()}}
    body["spec"]["containers"][0]["resources"] = {"limits": asked}
    return body


async def make(exp: Experiment, group: str, pods: dict[str, dict[str, int]], **pg: Any) -> None:  # noqa: F811
    await exp.podgroup(group, len(pods), **pg)
    for name, limits in pods.items():
        await exp.kube.create(POD, vgpu_pod(exp, name, group, **limits), namespace=exp.namespace)


async def cards_held(exp: Experiment) -> dict[str, list[tuple[str, int, int]]]:  # noqa: F811
    """Each bound pod's cards as its vgpu-ids-new annotation names them."""
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    return {
        p.metadata.name: [
            (d.uuid, d.memory, d.cores)
            for c in decode_pod_devices(p.metadata.annotations.get(IDS, ""))
            for d in c
        ]
        for p in pods
        if p.spec.node_name
    }


def assert_not_overcommitted(held: dict[str, list[tuple[str, int, int]]], split: int) -> None:
    memory: dict[str, int] = {}
    cores: dict[str, int] = {}
    count: dict[str, int] = {}
    for cards in held.values():
        for uuid, mem, core in cards:
            memory[uuid] = memory.get(uuid, 0) + mem
            cores[uuid] = cores.get(uuid, 0) + core
            count[uuid] = count.get(uuid, 0) + 1
    assert all(m <= CARD_MEMORY for m in memory.values()), memory
    assert all(c <= 100 for c in cores.values()), cores
    assert all(n <= split for n in count.values()), count


async def test_vgpu_pods_share_cards_through_the_handshake(exp: Experiment) -> None:  # noqa: F811
    """Two 3000 MiB pods share one card (binpack), a 100-core pod takes the other alone, a
    6000 MiB pod waits (2000 MiB left on the shared card) with the card in its wait record;
    every bind ends in the success phase and the node lock is released."""
    (node,) = await gpu_nodes(exp, "gpu")
    async with FakeDevicePlugin(exp.kube, exp.namespace) as plugin:
        scheduler = exp.scheduler(DEVICESHARE_CONF)
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
        await make(exp, "a", {"a-0": {"number": 1, "memory": 3000}})
        await make(exp, "b", {"b-0": {"number": 1, "memory": 3000}})
        await make(exp, "w", {"w-0": {"number": 1, "cores": 100}})

        async def three_done() -> bool:
            pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
            done = [p for p in pods if p.metadata.annotations.get(BIND_PHASE) == PHASE_SUCCESS]
            return len(done) == 3

        await eventually(three_done, timeout=60, what="three pods bound and handed over")
        held = await cards_held(exp)
        assert held["a-0"][0][0] == held["b-0"][0][0]
        assert held["a-0"][0][1:] == (3000, 0)
        assert held["w-0"] == [(held["w-0"][0][0], CARD_MEMORY, 100)]
        assert held["w-0"][0][0] != held["a-0"][0][0]
        assert plugin.failed == []
        a0 = await exp.kube.get(POD, "a-0", namespace=exp.namespace)
        assert a0.metadata.annotations[ASSIGNED_NODE] == node
        assert plugin.handed["a-0"] == a0.metadata.annotations[IDS]

        await make(exp, "d", {"d-0": {"number": 1, "memory": 6000}})

        async def why_d() -> str:
            pg = await exp.kube.get(PODGROUP, "d", namespace=exp.namespace)
            text = pg.metadata.annotations.get(WHY_ANNOTATION, "")
            record = decode_record(text) if text else None
            return "\n".join(record.details) if record is not None else ""

        async def names_card() -> bool:
            return "has 2000 MiB free, pod asks 6000" in await why_d()

        await eventually(names_card, timeout=30, what="d's wait record naming the card")
        held = await exp.settle(lambda: cards_held(exp), 2)
        assert "d-0" not in held
        assert_not_overcommitted(held, split=4)
        lock = (await exp.kube.get(NODE, node)).metadata.annotations.get(NODE_LOCK)
        assert lock is None


async def test_gang_binds_whole_and_queue_caps_vgpu_memory(exp: Experiment) -> None:  # noqa: F811
    """A gang of three whole-card pods waits on a node of two cards and binds whole once a
    second node comes; a queue capped at 5000 MiB of vGPU memory takes two 2000 MiB pods."""
    await gpu_nodes(exp, "first")
    capped = await exp.make_queue("capped", capability={"volcano.sh/vgpu-memory": "5000"})
    async with FakeDevicePlugin(exp.kube, exp.namespace):
        scheduler = exp.scheduler(DEVICESHARE_CONF)
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
        await make(exp, "g", {f"g-{i}": {"number": 1, "cores": 100} for i in range(3)})
        for i in range(3):
            await make(exp, f"q{i}", {f"q{i}-0": {"number": 1, "memory": 2000}}, queue=capped)
        held = await exp.settle(lambda: cards_held(exp), 3)
        assert not any(name.startswith("g-") for name in held)
        assert sum(1 for name in held if name.startswith("q")) == 2

        await gpu_nodes(exp, "second")  # a second node: the gang fits whole across the two

        async def gang_bound() -> bool:
            return sum(1 for n in await cards_held(exp) if n.startswith("g-")) == 3

        await eventually(gang_bound, timeout=60, what="the gang bound whole")
        held = await cards_held(exp)
        assert_not_overcommitted(held, split=4)
        assert sum(1 for name in held if name.startswith("q")) == 2
