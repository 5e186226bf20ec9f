"""Dynamic Resource Allocation on the real API server with kwok nodes: the test publishes a
DeviceClass and, for each of its nodes, a ResourceSlice of 8 GPUs (model, memory, index and
NUMA attributes), as a DRA driver would; kube-controller-manager's resource claim controller
makes the pods' claims from their templates. Caldera's scheduler then:

- places a gang whose pods each claim 4 GPUs from a template whole, each claim allocated 4
  distinct GPUs of its pod's node and reserved for it;
- leaves a gang that does not fit with no claim allocated;
- puts two pods sharing one claim (2 H100s on one NUMA node: a selector and a constraint) on
  the claim's node, reserves it for both, and releases it as they go (deallocated with the
  last one);
- refuses a claim asking for adminAccess, saying so on the pod.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import Any

import pytest

from caldera.api.dra import ResourceClaim
from caldera.api.kinds import (
    DEVICE_CLASS,
    NAMESPACE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from caldera.api.meta import find_condition
from caldera.kube.errors import NotFound
from caldera.kube.requests import PatchType
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

GPUS = 8


def driver_of(exp: Experiment) -> str:  # noqa: F811
    return f"gpu.{exp.namespace}.caldera.test"


def device_class(exp: Experiment) -> dict[str, Any]:  # noqa: F811
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"{exp.namespace}-gpu"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver_of(exp)}"'}}]},
    }


def gpu_slice(exp: Experiment, node: str) -> dict[str, Any]:  # noqa: F811
    """Eight GPUs: A100 (40Gi) for 0-3, H100 (80Gi) for 4-7; NUMA node 0 for 0-1 and 4-5."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": "A100" if i < 4 else "H100"},
                "index": {"int": i},
                "numa": {"int": (i // 2) % 2},
            },
            "capacity": {"memory": {"value": "40Gi" if i < 4 else "80Gi"}},
        }
        for i in range(GPUS)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": driver_of(exp),
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": devices,
        },
    }


def request(exp: Experiment, count: int, **extra: Any) -> dict[str, Any]:  # noqa: F811
    return {
        "name": "gpu",
        "exactly": {"deviceClassName": f"{exp.namespace}-gpu", "count": count, **extra},
    }


def claim_pod(
    exp: Experiment,  # noqa: F811
    name: str,
    group: str,
    *,
    template: str = "",
    claim: str = "",
) -> dict[str, Any]:
    body = exp.pod_body(name, group)
    entry: dict[str, str] = {"name": "gpus"}
    if template:
        entry["resourceClaimTemplateName"] = template
    else:
        entry["resourceClaimName"] = claim
    body["spec"]["resourceClaims"] = [entry]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return body


async def claims_of(exp: Experiment) -> dict[str, ResourceClaim]:  # noqa: F811
    found = await exp.kube.list(RESOURCE_CLAIM, namespace=exp.namespace)
    return {c.metadata.name: c for c in found.items}


def devices(claim: ResourceClaim) -> list[tuple[str, str]]:
    allocation = claim.status.allocation
    assert allocation is not None, claim.metadata.name
    return [(r.pool, r.device) for r in allocation.devices.results]


async def test_dra_gangs_shared_claims_and_refusals(exp: Experiment) -> None:  # noqa: F811
    nodes = exp.make_nodes(2, cpu=16)
    cls = device_class(exp)
    try:
        await exp.kube.create(DEVICE_CLASS, cls)
        for node in nodes:
            await exp.kube.create(RESOURCE_SLICE, gpu_slice(exp, node))
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "four"},
            "spec": {"spec": {"devices": {"requests": [request(exp, 4)]}}},
        }
        await exp.kube.create(RESOURCE_CLAIM_TEMPLATE, template, namespace=exp.namespace)
        scheduler = exp.scheduler()
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")

        # a gang of three pods of 4 GPUs each: placed whole with valid allocations
        await exp.podgroup("g", 3)
        for i in range(3):
            await exp.kube.create(
                POD, claim_pod(exp, f"g-{i}", "g", template="four"), namespace=exp.namespace
            )

        async def gang_placed() -> dict[str, str] | None:
            placed = await exp.placed("g-")
            return placed if len(placed) == 3 else None

        placed = await eventually(gang_placed, timeout=60, what="the gang placed")
        pods = {
            p.metadata.name: p for p in (await exp.kube.list(POD, namespace=exp.namespace)).items
        }
        claims = await claims_of(exp)
        taken: list[tuple[str, str]] = []
        for i in range(3):
            pod = pods[f"g-{i}"]
            (status,) = pod.status.resource_claim_statuses
            claim = claims[status.resource_claim_name or ""]
            got = devices(claim)
            assert len(got) == 4
            assert {pool for pool, _ in got} == {placed[f"g-{i}"]}  # the pod's node's GPUs
            assert [r.uid for r in claim.status.reserved_for] == [pod.metadata.uid]
            taken += got
        assert len(set(taken)) == 12, "a GPU was allocated twice"

        # a gang of five more pods of 4 GPUs: 4 GPUs are left, it waits whole
        await exp.podgroup("w", 5)
        for i in range(5):
            await exp.kube.create(
                POD, claim_pod(exp, f"w-{i}", "w", template="four"), namespace=exp.namespace
            )

        async def waiting_claims() -> list[tuple[str, bool]]:
            found = await claims_of(exp)
            return sorted(
                (n, c.status.allocation is not None) for n, c in found.items() if n.startswith("w-")
            )

        settled = await exp.settle(waiting_claims, 4)
        assert len(settled) == 5, "the claim controller made the waiting pods' claims"
        assert not any(allocated for _, allocated in settled), settled
        assert await exp.placed("w-") == {}

        # two pods share one claim: 2 H100 on one NUMA node (a selector and a constraint)
        shared = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": {
                "devices": {
                    "requests": [
                        request(
                            exp,
                            2,
                            selectors=[
                                {
                                    "cel": {
                                        "expression": f'device.attributes["{driver_of(exp)}"]'
                                        '.model == "H100"'
                                    }
                                }
                            ],
                        )
                    ],
                    "constraints": [{"matchAttribute": f"{driver_of(exp)}/numa"}],
                }
            },
        }
        await exp.kube.create(RESOURCE_CLAIM, shared, namespace=exp.namespace)
        for name in ("s-0", "s-1"):
            await exp.podgroup(name, 1)
            await exp.kube.create(
                POD, claim_pod(exp, name, name, claim="shared"), namespace=exp.namespace
            )

        async def shared_placed() -> dict[str, str] | None:
            placed = await exp.placed("s-")
            return placed if len(placed) == 2 else None

        where = await eventually(shared_placed, timeout=60, what="the claim's two pods placed")
        assert len(set(where.values())) == 1
        claim = (await claims_of(exp))["shared"]
        got = devices(claim)
        assert len(got) == 2
        assert {pool for pool, _ in got} == set(where.values())
        indexes = sorted(int(d.removeprefix("gpu-")) for _, d in got)
        assert all(i >= 4 for i in indexes), "H100s only"
        assert len({(i // 2) % 2 for i in indexes}) == 1, "one NUMA node"
        assert len(claim.status.reserved_for) == 2
        assert not set(got) & set(taken), "the shared claim took a gang pod's GPU"

        # the claim is released as its pods go, deallocated with the last
        await exp.kube.delete(POD, "s-0", namespace=exp.namespace)

        async def consumers() -> int | None:
            found = (await claims_of(exp))["shared"]
            if found.status.allocation is None:
                return None if found.status.reserved_for else 0
            return len(found.status.reserved_for)

        await eventually(
            lambda: _equals(consumers(), 1), timeout=30, what="s-0's reservation removed"
        )
        await exp.kube.delete(POD, "s-1", namespace=exp.namespace)
        await eventually(
            lambda: _equals(consumers(), 0), timeout=30, what="the shared claim deallocated"
        )

        # adminAccess (allowed in namespaces labelled for it) is refused, saying so
        await exp.kube.patch(
            NAMESPACE,
            exp.namespace,
            {"metadata": {"labels": {"resource.kubernetes.io/admin-access": "true"}}},
            patch_type=PatchType.MERGE,
        )
        admin = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "admin"},
            "spec": {"devices": {"requests": [request(exp, 1, adminAccess=True)]}},
        }
        await exp.kube.create(RESOURCE_CLAIM, admin, namespace=exp.namespace)
        await exp.podgroup("a", 1)
        await exp.kube.create(
            POD, claim_pod(exp, "a-0", "a", claim="admin"), namespace=exp.namespace
        )

        async def refused() -> str | None:
            pod = await exp.kube.get(POD, "a-0", namespace=exp.namespace)
            cond = find_condition(pod.status.conditions, "PodScheduled")
            return cond.message if cond is not None and cond.status == "False" else None

        message = await eventually(refused, timeout=30, what="a-0's PodScheduled=False")
        assert "adminAccess is not supported by Caldera" in message
        assert (await claims_of(exp))["admin"].status.allocation is None
    finally:
        for node in nodes:
            with contextlib.suppress(NotFound):
                await exp.kube.delete(RESOURCE_SLICE, f"{node}-gpus")
        with contextlib.suppress(NotFound):
            await exp.kube.delete(DEVICE_CLASS, cls["metadata"]["name"])


async def _equals(value: Awaitable[object], expected: object) -> bool:
    return bool(await value == expected)
