"""GPU cards over a simulated run, for the gpu-sharing experiment (docs/experiments.md): the
memory each pod uses on each card from its bind to its end, and from those the cluster's card
memory in use, the cards in use and the cards partly used (some memory in use, not all of it:
fragments) over time.

A pod that deviceshare placed names its cards and their memory in ``PodRun.devices``. A pod
that asked whole ``nvidia.com/gpu`` cards names none: it holds cards of its own on its node,
each using the memory the same workload asks when it shares cards (``needs``, read from the
sharing trace by ``card_needs``), so a 20 GiB inference pod leaves 60 GiB of its 80 GiB card
unused. Card keys are (node, UUID): HAMi's UUIDs are per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from caldera.api.core import Pod
from caldera.api.vgpu import REGISTER, container_requests, decode_pod_devices, parse_register
from simulator.results import RunResult
from simulator.spec import Scenario

CardKey = tuple[str, str]  # (node, card UUID)


@dataclass(frozen=True)
class CardUse:
    """``memory`` MiB of ``card`` used by one pod from ``start`` to ``end`` (seconds)."""

    card: CardKey
    memory: int
    start: float
    end: float


@dataclass(frozen=True)
class CardSample:
    """The cluster's cards from ``time`` on (until the next sample)."""

    time: float
    memory: int  # MiB in use
    used: int  # cards with some memory in use
    partly: int  # cards with some memory in use, not all of it


@dataclass(frozen=True)
class Capacity:
    """The cards a cluster's nodes register, and the memory of each (MiB, all alike here)."""

    cards: int
    memory: int

    @property
    def total(self) -> int:
        return self.cards * self.memory


def capacity(scenario: Scenario) -> Capacity:
    """The cards of the scenario's nodes, from their register annotations; every card must
    have the same memory (the figures are shares of one card size)."""
    sizes: set[int] = set()
    cards = 0
    for node in scenario.cluster.nodes:
        text = node.metadata.annotations.get(REGISTER)
        if text is None:
            continue
        for card in parse_register(text).cards:
            cards += 1
            sizes.add(card.memory)
    if len(sizes) > 1:
        raise ValueError(f"cards of different memory: {sorted(sizes)} MiB")
    return Capacity(cards, sizes.pop() if sizes else 0)


def card_needs(scenario: Scenario) -> dict[str, tuple[int, ...]]:
    """Per Job key, the MiB each of a pod's cards uses, from the first task of its template
    that asks vGPU (every pod of the experiment's Jobs asks alike)."""
    needs: dict[str, tuple[int, ...]] = {}
    for submission in scenario.jobs:
        for task in submission.job.spec.tasks:
            pod = msgspec.convert({"spec": task.template.get("spec", {})}, Pod)
            asked = [m for r in container_requests(pod) for m in [r.memory] * r.number]
            if asked:
                needs[submission.key] = tuple(asked)
                break
    return needs


def card_uses(run: RunResult, needs: Mapping[str, Sequence[int]] | None = None) -> list[CardUse]:
    """What every pod run of ``run`` used on which card; with ``needs``, pods without
    devices hold whole cards of their own using that much memory each."""
    uses: list[CardUse] = []
    for job in run.jobs:
        for pod in job.pods:
            end = run.end if pod.ended is None else pod.ended
            if pod.devices:
                for container in decode_pod_devices(pod.devices):
                    for device in container:
                        uses.append(CardUse((pod.node, device.uuid), device.memory, pod.bound, end))
            elif needs is not None:
                for i, memory in enumerate(needs.get(job.job, ())):
                    own = f"whole:{pod.pod}#{pod.attempt}/{i}"
                    uses.append(CardUse((pod.node, own), memory, pod.bound, end))
    return uses


def card_series(uses: Iterable[CardUse], card_memory: int) -> list[CardSample]:
    """The cards' state after every instant a use starts or ends, from time 0."""
    changes: dict[float, list[tuple[CardKey, int]]] = {}
    for use in uses:
        if use.end <= use.start:
            continue
        changes.setdefault(use.start, []).append((use.card, use.memory))
        changes.setdefault(use.end, []).append((use.card, -use.memory))
    held: dict[CardKey, int] = {}
    memory = used = partly = 0
    samples = [CardSample(0.0, 0, 0, 0)]
    for when in sorted(changes):
        for card, delta in changes[when]:
            before = held.get(card, 0)
            after = before + delta
            memory += delta
            used += (after > 0) - (before > 0)
            partly += (0 < after < card_memory) - (0 < before < card_memory)
            if after:
                held[card] = after
            else:
                held.pop(card, None)
        sample = CardSample(when, memory, used, partly)
        if samples[-1].time == when:
            samples[-1] = sample
        else:
            samples.append(sample)
    return samples


def time_average(samples: Sequence[CardSample], end: float, field: str) -> float:
    """The mean of a sample field over [0, end], each sample holding until the next."""
    if end <= 0:
        return 0.0
    total = 0.0
    for sample, following in zip(samples, [*samples[1:], None], strict=True):
        if sample.time >= end:
            break
        until = end if following is None else min(following.time, end)
        total += float(getattr(sample, field)) * (until - sample.time)
    return total / end
