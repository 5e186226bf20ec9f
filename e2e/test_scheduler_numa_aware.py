"""The numa-aware plugin on the real API server with kwok nodes: the test writes the nodes'
Numatopology objects as a node agent would (Caldera ships none). A Guaranteed pod asking for
single-numa-node goes to the node where one NUMA node has its CPUs free, not to the one whose
free CPUs are split; when the agent reports both split, the next pod waits; when it reports
one free again, the pod goes there."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from caldera.api.kinds import NUMATOPOLOGY, POD
from caldera.kube.errors import NotFound
from caldera.kube.requests import PatchType
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF
from scheduler.plugins.numa_policy import POLICY_KEY

pytestmark = pytest.mark.e2e

NUMA_CONF = DEFAULT_CONF + "  - name: numa-aware\n    arguments: {weight: 10}\n"


def topology(node: str, free: str) -> dict[str, Any]:
    """Two NUMA nodes of four CPUs each, the static CPU manager, single-numa-node."""
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": node},
        "spec": {
            "policies": {
                "CPUManagerPolicy": "static",
                "TopologyManagerPolicy": "single-numa-node",
            },
            "numares": {"cpu": {"allocatable": free, "capacity": 8}},
            "cpuDetail": {str(i): {"numa": i // 4, "socket": 0, "core": i} for i in range(8)},
        },
    }


def numa_pod(exp: Experiment, name: str, group: str) -> dict[str, Any]:  # noqa: F811
    """A Guaranteed pod of 3 CPUs asking for single-numa-node."""
    body = exp.pod_body(name, group, cpu="3")
    resources = {"cpu": "3", "memory": "1Gi"}
    body["spec"]["containers"][0]["resources"] = {"requests": resources, "limits": resources}
    body["metadata"]["annotations"][POLICY_KEY] = "single-numa-node"
    return body


async def test_guaranteed_pods_go_where_one_numa_node_holds_them(exp: Experiment) -> None:  # noqa: F811
    split, whole = exp.make_nodes(2, cpu=8)
    try:
        await exp.kube.create(NUMATOPOLOGY, topology(split, "0-1,4-5"))
        await exp.kube.create(NUMATOPOLOGY, topology(whole, "0-7"))
        await exp.podgroup("n", 1)
        await exp.kube.create(POD, numa_pod(exp, "n-0", "n"), namespace=exp.namespace)
        scheduler = exp.scheduler(NUMA_CONF)
        await eventually(
            lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness"
        )

        async def placed_on(pod: str, node: str) -> bool:
            return (await exp.placed()).get(pod) == node

        await eventually(lambda: placed_on("n-0", whole), timeout=30, what="n-0 on the whole node")

        # the agent reports n-0's CPUs taken: no node has 3 free CPUs on one NUMA node
        await exp.kube.patch(
            NUMATOPOLOGY,
            whole,
            {"spec": {"numares": {"cpu": {"allocatable": "3,5-6"}}}},
            patch_type=PatchType.MERGE,
        )
        await exp.podgroup("m", 1)
        await exp.kube.create(POD, numa_pod(exp, "m-0", "m"), namespace=exp.namespace)
        assert "m-0" not in await exp.settle(exp.placed, 3)

        # CPUs freed on the split node's second NUMA node: the pod goes there
        await exp.kube.patch(
            NUMATOPOLOGY,
            split,
            {"spec": {"numares": {"cpu": {"allocatable": "0-1,4-7"}}}},
            patch_type=PatchType.MERGE,
        )
        await eventually(lambda: placed_on("m-0", split), timeout=30, what="m-0 on the split node")
    finally:
        for node in (split, whole):
            with contextlib.suppress(NotFound):
                await exp.kube.delete(NUMATOPOLOGY, node)
