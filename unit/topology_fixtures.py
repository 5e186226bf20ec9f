"""HyperNodes for the topology tests: racks of nodes under spines, built the way the label
discovery builds them (exact-name members)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from caldera.api.meta import LabelSelector, ObjectMeta
from caldera.api.topology import (
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    MemberSelector,
    MemberSpec,
    RegexMatch,
)


def exact(kind: str, name: str) -> MemberSpec:
    return MemberSpec(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))


def regex(kind: str, pattern: str) -> MemberSpec:
    return MemberSpec(type=kind, selector=MemberSelector(regex_match=RegexMatch(pattern=pattern)))


def labelled(kind: str, labels: Mapping[str, str]) -> MemberSpec:
    return MemberSpec(
        type=kind, selector=MemberSelector(label_match=LabelSelector(match_labels=dict(labels)))
    )


def hypernode(
    name: str,
    tier: int,
    members: Sequence[MemberSpec],
    *,
    tier_name: str = "",
    labels: Mapping[str, str] | None = None,
) -> HyperNode:
    return HyperNode(
        metadata=ObjectMeta(name=name, labels=dict(labels or {})),
        spec=HyperNodeSpec(tier=tier, tier_name=tier_name, members=tuple(members)),
    )


def racks_and_spines(
    spines: int, racks_per_spine: int, nodes_per_rack: int
) -> tuple[list[str], list[HyperNode], dict[str, tuple[str, str]]]:
    """Node names ``n<i>``, the HyperNodes (racks ``r<i>`` of tier 1 named "rack", spines
    ``s<i>`` of tier 2 named "spine"), and node -> (rack, spine)."""
    nodes: list[str] = []
    hns: list[HyperNode] = []
    where: dict[str, tuple[str, str]] = {}
    rack = 0
    for s in range(spines):
        rack_names = []
        for _ in range(racks_per_spine):
            members = []
            for _ in range(nodes_per_rack):
                name = f"n{len(nodes)}"
                nodes.append(name)
                where[name] = (f"r{rack}", f"s{s}")
                members.append(exact("Node", name))
            hns.append(hypernode(f"r{rack}", 1, members, tier_name="rack"))
            rack_names.append(f"r{rack}")
            rack += 1
        hns.append(
            hypernode(f"s{s}", 2, [exact("HyperNode", r) for r in rack_names], tier_name="spine")
        )
    return nodes, hns, where
