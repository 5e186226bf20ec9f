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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from caldera.api.resources import Resources
from caldera.api.topology_tree import HyperNodeTree, Island
from caldera.api.volcano import NetworkTopologyMode, NetworkTopologySpec
from scheduler.api.types import NodeInfo

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


GroupKey = tuple[tuple[tuple[str, int], ...], ...]  # see ``_Sums.key``


class _Sums:
    """A HyperNode's resources summed over its ready nodes, kept as they change."""

    __slots__ = ("alloc", "moving", "used")

    def __init__(self) -> None:
        self.alloc: dict[str, int] = {}
        self.used: dict[str, int] = {}
        self.moving: dict[str, int] = {}  # releasing - pipelined

    def add_node(self, node: NodeInfo) -> None:
        _add(self.alloc, node.allocatable)
        self.add_tasks(node.used, node.releasing, node.pipelined)

    def add_tasks(self, used: Resources, releasing: Resources, pipelined: Resources) -> None:
        """Count a node's tasks."""
        _add(self.used, used)
        _add(self.moving, releasing)
        _add(self.moving, pipelined, -1)

    def add_change(self, used: Mapping[str, int], moving: Mapping[str, int]) -> None:
        """Count a node's change (see ``_change``)."""
        for into, amounts in ((self.used, used), (self.moving, moving)):
            for key, amount in amounts.items():
                into[key] = into.get(key, 0) + amount

    def key(self) -> GroupKey:
        """Equal for equal sums (the amounts, sorted by resource name)."""
        return (
            tuple(sorted(self.alloc.items())),
            tuple(sorted(self.used.items())),
            tuple(sorted(self.moving.items())),
        )

    def view(self) -> IslandResources:
        alloc, used, moving = self.alloc, self.used, self.moving
        idle = {k: v - used.get(k, 0) for k, v in alloc.items()}
        return IslandResources(
            Resources(alloc),
            Resources(used),
            Resources({k: max(v, 0) for k, v in idle.items()}),
            Resources({k: v + moving.get(k, 0) for k, v in idle.items()}),
        )


def _add(into: dict[str, int], amounts: Resources, sign: int = 1) -> None:
    for key, amount in amounts.items():
        into[key] = into.get(key, 0) + sign * amount


Counted = tuple[Resources, Resources, Resources]  # a node's used, releasing, pipelined


def _change(was: Counted, now: Counted) -> tuple[dict[str, int], dict[str, int]]:
    """What a node's change adds to the used and to the releasing - pipelined of the sums
    holding it; computed once, added to each of its HyperNodes."""
    used: dict[str, int] = {}
    moving: dict[str, int] = {}
    if now[0] is not was[0]:
        _add(used, now[0])
        _add(used, was[0], -1)
    for later, earlier, sign in ((now[1], was[1], 1), (now[2], was[2], -1)):
        if later is not earlier:
            _add(moving, later, sign)
            _add(moving, earlier, -sign)
    return used, moving


def island_resources(nodes: Mapping[str, NodeInfo], names: frozenset[str]) -> IslandResources:
    """The summed resources of the island's nodes present in the session (ready ones only)."""
    sums = _Sums()
    for name in names:
        node = nodes.get(name)
        if node is not None and node.ready:
            sums.add_node(node)
    return sums.view()


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
    """A session's view of the HyperNodes: each one's summed resources (Volcano's
    hyperNodeResourceCache), summed over its nodes when first asked and then kept by
    difference: the session logs every node whose tasks change (``Session.node_changes``),
    and before answering, each logged node's change since it was last counted is added to
    the sums of the HyperNodes holding it. A placement costs a few additions per HyperNode
    above the node, not a new sum over a spine's nodes; a session without a job that asks
    for a HyperNode sums nothing.

    For the search over a whole tier, the HyperNodes of the tier are also grouped by their
    resources: HyperNodes with equal resources have equal room and equal scores, so a job
    computes room and score once per group (a tier of 600 racks is mostly a few groups: empty,
    full, and a few partly used), not once per HyperNode."""

    def __init__(
        self,
        scorer: HyperNodeScorer,
        tree: HyperNodeTree,
        nodes: Mapping[str, NodeInfo],
        changes: Sequence[str] = (),
    ) -> None:
        """``changes``: the session's log of changed nodes (appended to as tasks move)."""
        self.scorer, self.tree, self.nodes, self.changes = scorer, tree, nodes, changes
        self._sums: dict[str, _Sums] = {}
        # The (used, releasing, pipelined) of each node as counted in the sums, for the nodes
        # of summed HyperNodes; Resources are immutable, so a node's change is a new object.
        self._counted: dict[str, Counted] = {}
        self._seen = len(changes)  # how much of the log is counted
        self._views: dict[str, IslandResources] = {}
        self._groups: dict[int, dict[GroupKey, set[str]]] = {}  # by tier
        self._group_of: dict[str, GroupKey] = {}
        self._group_views: dict[GroupKey, IslandResources] = {}
        self._dirty: set[str] = set()  # summed HyperNodes changed since they were grouped

    def resources(self, name: str) -> IslandResources:
        self._catch_up()
        found = self._views.get(name)
        if found is None:
            sums = self._sums.get(name) or self._sum(name)
            found = self._views[name] = sums.view()
        return found

    def _sum(self, name: str) -> _Sums:
        island = self.tree.islands[name]
        children = [self.tree.islands[c] for c in island.children if c in self.tree.islands]
        if children and self._partitioned_by(island.nodes, children):
            # A spine of racks: the racks' sums added up, not its nodes again.
            sums = self._sums[name] = _Sums()
            for child in children:
                part = self._sums.get(child.name) or self._sum(child.name)
                for into, amounts in (
                    (sums.alloc, part.alloc),
                    (sums.used, part.used),
                    (sums.moving, part.moving),
                ):
                    for key, amount in amounts.items():
                        into[key] = into.get(key, 0) + amount
            return sums
        sums = self._sums[name] = _Sums()
        for node_name in island.nodes:
            node = self.nodes.get(node_name)
            if node is None or not node.ready:
                continue
            sums.add_node(node)
            self._counted[node_name] = (node.used, node.releasing, node.pipelined)
        return sums

    @staticmethod
    def _partitioned_by(nodes: frozenset[str], children: Sequence[Island]) -> bool:
        """Whether the children's nodes are ``nodes``, each node in exactly one child."""
        return sum(len(c.nodes) for c in children) == len(nodes) and all(
            c.nodes <= nodes for c in children
        )

    def _catch_up(self) -> None:
        """Count the nodes logged since the last call into the sums holding them."""
        log = self.changes
        if self._seen == len(log):
            return
        for node_name in set(log[self._seen :]):
            counted = self._counted.get(node_name)
            if counted is None:
                continue  # in no summed HyperNode (or not ready: never counted)
            node = self.nodes[node_name]
            now = (node.used, node.releasing, node.pipelined)
            if now[0] is counted[0] and now[1] is counted[1] and now[2] is counted[2]:
                continue
            self._counted[node_name] = now
            used, moving = _change(counted, now)
            for held_by in self.tree.by_node.get(node_name, ()):
                sums = self._sums.get(held_by)
                if sums is None:
                    continue
                sums.add_change(used, moving)
                self._views.pop(held_by, None)
                self._dirty.add(held_by)
        self._seen = len(log)

    def _key(self, name: str) -> GroupKey:
        return (self._sums.get(name) or self._sum(name)).key()

    def _tier_groups(self, tier: int) -> dict[GroupKey, set[str]]:
        """The tier's HyperNodes by their sums (brought up to date)."""
        self._catch_up()
        groups = self._groups.get(tier)
        if groups is None:
            groups = self._groups[tier] = {}
            for name, island in self.tree.islands.items():
                if island.tier == tier:
                    key = self._group_of[name] = self._key(name)
                    groups.setdefault(key, set()).add(name)
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
            key = self._group_of[name] = self._key(name)
            groups.setdefault(key, set()).add(name)
        return groups

    def in_tier(self, tier: int, request: Resources) -> Iterator[str]:
        """The tier's HyperNodes with room for ``request`` (idle or future idle), best first:
        highest score, then name. Produced lazily, a score at a time: a job placed in the
        best rack never sorts the others."""
        by_score: dict[float, list[str]] = {}
        views = self._group_views
        for key, names in self._tier_groups(tier).items():
            res = views.get(key)
            if res is None:
                res = views[key] = self._sums[next(iter(names))].view()
            if fits(request, res.idle) or fits(request, res.future_idle):
                by_score.setdefault(self.scorer.score(request, res), []).extend(names)
        for score in sorted(by_score, reverse=True):
            yield from sorted(by_score[score])
