"""drf's hierarchical mode (hdrf) on the real API server with kwok nodes: two queues under the
root, weighted 1 and 3 by ``volcano.sh/hierarchy-weights``, share an 8-cpu node as 2 and 6."""

from __future__ import annotations

import pytest

from caldera.api.kinds import QUEUE
from caldera.api.volcano import HIERARCHY_KEY, HIERARCHY_WEIGHTS_KEY
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

HDRF_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
    enableHierarchy: true
  - name: predicates
  - name: nodeorder
"""


async def _queue(ex: Experiment, short: str, weight: str) -> str:
    name = f"{ex.namespace}-{short}"
    notes = {HIERARCHY_KEY: f"root/{short}", HIERARCHY_WEIGHTS_KEY: f"1/{weight}"}
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "annotations": notes},
        "spec": {"weight": 1},
    }
    await ex.kube.create(QUEUE, body)
    ex.queues.append(name)
    return name


async def test_weighted_levels_share_a_node(exp: Experiment) -> None:  # noqa: F811
    """Eight one-cpu pods in each queue, one 8-cpu node: the weight-3 queue runs 6, the other
    2."""
    exp.make_nodes(1, 8)
    for short, weight in (("light", "1"), ("heavy", "3")):
        queue = await _queue(exp, short, weight)
        for i in range(8):
            await exp.podgroup(f"{short}-{i}", 1, queue=queue)
            await exp.pods([f"{short}-{i}-0"], f"{short}-{i}")
    scheduler = exp.scheduler(HDRF_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def held() -> dict[str, int]:
        placed = await exp.placed()
        return {
            short: sum(1 for pod in placed if pod.startswith(f"{short}-"))
            for short in ("light", "heavy")
        }

    assert await exp.settle(held, 4) == {"light": 2, "heavy": 6}
