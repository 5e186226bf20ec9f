"""Pod topology spread on the real API server with kwok nodes in three zones (labelled
``topology.kubernetes.io/zone``; only the experiment's pods select them): a Volcano Job's
template constraints reach its pods unchanged, six replicas with maxSkew 1 land 2/2/2 on zones
of three, one and one nodes, and with a full zone the pod that would skew further stays
Pending with kube-scheduler's reason."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.kinds import JOB, POD
from caldera.api.meta import find_condition
from e2e.cluster.control_plane import NodeSpec
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
REASON = "node(s) didn't match pod topology spread constraints"


def _zone_nodes(ex: Experiment, zone: str, count: int, cpu: str = "4") -> list[str]:
    spec = NodeSpec(cpu=cpu, memory="64Gi", labels={NODE_LABEL: ex.namespace, ZONE: zone})
    names = ex.plane.create_nodes(count, spec, prefix=f"{ex.namespace}-{zone}-")
    ex.nodes += names
    return names


def _spread(app: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}},
        }
    ]


async def _zones_of(ex: Experiment, prefix: str) -> dict[str, int]:
    node_zone = {n: n.removeprefix(f"{ex.namespace}-").split("-", 1)[0] for n in ex.nodes}
    counts: dict[str, int] = {}
    for node in (await ex.placed(prefix)).values():
        counts[node_zone[node]] = counts.get(node_zone[node], 0) + 1
    return counts


async def test_a_job_of_six_replicas_lands_two_per_zone(exp: Experiment) -> None:  # noqa: F811
    """A Volcano Job whose template spreads its 6 replicas over zones (maxSkew 1): its pods
    carry the template's constraints, and they run 2/2/2 on zones of 3, 1 and 1 nodes, where
    the least requested nodes alone would put 4 in zone a."""
    for zone, count in (("a", 3), ("b", 1), ("c", 1)):
        _zone_nodes(exp, zone, count)
    scheduler = exp.scheduler()
    exp.controllers()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")
    constraints = _spread("spread")
    template = {
        "metadata": {"labels": {"app": "spread"}},
        "spec": {
            "nodeSelector": {NODE_LABEL: exp.namespace},
            "tolerations": [{"operator": "Exists"}],
            "topologySpreadConstraints": constraints,
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "spread"},
        "spec": {
            "minAvailable": 6,
            "schedulerName": "volcano",
            "queue": "default",
            "maxRetry": 3,
            "tasks": [{"name": "w", "replicas": 6, "template": template}],
        },
    }
    await exp.kube.create(JOB, job, namespace=exp.namespace)

    async def six() -> dict[str, int] | None:
        zones = await _zones_of(exp, "spread-")
        return zones if sum(zones.values()) == 6 else None

    await eventually(six, timeout=60, what="the job's 6 pods placed")
    assert await exp.settle(lambda: _zones_of(exp, "spread-"), 3) == {"a": 2, "b": 2, "c": 2}
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    mine = [p for p in pods if p.metadata.name.startswith("spread-")]
    assert len(mine) == 6
    for pod in mine:
        spread = pod.spec.topology_spread_constraints
        assert [(c.max_skew, c.topology_key, c.when_unsatisfiable) for c in spread] == [
            (1, ZONE, "DoNotSchedule")
        ]
        selector = spread[0].label_selector
        assert selector is not None
        assert selector.match_labels == {"app": "spread"}


async def test_a_full_zone_leaves_the_pod_that_would_skew_pending(exp: Experiment) -> None:  # noqa: F811
    """Zones a and b of one 4-cpu node, zone c of one 1-cpu node; 6 one-cpu pods spread with
    maxSkew 1: 2/2/1 run, and the sixth waits, PodScheduled False with the spread reason
    (the 2 nodes of zones a and b) and Insufficient cpu (zone c's)."""
    _zone_nodes(exp, "a", 1)
    _zone_nodes(exp, "b", 1)
    _zone_nodes(exp, "c", 1, cpu="1")
    await exp.podgroup("full", 3)
    for i in range(6):
        body = exp.pod_body(f"full-{i}", "full")
        body["metadata"]["labels"] = {"app": "full"}
        body["spec"]["topologySpreadConstraints"] = _spread("full")
        await exp.kube.create(POD, body, namespace=exp.namespace)
    scheduler = exp.scheduler()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def five() -> dict[str, int] | None:
        zones = await _zones_of(exp, "full-")
        return zones if sum(zones.values()) == 5 else None

    await eventually(five, timeout=60, what="5 pods placed")
    assert await exp.settle(lambda: _zones_of(exp, "full-"), 3) == {"a": 2, "b": 2, "c": 1}
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    (waiting,) = [p for p in pods if p.metadata.name.startswith("full-") and not p.spec.node_name]

    async def refused() -> str | None:
        pod = await exp.kube.get(POD, waiting.metadata.name, namespace=exp.namespace)
        cond = find_condition(pod.status.conditions, "PodScheduled")
        return cond.message if cond is not None and cond.status == "False" else None

    message = await eventually(refused, timeout=30, what="PodScheduled=False")
    assert f"2 {REASON}" in message
    assert "Insufficient cpu" in message  # zone c's node (and any full node of the cluster)
