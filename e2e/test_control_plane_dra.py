"""Dynamic Resource Allocation on the local control plane: the API server serves
``resource.k8s.io/v1`` and kube-controller-manager's resourceclaim controller makes a pod's
ResourceClaims from its ResourceClaimTemplates (both are on by default in Kubernetes 1.34 and
later; these tests fail if a version or a flag turns them off)."""

from __future__ import annotations

import json
import secrets

import pytest

from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.dra_kinds import (
    DEVICE_CLASS,
    POD_JSON,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    Json,
    claim_template,
    pod_with_claims,
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


async def test_resource_api_is_served(kube: KubeClient) -> None:
    """The four DRA kinds are in the API server's discovery of resource.k8s.io/v1."""
    listing = json.loads(await kube.request("GET", "/apis/resource.k8s.io/v1"))
    kinds = {r["kind"] for r in listing["resources"] if "/" not in r["name"]}
    assert {"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"} <= kinds


async def test_template_yields_a_claim_for_the_pod(kube: KubeClient, namespace: str) -> None:
    """A pod naming a ResourceClaimTemplate gets a generated ResourceClaim (owned by the pod,
    with the template's requests) and its status names it; the claim goes with the pod. No
    scheduler serves the pod: the controller works before scheduling, as DRA requires."""
    device_class = f"e2e-{secrets.token_hex(3)}.fake.caldera.dev"
    await kube.create(
        DEVICE_CLASS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{device_class}"'}}]},
        },
    )
    try:
        await kube.create(
            RESOURCE_CLAIM_TEMPLATE,
            claim_template("two-gpus", device_class, 2),
            namespace=namespace,
        )
        pod = await kube.create(
            POD_JSON, pod_with_claims("p", "nobody", {"gpus": "two-gpus"}), namespace=namespace
        )

        async def claim_status() -> list[Json] | None:
            got = await kube.get(POD_JSON, "p", namespace=namespace)
            statuses: list[Json] = got.get("status", {}).get("resourceClaimStatuses", [])
            return statuses or None

        statuses = await eventually(claim_status, what="the pod's resourceClaimStatuses")
        assert [s["name"] for s in statuses] == ["gpus"]
        claim = await kube.get(
            RESOURCE_CLAIM, statuses[0]["resourceClaimName"], namespace=namespace
        )
        owners = claim["metadata"]["ownerReferences"]
        assert [(o["kind"], o["uid"], o.get("controller")) for o in owners] == [
            ("Pod", pod["metadata"]["uid"], True)
        ]
        assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpus"
        request = claim["spec"]["devices"]["requests"][0]
        assert request["exactly"]["deviceClassName"] == device_class
        assert request["exactly"]["count"] == 2
        assert not claim.get("status", {}).get("allocation")  # nobody allocated it

        await kube.delete(POD_JSON, "p", namespace=namespace, grace_period_seconds=0)

        async def claim_gone() -> bool:
            try:
                await kube.get(RESOURCE_CLAIM, claim["metadata"]["name"], namespace=namespace)
            except NotFound:
                return True
            return False

        await eventually(claim_gone, what="the generated claim deleted with its pod")
    finally:
        await kube.delete(DEVICE_CLASS, device_class)
