"""A fake Dynamic Resource Allocation driver for kwok nodes, in tests, benchmarks and the demo.

A real DRA driver runs on every node: it publishes the node's devices as ResourceSlices and,
when the kubelet starts a pod whose claims were allocated there, prepares the devices
(``NodePrepareResources``) and may report them in the claim's ``status.devices``. kwok nodes
have no kubelet, so this driver does both from one place:

* it publishes one ResourceSlice per node (pool = the node's name): ``gpus`` devices
  ``gpu-0``... with the attributes ``model`` (string), ``index`` (int) and ``uuid`` (string) and
  the capacity ``memory``, and a DeviceClass selecting its devices (CEL
  ``device.driver == "<driver>"``);
* it watches ResourceClaims, and a claim allocated devices of its pools and reserved for a pod
  is "prepared": each such device gets a ``status.devices`` entry with condition ``Ready`` (and
  ``data.env.CUDA_VISIBLE_DEVICES``), the handshake the tests and the demo show;
* on the way out it deletes its slices (those it labelled, so also a crashed run's).

In process: ``FakeDraDriver(kube, {node: NodeGpus()})`` with ``publish``, ``prepare_once`` /
``run`` and ``cleanup``. As a process::

    python -m e2e.fake_dra_driver --kubeconfig K [--nodes a,b] [--gpus 8] [--model M ...]

(every kwok node without ``--nodes``); it runs until SIGTERM or SIGINT and then cleans up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import signal
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from caldera.api.kinds import NODE
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Conflict, NotFound
from caldera.kube.requests import PatchType
from e2e.dra_kinds import API_VERSION, DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE, Json

DRIVER: Final = "gpu.fake.caldera.dev"
DRIVER_LABEL: Final = "caldera.io/fake-dra-driver"
FIELD_MANAGER: Final = "caldera-fake-dra-driver"
KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
# Bounds on what a command line can make the driver publish (a slice holds at most 128 devices).
MAX_GPUS: Final = 128
MAX_NODES: Final = 5000

DeviceKey = tuple[str, str, str]  # (driver, pool, device), as allocation results name a device


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs one node's slice publishes: ``gpus`` devices whose models are ``models`` in
    equal consecutive runs (``("A", "B")`` on 8 GPUs: gpu-0..3 are A, gpu-4..7 are B)."""

    gpus: int = 8
    models: tuple[str, ...] = ("FakeGPU-80",)
    memory: str = "80Gi"

    def __post_init__(self) -> None:
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus: {self.gpus} is not between 1 and {MAX_GPUS}")
        if not self.models or len(self.models) > self.gpus:
            raise ValueError(f"models: {len(self.models)} models for {self.gpus} GPUs")

    def model_of(self, index: int) -> str:
        return self.models[index * len(self.models) // self.gpus]


# ---- the manifests and the decisions (pure) --------------------------------------------------


def slice_name(node: str, driver: str = DRIVER) -> str:
    return f"{node}-{driver}"


def resource_slice(node: str, gpus: NodeGpus, driver: str = DRIVER) -> Json:
    """The ResourceSlice of ``node``'s GPUs: one pool named after the node, one slice in it."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": gpus.model_of(i)},
                "index": {"int": i},
                "uuid": {"string": f"GPU-{node}-{i}"},
            },
            "capacity": {"memory": {"value": gpus.memory}},
        }
        for i in range(gpus.gpus)
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node, driver), "labels": {DRIVER_LABEL: driver}},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class(driver: str = DRIVER, name: str | None = None) -> Json:
    """A DeviceClass selecting every device of ``driver`` (named after the driver by default)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name or driver, "labels": {DRIVER_LABEL: driver}},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def allocated_devices(claim: Json) -> list[DeviceKey]:
    """The devices of a claim's allocation, as (driver, pool, device)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return [(r["driver"], r["pool"], r["device"]) for r in results]


def _is_ready(entry: Json) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in entry.get("conditions") or []
    )


def devices_to_prepare(claim: Json, driver: str, pools: Iterable[str]) -> list[DeviceKey]:
    """The devices of ``driver`` in ``pools`` that the claim was allocated and that are not yet
    reported Ready; none while no pod has the claim reserved (the kubelet prepares a claim for
    a pod that is to run, not for an allocation alone)."""
    status = claim.get("status") or {}
    if not status.get("reservedFor"):
        return []
    ours = set(pools)
    ready = {
        (e.get("driver"), e.get("pool"), e.get("device"))
        for e in status.get("devices") or []
        if _is_ready(e)
    }
    return [
        key
        for key in allocated_devices(claim)
        if key[0] == driver and key[1] in ours and key not in ready
    ]


def prepared_status(
    claim: Json, driver: str, pools: Iterable[str], now: dt.datetime
) -> list[Json] | None:
    """The claim's new ``status.devices`` once this driver has prepared its devices, or None if
    there is nothing to do. Entries for devices no longer allocated are dropped (the API server
    accepts only allocated ones); other drivers' entries are kept."""
    todo = devices_to_prepare(claim, driver, pools)
    if not todo:
        return None
    allocated = set(allocated_devices(claim))
    fresh = set(todo)
    kept = [
        e
        for e in (claim.get("status") or {}).get("devices") or []
        if (e.get("driver"), e.get("pool"), e.get("device")) in allocated - fresh
    ]
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return kept + [
        {
            "driver": d,
            "pool": pool,
            "device": device,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Prepared",
                    "message": "prepared by the fake DRA driver (no kubelet on kwok nodes)",
                    "lastTransitionTime": stamp,
                }
            ],
            "data": {"env": {"CUDA_VISIBLE_DEVICES": device.removeprefix("gpu-")}},
        }
        for d, pool, device in todo
    ]


def claim_key(claim: Json) -> str:
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# ---- the driver (I/O) -------------------------------------------------------------------------


class FakeDraDriver:
    """Publishes ``layouts`` (node -> its GPUs) as ResourceSlices of ``driver`` and prepares the
    claims allocated on them; ``prepared`` records each claim key it prepared, with devices."""

    def __init__(
        self,
        kube: KubeClient,
        layouts: Mapping[str, NodeGpus],
        *,
        driver: str = DRIVER,
        log: Any = None,
    ) -> None:
        if len(layouts) > MAX_NODES:
            raise ValueError(f"nodes: {len(layouts)} nodes, at most {MAX_NODES}")
        self.kube, self.layouts, self.driver = kube, dict(layouts), driver
        self.prepared: dict[str, list[DeviceKey]] = {}
        self._say = log or (lambda _line: None)

    @classmethod
    def uniform(
        cls, kube: KubeClient, nodes: Iterable[str], gpus: NodeGpus = NodeGpus(), **kw: Any
    ) -> FakeDraDriver:
        return cls(kube, dict.fromkeys(nodes, gpus), **kw)

    async def publish(self, *, with_class: bool = True, inflight: int = 16) -> None:
        """Apply (server-side, so again is harmless) every node's slice and the DeviceClass."""
        gate = asyncio.Semaphore(inflight)

        async def apply(node: str, gpus: NodeGpus) -> None:
            body = resource_slice(node, gpus, self.driver)
            async with gate:
                await self.kube.patch(
                    RESOURCE_SLICE,
                    body["metadata"]["name"],
                    body,
                    patch_type=PatchType.APPLY,
                    field_manager=FIELD_MANAGER,
                    force=True,
                )

        await asyncio.gather(*(apply(n, g) for n, g in self.layouts.items()))
        if with_class:
            body = device_class(self.driver)
            await self.kube.patch(
                DEVICE_CLASS,
                body["metadata"]["name"],
                body,
                patch_type=PatchType.APPLY,
                field_manager=FIELD_MANAGER,
                force=True,
            )

    async def prepare(self, claim: Json) -> bool:
        """Report the claim's devices on this driver's nodes prepared; True if it wrote."""
        devices = prepared_status(claim, self.driver, self.layouts, dt.datetime.now(dt.UTC))
        if devices is None:
            return False
        meta = claim["metadata"]
        # The resourceVersion makes the patch fail on a claim changed since (Conflict): the
        # watch brings the newer claim, decided again then.
        patch = {
            "metadata": {"resourceVersion": meta["resourceVersion"]},
            "status": {"devices": devices},
        }
        try:
            await self.kube.patch_status(
                RESOURCE_CLAIM, meta["name"], patch, namespace=meta["namespace"]
            )
        except (Conflict, NotFound):
            return False
        key = claim_key(claim)
        done = devices_to_prepare(claim, self.driver, self.layouts)
        self.prepared[key] = sorted({*self.prepared.get(key, []), *done})
        self._say(f"prepared {key}: {', '.join(f'{p}/{d}' for _, p, d in done)}")
        return True

    async def prepare_once(self) -> int:
        """One pass over every claim; the number of claims it prepared."""
        listed = await self.kube.list(RESOURCE_CLAIM)
        return sum([await self.prepare(c) for c in listed.items])

    async def run(self, stop: asyncio.Event) -> None:
        """Prepare claims as they are allocated until ``stop`` is set (list, then watch; list
        again whenever the watch ends)."""
        while not stop.is_set():
            try:
                listed = await self.kube.list(RESOURCE_CLAIM)
                for claim in listed.items:
                    await self.prepare(claim)
                async with self.kube.watch(
                    RESOURCE_CLAIM, resource_version=listed.resource_version, timeout_seconds=60
                ) as events:
                    async for event in events:
                        if stop.is_set():
                            return
                        if not isinstance(event.object, dict) or event.type == "ERROR":
                            break  # a Status: list again
                        if event.type in ("ADDED", "MODIFIED"):
                            await self.prepare(event.object)
            except (ApiError, ApiConnectionError, TimeoutError) as exc:
                self._say(f"watching ResourceClaims failed ({exc}); listing again")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)

    async def cleanup(self, *, with_class: bool = False) -> int:
        """Delete every slice this driver labelled (this run's and earlier ones'), and its
        DeviceClass if asked; the number of slices deleted."""
        selector = f"{DRIVER_LABEL}={self.driver}"
        listed = await self.kube.list(RESOURCE_SLICE, label_selector=selector)
        for item in listed.items:
            with contextlib.suppress(NotFound):
                await self.kube.delete(RESOURCE_SLICE, item["metadata"]["name"])
        if with_class:
            with contextlib.suppress(NotFound):
                await self.kube.delete(DEVICE_CLASS, device_class(self.driver)["metadata"]["name"])
        return len(listed.items)


# ---- the process ------------------------------------------------------------------------------


async def kwok_nodes(kube: KubeClient) -> list[str]:
    """The names of the nodes kwok manages (annotated ``kwok.x-k8s.io/node: fake``)."""
    listed = await kube.list(NODE)
    return sorted(
        n.metadata.name
        for n in listed.items
        if (n.metadata.annotations or {}).get(KWOK_NODE_ANNOTATION) == "fake"
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.fake_dra_driver",
        description="A fake DRA driver: ResourceSlices of GPUs for kwok nodes, claims prepared.",
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument(
        "--nodes", default="", help="comma-separated nodes (default: every kwok node)"
    )
    parser.add_argument("--driver", default=DRIVER, help=f"driver name (default {DRIVER})")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument(
        "--model", action="append", default=[], help="GPU model (repeatable: split per node)"
    )
    parser.add_argument("--memory", default="80Gi", help="memory of each GPU (default 80Gi)")
    parser.add_argument(
        "--keep", action="store_true", help="leave the slices and the class behind on exit"
    )
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(f"fake-dra-driver: {line}", file=sys.stderr, flush=True)

    try:
        gpus = NodeGpus(args.gpus, tuple(args.model) or ("FakeGPU-80",), args.memory)
    except ValueError as exc:
        say(f"error: {exc}")
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    options = ClientOptions(qps=200, burst=200)
    async with KubeClient.from_kubeconfig(args.kubeconfig, options=options) as kube:
        nodes = [n for n in args.nodes.split(",") if n] or await kwok_nodes(kube)
        try:
            driver = FakeDraDriver.uniform(kube, nodes, gpus, driver=args.driver, log=say)
        except ValueError as exc:
            say(f"error: {exc}")
            return 2
        await driver.publish()
        say(f"published {len(nodes)} ResourceSlices of {gpus.gpus} GPUs ({args.driver})")
        try:
            await driver.run(stop)
        finally:
            if not args.keep:
                removed = await driver.cleanup(with_class=True)
                say(f"deleted {removed} ResourceSlices and the DeviceClass")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from caldera.obs.logging import configure_logging

    configure_logging(component="fake-dra-driver", level="warning")
    return asyncio.run(_main(_parse(argv)))


if __name__ == "__main__":
    sys.exit(main())
