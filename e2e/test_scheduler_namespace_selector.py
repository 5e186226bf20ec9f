"""Inter-pod affinity across namespaces on the real API server with kwok nodes.

- ``namespaceSelector`` by namespace labels: a pod whose required anti-affinity names the pods
  of the namespaces labelled ``team: a`` stays off the node of such a pod and shares a node
  with a pod of a ``team: b`` namespace; after the two namespaces swap labels, the next pod
  with the same term goes the other way (the scheduler watches Namespaces, and a label change
  is seen by the next session).
- Who may write cross-namespace terms is bounded by the API server, not the scheduler: a
  ResourceQuota scoped ``CrossNamespacePodAffinity`` with ``pods: 0`` refuses a pod whose term
  has ``namespaceSelector: {}`` and admits one whose terms stay in its namespace
  (kube-apiserver's ResourceQuota admission; docs/reliability.md, "Cross-namespace pod
  affinity").
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from caldera.api.kinds import NAMESPACE, POD, RESOURCE_QUOTA
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError, NotFound
from e2e.cluster.control_plane import NodeSpec
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture
async def teams(kube: KubeClient) -> AsyncIterator[tuple[str, str]]:
    """Two fresh namespaces, labelled ``team: a`` and ``team: b``; deleted afterwards."""
    token = secrets.token_hex(4)
    names = (f"e2e-{token}-a", f"e2e-{token}-b")
    for name, team in zip(names, ("a", "b"), strict=True):
        body = {"metadata": {"name": name, "labels": {"team": team, "caldera.io/e2e": name}}}
        await kube.create(NAMESPACE, body)
    try:
        yield names
    finally:
        for name in names:
            with contextlib.suppress(NotFound):
                await kube.delete(NAMESPACE, name)


def _bound_pod(name: str, node: str, labels: dict[str, str], cpu: str) -> dict[str, Any]:
    """A pod already on ``node`` (``nodeName``: no scheduler involved)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def _anti_affinity(labels: dict[str, str], namespace_selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            REQUIRED: [
                {
                    "labelSelector": {"matchLabels": labels},
                    "namespaceSelector": namespace_selector,
                    "topologyKey": HOST,
                }
            ]
        }
    }


async def _relabel(kube: KubeClient, name: str, team: str) -> None:
    await kube.patch(NAMESPACE, name, {"metadata": {"labels": {"team": team}}})


async def test_anti_affinity_by_namespace_labels_follows_the_labels(
    exp: Experiment,  # noqa: F811
    teams: tuple[str, str],
) -> None:
    """Node 1 holds a web pod of the team=a namespace, node 2 (busier, so less preferred by
    nodeorder) one of the team=b namespace. A pod refusing web pods of team=a namespaces goes
    to node 2. Then the namespaces swap labels: the next such pod goes to node 1."""
    spec = NodeSpec(cpu="4", memory="64Gi", labels={NODE_LABEL: exp.namespace})
    first, second = exp.plane.create_nodes(2, spec, prefix=f"{exp.namespace}-")
    exp.nodes += [first, second]
    ns_a, ns_b = teams
    web = {"app": f"web-{exp.namespace}"}
    # The busier node is the one the least-requested score passes over: a scheduler that
    # ignored the namespace selector would pick the first node.
    await exp.kube.create(POD, _bound_pod("web", first, web, "100m"), namespace=ns_a)
    await exp.kube.create(POD, _bound_pod("web", second, web, "2"), namespace=ns_b)
    scheduler = exp.scheduler()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def place(name: str) -> str:
        body = exp.pod_body(name, name, cpu="100m")
        body["spec"]["affinity"] = _anti_affinity(web, {"matchLabels": {"team": "a"}})
        await exp.podgroup(name, 1)
        await exp.kube.create(POD, body, namespace=exp.namespace)

        async def placed() -> str | None:
            return (await exp.placed(name)).get(name)

        node: str = await eventually(placed, timeout=60, what=f"{name} placed")
        return node

    assert await place("before") == second
    await _relabel(exp.kube, ns_a, "b")
    await _relabel(exp.kube, ns_b, "a")
    assert await place("after") == first


async def test_a_cross_namespace_quota_refuses_cross_namespace_terms(
    kube: KubeClient, namespace: str
) -> None:
    """kube-apiserver's ResourceQuota admission, not the scheduler, bounds who may write
    cross-namespace terms: with a quota scoped CrossNamespacePodAffinity of 0 pods, a pod whose
    anti-affinity term has ``namespaceSelector: {}`` is refused, one whose term names no other
    namespace is admitted."""
    name = "no-cross-namespace-affinity"
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}
                ]
            },
        },
    }
    await kube.create(RESOURCE_QUOTA, quota, namespace=namespace)

    async def quota_synced() -> bool:
        found = await kube.get(RESOURCE_QUOTA, name, namespace=namespace)
        return found.status.hard.get("pods") == "0"

    await eventually(quota_synced, timeout=30, what="the quota controller's status")
    web = {"app": "web"}

    def pod(name: str, affinity: dict[str, Any]) -> dict[str, Any]:
        body = _bound_pod(name, "", web, "100m")
        del body["spec"]["nodeName"]
        body["spec"]["affinity"] = affinity
        return body

    with pytest.raises(ApiError) as refused:
        await kube.create(POD, pod("everywhere", _anti_affinity(web, {})), namespace=namespace)
    assert refused.value.status == 403, refused.value
    assert "exceeded quota" in refused.value.message, refused.value.message
    assert name in refused.value.message, refused.value.message
    own = {
        "podAntiAffinity": {
            REQUIRED: [{"labelSelector": {"matchLabels": web}, "topologyKey": HOST}]
        }
    }
    await kube.create(POD, pod("own-namespace", own), namespace=namespace)
    with pytest.raises(NotFound):
        await kube.get(POD, "everywhere", namespace=namespace)
    assert (await kube.get(POD, "own-namespace", namespace=namespace)).metadata.name
