"""Feasible-node sampling on the real API server (Volcano's ``--minimum-feasible-nodes`` and
``--percentage-nodes-to-find``, docs/compatibility.md): a pod judged node by node (here: preferred
pod affinity) looks at every node in a small cluster, so all of them join the pod they prefer;
with the search stopped at two fitting nodes, each pod chooses among the two its turn of the
rotation reaches, and most of them land elsewhere."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.kinds import POD
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
PODS = 8
# Each search stops once two nodes fit: 1% of any cluster here is below the minimum of 2.
SAMPLED = ("--minimum-feasible-nodes=2", "--percentage-nodes-to-find=1")


async def _magnet(ex: Experiment, node: str) -> dict[str, str]:
    """A pod bound to ``node`` that the others prefer to share a host with; its labels."""
    labels = {"app": f"magnet-{ex.namespace}"}
    body = ex.pod_body("magnet", None, cpu="100m")
    body["metadata"]["labels"] = labels
    body["spec"]["nodeName"] = node
    await ex.kube.create(POD, body, namespace=ex.namespace)
    return labels


async def _followers(ex: Experiment, prefix: str, magnet: dict[str, str]) -> None:
    """``PODS`` pods, each in its own PodGroup, preferring the magnet's host (weight 100)."""
    affinity: dict[str, Any] = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": magnet},
                        "topologyKey": HOST,
                    },
                }
            ]
        }
    }
    for i in range(PODS):
        name = f"{prefix}-{i}"
        await ex.podgroup(name, 1)
        body = ex.pod_body(name, name, cpu="100m")
        body["spec"]["affinity"] = affinity
        await ex.kube.create(POD, body, namespace=ex.namespace)


async def _placed_all(ex: Experiment, prefix: str) -> dict[str, str]:
    async def all_placed() -> dict[str, str] | None:
        placed = await ex.placed(f"{prefix}-")
        return placed if len(placed) == PODS else None

    placed: dict[str, str] = await eventually(all_placed, timeout=90, what=f"{prefix} placed")
    return placed


async def test_sampling_limits_the_search_and_every_node_is_searched_without_it(
    exp: Experiment,  # noqa: F811
) -> None:
    """All pods exist before the scheduler starts, so one session places them one after
    another: without sampling all 8 join the magnet's node; with it, each looks at 2 of the 8
    nodes in turn, so at most 2 of them see the magnet's node and the rest spread out."""
    nodes = exp.make_nodes(8, cpu=4)
    magnet = await _magnet(exp, nodes[0])

    await _followers(exp, "full", magnet)
    full = exp.scheduler()
    await eventually(lambda: _ready(full), timeout=READY_TIMEOUT, what="scheduler readiness")
    placed = await _placed_all(exp, "full")
    assert set(placed.values()) == {nodes[0]}, placed
    assert full.stop() == 0
    exp.processes.remove(full)

    await _followers(exp, "sampled", magnet)
    sampled = exp.scheduler(None, *SAMPLED)
    await eventually(lambda: _ready(sampled), timeout=READY_TIMEOUT, what="scheduler readiness")
    placed = await _placed_all(exp, "sampled")
    with_magnet = [name for name, node in placed.items() if node == nodes[0]]
    assert len(with_magnet) <= PODS // 4 + 1, placed
    assert len(set(placed.values())) >= PODS // 2, placed
