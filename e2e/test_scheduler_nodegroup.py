"""The nodegroup plugin on the real API server with kwok nodes labelled
``volcano.sh/nodegroup-name``: a queue's pods go only to the groups its ``spec.affinity``
allows, and no further than its ``volcano.sh/nodegroup-resource-limits`` in a group."""

from __future__ import annotations

import json

import pytest

from caldera.api.kinds import QUEUE
from caldera.api.volcano import NODEGROUP_NAME_KEY, NODEGROUP_RESOURCE_LIMITS_KEY
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

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
NODEGROUP_CONF = DEFAULT_CONF + "  - name: nodegroup\n    arguments: {strict: true}\n"


def _group_nodes(ex: Experiment, group: str, count: int) -> list[str]:
    """``count`` 4-cpu nodes of node group ``group`` that only this experiment selects."""
    spec = NodeSpec(
        cpu="4", memory="64Gi", labels={NODE_LABEL: ex.namespace, NODEGROUP_NAME_KEY: group}
    )
    names = ex.plane.create_nodes(count, spec, prefix=f"{ex.namespace}-{group}-")
    ex.nodes += names
    return names


async def test_queues_stay_in_their_node_groups_within_limits(exp: Experiment) -> None:  # noqa: F811
    """Group 'fast' (2 nodes, 8 cpu) and 'slow' (1 node, 4 cpu). Queue 'train' requires fast
    and may hold 5 cpu there; queue 'batch' prefers slow. train's 8 one-cpu pods: 5 run on
    fast, 3 wait although fast has room; batch's 3 pods run on slow."""
    fast = _group_nodes(exp, "fast", 2)
    slow = _group_nodes(exp, "slow", 1)
    train = f"{exp.namespace}-train"
    await exp.kube.create(
        QUEUE,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {
                "name": train,
                "annotations": {NODEGROUP_RESOURCE_LIMITS_KEY: json.dumps({"fast": {"cpu": "5"}})},
            },
            "spec": {"weight": 1, "affinity": {"nodeGroupAffinity": {REQUIRED: ["fast"]}}},
        },
    )
    exp.queues.append(train)
    batch = await exp.make_queue("batch", affinity={"nodeGroupAffinity": {PREFERRED: ["slow"]}})
    await exp.podgroup("t", 1, queue=train)
    await exp.pods([f"t-{i}" for i in range(8)], "t")
    await exp.podgroup("b", 1, queue=batch)
    await exp.pods([f"b-{i}" for i in range(3)], "b")
    scheduler = exp.scheduler(NODEGROUP_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def spread() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed()).items()))

    placed = dict(await exp.settle(spread, 5))
    on = {g: [node for pod, node in placed.items() if pod.startswith(f"{g}-")] for g in "tb"}
    assert len(on["t"]) == 5
    assert set(on["t"]) <= set(fast)
    assert sorted(on["b"]) == sorted(slow * 3)
