"""Inter-pod affinity on the real API server with kwok nodes: a Volcano Job whose replicas
refuse to share a node (required anti-affinity on the hostname) gets one pod per node and the
rest wait with kube-scheduler's reason; a pod with required affinity to a labelled pod goes to
that pod's zone."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import JOB, POD
from caldera.api.meta import find_condition
from e2e.cluster.control_plane import NodeSpec
from e2e.job_fixtures import job, task
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _zone_nodes(ex: Experiment, zone: str, count: int) -> list[str]:
    spec = NodeSpec(cpu="4", memory="64Gi", labels={NODE_LABEL: ex.namespace, ZONE: zone})
    names = ex.plane.create_nodes(count, spec, prefix=f"{ex.namespace}-{zone}-")
    ex.nodes += names
    return names


def _placement(ex: Experiment, labels: dict[str, str], affinity: dict[str, Any]) -> dict[str, Any]:
    """What the experiment's pods carry: its nodes only, ``labels``, and ``affinity``."""
    return {
        "metadata": {"labels": labels},
        "spec": {
            "nodeSelector": {NODE_LABEL: ex.namespace},
            "tolerations": [{"operator": "Exists"}],
            "affinity": affinity,
        },
    }


def _with(task_body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    template = task_body["template"]
    template["metadata"].setdefault("labels", {}).update(extra["metadata"]["labels"])
    template["spec"].update(extra["spec"])
    return task_body


async def test_required_anti_affinity_puts_one_replica_per_node(exp: Experiment) -> None:  # noqa: F811
    """4 replicas (minAvailable 3) refusing each other's hosts over 3 nodes: 3 run on 3
    distinct nodes; the 4th waits, its PodScheduled condition giving kube-scheduler's reason."""
    nodes = _zone_nodes(exp, "a", 3)
    app = {"app": f"spread-{exp.namespace}"}
    anti = {
        "podAntiAffinity": {
            REQUIRED: [{"labelSelector": {"matchLabels": app}, "topologyKey": HOST}]
        }
    }
    body = job("spread", [_with(task("web", 4), _placement(exp, app, anti))], minAvailable=3)
    await exp.kube.create(JOB, body, namespace=exp.namespace)
    exp.controllers()
    scheduler = exp.scheduler()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def three() -> dict[str, str] | None:
        placed = await exp.placed("spread-")
        return placed if len(placed) >= 3 else None

    await eventually(three, timeout=60, what="three replicas placed")
    placed = await exp.settle(lambda: exp.placed("spread-"), 3)
    assert len(placed) == 3
    assert sorted(placed.values()) == sorted(nodes)

    async def waiting_reason() -> str | None:
        pods: list[Pod] = list((await exp.kube.list(POD, namespace=exp.namespace)).items)
        for pod in pods:
            if not pod.metadata.name.startswith("spread-") or pod.spec.node_name:
                continue
            cond = find_condition(pod.status.conditions, "PodScheduled")
            if cond is not None and cond.status == "False" and cond.message:
                return cond.message
        return None

    message = await eventually(waiting_reason, timeout=60, what="the waiting pod's condition")
    assert "3 node(s) didn't match pod anti-affinity rules" in message, message


async def test_required_affinity_follows_the_labelled_pod_to_its_zone(exp: Experiment) -> None:  # noqa: F811
    """A cache pod runs in zone b (the only room for it); a web pod requiring a cache pod in
    its zone goes to zone b, though zone a has more room."""
    _zone_nodes(exp, "a", 2)
    (zone_b,) = _zone_nodes(exp, "b", 1)
    cache_labels = {"app": f"cache-{exp.namespace}"}
    cache = exp.pod_body("cache", "cache", cpu="1")
    cache["metadata"]["labels"] = cache_labels
    cache["spec"]["nodeSelector"] = {NODE_LABEL: exp.namespace, ZONE: "b"}
    await exp.podgroup("cache", 1)
    await exp.kube.create(POD, cache, namespace=exp.namespace)
    scheduler = exp.scheduler()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def cache_placed() -> str | None:
        return (await exp.placed("cache")).get("cache")

    assert await eventually(cache_placed, timeout=60, what="the cache pod placed") == zone_b
    web = exp.pod_body("web", "web", cpu="1")
    web["metadata"]["labels"] = {"app": f"web-{exp.namespace}"}
    web["spec"]["affinity"] = {
        "podAffinity": {
            REQUIRED: [{"labelSelector": {"matchLabels": cache_labels}, "topologyKey": ZONE}]
        }
    }
    await exp.podgroup("web", 1)
    await exp.kube.create(POD, web, namespace=exp.namespace)

    async def web_placed() -> str | None:
        return (await exp.placed("web")).get("web")

    assert await eventually(web_placed, timeout=60, what="the web pod placed") == zone_b
