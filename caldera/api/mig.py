"""MIG geometries and MIG instance names, as Volcano's deviceshare plugin reads and writes
them for HAMi's device plugin in ``mig`` mode (Volcano's pkg/scheduler/api/devices/config:
config.go, vgpu.go; pkg/scheduler/api/devices/nvidia/vgpu/mig.go).

- The known geometries come from a ConfigMap (``deviceshare.KnownGeometriesCMName``, default
  ``volcano-vgpu-device-config``, in ``deviceshare.KnownGeometriesCMNamespace``, default
  ``kube-system``), key ``device-config.yaml``::

      nvidia:
        gpuMemoryFactor: 1            # optional: device memory unit multiplier
        knownMigGeometries:
        - models: ["A100-SXM4-40GB", "A100-PCIE-40GB"]
          allowedGeometries:
          - group: group2
            geometries:
            - {name: 2g.10gb, memory: 10240, count: 3}
            - {name: 1g.5gb, memory: 5120, count: 1}

  A card takes the geometries of the first entry one of whose models its registered type
  contains. A geometry (``group``) is one way to partition a card; its instances are laid out
  in order, so an instance's *position* in the group is the count of the instances listed
  before its kind plus its index within its kind (``2g.10gb`` holds 0-2, ``1g.5gb`` 3).
- A MIG instance given to a container is written in ``volcano.sh/vgpu-ids-new`` in place of
  the card's UUID: ``GPU-0fc3...[group2-3]``.

The ConfigMap lives in a namespace tenants cannot write, but it is not trusted blindly: its
text, its lists and its numbers are bounded (``MAX_*``), and a group name must be one the
instance naming can carry back (no ``-``, ``[``, ``]`` or the annotation's separators).
``ConfigError`` names the field that does not read.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import yaml

CONFIG_KEY: Final = "device-config.yaml"
DEFAULT_CM_NAME: Final = "volcano-vgpu-device-config"
DEFAULT_CM_NAMESPACE: Final = "kube-system"

MAX_CONFIG_CHARS: Final = 256 * 1024
MAX_ENTRIES: Final = 64  # knownMigGeometries entries
MAX_MODELS: Final = 32  # models per entry
MAX_GEOMETRIES: Final = 16  # allowedGeometries per entry
MAX_INSTANCE_KINDS: Final = 8  # geometries (instance kinds) per group
MAX_INSTANCES: Final = 16  # count of one kind (an A100 has 7 slices)
MAX_MEMORY_MIB: Final = 1 << 24
MAX_MEMORY_FACTOR: Final = 1024
MAX_NAME_CHARS: Final = 63
MAX_MODEL_CHARS: Final = 128

# Names the instance naming ``uuid[group-position]`` can carry back unchanged.
_GROUP_NAME: Final = re.compile(r"[A-Za-z0-9_.]+")
_INSTANCE_NAME: Final = re.compile(r"[A-Za-z0-9_.+-]+")
_MIG_ID: Final = re.compile(r"(?P<uuid>[^\[\]]*)\[(?P<group>[^\[\]-]+)-(?P<position>[0-9]{1,4})\]")


class ConfigError(ValueError):
    """A device configuration that does not read; the message names the field."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One kind of MIG instance in a geometry (Volcano's MigTemplate)."""

    name: str  # e.g. 1g.10gb
    memory: int  # MiB
    count: int


@dataclass(frozen=True, slots=True)
class Geometry:
    """One way to partition a card (Volcano's Geometry): its instances in layout order."""

    group: str
    instances: tuple[Instance, ...]

    @property
    def size(self) -> int:
        """How many instances the card holds in this geometry (positions 0 to size - 1)."""
        return sum(instance.count for instance in self.instances)

    def kind_at(self, position: int) -> int:
        """The index of the instance kind laid out at ``position`` (-1 past the end)."""
        first = 0
        for kind, instance in enumerate(self.instances):
            if position < first + instance.count:
                return kind
            first += instance.count
        return -1

    def first_position(self, kind: int) -> int:
        return sum(instance.count for instance in self.instances[:kind])


@dataclass(frozen=True, slots=True)
class ModelGeometries:
    """The geometries a family of card models allows (Volcano's AllowedMigGeometries)."""

    models: tuple[str, ...]
    geometries: tuple[Geometry, ...]


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """What the scheduler reads of the device configuration: the known MIG geometries and
    the memory factor (``gpuMemoryFactor``; 0 or 1: none)."""

    known: tuple[ModelGeometries, ...] = ()
    memory_factor: int = 1
    problem: str = ""  # why no geometry is known (the ConfigMap not read), for a user

    def geometries_for(self, card_type: str) -> tuple[Geometry, ...]:
        """The geometries of the first entry one of whose models the type contains
        (Volcano's extractGeometryFromType); none when no entry names it."""
        for entry in self.known:
            if any(model in card_type for model in entry.models):
                return entry.geometries
        return ()


NO_DEVICE_CONFIG: Final = DeviceConfig(problem="no device configuration read")


def _mapping(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    return value


def _list(value: object, where: str, bound: int) -> list[object]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list")
    if len(value) > bound:
        raise ConfigError(f"{where}: more than {bound} items")
    return value


def _whole(value: object, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{where}: must be between {low} and {high}, got {value}")
    return value


def _name(value: object, where: str, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS or not pattern.fullmatch(value):
        raise ConfigError(
            f"{where}: must be 1 to {MAX_NAME_CHARS} characters of {pattern.pattern}, got {value!r}"
        )
    return value


def _geometry(value: object, where: str) -> Geometry:
    fields = _mapping(value, where)
    group = _name(fields.get("group"), f"{where}.group", _GROUP_NAME)
    kinds = _list(fields.get("geometries"), f"{where}.geometries", MAX_INSTANCE_KINDS)
    if not kinds:
        raise ConfigError(f"{where}.geometries: names no instance")
    instances = []
    for k, raw in enumerate(kinds):
        at = f"{where}.geometries[{k}]"
        kind = _mapping(raw, at)
        instances.append(
            Instance(
                name=_name(kind.get("name"), f"{at}.name", _INSTANCE_NAME),
                memory=_whole(kind.get("memory"), f"{at}.memory", 1, MAX_MEMORY_MIB),
                count=_whole(kind.get("count"), f"{at}.count", 1, MAX_INSTANCES),
            )
        )
    return Geometry(group, tuple(instances))


def _entry(value: object, where: str) -> ModelGeometries:
    fields = _mapping(value, where)
    models = []
    for m, model in enumerate(_list(fields.get("models"), f"{where}.models", MAX_MODELS)):
        if not isinstance(model, str) or not 0 < len(model) <= MAX_MODEL_CHARS:
            raise ConfigError(f"{where}.models[{m}]: must be 1 to {MAX_MODEL_CHARS} characters")
        models.append(model)
    raw = _list(fields.get("allowedGeometries"), f"{where}.allowedGeometries", MAX_GEOMETRIES)
    geometries = tuple(_geometry(g, f"{where}.allowedGeometries[{i}]") for i, g in enumerate(raw))
    groups = [g.group for g in geometries]
    if len(set(groups)) != len(groups):
        raise ConfigError(f"{where}.allowedGeometries: a group name is given twice")
    return ModelGeometries(tuple(models), geometries)


def parse_device_config(data: Mapping[str, str]) -> DeviceConfig:
    """The device configuration in a ConfigMap's data; ``ConfigError`` naming the field when
    it does not read. Volcano's other settings (resource names, scaling) are not read."""
    text = data.get(CONFIG_KEY)
    if text is None:
        raise ConfigError(f"{CONFIG_KEY}: missing from the ConfigMap's data")
    if len(text) > MAX_CONFIG_CHARS:
        raise ConfigError(f"{CONFIG_KEY}: longer than {MAX_CONFIG_CHARS} characters")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{CONFIG_KEY}: not YAML ({exc.__class__.__name__})") from exc
    if document is None:
        return DeviceConfig()
    nvidia = _mapping(document, CONFIG_KEY).get("nvidia")
    if nvidia is None:
        return DeviceConfig()
    fields = _mapping(nvidia, "nvidia")
    factor_raw = fields.get("gpuMemoryFactor", 1)
    factor = max(_whole(factor_raw, "nvidia.gpuMemoryFactor", 0, MAX_MEMORY_FACTOR), 1)
    raw = fields.get("knownMigGeometries")
    if raw is None:
        return DeviceConfig(memory_factor=factor)
    entries = _list(raw, "nvidia.knownMigGeometries", MAX_ENTRIES)
    known = tuple(_entry(e, f"nvidia.knownMigGeometries[{i}]") for i, e in enumerate(entries))
    return DeviceConfig(known, factor)


def encode_mig_id(uuid: str, group: str, position: int) -> str:
    """The name of a MIG instance in the ids annotation (Volcano's encodeMIGID)."""
    return f"{uuid}[{group}-{position}]"


def decode_mig_id(text: str) -> tuple[str, str, int] | None:
    """(card uuid, group, position) of a MIG instance name; None for a plain card UUID or a
    name that does not read."""
    found = _MIG_ID.fullmatch(text)
    if found is None:
        return None
    return found["uuid"], found["group"], int(found["position"])
