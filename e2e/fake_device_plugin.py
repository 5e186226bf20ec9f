"""A stand-in for HAMi's volcano-vgpu-device-plugin on kwok nodes (no GPU needed): what the
real one does on the node once a vGPU pod is bound, as the e2e tests need it shown.

For each bound pod of a namespace whose ``volcano.sh/bind-phase`` is ``allocating`` and whose
``volcano.sh/vgpu-node`` is its node, it reads ``volcano.sh/devices-to-allocate``, checks that
every card named there is registered on that node (``volcano.sh/node-vgpu-register``), then, as
the real plugin's Allocate does, empties ``devices-to-allocate`` (what it handed over), sets
the bind phase to ``success`` (``failed`` when a card is not the node's) and releases the
node's ``hamivgpu`` lock. ``handed`` keeps what each pod was given, for the test to check.
A MIG instance (``uuid[group-position]``) is named by its card's UUID.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from caldera.api.kinds import NODE, POD
from caldera.api.mig import decode_mig_id
from caldera.api.vgpu import (
    ASSIGNED_NODE,
    BIND_PHASE,
    NODE_LOCK,
    PHASE_ALLOCATING,
    PHASE_FAILED,
    PHASE_SUCCESS,
    REGISTER,
    TO_ALLOCATE,
    FormatError,
    decode_pod_devices,
    parse_register,
)
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound


@dataclass
class FakeDevicePlugin:
    """Polls the namespace's pods every ``period`` seconds while running."""

    kube: KubeClient
    namespace: str
    period: float = 0.3
    handed: dict[str, str] = field(default_factory=dict)  # pod -> devices-to-allocate text
    failed: list[str] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeDevicePlugin:
        self._task = asyncio.create_task(self._run(), name="fake device plugin")
        return self

    async def __aexit__(self, *_exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(self.period)

    async def step(self) -> None:
        """Hand over the cards of every pod bound since the last step."""
        pods = (await self.kube.list(POD, namespace=self.namespace)).items
        for pod in pods:
            notes = pod.metadata.annotations
            node = pod.spec.node_name
            if not node or notes.get(BIND_PHASE) != PHASE_ALLOCATING:
                continue
            if notes.get(ASSIGNED_NODE) != node:
                continue
            text = notes.get(TO_ALLOCATE, "")
            phase = PHASE_SUCCESS if await self._cards_on(node, text) else PHASE_FAILED
            if phase == PHASE_FAILED:
                self.failed.append(pod.metadata.name)
            self.handed[pod.metadata.name] = text
            with contextlib.suppress(NotFound):
                await self.kube.patch(
                    POD,
                    pod.metadata.name,
                    {"metadata": {"annotations": {TO_ALLOCATE: "", BIND_PHASE: phase}}},
                    namespace=self.namespace,
                )
                await self.kube.patch(NODE, node, {"metadata": {"annotations": {NODE_LOCK: None}}})

    async def _cards_on(self, node: str, text: str) -> bool:
        """Whether every card the text names is registered on the node."""
        try:
            registered = parse_register(
                (await self.kube.get(NODE, node)).metadata.annotations.get(REGISTER, "")
            )
        except (FormatError, NotFound):
            return False
        uuids = {card.uuid for card in registered.cards}
        named = [_card_of(d.uuid) for container in decode_pod_devices(text) for d in container]
        return bool(named) and all(uuid in uuids for uuid in named)


def _card_of(name: str) -> str:
    """The card a device name is on: a MIG instance ``uuid[group-position]`` is on ``uuid``."""
    instance = decode_mig_id(name)
    return name if instance is None else instance[0]
