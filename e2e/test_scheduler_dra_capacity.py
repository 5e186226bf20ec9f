"""Consumable capacity (``DRAConsumableCapacity``, beta and on by default in Kubernetes 1.36)
on the real API server: the local control plane's kube-apiserver keeps a device's
``allowMultipleAllocations`` and its capacity's ``requestPolicy`` in a ResourceSlice, and a
request's ``capacity.requests`` in a ResourceClaim. Caldera's allocator does not share
devices between claims: a pod whose claim asks for capacity waits, saying so (docs/dra.md).
"""

from __future__ import annotations

import contextlib
import json

import pytest

from caldera.api.kinds import DEVICE_CLASS, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from caldera.api.meta import find_condition
from caldera.kube.errors import NotFound
from e2e.test_scheduler_dra import claim_pod, device_class, driver_of, request
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

POLICY = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}}


async def test_capacity_requests_are_kept_by_the_api_server_and_refused(exp: Experiment) -> None:  # noqa: F811
    (node,) = exp.make_nodes(1, cpu=16)
    cls = device_class(exp)
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-shared"},
        "spec": {
            "driver": driver_of(exp),
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [
                {
                    "name": "gpu-0",
                    "allowMultipleAllocations": True,
                    "capacity": {"memory": {"value": "80Gi", "requestPolicy": POLICY}},
                }
            ],
        },
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "part"},
        "spec": {
            "devices": {"requests": [request(exp, 1, capacity={"requests": {"memory": "20Gi"}})]}
        },
    }
    try:
        await exp.kube.create(DEVICE_CLASS, cls)
        await exp.kube.create(RESOURCE_SLICE, shared)
        await exp.kube.create(RESOURCE_CLAIM, claim, namespace=exp.namespace)

        # what the API server stored, as JSON (Caldera's models keep only what they read)
        stored = json.loads(exp.plane.kubectl("get", "resourceslice", f"{node}-shared", "-o=json"))
        (device,) = stored["spec"]["devices"]
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"]["memory"]["requestPolicy"]["validRange"]["step"] == "10Gi"
        stored = json.loads(
            exp.plane.kubectl("get", "resourceclaim", "part", "-n", exp.namespace, "-o=json")
        )
        (kept,) = stored["spec"]["devices"]["requests"]
        assert kept["exactly"]["capacity"] == {"requests": {"memory": "20Gi"}}

        scheduler = exp.scheduler()
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")
        await exp.podgroup("p", 1)
        await exp.kube.create(
            POD, claim_pod(exp, "p-0", "p", claim="part"), namespace=exp.namespace
        )

        async def refused() -> str | None:
            pod = await exp.kube.get(POD, "p-0", namespace=exp.namespace)
            cond = find_condition(pod.status.conditions, "PodScheduled")
            return cond.message if cond is not None and cond.status == "False" else None

        message = await eventually(refused, timeout=30, what="p-0's PodScheduled=False")
        assert "capacity requests are not supported by Caldera" in message
        part = await exp.kube.get(RESOURCE_CLAIM, "part", namespace=exp.namespace)
        assert part.status.allocation is None
    finally:
        with contextlib.suppress(NotFound):
            await exp.kube.delete(RESOURCE_SLICE, f"{node}-shared")
        with contextlib.suppress(NotFound):
            await exp.kube.delete(DEVICE_CLASS, cls["metadata"]["name"])
