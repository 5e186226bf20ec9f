"""The wire formats of GPU sharing with HAMi's device plugin, as Volcano's deviceshare plugin
reads and writes them (Volcano's pkg/scheduler/api/devices/nvidia/vgpu: type.go, utils.go,
device_info.go; pkg/scheduler/api/devices/config).

- The node's cards, written by the device plugin in ``volcano.sh/node-vgpu-register``: one
  ``uuid,split,memory,type,healthy,mode`` entry per card, each followed by ``:``. ``split`` is
  how many pods may share the card, ``memory`` its memory in MiB, ``mode`` ``hami-core`` or
  ``mig`` (anything else reads as ``hami-core``).
- A pod's request, from its containers' limits (requests when a limit is missing, as Volcano):
  ``volcano.sh/vgpu-number`` cards per container, each with ``volcano.sh/vgpu-memory`` MiB
  or ``volcano.sh/vgpu-memory-percentage`` percent of the card, and ``volcano.sh/vgpu-cores``
  percent of its compute (100: the card alone).
- What the scheduler writes at bind (``volcano.sh/vgpu-ids-new`` and the same text in
  ``volcano.sh/devices-to-allocate``): per container, ``uuid,type,memory,cores:`` per card,
  containers separated by ``;``; ``volcano.sh/vgpu-node``, ``volcano.sh/vgpu-time`` and
  ``volcano.sh/bind-time`` (Unix seconds), ``volcano.sh/bind-phase: allocating``, which the
  device plugin turns to ``success`` (or ``failed``) once it has handed the cards over.

Differences from Volcano, on purpose: a register annotation is bounded (``MAX_CARDS`` cards,
``MAX_REGISTER_CHARS`` characters) and a bad number in it makes the whole annotation
unreadable (Volcano reads it as 0); Volcano reads the handshake annotation
(``volcano.sh/node-vgpu-handshake``) nowhere in its scheduler, and neither does Caldera.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from caldera.api.core import Pod
from caldera.api.meta import Quantity
from caldera.api.quantity import QuantityError, parse_quantity

REGISTER: Final = "volcano.sh/node-vgpu-register"
HANDSHAKE: Final = "volcano.sh/node-vgpu-handshake"
VGPU_NUMBER: Final = "volcano.sh/vgpu-number"
VGPU_MEMORY: Final = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE: Final = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES: Final = "volcano.sh/vgpu-cores"
VGPU_RESOURCES: Final = (VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES)
WHOLE_GPU: Final = "nvidia.com/gpu"

IDS: Final = "volcano.sh/vgpu-ids-new"
TO_ALLOCATE: Final = "volcano.sh/devices-to-allocate"
ASSIGNED_NODE: Final = "volcano.sh/vgpu-node"
ASSIGNED_TIME: Final = "volcano.sh/vgpu-time"
BIND_TIME: Final = "volcano.sh/bind-time"
BIND_PHASE: Final = "volcano.sh/bind-phase"
PHASE_ALLOCATING: Final = "allocating"
PHASE_SUCCESS: Final = "success"
PHASE_FAILED: Final = "failed"
# The node annotation the scheduler sets while a bind is handed to the device plugin, with
# deviceshare.NodeLockEnable (Volcano's nodelock, lock name "hamivgpu"); the device plugin
# removes it, and a lock older than NODE_LOCK_SECONDS is taken over.
NODE_LOCK: Final = "hamivgpu"
NODE_LOCK_SECONDS: Final = 300

MODE: Final = "volcano.sh/vgpu-mode"
HAMI_CORE: Final = "hami-core"
MIG: Final = "mig"
USE_TYPE: Final = "nvidia.com/use-gputype"
NOUSE_TYPE: Final = "nvidia.com/nouse-gputype"
USE_UUID: Final = "volcano.sh/vgpu-use-gpuuuid"
NOUSE_UUID: Final = "volcano.sh/vgpu-nouse-gpuuuid"
PODGROUP_POLICY: Final = "volcano.sh/vgpu-podgroup-policy"
NVIDIA: Final = "NVIDIA"

MAX_CARDS: Final = 64
MAX_REGISTER_CHARS: Final = 16_384
MAX_SPLIT: Final = 1_000
MAX_MEMORY_MIB: Final = 1 << 24  # 16 TiB a card
NO_PERCENTAGE: Final = 101  # Volcano's "no percentage asked"
_GROUP_KEYS: Final = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})


class FormatError(ValueError):
    """An annotation that does not read; the message names the annotation and the part."""


@dataclass(frozen=True, slots=True)
class Card:
    """One GPU as the device plugin registers it."""

    index: int  # its position in the register annotation (Volcano's device ID)
    uuid: str
    split: int  # how many pods may share it
    memory: int  # MiB
    type: str
    healthy: bool
    mode: str


@dataclass(frozen=True, slots=True)
class NodeCards:
    """A node's cards and its sharing mode (the mode of its last card, as Volcano)."""

    cards: tuple[Card, ...]
    mode: str


def _whole(text: str, what: str) -> int:
    if not text.isdigit() or len(text) > 12:
        raise FormatError(f"{REGISTER}: {what} {text!r} is not a whole number")
    return int(text)


def parse_register(text: str) -> NodeCards:
    """The node's cards from its register annotation; ``FormatError`` when it does not read."""
    if len(text) > MAX_REGISTER_CHARS:
        raise FormatError(f"{REGISTER}: longer than {MAX_REGISTER_CHARS} characters")
    if ":" not in text:
        raise FormatError(f"{REGISTER}: no card entry (each ends with ':')")
    cards: list[Card] = []
    mode = HAMI_CORE
    for index, entry in enumerate(text.split(":")):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 6:
            raise FormatError(f"{REGISTER}: card entry {entry!r} has fewer than 6 fields")
        split = _whole(items[1], "split count")
        memory = _whole(items[2], "memory")
        if split > MAX_SPLIT or memory > MAX_MEMORY_MIB:
            raise FormatError(f"{REGISTER}: card {items[0]!r} split or memory out of range")
        mode = MIG if items[5] == MIG else HAMI_CORE
        cards.append(Card(index, items[0], split, memory, items[3], items[4] in _TRUE, mode))
        if len(cards) > MAX_CARDS:
            raise FormatError(f"{REGISTER}: more than {MAX_CARDS} cards")
    if not cards:
        raise FormatError(f"{REGISTER}: no card entry")
    return NodeCards(tuple(cards), mode)


def encode_register(cards: Sequence[Card]) -> str:
    """The register annotation of ``cards`` (what HAMi's device plugin writes; tests use it)."""
    return "".join(
        f"{c.uuid},{c.split},{c.memory},{c.type},{str(c.healthy).lower()},{c.mode}:" for c in cards
    )


# --- what a pod asks --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's vGPU request (Volcano's ContainerDeviceRequest)."""

    number: int  # cards
    memory: int  # MiB on each card (0 with a percentage)
    percentage: int  # of each card's memory; NO_PERCENTAGE when memory is given
    cores: int  # percent of each card's compute


def _as_int(raw: Quantity | None) -> int | None:
    """A quantity's exact whole value (Go's AsInt64); None when absent or not whole."""
    if raw is None:
        return None
    try:
        value = parse_quantity(raw)
    except QuantityError:
        return None
    if value.denominator != 1 or not (-(1 << 62) < value < (1 << 62)):
        return None
    return int(Fraction(value))


def asks_vgpu(pod: Pod) -> bool:
    """Whether a container's limits name vGPU memory or cards (Volcano's
    checkVGPUResourcesInPod)."""
    return any(
        VGPU_MEMORY in c.resources.limits or VGPU_NUMBER in c.resources.limits
        for c in pod.spec.containers
    )


def container_requests(pod: Pod) -> tuple[ContainerRequest, ...]:
    """Each asking container's request, as Volcano's ExtractResourceRequest reads them: cards
    from the limit (1 when only memory is limited), memory, percentage and cores from the
    limit or else the request; neither memory nor percentage means the whole card's memory."""
    found: list[ContainerRequest] = []
    for container in pod.spec.containers:
        limits: Mapping[str, Quantity] = container.resources.limits
        requests: Mapping[str, Quantity] = container.resources.requests
        if VGPU_NUMBER in limits:
            number = _as_int(limits[VGPU_NUMBER]) or 0
        elif VGPU_MEMORY in limits:
            number = 1
        else:
            continue

        def read(name: str, default: int) -> int:
            raw = limits.get(name, requests.get(name))  # noqa: B023 (used in this turn only)
            value = _as_int(raw)
            return default if value is None else value

        # Negative figures would give a card back: read as 0 (nothing asked).
        memory = max(read(VGPU_MEMORY, 0), 0)
        percentage = max(read(VGPU_MEMORY_PERCENTAGE, NO_PERCENTAGE), 0)
        if percentage == NO_PERCENTAGE and memory == 0:
            percentage = 100
        cores = max(read(VGPU_CORES, 0), 0)
        found.append(ContainerRequest(max(number, 0), memory, percentage, cores))
    return tuple(found)


def group_key(pod: Pod) -> str:
    """``namespace/podgroup`` of the pod's group annotation, "" without one."""
    annotations = pod.metadata.annotations
    name = annotations.get(_GROUP_KEYS[0]) or annotations.get(_GROUP_KEYS[1], "")
    return f"{pod.metadata.namespace}/{name}" if name else ""


def _names(text: str) -> tuple[str, ...]:
    return tuple(part for part in (p.strip() for p in text.split(",")) if part)


@dataclass(frozen=True, slots=True)
class CardFilter:
    """Which cards a pod accepts, from its annotations: GPU types (``nvidia.com/use-gputype``,
    else ``nvidia.com/nouse-gputype``, substrings, case-blind) and UUIDs
    (``volcano.sh/vgpu-use-gpuuuid`` allowlist, ``volcano.sh/vgpu-nouse-gpuuuid`` denylist)."""

    use_types: tuple[str, ...] | None = None
    nouse_types: tuple[str, ...] | None = None
    use_uuids: tuple[str, ...] = ()
    nouse_uuids: tuple[str, ...] = ()

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> CardFilter:
        use = annotations.get(USE_TYPE)
        nouse = annotations.get(NOUSE_TYPE)
        return cls(
            use_types=None if use is None else tuple(t.upper() for t in use.split(",")),
            nouse_types=None if nouse is None else tuple(t.upper() for t in nouse.split(",")),
            use_uuids=_names(annotations.get(USE_UUID, "")),
            nouse_uuids=_names(annotations.get(NOUSE_UUID, "")),
        )

    @property
    def by_uuid(self) -> bool:
        return bool(self.use_uuids or self.nouse_uuids)

    def uuid_allows(self, uuid: str) -> bool:
        if not uuid and self.by_uuid:
            return False
        if self.use_uuids and uuid not in self.use_uuids:
            return False
        return uuid not in self.nouse_uuids

    def type_allows(self, card_type: str) -> bool:
        """Volcano's checkType for NVIDIA requests: the card's type names NVIDIA, then the
        use/nouse type lists (use wins when both are given)."""
        if NVIDIA not in card_type:
            return False
        upper = card_type.upper()
        if self.use_types is not None:
            return any(t in upper for t in self.use_types)
        if self.nouse_types is not None:
            return not any(t in upper for t in self.nouse_types)
        return True


# --- what the scheduler writes at bind --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """One card given to one container (Volcano's ContainerDevice)."""

    uuid: str
    type: str
    memory: int  # MiB
    cores: int


PodDevices = tuple[tuple[ContainerDevice, ...], ...]  # per asking container


def encode_pod_devices(devices: PodDevices) -> str:
    """Volcano's encodePodDevices: ``uuid,type,memory,cores:`` per card, ``;`` between
    containers."""
    return ";".join(
        "".join(f"{d.uuid},{d.type},{d.memory},{d.cores}:" for d in container)
        for container in devices
    )


def decode_pod_devices(text: str) -> PodDevices:
    """Volcano's DecodePodDevices; entries with fewer than 4 fields or bad numbers are
    skipped, as Volcano does."""
    if not text:
        return ()
    decoded: list[tuple[ContainerDevice, ...]] = []
    for part in text.split(";"):
        devices: list[ContainerDevice] = []
        for entry in part.split(":"):
            items = entry.split(",")
            if len(items) < 4 or not items[2].isdigit() or not items[3].isdigit():
                continue
            if len(items[2]) > 10 or len(items[3]) > 10:
                continue
            devices.append(ContainerDevice(items[0], items[1], int(items[2]), int(items[3])))
        decoded.append(tuple(devices))
    return tuple(decoded)


def bind_annotations(node: str, devices: PodDevices, unix_seconds: int) -> dict[str, str]:
    """The pod annotations written with the bind (Volcano's GPUDevices.Allocate)."""
    ids = encode_pod_devices(devices)
    stamp = str(unix_seconds)
    return {
        ASSIGNED_NODE: node,
        ASSIGNED_TIME: stamp,
        IDS: ids,
        TO_ALLOCATE: ids,
        BIND_PHASE: PHASE_ALLOCATING,
        BIND_TIME: stamp,
    }


def node_lock_patch(
    annotations: Mapping[str, str],
    resource_version: str,
    now: dt.datetime,
    *,
    lock: str = NODE_LOCK,
) -> dict[str, object] | None:
    """The merge patch that takes the node's lock ``lock`` (Volcano's nodelock.LockNode; the
    GPU memory mode's is ``caldera.api.gpushare.NODE_LOCK``): None while another holds it (a
    lock younger than ``NODE_LOCK_SECONDS``); an older or unreadable one is taken over. The
    patch carries the node's resourceVersion, so two schedulers racing for the lock cannot
    both win (the API server answers the later one 409 Conflict)."""
    held = annotations.get(lock)
    if held is not None:
        try:
            since = dt.datetime.fromisoformat(held.replace("Z", "+00:00"))
        except ValueError:
            since = None
        fresh = since is not None and since.tzinfo is not None
        if fresh and since is not None and (now - since).total_seconds() <= NODE_LOCK_SECONDS:
            return None
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"resourceVersion": resource_version, "annotations": {lock: stamp}}}


@dataclass(frozen=True, slots=True)
class CardInUse:
    """One registered card and what the pods bound to its node hold of it, as their
    ``volcano.sh/vgpu-ids-new`` annotations say (for views and metrics)."""

    card: Card
    pods: int
    memory: int  # MiB
    cores: int


def cards_in_use(register: str, held: Sequence[str]) -> tuple[CardInUse, ...]:
    """The node's cards (from its register annotation; none when it does not read) with the
    use ``held`` (the ids annotations of the pods bound there) adds up to. Figures are what
    the pods were given, not what they use."""
    try:
        cards = parse_register(register).cards
    except FormatError:
        return ()
    use = {card.uuid: [0, 0, 0] for card in cards}
    for text in held:
        for container in decode_pod_devices(text):
            for device in container:
                # A MIG instance, uuid[group-position], counts on its card.
                figures = use.get(device.uuid) or use.get(device.uuid.split("[", 1)[0])
                if figures is not None:
                    figures[0] += 1
                    figures[1] += device.memory
                    figures[2] += device.cores
    return tuple(CardInUse(card, *use[card.uuid]) for card in cards)
