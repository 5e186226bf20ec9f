"""Volcano's nodeinfo.volcano.sh/v1alpha1 Numatopology as msgspec models.

A node agent (Volcano's resource exporter; Caldera ships none) writes one Numatopology per node,
named after the node, describing its kubelet's CPU manager and topology manager policies
(``spec.policies``: ``CPUManagerPolicy``, ``TopologyManagerPolicy``), the CPUs still free for
exclusive use as a cpuset string per resource (``spec.numares``: ``cpu`` ->
``{allocatable: "0-3,8", capacity: 16}``), each CPU's NUMA node, socket and core
(``spec.cpuDetail``, keyed by CPU id), the resources kept for the system (``spec.resReserved``)
and what it has assigned to pods (``spec.podAllocations``). The ``numa-aware`` scheduler plugin
reads them (``scheduler.plugins.numa_aware``). Cluster-scoped, short name ``numatopo``; the CRD
in the chart is generated from these models (``caldera.api.crdgen``), its maps and lists
bounded (``caldera.api.limits``).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from caldera.api.meta import Model, ObjectMeta, crd, type_meta

NODEINFO_API_VERSION: Final = "nodeinfo.volcano.sh/v1alpha1"
CPU_MANAGER_POLICY: Final = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY: Final = "TopologyManagerPolicy"

_NON_NEGATIVE: Final = crd(minimum=0)


class NumaResourceInfo(Model, frozen=True):
    """One resource's free cpuset (``allocatable``, e.g. ``"0-3,8"``) and its capacity."""

    allocatable: str = ""
    capacity: int = 0


class CpuInfo(Model, frozen=True):
    """Where one CPU sits: its NUMA node, socket and core."""

    numa: Annotated[int, _NON_NEGATIVE] = 0
    socket: Annotated[int, _NON_NEGATIVE] = 0
    core: Annotated[int, _NON_NEGATIVE] = 0


class ContainerAllocation(Model, frozen=True):
    name: str = ""
    allocations: dict[str, str] = msgspec.field(default_factory=dict)


class PodAllocation(Model, frozen=True):
    uid: str = ""
    name: str = ""
    namespace: str = ""
    container_allocations: tuple[ContainerAllocation, ...] = ()


class NumatopoSpec(Model, frozen=True):
    policies: dict[str, str] = msgspec.field(default_factory=dict)
    res_reserved: dict[str, str] = msgspec.field(default_factory=dict)
    numares: dict[str, NumaResourceInfo] = msgspec.field(default_factory=dict)
    cpu_detail: dict[str, CpuInfo] = msgspec.field(default_factory=dict)
    pod_allocations: tuple[PodAllocation, ...] = ()


class Numatopology(Model, frozen=True):
    """nodeinfo.volcano.sh/v1alpha1 Numatopology (numatopo), cluster-scoped."""

    api_version: str = type_meta(NODEINFO_API_VERSION)
    kind: str = type_meta("Numatopology")
    metadata: ObjectMeta = ObjectMeta()
    spec: NumatopoSpec = NumatopoSpec()


NUMATOPOLOGY_DECODER: Final = msgspec.json.Decoder(Numatopology)
