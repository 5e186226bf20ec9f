"""The wire formats of Volcano's older GPU sharing mode, GPU memory or whole GPU numbers
(Volcano's pkg/scheduler/api/devices/nvidia/gpushare: type.go, share.go, device_info.go), as
the deviceshare plugin reads and writes them with ``deviceshare.GPUSharingEnable`` or
``deviceshare.GPUNumberEnable``.

- A node's cards, from its capacity: ``volcano.sh/gpu-number`` cards, numbered 0 to n-1, each
  with ``volcano.sh/gpu-memory`` / n of memory (rounded down; the unit is the device plugin's),
  less the cards its ``volcano.sh/gpu-unhealthy-ids`` annotation lists ("1,3").
- A pod's request, from its containers' limits: the sum over its containers of
  ``volcano.sh/gpu-memory`` (or of ``volcano.sh/gpu-number``), or the largest init
  container's when that is larger.
- What the scheduler writes at bind: ``volcano.sh/gpu-index`` (the cards, "0" or "0,1") and
  ``volcano.sh/predicate-time`` (Unix nanoseconds); a running pod's ``volcano.sh/gpu-index``
  says which cards it holds.

Differences from Volcano, on purpose: a node with more than ``MAX_CARDS`` cards is not read
(Volcano would build them all); a negative limit reads as 0 (Volcano's unsigned arithmetic
turns it into a huge request).

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Container, Pod
from caldera.api.meta import Quantity
from caldera.api.quantity import QuantityError, parse_quantity

GPU_MEMORY: Final = "volcano.sh/gpu-memory"
GPU_NUMBER: Final = "volcano.sh/gpu-number"
GPU_INDEX: Final = "volcano.sh/gpu-index"
PREDICATE_TIME: Final = "volcano.sh/predicate-time"
UNHEALTHY_IDS: Final = "volcano.sh/gpu-unhealthy-ids"
# The node annotation the scheduler sets, with deviceshare.NodeLockEnable, before a bind that
# shares a card by memory (Volcano's nodelock.LockNode(node, "gpu")).
NODE_LOCK: Final = "gpu"

MAX_CARDS: Final = 1024
_MAX_INDEX_CHARS: Final = 8192
_INDEX: Final = re.compile(r"[+-]?[0-9]{1,9}")


@dataclass(frozen=True, slots=True)
class ShareCards:
    """A node's cards in this mode: their ids (the healthy ones, in order) and memory each."""

    ids: tuple[int, ...]
    memory: int


@dataclass(frozen=True, slots=True)
class ShareAsk:
    """What a pod asks in this mode: memory on one card, or whole idle cards."""

    memory: int = 0
    number: int = 0


def _whole(raw: Quantity | None) -> int:
    """A quantity's value rounded up (Go's Quantity.Value); 0 when absent, bad or negative."""
    if raw is None:
        return 0
    try:
        value = parse_quantity(raw)
    except QuantityError:
        return 0
    return max(math.ceil(value), 0)


def node_cards(
    capacity: Mapping[str, Quantity], annotations: Mapping[str, str]
) -> ShareCards | None:
    """The node's cards (Volcano's NewGPUDevices); None when its capacity names no cards."""
    if GPU_MEMORY not in capacity or GPU_NUMBER not in capacity:
        return None
    number = _whole(capacity[GPU_NUMBER])
    if number <= 0 or number > MAX_CARDS:
        return None
    memory = _whole(capacity[GPU_MEMORY]) // number
    unhealthy = set(_indices(annotations.get(UNHEALTHY_IDS, ""), skip_bad=True))
    return ShareCards(tuple(i for i in range(number) if i not in unhealthy), memory)


def _limit_sum(containers: Iterable[Container], init: Iterable[Container], name: str) -> int:
    total = sum(_whole(c.resources.limits.get(name)) for c in containers)
    return max(total, max((_whole(c.resources.limits.get(name)) for c in init), default=0))


def pod_memory(pod: Pod) -> int:
    """The GPU memory the pod asks (Volcano's getGPUMemoryOfPod)."""
    return _limit_sum(pod.spec.containers, pod.spec.init_containers, GPU_MEMORY)


def pod_number(pod: Pod) -> int:
    """The whole GPUs the pod asks (Volcano's getGPUNumberOfPod)."""
    return _limit_sum(pod.spec.containers, pod.spec.init_containers, GPU_NUMBER)


def _indices(text: str, *, skip_bad: bool) -> list[int]:
    found: list[int] = []
    for part in text[:_MAX_INDEX_CHARS].split(","):
        if _INDEX.fullmatch(part):
            found.append(int(part))
        elif not skip_bad:
            return []
    return found


def parse_gpu_index(text: str) -> tuple[int, ...] | None:
    """The cards a ``volcano.sh/gpu-index`` annotation names (Volcano's GetGPUIndex); None when
    any entry is not a number, as Volcano."""
    if len(text) > _MAX_INDEX_CHARS:
        return None
    found = _indices(text, skip_bad=False)
    return tuple(found) if found else None


def bind_annotations(ids: Iterable[int], unix_nanos: int) -> dict[str, str]:
    """The pod annotations written with the bind (Volcano's gpuIndexAnnotations)."""
    return {PREDICATE_TIME: str(unix_nanos), GPU_INDEX: ",".join(str(i) for i in ids)}
