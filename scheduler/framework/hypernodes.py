"""How HyperNodes are ranked for a job, and what a job's networkTopology asks (pure).

The network-topology-aware plugin builds a ``HyperNodeScorer`` from its arguments, and when a
session opens sets a ``HyperNodeState`` (the scorer and the HyperNodes' summed resources, kept
as tasks are allocated and released in the session) as ``Session.topology``; the allocate,
preempt and reclaim actions read it (``scheduler.actions.topology``). Without the plugin,
``networkTopology`` is ignored, as in Volcano, where the plugin provides the HyperNode
gradients.

Scores follow Volcano's plugin: a HyperNode's binpack score for a request is, per weighted
resource, ``(used + request) / allocatable`` over the HyperNode's nodes, averaged with the
weights, and 0 when the request does not fit; so a job fills the fullest island it fits in and
free islands stay whole. The final score is scaled by 100 x ``weight``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from caldera.api.resources import Resources
from caldera.api.topology_tree import HyperNodeTree
from caldera.api.volcano import NetworkTopologyMode, NetworkTopologySpec
from scheduler.api.types import NodeInfo, TaskInfo

MAX_NODE_SCORE = 100.0


@dataclass(frozen=True)
class Constraint:
    """A job's networkTopology, resolved against the tiers that exist."""

    hard: bool
    highest_tier: int | None  # None: no tier is allowed (a tier name no HyperNode carries)
    spec: NetworkTopologySpec

    def describe(self) -> str:
        if self.spec.highest_tier_name and self.spec.highest_tier_allowed is None:
            return f"tier {self.spec.highest_tier_name!r}"
        return f"tier <= {self.highest_tier}"


def constraint(spec: NetworkTopologySpec | None, tree: HyperNodeTree) -> Constraint | None:
    """What ``spec`` asks of ``tree``, or None for a job without networkTopology."""
    if spec is None:
        return None
    hard = spec.mode != NetworkTopologyMode.SOFT
    highest: int | None
    if spec.highest_tier_allowed is not None:
        highest = spec.highest_tier_allowed
    elif spec.highest_tier_name:
        highest = tree.tier_of_name(spec.highest_tier_name)
    else:
        # Neither field: any tier (the whole topology), still one HyperNode in hard mode.
        highest = tree.tiers[-1] if tree.tiers else 0
    return Constraint(hard=hard, highest_tier=highest, spec=spec)


@dataclass(frozen=True)
class IslandResources:
    allocatable: Resources
    used: Resources
    idle: Resources
    future_idle: Resources


def island_resources(nodes: Mapping[str, NodeInfo], names: frozenset[str]) -> IslandResources:
    """The summed resources of the island's nodes present in the session (ready ones only);
    summed in plain dicts (a rack of a 5,000-node cluster is asked for this once per session
    and again each time a pod lands on it)."""
    alloc: dict[str, int] = {}
    used: dict[str, int] = {}
    moving: dict[str, int] = {}  # releasing - pipelined: future idle = alloc - used + moving
    for name in names:
        node = nodes.get(name)
        if node is None or not node.ready:
            continue
        for key, amount in node.allocatable.items():
            alloc[key] = alloc.get(key, 0) + amount
        for key, amount in node.used.items():
            used[key] = used.get(key, 0) + amount
        if not node.releasing.is_empty():
            for key, amount in node.releasing.items():
                moving[key] = moving.get(key, 0) + amount
        if not node.pipelined.is_empty():
            for key, amount in node.pipelined.items():
                moving[key] = moving.get(key, 0) - amount
    idle = {k: v - used.get(k, 0) for k, v in alloc.items()}
    future = {k: v + moving.get(k, 0) for k, v in idle.items()}
    return IslandResources(
        Resources(alloc),
        Resources(used),
        Resources({k: max(v, 0) for k, v in idle.items()}),
        Resources(future),
    )


def fits(request: Resources, available: Resources) -> bool:
    return all(amount <= available.get(name) for name, amount in request.items() if amount > 0)


@dataclass(frozen=True)
class HyperNodeScorer:
    """The plugin's arguments, and the scores built on them."""

    weight: int = 1
    resource_weights: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    normal_pod_enable: bool = True
    normal_pod_fading: float = 0.8
    evict_max_hypernodes: int = 8

    def binpack(self, request: Resources, island: IslandResources) -> float:
        """Volcano's HyperNode binpack score in [0, 1] of placing ``request`` there."""
        total, weights = 0.0, 0
        for name, amount in request.items():
            weight = self.resource_weights.get(name)
            if weight is None or amount <= 0:
                continue
            allocatable = island.allocatable.get(name)
            used = island.used.get(name)
            if allocatable <= 0 or used + amount > allocatable:
                return 0.0
            total += weight * (used + amount) / allocatable
            weights += weight
        return total / weights if weights > 0 else 0.0

    def score(self, request: Resources, island: IslandResources) -> float:
        return MAX_NODE_SCORE * self.weight * self.binpack(request, island)


class HyperNodeState:
    """A session's view of the HyperNodes: each one's summed resources, computed when first
    asked and forgotten when a task is allocated or released on one of its nodes (Volcano's
    hyperNodeResourceCache, kept by the same event handlers).

    For the search over a whole tier, the HyperNodes of the tier are also grouped by their
    resources: HyperNodes with equal resources have equal room and equal scores, so a job
    computes room and score once per group (a tier of 600 racks is mostly a few groups: empty,
    full, and a few partly used), not once per HyperNode."""

    def __init__(
        self, scorer: HyperNodeScorer, tree: HyperNodeTree, nodes: Mapping[str, NodeInfo]
    ) -> None:
        self.scorer, self.tree, self.nodes = scorer, tree, nodes
        self._cache: dict[str, IslandResources] = {}
        self._groups: dict[int, dict[IslandResources, set[str]]] = {}  # by tier
        self._group_of: dict[str, IslandResources] = {}
        self._dirty: set[str] = set()

    def resources(self, name: str) -> IslandResources:
        found = self._cache.get(name)
        if found is None:
            found = self._cache[name] = island_resources(self.nodes, self.tree.islands[name].nodes)
        return found

    def task_moved(self, task: TaskInfo) -> None:
        """An allocate handler: the task's node changed, and so did its HyperNodes."""
        for name in self.tree.by_node.get(task.node_name, ()):
            self._cache.pop(name, None)
            self._dirty.add(name)

    def _tier_groups(self, tier: int) -> dict[IslandResources, set[str]]:
        groups = self._groups.get(tier)
        if groups is None:
            groups = self._groups[tier] = {}
            for name, island in self.tree.islands.items():
                if island.tier == tier:
                    res = self._group_of[name] = self.resources(name)
                    groups.setdefault(res, set()).add(name)
            self._dirty = {n for n in self._dirty if self.tree.islands[n].tier != tier}
            return groups
        moved = [n for n in self._dirty if self.tree.islands[n].tier == tier]
        for name in moved:
            self._dirty.discard(name)
            old = self._group_of[name]
            members = groups[old]
            members.discard(name)
            if not members:
                del groups[old]
            res = self._group_of[name] = self.resources(name)
            groups.setdefault(res, set()).add(name)
        return groups

    def in_tier(self, tier: int, request: Resources) -> list[tuple[float, str]]:
        """(-score, name) of the tier's HyperNodes with room for ``request`` (idle or future
        idle), unordered: the caller takes them best first."""
        out: list[tuple[float, str]] = []
        for res, names in self._tier_groups(tier).items():
            if fits(request, res.idle) or fits(request, res.future_idle):
                score = -self.scorer.score(request, res)
                out.extend((score, name) for name in names)
        return out
