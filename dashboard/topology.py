"""The HyperNode topology page's model: topology.volcano.sh HyperNodes as a tree (each under
the HyperNode that lists it, as `caldera.api.topology_tree` resolves Volcano's rules), with each
one's tier, its members and how many nodes and GPUs it holds, and what the resolution found
wrong (a cycle, a HyperNode listed by two); and a job's HyperNode, the lowest one holding the
nodes its pods are bound to.

A purely computational module with no side-effects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Node
from caldera.api.topology import HyperNode
from caldera.api.topology_tree import build_tree
from dashboard.overview import GPU, milli_amounts

__all__ = [
    "MAX_MEMBERS",
    "MAX_ROWS",
    "HyperNodeRow",
    "TopologyPage",
    "build_topology",
    "job_hypernode",
]

MAX_ROWS: Final = 2000
MAX_MEMBERS: Final = 32
"""Node members named per HyperNode; more are counted."""
MAX_PROBLEMS: Final = 20


@dataclass(frozen=True, slots=True)
class HyperNodeRow:
    name: str
    depth: int
    tier: int
    tier_name: str
    nodes: int
    gpus: int
    children: tuple[str, ...]
    members: tuple[str, ...]
    """Its own Node members (resolved), by name, the first `MAX_MEMBERS`."""
    more_members: int


@dataclass(frozen=True, slots=True)
class TopologyPage:
    rows: tuple[HyperNodeRow, ...]
    more: int
    tiers: tuple[int, ...]
    problems: tuple[str, ...]
    unplaced: int
    """Nodes no HyperNode holds."""


def build_topology(hypernodes: Sequence[HyperNode], nodes: Sequence[Node]) -> TopologyPage:
    """The tree of `hypernodes` over `nodes`, roots by name, children by name."""
    labels = {n.metadata.name: dict(n.metadata.labels) for n in nodes}
    gpus = {n.metadata.name: milli_amounts(n.status.allocatable).get(GPU, 0) // 1000 for n in nodes}
    tree = build_tree(hypernodes, labels)
    rows: list[HyperNodeRow] = []
    seen: set[str] = set()

    def walk(name: str, depth: int) -> None:
        island = tree.islands.get(name)
        if island is None or name in seen:
            return
        seen.add(name)
        members = sorted(island.direct_nodes)
        rows.append(
            HyperNodeRow(
                name=name,
                depth=depth,
                tier=island.tier,
                tier_name=island.tier_name,
                nodes=len(island.nodes),
                gpus=sum(gpus.get(n, 0) for n in island.nodes),
                children=tuple(sorted(island.children)),
                members=tuple(members[:MAX_MEMBERS]),
                more_members=max(0, len(members) - MAX_MEMBERS),
            )
        )
        for child in sorted(island.children):
            walk(child, depth + 1)

    for root in tree.roots():
        walk(root, 0)
    for name in sorted(tree.islands):  # on a cycle: no root reaches it
        walk(name, 0)
    placed = set(tree.by_node)
    return TopologyPage(
        rows=tuple(rows[:MAX_ROWS]),
        more=max(0, len(rows) - MAX_ROWS),
        tiers=tree.tiers,
        problems=tuple(tree.problems[:MAX_PROBLEMS]),
        unplaced=sum(1 for n in labels if n not in placed),
    )


def job_hypernode(
    hypernodes: Sequence[HyperNode], nodes: Sequence[Node], pod_nodes: Iterable[str]
) -> str | None:
    """The lowest HyperNode holding every node the job's pods are bound to (where the job
    runs, as the scheduler's network-topology placement sees it); None when its pods are not
    bound, or no HyperNode holds them all."""
    bound = {n for n in pod_nodes if n}
    if not bound or not hypernodes:
        return None
    labels = {n.metadata.name: dict(n.metadata.labels) for n in nodes}
    return build_tree(hypernodes, labels).lowest_common(sorted(bound))
