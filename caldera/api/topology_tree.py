"""HyperNodes resolved into a tree of islands: which nodes each one holds, its parent and tier.

The scheduler, the hypernode controller (``status.nodeCount``), the webhook (member cycles) and
the CLI (the tree view) all read HyperNodes through this one resolution, Volcano's rules:

- a Node member selects nodes by exact name, by a regular expression searched in the name
  (Go's ``MatchString``: unanchored) or by labels; a HyperNode member selects HyperNodes the
  same way (labels are the HyperNode's own);
- an island's nodes are its Node members plus, recursively, the nodes of its HyperNode members;
- a HyperNode listed by two others keeps the parent of lowest tier (then name) and the other
  listing is reported; a member cycle is reported and its edges are not followed.

Nodes are given as ``name -> labels``; nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from caldera.api.meta import LabelSelector
from caldera.api.topology import HyperNode, MemberSelector, MemberType

Labels = Mapping[str, str]


def label_selector_matches(selector: LabelSelector, labels: Labels) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches nothing here, as Volcano's
    member selector treats it."""
    if not selector.match_labels and not selector.match_expressions:
        return False
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        value = labels.get(req.key)
        op = req.operator
        if op == "In" and value not in req.values:
            return False
        if op == "NotIn" and present and value in req.values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` does not compile, or None."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


def selected(selector: MemberSelector, candidates: Mapping[str, Labels]) -> set[str]:
    """The names among ``candidates`` (name -> labels) that ``selector`` chooses."""
    if selector.exact_match is not None:
        name = selector.exact_match.name
        return {name} if name in candidates else set()
    if selector.regex_match is not None:
        regex = _regex(selector.regex_match.pattern)
        if regex is None:
            return set()
        return {name for name in candidates if regex.search(name)}
    if selector.label_match is not None:
        match = selector.label_match
        return {
            name for name, labels in candidates.items() if label_selector_matches(match, labels)
        }
    return set()


@dataclass(slots=True)
class Island:
    """One HyperNode, resolved."""

    name: str
    tier: int
    tier_name: str
    nodes: frozenset[str] = frozenset()  # every real node under it
    direct_nodes: frozenset[str] = frozenset()  # its own Node members
    children: tuple[str, ...] = ()  # HyperNode members, by name
    parent: str | None = None


@dataclass(slots=True)
class HyperNodeTree:
    """Every HyperNode resolved against the nodes; see the module docstring."""

    islands: dict[str, Island] = field(default_factory=dict)
    tiers: tuple[int, ...] = ()  # distinct tiers, ascending
    problems: list[str] = field(default_factory=list)
    # node -> the islands holding it, lowest tier first
    by_node: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.islands)

    def ancestors(self, name: str) -> list[str]:
        """``name`` and the islands above it, lowest first."""
        out: list[str] = []
        current: str | None = name
        while current is not None and current in self.islands and current not in out:
            out.append(current)
            current = self.islands[current].parent
        return out

    def lowest_common(self, nodes: Iterable[str]) -> str | None:
        """The lowest island holding every one of ``nodes``, or None (no nodes, or none
        holds them all)."""
        common: Sequence[str] | None = None
        by_node = self.by_node
        for node in nodes:
            holding = by_node.get(node)
            if not holding:
                return None
            if common is None:
                common = holding
            elif holding != common:  # nodes of one rack: the same islands, compared in C
                keep = set(holding)
                common = tuple([name for name in common if name in keep])
                if not common:
                    return None
        return common[0] if common else None

    def tier_of_name(self, tier_name: str) -> int | None:
        """The tier whose HyperNodes carry ``spec.tierName`` ``tier_name`` (the highest such)."""
        tiers = [i.tier for i in self.islands.values() if i.tier_name == tier_name]
        return max(tiers) if tiers else None

    def roots(self) -> list[str]:
        return sorted(n for n, i in self.islands.items() if i.parent is None)


def build_tree(hypernodes: Sequence[HyperNode], nodes: Mapping[str, Labels]) -> HyperNodeTree:
    """Resolve ``hypernodes`` against ``nodes`` (name -> labels)."""
    tree = HyperNodeTree()
    hn_labels = {hn.metadata.name: hn.metadata.labels for hn in hypernodes}
    by_name = {hn.metadata.name: hn for hn in hypernodes}
    children: dict[str, list[str]] = {}
    parents: dict[str, list[str]] = {}
    for hn in hypernodes:
        direct: set[str] = set()
        kids: set[str] = set()
        for member in hn.spec.members:
            if member.type == MemberType.NODE:
                direct |= selected(member.selector, nodes)
            elif member.type == MemberType.HYPERNODE:
                kids |= selected(member.selector, hn_labels) - {hn.metadata.name}
        name = hn.metadata.name
        tree.islands[name] = Island(
            name=name,
            tier=hn.spec.tier,
            tier_name=hn.spec.tier_name,
            direct_nodes=frozenset(direct),
        )
        children[name] = sorted(kids)
        for kid in kids:
            parents.setdefault(kid, []).append(name)
    for kid, listed_by in parents.items():
        ranked = sorted(listed_by, key=lambda p: (by_name[p].spec.tier, p))
        tree.islands[kid].parent = ranked[0]
        if len(ranked) > 1:
            tree.problems.append(
                f"hypernode {kid} is a member of {', '.join(ranked)}; {ranked[0]} is kept"
            )
    for name, island in tree.islands.items():
        island.children = tuple(k for k in children[name] if tree.islands[k].parent == name)
    _resolve_nodes(tree)
    tree.tiers = tuple(sorted({i.tier for i in tree.islands.values()}))
    holding: dict[str, list[Island]] = {}
    for island in tree.islands.values():
        for node in island.nodes:
            holding.setdefault(node, []).append(island)
    tree.by_node = {
        node: tuple(i.name for i in sorted(islands, key=lambda i: (i.tier, len(i.nodes), i.name)))
        for node, islands in holding.items()
    }
    return tree


def _resolve_nodes(tree: HyperNodeTree) -> None:
    """Each island's nodes: its own plus its children's, following no edge of a cycle."""
    done: dict[str, frozenset[str]] = {}
    for start in sorted(tree.islands):
        _collect(tree, start, done, [])
    for name, island in tree.islands.items():
        island.nodes = done[name]


def _collect(
    tree: HyperNodeTree, name: str, done: dict[str, frozenset[str]], path: list[str]
) -> frozenset[str]:
    if name in done:
        return done[name]
    if name in path:
        cycle = [*path[path.index(name) :], name]
        tree.problems.append(f"hypernode member cycle: {' -> '.join(cycle)}")
        return frozenset()
    path.append(name)
    island = tree.islands[name]
    nodes = set(island.direct_nodes)
    for kid in island.children:
        nodes |= _collect(tree, kid, done, path)
    path.pop()
    done[name] = frozenset(nodes)
    return done[name]


def member_cycle(hypernodes: Sequence[HyperNode], candidate: HyperNode) -> list[str] | None:
    """The member cycle ``candidate`` would close among ``hypernodes`` (which it replaces if
    one has its name), as names from ``candidate`` back to it, or None."""
    others = [hn for hn in hypernodes if hn.metadata.name != candidate.metadata.name]
    every = [*others, candidate]
    labels = {hn.metadata.name: hn.metadata.labels for hn in every}
    edges: dict[str, list[str]] = {}
    for hn in every:
        kids: set[str] = set()
        for member in hn.spec.members:
            if member.type == MemberType.HYPERNODE:
                kids |= selected(member.selector, labels)
        edges[hn.metadata.name] = sorted(kids)
    start = candidate.metadata.name
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        name, path = stack.pop()
        for kid in edges.get(name, ()):
            if kid == start:
                return [*path, start]
            if kid not in seen:
                seen.add(kid)
                stack.append((kid, [*path, kid]))
    return None
