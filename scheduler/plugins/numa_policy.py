"""The pure core of the numa-aware plugin: a node's NUMA layout from its Numatopology, the CPU
hints of a container, the kubelet topology manager's policies over them, and the CPUs a pod
would take (Volcano's pkg/scheduler/plugins/numaaware: policy/ and provider/cpumanager/).

Only CPUs are hinted, as in Volcano (its one hint provider is the CPU manager's). A hint is a
set of NUMA nodes (None: any) and whether it is preferred: the narrowest sets with enough CPUs
in total are preferred. The policies, by the node's ``TopologyManagerPolicy``: ``none`` admits
everything; ``best-effort`` admits with the best hint; ``restricted`` only with a preferred
hint; ``single-numa-node`` only with a preferred hint of one NUMA node.

Differences from Volcano, on purpose: the CPUs a container takes (and the reserved ones) are the
first ones in (NUMA node, socket, core, id) order rather than the kubelet's whole-socket then
whole-core search; only their NUMA nodes matter here (the score, and what later pods of the
session find free), the kubelet chooses the real ones; a free CPU that ``cpuDetail`` does not
list counts nowhere. A node reporting more than ``MAX_NUMA_NODES`` NUMA nodes (the kubelet's own
topology manager refuses more than 8; it also bounds the 2^n sets of NUMA nodes the hints
walk), a CPU id above ``MAX_CPU_ID``, or a cpuset that does not parse is read as having no
Numatopology (Volcano reads a bad cpuset as empty).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import Final

from caldera.api.core import Container, Pod
from caldera.api.meta import Quantity
from caldera.api.numatopology import CPU_MANAGER_POLICY, TOPOLOGY_MANAGER_POLICY, Numatopology
from caldera.api.quantity import QuantityError, milli_value

POLICY_KEY: Final = "volcano.sh/numa-topology-policy"
NONE: Final = "none"
BEST_EFFORT: Final = "best-effort"
RESTRICTED: Final = "restricted"
SINGLE_NUMA_NODE: Final = "single-numa-node"
MAX_NUMA_NODES: Final = 8
MAX_CPU_ID: Final = 65_535


@dataclass(frozen=True)
class NodeNuma:
    """What the plugin reads of one node's Numatopology."""

    cpu_manager_policy: str
    topology_policy: str
    cpus: Mapping[int, tuple[int, int, int]]  # cpu id -> (NUMA node, socket, core)
    free: frozenset[int]  # numares.cpu.allocatable
    reserved: frozenset[int]  # the CPUs resReserved.cpu keeps (rounded up)
    numa_nodes: tuple[int, ...] = field(init=False)
    # Every non-empty set of NUMA nodes, smallest first, with how many CPUs it has.
    masks: tuple[tuple[frozenset[int], int], ...] = field(init=False)
    ordered: tuple[int, ...] = field(init=False)  # every CPU, in the order they are taken

    def __post_init__(self) -> None:
        numa_nodes = tuple(sorted({numa for numa, _, _ in self.cpus.values()}))
        per_node = Counter(numa for numa, _, _ in self.cpus.values())
        masks = tuple((mask, sum(per_node[n] for n in mask)) for mask in _subsets(numa_nodes))
        object.__setattr__(self, "numa_nodes", numa_nodes)
        object.__setattr__(self, "masks", masks)
        ordered = tuple(sorted(self.cpus, key=lambda cpu: (*self.cpus[cpu], cpu)))
        object.__setattr__(self, "ordered", ordered)

    def shape(self) -> Hashable:
        """All a placement reads of the node beyond its free CPUs: nodes of equal shapes
        place a pod alike."""
        return (self.topology_policy, tuple(sorted(self.cpus.items())), self.reserved)

    def numa_of(self, cpu: int) -> int:
        return self.cpus.get(cpu, (-1, 0, 0))[0]

    def order(self, cpus: frozenset[int] | set[int]) -> list[int]:
        """The node's CPUs among ``cpus`` in the order they are taken: by NUMA node, socket,
        core, then id (a free CPU the node's cpuDetail does not list is never taken)."""
        return [cpu for cpu in self.ordered if cpu in cpus]


def _subsets(numa_nodes: tuple[int, ...]) -> Iterator[frozenset[int]]:
    for size in range(1, len(numa_nodes) + 1):
        for combo in combinations(numa_nodes, size):
            yield frozenset(combo)


def parse_cpuset(text: str) -> frozenset[int]:
    """A Linux cpuset list ("0-3,8"); ValueError when it does not parse or names an id above
    MAX_CPU_ID."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high) if high else int(low)
        if first < 0 or last < first or last > MAX_CPU_ID:
            raise ValueError(f"cpuset {text!r}: bad range {part!r}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def node_numa(topology: Numatopology) -> NodeNuma | None:
    """The node's NUMA layout; None when the object cannot be read (see the module's notes)."""
    spec = topology.spec
    try:
        cpus = {
            int(cpu): (info.numa, info.socket, info.core) for cpu, info in spec.cpu_detail.items()
        }
        if any(cpu < 0 or cpu > MAX_CPU_ID for cpu in cpus):
            return None
        numares = spec.numares.get("cpu")
        free = parse_cpuset(numares.allocatable) if numares is not None else frozenset()
        reserved_raw = spec.res_reserved.get("cpu")
        reserved_count = math.ceil(milli_value(reserved_raw) / 1000) if reserved_raw else 0
    except (ValueError, QuantityError):
        return None
    if len({numa for numa, _, _ in cpus.values()}) > MAX_NUMA_NODES:
        return None
    order = sorted(cpus, key=lambda cpu: (*cpus[cpu], cpu))
    return NodeNuma(
        spec.policies.get(CPU_MANAGER_POLICY, ""),
        spec.policies.get(TOPOLOGY_MANAGER_POLICY, ""),
        cpus,
        free,
        frozenset(order[: max(reserved_count, 0)]),
    )


# --- the pod ------------------------------------------------------------------------------------


def _milli(resources: Mapping[str, Quantity], name: str) -> int | None:
    raw = resources.get(name)
    if raw is None:
        return None
    if isinstance(raw, str) and raw.isdigit() and len(raw) < 12:  # whole units: the usual case
        return int(raw) * 1000
    try:
        return milli_value(raw)
    except QuantityError:
        return None


def _nonzero(raw: Quantity | None) -> bool:
    if isinstance(raw, str) and raw[:1].isdigit() and raw[0] != "0":
        return True  # "2", "4Gi": no parse needed
    return raw is not None and bool(_milli({"q": raw}, "q"))


def _equal(first: Quantity | None, second: Quantity | None) -> bool:
    if first == second:
        return True
    if first is None or second is None:
        return False
    return _milli({"q": first}, "q") == _milli({"q": second}, "q")


def is_guaranteed(pod: Pod) -> bool:
    """Kubernetes' Guaranteed QoS class: every container limits cpu and memory, and requests
    (when given) equal the limits."""
    containers = (*pod.spec.containers, *pod.spec.init_containers)
    if not containers:
        return False
    for container in containers:
        requests, limits = container.resources.requests, container.resources.limits
        for name in ("cpu", "memory"):
            limit = limits.get(name)
            if not _nonzero(limit):
                return False
            request = requests.get(name)
            if request is not None and not _equal(request, limit):
                return False
        for name, request in requests.items():
            if name not in ("cpu", "memory") and not _equal(request, limits.get(name)):
                return False
    return True


def pod_policy(pod: Pod) -> str:
    """The pod's volcano.sh/numa-topology-policy annotation ("" without it)."""
    return pod.metadata.annotations.get(POLICY_KEY, "")


def guaranteed_cpus(container: Container) -> int:
    """Whole CPUs the container requests; 0 for none or a fraction (Volcano's guaranteedCPUs)."""
    milli = _milli(container.resources.requests, "cpu")
    if milli is None or milli % 1000:
        return 0
    return milli // 1000


@dataclass(frozen=True)
class PodNuma:
    """What the plugin reads of a pod: its QoS, its policy and its containers' whole CPUs."""

    guaranteed: bool
    policy: str
    containers: tuple[tuple[str, int], ...]  # (name, whole CPUs requested)


def pod_numa(pod: Pod) -> PodNuma:
    return PodNuma(
        is_guaranteed(pod),
        pod_policy(pod),
        tuple((c.name, guaranteed_cpus(c)) for c in pod.spec.containers),
    )


# --- hints and policies -------------------------------------------------------------------------


@dataclass(frozen=True)
class Hint:
    affinity: frozenset[int] | None  # NUMA nodes; None: any
    preferred: bool


def _mask(nodes: frozenset[int]) -> int:
    return sum(1 << node for node in nodes)


def cpu_hints(request: int, numa: NodeNuma, free: frozenset[int]) -> list[Hint] | None:
    """The CPU manager's hints for ``request`` whole CPUs: None for no preference (none
    requested); otherwise every set of NUMA nodes whose free CPUs cover the request, the
    narrowest sets that could hold the request preferred (Volcano's
    generateCPUTopologyHints)."""
    if request == 0:
        return None
    free_per_node = Counter(numa.numa_of(cpu) for cpu in free - numa.reserved)
    min_size = len(numa.numa_nodes)
    hints: list[Hint] = []
    for mask, in_mask in numa.masks:
        if in_mask >= request and len(mask) < min_size:
            min_size = len(mask)
        if sum(free_per_node[n] for n in mask) >= request:
            hints.append(Hint(mask, False))
    return [Hint(h.affinity, h.affinity is not None and len(h.affinity) == min_size) for h in hints]


def _merge(numa_nodes: tuple[int, ...], hints: list[Hint]) -> Hint:
    """The best of one provider's hints (Volcano's mergeFilteredHints with one provider):
    preferred over not, then the narrowest (fewer NUMA nodes, then the lower ones)."""
    everything = frozenset(numa_nodes)
    best = Hint(everything, False)
    for hint in hints:
        merged = Hint(
            everything if hint.affinity is None else hint.affinity & everything, hint.preferred
        )
        assert merged.affinity is not None
        if not merged.affinity:
            continue
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        assert best.affinity is not None
        narrower = len(merged.affinity) < len(best.affinity) or (
            len(merged.affinity) == len(best.affinity)
            and _mask(merged.affinity) < _mask(best.affinity)
        )
        if narrower:
            best = merged
    return best


def admit(policy: str, numa_nodes: tuple[int, ...], hints: list[Hint] | None) -> tuple[Hint, bool]:
    """The node's topology manager policy over a container's hints: the best hint and whether
    the container is admitted. An unknown policy acts as none, as in Volcano."""
    if policy not in (BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE):
        return Hint(None, False), True
    # Volcano's filterProvidersHints: no preference is one preferred any-NUMA hint, no possible
    # placement one unpreferred any-NUMA hint.
    listed = [Hint(None, True)] if hints is None else hints or [Hint(None, False)]
    if policy == SINGLE_NUMA_NODE:
        listed = [h for h in listed if h.preferred and (h.affinity is None or len(h.affinity) == 1)]
    best = _merge(numa_nodes, listed)
    return best, policy == BEST_EFFORT or best.preferred


def take(numa: NodeNuma, request: int, best: Hint, free: frozenset[int]) -> frozenset[int]:
    """The ``request`` CPUs a container takes: aligned with the best hint first, the rest
    from anywhere; none when the free CPUs do not cover it (Volcano's cpuMng.Allocate)."""
    if request == 0:
        return frozenset()
    available = free - numa.reserved
    taken: list[int] = []
    if best.affinity is not None:
        affinity = best.affinity
        taken = [c for c in numa.order(available) if numa.numa_of(c) in affinity][:request]
    rest = numa.order(available - set(taken))[: request - len(taken)]
    if len(taken) + len(rest) < request:
        return frozenset()
    return frozenset(taken) | frozenset(rest)


# --- the plugin's questions ---------------------------------------------------------------------


def node_refusal(policy: str, numa: NodeNuma | None) -> tuple[bool, str | None]:
    """Volcano's filterNodeByPolicy: (whether the NUMA check applies, the reason the node is
    refused). A pod without a policy is checked only on nodes whose kubelet aligns CPUs."""
    if policy not in ("", NONE):
        if numa is None:
            return False, "numa info is empty"
        if numa.cpu_manager_policy != "static":
            return False, "cpu manager policy isn't static"
        if policy != numa.topology_policy:
            return False, (
                f"task topology policy[{policy}] is different with node[{numa.topology_policy}]"
            )
        if not numa.free:
            return False, "cpu allocatable map is empty"
        return True, None
    if numa is None or numa.cpu_manager_policy != "static":
        return False, None
    return numa.topology_policy not in ("", NONE), None


def place(
    pod: PodNuma, numa: NodeNuma, free: frozenset[int]
) -> tuple[frozenset[int] | None, str | None]:
    """The CPUs the pod's containers take on the node, container by container; or None and
    the reason when the node's policy refuses one."""
    taken: frozenset[int] = frozenset()
    numa_nodes = numa.numa_nodes
    for name, request in pod.containers:
        best, admitted = admit(numa.topology_policy, numa_nodes, cpu_hints(request, numa, free))
        if not admitted:
            return None, f"container {name} cannot be assigned by numa"
        cpus = take(numa, request, best, free)
        taken |= cpus
        free = free - cpus
    return taken, None


def numa_nodes_used(numa: NodeNuma, cpus: Iterable[int]) -> int:
    """How many NUMA nodes the CPUs span."""
    return len({numa.numa_of(c) for c in cpus if c in numa.cpus})


def spread_score(count: int, most: int, weight: int) -> float:
    """Fewer NUMA nodes score higher: 100 - 100 * count / most, times the weight (Volcano's
    reversed NormalizeScore, ``most`` here being the most NUMA nodes of any node)."""
    if most <= 0:
        return 100.0 * weight
    return float((100 - 100 * count // most) * weight)
