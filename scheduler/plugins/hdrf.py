"""Hierarchical DRF (hdrf): drf's mode with the switch ``enableHierarchy: true`` (Volcano's
pkg/scheduler/plugins/drf, docs/design/hdrf.md there).

Queues name their place in a tree with the annotations ``volcano.sh/hierarchy`` ("root/eng/ml")
and ``volcano.sh/hierarchy-weights`` ("1/2/8"; a weight below 1, missing or not a number counts
1). Every job is a leaf under its queue's path. Bottom up, as Volcano computes it:

- a leaf holds its job's allocation; it is *saturated* when it holds all it requests of some
  resource, or holds any of a resource the cluster has no more of (no longer *demanding*);
- an inner node's allocation is the sum of its children's that hold something, those not
  saturated scaled to the smallest dominant share among them (``mdr``); its share is the
  dominant share of that sum; it is saturated when all its children are.

Queues are ordered by walking both paths from the root: at the first level where they differ, a
node that is not saturated goes first, then the lower share divided by the node's weight. In
reclaim, a victim's job may lose a task only when, after the reclaimer's job gains its task and
the victim's job loses its own, the reclaimer's queue comes before the victim's.

The tree is kept across the session's allocations: a change marks the job's leaf and its
ancestors, and a node's figures are derived again only when a comparison reads them (when the
set of demanding resources changes, every node is). Where Volcano would dereference a node that
does not exist (a queue without jobs compared below the root), the comparison has no opinion.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from caldera.api.resources import Resources

ROOT = "root"


def parse_weight(text: str) -> float:
    """A level's weight: below 1, missing or not a finite number counts 1 (Volcano's)."""
    try:
        weight = float(text)
    except ValueError:
        return 1.0
    return weight if math.isfinite(weight) and weight >= 1 else 1.0


def path_of(hierarchy: str, weights: str) -> list[tuple[str, float]]:
    """The levels below the root of a queue's annotations, with their weights."""
    names, given = hierarchy.split("/"), weights.split("/")
    return [
        (names[i], parse_weight(given[i]) if i < len(given) else 1.0) for i in range(1, len(names))
    ]


@dataclass(eq=False, slots=True)
class Node:
    """A level of the tree, or a job's leaf (``children`` None)."""

    name: str
    weight: float = 1.0
    parent: Node | None = None
    children: dict[str, Node] | None = None
    allocated: Mapping[str, float] = field(default_factory=dict)
    request: Resources = field(default_factory=Resources)
    share: float = 0.0
    saturated: bool = False
    dirty: bool = True


class HdrfTree:
    """The jobs' allocations aggregated up the queues' hierarchy (see the module docstring)."""

    def __init__(self, total: Resources) -> None:
        self.total = {name: float(amount) for name, amount in total.items() if amount > 0}
        # In integer thousandths: float sums of memory in thousandths of bytes would round.
        self.limits = {name: amount for name, amount in total.items() if amount > 0}
        self.allocated_total: dict[str, int] = {}
        self.root = Node(ROOT, children={})
        self.leaves: dict[str, Node] = {}
        self.demanding = self._demanding()

    # ---- building ------------------------------------------------------------------------

    def add_job(
        self, key: str, path: Iterable[tuple[str, float]], allocated: Resources, request: Resources
    ) -> None:
        """Put job ``key``'s leaf under ``path`` (its queue's levels below the root)."""
        node = self.root
        for name, weight in path:
            assert node.children is not None
            child = node.children.get(name)
            if child is None or child.children is None:
                child = node.children[name] = Node(name, weight, node, children={})
            node = child
        assert node.children is not None
        leaf = Node(key, 1.0, node, None, request=request)
        node.children[key] = leaf
        self.leaves[key] = leaf
        self.change(key, allocated, allocated, +1)

    def change(self, key: str, allocated: Resources, delta: Resources, sign: int) -> None:
        """Job ``key`` now holds ``allocated``, having gained (``sign`` +1) or lost (-1)
        ``delta``."""
        held, limits, flipped = self.allocated_total, self.limits, False
        for name, amount in delta.items():
            limit = limits.get(name)
            if limit is not None:
                held[name] = now = held.get(name, 0) + sign * amount
                flipped = flipped or ((now < limit) != (name in self.demanding))
        leaf = self.leaves.get(key)
        if leaf is not None:
            self._set_leaf(leaf, allocated)
        if flipped:  # every leaf's saturation may change
            self.demanding = self._demanding()
            self._mark_all(self.root)

    # ---- reading -------------------------------------------------------------------------

    def share_of(self, allocated: Mapping[str, float]) -> float:
        """Volcano's calculateShare over the cluster's resources."""
        share = 0.0
        for name, total in self.total.items():
            share = max(share, allocated.get(name, 0.0) / total)
        return share

    def compare(self, left: list[str], right: list[str]) -> float:
        """Volcano's compareQueues over two queues' level names below the root: < 0 when the
        left queue goes first."""
        self.refresh()
        lnode: Node | None = self.root
        rnode: Node | None = self.root
        depth = min(len(left), len(right)) + 1
        for i in range(depth):
            if lnode is None or rnode is None:
                return 0.0
            if not lnode.saturated and rnode.saturated:
                return -1.0
            if lnode.saturated and not rnode.saturated:
                return 1.0
            lshare, rshare = lnode.share / lnode.weight, rnode.share / rnode.weight
            if lshare != rshare:
                return lshare - rshare
            if i < depth - 1:
                lnode = (lnode.children or {}).get(left[i])
                rnode = (rnode.children or {}).get(right[i])
        return 0.0

    def refresh(self) -> None:
        """Derive again the figures of the nodes marked since the last refresh."""
        if self.root.dirty:
            self._aggregate(self.root)

    # ---- inside --------------------------------------------------------------------------

    def _demanding(self) -> frozenset[str]:
        held = self.allocated_total
        return frozenset(name for name, total in self.limits.items() if held.get(name, 0) < total)

    def _set_leaf(self, leaf: Node, allocated: Resources) -> None:
        leaf.allocated = {name: float(amount) for name, amount in allocated.items()}
        leaf.share = self.share_of(leaf.allocated)
        node: Node | None = leaf
        while node is not None and not (node.dirty and node is not leaf):
            node.dirty = True
            node = node.parent

    def _mark_all(self, node: Node) -> None:
        node.dirty = True
        for child in (node.children or {}).values():
            self._mark_all(child)

    def _saturated_leaf(self, leaf: Node) -> bool:
        """Volcano's resourceSaturated."""
        request = leaf.request
        for name, amount in leaf.allocated.items():
            if amount <= 0 or name in ("pods", "ephemeral-storage", "storage"):
                continue
            wanted = request.get(name)
            if wanted != 0 and amount >= wanted:
                return True
            if name not in self.demanding and wanted != 0:
                return True
        return False

    def _aggregate(self, node: Node) -> None:
        node.dirty = False
        children = node.children
        if children is None:
            node.saturated = self._saturated_leaf(node)
            return
        mdr = 1.0
        for child in children.values():
            if child.dirty:
                self._aggregate(child)
            if child.share != 0 and not child.saturated:
                mdr = min(mdr, child.share)
        summed: dict[str, float] = {}
        saturated = True
        for child in children.values():
            saturated = saturated and child.saturated
            if child.share == 0:
                continue
            scale = 1.0 if child.saturated else mdr / child.share
            for name, amount in child.allocated.items():
                if name in self.total:
                    summed[name] = summed.get(name, 0.0) + amount * scale
        node.allocated = summed
        node.share = self.share_of(summed)
        node.saturated = saturated
