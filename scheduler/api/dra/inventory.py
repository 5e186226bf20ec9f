"""The devices the ResourceSlices publish, as the allocator reads them.

Per pool (driver and pool name) only the slices of the newest generation count; a pool is
complete when all ``resourceSliceCount`` of them are seen. A slice's devices are on its
``nodeName``, on the nodes its ``nodeSelector`` picks, or on every node (``allNodes``); with
``perDeviceNodeSelection`` each device says so itself. Counter sets (partitionable devices)
are per pool, by name.

Devices Caldera does not allocate, on purpose, are left out (docs/dra.md): devices with
taints (the claims' tolerations are refused, so no claim could tolerate one), with binding
conditions or ``bindsToNode`` (alpha features the scheduler would have to wait on), and
devices that allow multiple allocations (consumable capacity, beta in Kubernetes 1.36) are
treated as whole devices.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from caldera.api.core import NodeSelector
from caldera.api.dra import Device, ResourceSlice
from caldera.api.quantity import QuantityError, parse_quantity
from scheduler.api.dra.allocator import Candidate, CounterKey, DeviceId
from scheduler.api.dra.cel import attribute_of, device_variables


@dataclass(slots=True)
class Published:
    """One device as published: its slice's driver, the device, and its candidate form."""

    driver: str
    device: Device
    candidate: Candidate
    _variables: dict[str, object] | None = None

    def variables(self) -> dict[str, object]:
        """The ``device`` variable of CEL selectors, built once."""
        if self._variables is None:
            self._variables = device_variables(self.driver, self.device)
        return self._variables


@dataclass(slots=True)
class Inventory:
    """Every allocatable device, by where it is reachable from."""

    devices: dict[DeviceId, Published] = field(default_factory=dict)
    on_node: dict[str, list[DeviceId]] = field(default_factory=dict)
    node_of: dict[DeviceId, str] = field(default_factory=dict)  # the node-local devices' node
    everywhere: list[DeviceId] = field(default_factory=list)
    by_selector: list[tuple[NodeSelector, DeviceId]] = field(default_factory=list)
    counters: dict[CounterKey, Fraction] = field(default_factory=dict)

    def reachable(self, node: str, selects: Callable[[NodeSelector], bool]) -> list[Candidate]:
        """The devices ``node`` reaches: its own, those on every node, and those whose node
        selector ``selects`` it (network-attached)."""
        ids = [*self.on_node.get(node, ()), *self.everywhere]
        ids += [device for selector, device in self.by_selector if selects(selector)]
        return [self.devices[i].candidate for i in ids]


def _usable(device: Device) -> bool:
    return not device.taints and not device.binding_conditions and not device.binds_to_node


def _amount(text: str) -> Fraction | None:
    try:
        return parse_quantity(text)
    except QuantityError:
        return None


def build_inventory(slices: Iterable[ResourceSlice]) -> Inventory:
    """The inventory of ``slices`` (see the module docstring)."""
    newest: dict[tuple[str, str], int] = {}
    listed = list(slices)
    for s in listed:
        pool = (s.spec.driver, s.spec.pool.name)
        newest[pool] = max(newest.get(pool, s.spec.pool.generation), s.spec.pool.generation)
    current = [
        s for s in listed if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]
    ]
    seen: dict[tuple[str, str], int] = {}
    wanted: dict[tuple[str, str], int] = {}
    for s in current:
        pool = (s.spec.driver, s.spec.pool.name)
        seen[pool] = seen.get(pool, 0) + 1
        wanted[pool] = max(wanted.get(pool, 0), s.spec.pool.resource_slice_count)
    inventory = Inventory()
    for s in current:
        driver, pool_name = s.spec.driver, s.spec.pool.name
        for counter_set in s.spec.shared_counters:
            for name, counter in counter_set.counters.items():
                amount = _amount(counter.value)
                if amount is not None:
                    key = (driver, pool_name, counter_set.name, name)
                    inventory.counters[key] = amount
    for s in sorted(current, key=lambda s: (s.spec.driver, s.spec.pool.name, s.metadata.name)):
        driver, pool_name = s.spec.driver, s.spec.pool.name
        complete = seen[(driver, pool_name)] >= wanted[(driver, pool_name)]
        for device in s.spec.devices:
            if not _usable(device):
                continue
            ident: DeviceId = (driver, pool_name, device.name)
            if ident in inventory.devices:
                continue  # a duplicate name in one pool: the API server's check missed it
            consumes = []
            for use in device.consumes_counters:
                for name, counter in use.counters.items():
                    amount = _amount(counter.value)
                    if amount is not None:
                        consumes.append(((driver, pool_name, use.counter_set, name), amount))

            def attribute(name: str, _driver: str = driver, _device: Device = device) -> object:
                return attribute_of(_driver, _device, name)

            candidate = Candidate(ident, attribute, tuple(consumes), complete)
            inventory.devices[ident] = Published(driver, device, candidate)
            source = device if s.spec.per_device_node_selection else s.spec
            if source.node_name:
                inventory.on_node.setdefault(source.node_name, []).append(ident)
                inventory.node_of[ident] = source.node_name
            elif source.node_selector is not None:
                inventory.by_selector.append((source.node_selector, ident))
            elif source.all_nodes:
                inventory.everywhere.append(ident)
    return inventory
