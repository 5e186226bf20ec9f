"""deviceshare's older GPU memory / number mode on the real API server with kwok nodes whose
capacity carries ``volcano.sh/gpu-number`` and ``volcano.sh/gpu-memory`` (no GPU needed): pods
placed on the lowest card with room with ``volcano.sh/gpu-index`` and
``volcano.sh/predicate-time`` written at bind, a pod no single card fits waits with the card in
its wait record, the "gpu" node lock taken with ``deviceshare.NodeLockEnable``, and in the
number mode a gang of whole-card pods binds whole."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from caldera.api.gpushare import GPU_INDEX, NODE_LOCK, PREDICATE_TIME
from caldera.api.kinds import NODE, POD, PODGROUP
from caldera.api.why import WHY_ANNOTATION, decode_record
from e2e.cluster.control_plane import NodeSpec
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


def gpushare_conf(argument: str, *, lock: bool = False) -> str:
    text = DEFAULT_CONF + (
        f"  - name: deviceshare\n    arguments:\n      deviceshare.{argument}: true\n"
    )
    return text + ("      deviceshare.NodeLockEnable: true\n" if lock else "")


async def gpu_nodes(exp: Experiment, tag: str, count: int = 1, cards: int = 2) -> list[str]:  # noqa: F811
    """Nodes as Volcano's GPU share device plugin leaves them: cards and memory in capacity."""
    spec = NodeSpec(cpu="16", memory="64Gi", labels={NODE_LABEL: exp.namespace})
    names = exp.plane.create_nodes(count, spec, prefix=f"{exp.namespace}-{tag}-")
    exp.nodes += names
    totals = {
        "volcano.sh/gpu-number": str(cards),
        "volcano.sh/gpu-memory": str(cards * CARD_MEMORY),
    }
    status = json.dumps({"status": {"capacity": totals, "allocatable": totals}})
    for name in names:
        exp.plane.kubectl(
            "patch", "node", name, "--subresource=status", "--type=merge", "-p", status
        )
    return names


async def make(exp: Experiment, group: str, pods: dict[str, dict[str, int]], **pg: Any) -> None:  # noqa: F811
    """A PodGroup and its pods, each asking ``memory`` / ``number`` in its limits."""
    await exp.podgroup(group, len(pods), **pg)
    for name, limits in pods.items():
        body = exp.pod_body(name, group)
        asked = {"cpu": "1", **{f"volcano.sh/gpu-{k}": str(v) for k, v in limits.items()}}
        body["spec"]["containers"][0]["resources"] = {"limits": asked}
        await exp.kube.create(POD, body, namespace=exp.namespace)


async def indices(exp: Experiment) -> dict[str, tuple[str, str]]:  # noqa: F811
    """Each bound pod's node and gpu-index annotation."""
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    return {
        p.metadata.name: (p.spec.node_name, p.metadata.annotations.get(GPU_INDEX, ""))
        for p in pods
        if p.spec.node_name
    }


async def bound(exp: Experiment, name: str) -> None:  # noqa: F811
    async def done() -> bool:
        return name in await indices(exp)

    await eventually(done, timeout=60, what=f"{name} bound")


async def wait_record(exp: Experiment, group: str) -> str:  # noqa: F811
    pg = await exp.kube.get(PODGROUP, group, namespace=exp.namespace)
    text = pg.metadata.annotations.get(WHY_ANNOTATION, "")
    record = decode_record(text) if text else None
    return "\n".join(record.details) if record is not None else ""


async def test_memory_pods_share_cards_and_a_pod_no_card_fits_waits(exp: Experiment) -> None:  # noqa: F811
    """Two 3000 pods share card 0, a 5000 pod takes card 1; each carries gpu-index and the
    predicate time (Unix nanoseconds). A 4000 pod fits the node's 5000 left but no card (2000
    and 3000 free): it waits, its wait record naming card 1."""
    (node,) = await gpu_nodes(exp, "gpu")
    started = time.time_ns()
    scheduler = exp.scheduler(gpushare_conf("GPUSharingEnable"))
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    for name, memory in (("a", 3000), ("b", 3000), ("c", 5000)):  # one after the other
        await make(exp, name, {f"{name}-0": {"memory": memory}})
        await bound(exp, f"{name}-0")
    held = await indices(exp)
    assert held == {"a-0": (node, "0"), "b-0": (node, "0"), "c-0": (node, "1")}
    a0 = await exp.kube.get(POD, "a-0", namespace=exp.namespace)
    stamp = int(a0.metadata.annotations[PREDICATE_TIME])
    assert started - 10**9 <= stamp <= time.time_ns()

    await make(exp, "d", {"d-0": {"memory": 4000}})

    async def names_card() -> bool:
        return f"node {node}: card 1 has 3000 gpu-memory free, pod asks 4000" in (
            await wait_record(exp, "d")
        )

    await eventually(names_card, timeout=30, what="d's wait record naming the card")
    assert "d-0" not in await indices(exp)


async def test_node_lock_is_taken_before_a_memory_bind(exp: Experiment) -> None:  # noqa: F811
    """With deviceshare.NodeLockEnable the bind takes the node's "gpu" lock (nothing here
    releases it, as a device plugin would): the next pod for that node waits until it goes."""
    (node,) = await gpu_nodes(exp, "lock")
    scheduler = exp.scheduler(gpushare_conf("GPUSharingEnable", lock=True))
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    await make(exp, "a", {"a-0": {"memory": 1000}})
    await bound(exp, "a-0")
    assert await indices(exp) == {"a-0": (node, "0")}
    lock = (await exp.kube.get(NODE, node)).metadata.annotations.get(NODE_LOCK, "")
    assert lock.endswith("Z")
    await make(exp, "b", {"b-0": {"memory": 1000}})
    held = await exp.settle(lambda: indices(exp), 3)
    assert "b-0" not in held
    await exp.kube.patch(NODE, node, {"metadata": {"annotations": {NODE_LOCK: None}}})

    async def b_bound() -> bool:
        return (await indices(exp)).get("b-0") == (node, "0")

    await eventually(b_bound, timeout=60, what="b bound once the lock is gone")


async def test_number_mode_gang_binds_whole(exp: Experiment) -> None:  # noqa: F811
    """A gang of three one-card pods waits on a node of two cards and binds whole once a second
    node comes, each pod on a card of its own."""
    await gpu_nodes(exp, "first")
    scheduler = exp.scheduler(gpushare_conf("GPUNumberEnable"))
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
    await make(exp, "g", {f"g-{i}": {"number": 1} for i in range(3)})
    held = await exp.settle(lambda: indices(exp), 3)
    assert held == {}

    await gpu_nodes(exp, "second")

    async def gang_bound() -> bool:
        return len(await indices(exp)) == 3

    await eventually(gang_bound, timeout=60, what="the gang bound whole")
    held = await indices(exp)
    assert len(set(held.values())) == 3
    assert all(index in ("0", "1") for _, index in held.values())
