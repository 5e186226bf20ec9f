"""The resource-strategy-fit plugin on the real API server with kwok nodes: with ``sra``,
CPU-only pods keep off the GPU node while the CPU node has room, although the GPU node is the
emptier one (nodeorder alone spreads them over both)."""

from __future__ import annotations

import pytest

from e2e.cluster.control_plane import NodeSpec
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

SRA_CONF = DEFAULT_CONF + (
    "  - name: resource-strategy-fit\n"
    "    arguments:\n"
    "      resourceStrategyFitWeight: 0  # sra alone (its default LeastAllocated would spread)\n"
    "      sra: {enable: true, resources: nvidia.com/gpu, weight: 10}\n"
)


async def test_sra_keeps_cpu_pods_off_the_gpu_node(exp: Experiment) -> None:  # noqa: F811
    """A 4-cpu node and a 16-cpu node with 8 GPUs: four one-cpu pods all go to the 4-cpu
    node; a fifth, finding it full, goes to the GPU node."""
    labels = {NODE_LABEL: exp.namespace}
    cpu_node = exp.plane.create_nodes(
        1, NodeSpec(cpu="4", memory="64Gi", labels=labels), prefix=f"{exp.namespace}-cpu-"
    )
    gpu_node = exp.plane.create_nodes(
        1, NodeSpec(cpu="16", memory="64Gi", gpu="8", labels=labels), prefix=f"{exp.namespace}-gpu-"
    )
    exp.nodes += cpu_node + gpu_node
    await exp.podgroup("c", 1)
    await exp.pods([f"c-{i}" for i in range(4)], "c")
    scheduler = exp.scheduler(SRA_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def spread() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed()).items()))

    placed = dict(await exp.settle(spread, 4))
    assert sorted(placed.values()) == cpu_node * 4
    await exp.pods(["c-4"], "c")

    async def fifth() -> bool:
        return (await exp.placed()).get("c-4") == gpu_node[0]

    await eventually(fifth, timeout=30, what="the fifth pod on the GPU node")
