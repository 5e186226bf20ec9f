"""Queue quota by DeviceClass on the real API server with kwok nodes (the DeviceClass and
ResourceSlices of e2e/test_scheduler_dra.py; kube-controller-manager's resource claim
controller makes the pods' claims from their templates). With a queue capped at
``deviceclass/<class>: 8``, Caldera's scheduler:

- admits and places a gang of two pods claiming 4 GPUs each, and writes
  ``deviceclass/<class>: 8`` in the Queue's ``status.allocated``;
- keeps a third job, claiming 4 more, Pending (its PodGroup not Inqueue), with the reason in
  its wait record;
- admits and places it once the queue's capability grows to 12, and drops the gang's devices
  from ``status.allocated`` once the gang's pods are gone.
"""

from __future__ import annotations

import contextlib

import pytest

from caldera.api.kinds import (
    DEVICE_CLASS,
    POD,
    PODGROUP,
    QUEUE,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
)
from caldera.api.why import WHY_ANNOTATION
from caldera.kube.errors import NotFound
from caldera.kube.requests import PatchType
from e2e.test_scheduler_dra import claim_pod, device_class, gpu_slice, request
from e2e.test_scheduler_experiments import (
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


async def test_a_queue_holds_jobs_to_its_device_class_capability(exp: Experiment) -> None:  # noqa: F811
    nodes = exp.make_nodes(2, cpu=16)
    cls = device_class(exp)
    key = f"deviceclass/{cls['metadata']['name']}"
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
        queue = await exp.make_queue("gpus", capability={key: "8"})
        scheduler = exp.scheduler()
        await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")

        async def phase(group: str) -> str:
            pg = await exp.kube.get(PODGROUP, group, namespace=exp.namespace)
            return pg.status.phase or ""

        async def allocated() -> dict[str, str]:
            found = await exp.kube.get(QUEUE, queue)
            return {name: str(amount) for name, amount in found.status.allocated.items()}

        # a gang of two pods of 4 GPUs: admitted, placed, 8 GPUs in status.allocated
        await exp.podgroup("g", 2, queue=queue)
        for i in range(2):
            await exp.kube.create(
                POD, claim_pod(exp, f"g-{i}", "g", template="four"), namespace=exp.namespace
            )

        async def gang_placed() -> dict[str, str] | None:
            placed = await exp.placed("g-")
            return placed if len(placed) == 2 else None

        await eventually(gang_placed, timeout=60, what="the gang placed")

        async def held(amount: str | None) -> bool:
            return (await allocated()).get(key) == amount

        await eventually(lambda: held("8"), timeout=30, what=f"{key}: 8 in status.allocated")

        # one more pod of 4 GPUs: its job stays Pending, saying why
        await exp.podgroup("w", 1, queue=queue)
        await exp.kube.create(
            POD, claim_pod(exp, "w-0", "w", template="four"), namespace=exp.namespace
        )

        async def why_waiting() -> str | None:
            pg = await exp.kube.get(PODGROUP, "w", namespace=exp.namespace)
            record = pg.metadata.annotations.get(WHY_ANNOTATION, "")
            return record if key in record else None

        record = await eventually(why_waiting, timeout=30, what="w's wait record")
        assert "8 held and 0 reserved of 8" in record
        assert await exp.settle(lambda: phase("w"), 3) == "Pending"
        assert await exp.placed("w-") == {}

        # the capability grows: the job is admitted and placed
        await exp.kube.patch(
            QUEUE, queue, {"spec": {"capability": {key: "12"}}}, patch_type=PatchType.MERGE
        )

        async def waiting_placed() -> dict[str, str] | None:
            placed = await exp.placed("w-")
            return placed or None

        await eventually(waiting_placed, timeout=60, what="w-0 placed")
        assert await phase("w") != "Pending"
        await eventually(lambda: held("12"), timeout=30, what=f"{key}: 12 in status.allocated")

        # the gang goes: its devices leave status.allocated
        for i in range(2):
            await exp.kube.delete(POD, f"g-{i}", namespace=exp.namespace)
        await eventually(lambda: held("4"), timeout=30, what=f"{key}: 4 in status.allocated")
        await exp.kube.delete(POD, "w-0", namespace=exp.namespace)
        left = await exp.settle(allocated, 5)
        assert key not in left, left
    finally:
        for node in nodes:
            with contextlib.suppress(NotFound):
                await exp.kube.delete(RESOURCE_SLICE, f"{node}-gpus")
        with contextlib.suppress(NotFound):
            await exp.kube.delete(DEVICE_CLASS, cls["metadata"]["name"])
