"""How HyperNodes are ranked for a job, and what a job's networkTopology asks (pure).

The network-topology-aware plugin builds a ``HyperNodeScorer`` from its arguments, and when a
session opens sets a ``HyperNodeState`` (the scorer and the HyperNodes' summed resources, kept
as tasks are allocated and released in the session, and on the live snapshot carried from one
session to the next: ``HyperNodeState.resume``) as ``Session.topology``; the allocate,
preempt and reclaim actions read it (``scheduler.actions.topology``). Without the plugin,
``networkTopology`` is ignored, as in Volcano, where the plugin provides the HyperNode
gradients.

Scores follow Volcano's plugin: a HyperNode's binpack score for a request is, per weighted
resource, ``(used + request) / allocatable`` over the HyperNode's nodes, averaged with the
weights, and 0 when the request does not fit; so a job fills the fullest island it fits in and
free islands stay whole. The final score is scaled by 100 x ``weight``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Final

from caldera.api.resources import Resources
from caldera.api.topology_tree import HyperNodeTree, Island
from caldera.api.volcano import NetworkTopologyMode, NetworkTopologySpec
from scheduler.api.types import NodeInfo

MAX_NODE_SCORE = 100.0
_UNKNOWN: Final = -math.inf  # no score kept yet (a score is finite)


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
# A group's view, and the score of each request asked (None: no room).
Kept = tuple[IslandResources, dict[Resources, float | None]]


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

    def key(self) -> GroupKey:
        """Equal only for equal sums. The amounts in the order their names were first added
        (not sorted: a tier's HyperNodes add the same resources in the same order), so equal
        sums in another order make another group, of the same score (``in_tier`` ranks the
        groups of a score together)."""
        return (tuple(self.alloc.items()), tuple(self.used.items()), tuple(self.moving.items()))

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
    resources: HyperNodes with equal resources have equal room and equal scores, so room and
    score are computed once per group and request (a tier of 600 racks is mostly a few groups:
    empty, full, and a few partly used), not once per HyperNode and job."""

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
        self._groups: dict[int, dict[GroupKey, _Group]] = {}  # by tier
        self._group_of: dict[str, _Group] = {}
        # What a group of these sums was asked (``Kept``), for a group emptied and made again.
        self._group_views: dict[GroupKey, Kept] = {}
        # By tier, the summed HyperNodes changed since they were grouped.
        self._dirty: dict[int, set[str]] = {}

    def resume(
        self, nodes: Mapping[str, NodeInfo], changes: Sequence[str], between: Iterable[str]
    ) -> None:
        """Carry the sums into the next session over the same nodes and tree: ``changes`` is
        its log of changed nodes, ``between`` every node changed since this session's sums
        were last brought up to date (the nodes the snapshot derived again or the session
        touched). The HyperNodes holding those are summed again when next asked; the others
        keep their sums, groups and kept scores (a session costs the racks that changed, not
        a sum over every node)."""
        self.nodes, self.changes, self._seen = nodes, changes, len(changes)
        by_node, all_sums, views, dirty, islands = (
            self.tree.by_node,
            self._sums,
            self._views,
            self._dirty,
            self.tree.islands,
        )
        for node_name in set(between):
            for held_by in by_node.get(node_name, ()):
                if all_sums.pop(held_by, None) is not None:
                    views.pop(held_by, None)
                    changed = dirty.get(islands[held_by].tier)
                    if changed is None:
                        changed = dirty[islands[held_by].tier] = set()
                    changed.add(held_by)
        # What is kept only to be found again is bounded (sums and requests met before).
        if len(self._group_views) > _MAX_GROUP_VIEWS:
            self._group_views.clear()
        for group in set(self._group_of.values()):
            group.compact()
            if group.kept is not None and len(group.kept[1]) > _MAX_KEPT_SCORES:
                group.kept[1].clear()

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
        alloc, used, moving = sums.alloc, sums.used, sums.moving
        nodes, counted = self.nodes, self._counted
        for node_name in island.nodes:
            node = nodes.get(node_name)
            if node is None or not node.ready:
                continue
            # ``_Sums.add_node`` inline: a session's first hard-mode job sums every node.
            for key, amount in node.allocatable.items():
                alloc[key] = alloc.get(key, 0) + amount
            node_used, releasing, pipelined = node.used, node.releasing, node.pipelined
            for key, amount in node_used.items():
                used[key] = used.get(key, 0) + amount
            for key, amount in releasing.items():
                moving[key] = moving.get(key, 0) + amount
            for key, amount in pipelined.items():
                moving[key] = moving.get(key, 0) - amount
            counted[node_name] = (node_used, releasing, pipelined)
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
        counted_of, nodes, by_node, all_sums = (
            self._counted,
            self.nodes,
            self.tree.by_node,
            self._sums,
        )
        # The changes of nodes under the same HyperNodes (a rack's) are added up first, then
        # added once to each of those HyperNodes' sums: (used, releasing - pipelined).
        changes: dict[tuple[str, ...], tuple[dict[str, int], dict[str, int]]] = {}
        for node_name in set(log[self._seen :]):
            counted = counted_of.get(node_name)
            if counted is None:
                continue  # in no summed HyperNode (or not ready: never counted)
            node = nodes[node_name]
            used, releasing, pipelined = node.used, node.releasing, node.pipelined
            was_used, was_releasing, was_pipelined = counted
            same_used = used is was_used
            same_moving = releasing is was_releasing and pipelined is was_pipelined
            if same_used and same_moving:
                continue
            counted_of[node_name] = (used, releasing, pipelined)
            holders = by_node.get(node_name, ())
            change = changes.get(holders)
            if change is None:
                change = changes[holders] = ({}, {})
            if not same_used:
                into = change[0]
                for key, amount in used.items():
                    into[key] = into.get(key, 0) + amount
                for key, amount in was_used.items():
                    into[key] = into.get(key, 0) - amount
            if not same_moving:
                into = change[1]
                for vector, sign in (
                    (releasing, 1),
                    (was_releasing, -1),
                    (pipelined, -1),
                    (was_pipelined, 1),
                ):
                    for key, amount in vector.items():
                        into[key] = into.get(key, 0) + sign * amount
        touched: set[str] = set()
        for holders, (used_change, moving_change) in changes.items():
            for held_by in holders:
                sums = all_sums.get(held_by)
                if sums is None:
                    continue
                touched.add(held_by)
                for into, change_items in (
                    (sums.used, used_change.items()),
                    (sums.moving, moving_change.items()),
                ):
                    for key, amount in change_items:
                        into[key] = into.get(key, 0) + amount
        self._seen = len(log)
        views, dirty, islands = self._views, self._dirty, self.tree.islands
        for held_by in touched:
            views.pop(held_by, None)
            tier = islands[held_by].tier
            changed = dirty.get(tier)
            if changed is None:
                changed = dirty[tier] = set()
            changed.add(held_by)

    def _tier_groups(self, tier: int) -> dict[GroupKey, _Group]:
        """The tier's HyperNodes by their sums (brought up to date)."""
        self._catch_up()
        groups = self._groups.get(tier)
        moved: Iterable[str] = self._dirty.pop(tier, ())
        if groups is None:
            groups = self._groups[tier] = {}
            moved = [name for name, island in self.tree.islands.items() if island.tier == tier]
        group_of = self._group_of
        for name in moved:
            old = group_of.get(name)
            if old is not None and old.discard(name):
                del groups[old.key]
            key = (self._sums.get(name) or self._sum(name)).key()
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(key, self._group_views.get(key))
            group.add(name)
            group_of[name] = group
        return groups

    def in_tier(self, tier: int, request: Resources) -> Iterator[str]:
        """The tier's HyperNodes with room for ``request`` (idle or future idle), best first:
        highest score, then name. Produced lazily, a score at a time: a job placed in the
        best rack never sorts the others. A group's score for a request is kept (equal sums,
        equal score), so a job ranks only the groups whose sums it has not seen before."""
        by_score: dict[float, list[_Group]] = {}
        for group in self._tier_groups(tier).values():
            kept = group.kept
            if kept is None:
                view = self._sums[next(iter(group.names))].view()
                kept = group.kept = self._group_views[group.key] = (view, {})
            res, scores = kept
            score = scores.get(request, _UNKNOWN)
            if score == _UNKNOWN:
                room = fits(request, res.idle) or fits(request, res.future_idle)
                score = scores[request] = self.scorer.score(request, res) if room else None
            if score is not None:
                tied = by_score.get(score)
                if tied is None:
                    by_score[score] = [group]
                else:
                    tied.append(group)
        for score in sorted(by_score, reverse=True):
            tied = by_score[score]
            # Most often the first is taken: found without sorting a tier of free racks.
            first = tied[0].first() if len(tied) == 1 else min(g.first() for g in tied)
            yield first
            rest = sorted(chain.from_iterable(g.names for g in tied))
            yield from rest[1:]  # rest[0] is ``first``


# Bounds on what a state carried from session to session keeps to find again: the views of
# sums met before, and the scores a group keeps (requests met before).
_MAX_GROUP_VIEWS = 4096
_MAX_KEPT_SCORES = 256


class _Group:
    """A tier's HyperNodes with equal sums (``key``), what a job asks of them (``kept``: their
    view and the score of each request asked), and the first of them by name, kept in a heap
    (a job placed in an empty rack takes the first of hundreds; the next asks again)."""

    __slots__ = ("_order", "kept", "key", "names")

    def __init__(self, key: GroupKey, kept: Kept | None) -> None:
        self.key = key
        self.kept = kept  # None: not asked yet
        self.names: set[str] = set()
        # ``names`` as a heap, made when first asked; a name taken out stays until it comes
        # to the top (skipped there), so a name put back may be in it twice.
        self._order: list[str] | None = None

    def add(self, name: str) -> None:
        self.names.add(name)
        if self._order is not None:
            heapq.heappush(self._order, name)

    def discard(self, name: str) -> bool:
        """Take ``name`` out; True when the group is then empty."""
        self.names.discard(name)
        return not self.names

    def compact(self) -> None:
        """Forget the heap when names taken out outnumber those in (it is made again)."""
        if self._order is not None and len(self._order) > 2 * len(self.names) + 16:
            self._order = None

    def first(self) -> str:
        order, names = self._order, self.names
        if order is None:
            order = self._order = sorted(names)  # a sorted list is a heap
        while order[0] not in names:
            heapq.heappop(order)
        return order[0]
