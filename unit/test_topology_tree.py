"""HyperNodes resolved into islands: selectors, nesting, parents, cycles
(caldera.api.topology_tree)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.meta import LabelSelector, LabelSelectorRequirement
from caldera.api.topology_tree import (
    build_tree,
    label_selector_matches,
    member_cycle,
    regex_error,
)
from unit.topology_fixtures import exact, hypernode, labelled, racks_and_spines, regex


def test_racks_and_spines_resolve_to_their_nodes() -> None:
    """A spine holds the nodes of its racks; each node's islands come lowest tier first."""
    nodes, hns, _ = racks_and_spines(2, 2, 2)
    tree = build_tree(hns, {n: {} for n in nodes})
    assert tree.islands["r0"].nodes == {"n0", "n1"}
    assert tree.islands["s1"].nodes == {"n4", "n5", "n6", "n7"}
    assert tree.islands["r3"].parent == "s1"
    assert tree.by_node["n5"] == ("r2", "s1")
    assert tree.tiers == (1, 2)
    assert tree.roots() == ["s0", "s1"]
    assert tree.ancestors("r2") == ["r2", "s1"]
    assert tree.lowest_common(["n0", "n1"]) == "r0"
    assert tree.lowest_common(["n0", "n3"]) == "s0"
    assert tree.lowest_common(["n0", "n7"]) is None
    assert tree.tier_of_name("spine") == 2
    assert tree.tier_of_name("zone") is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([f"n{i}" for i in range(9)]), max_size=6))
def test_lowest_common_is_the_lowest_island_holding_every_node(nodes: list[str]) -> None:
    """Nodes of one rack, of several, repeated, or one outside every island (n8): the first
    of the first node's islands (lowest first) that holds all of them, or None."""
    names, hns, _ = racks_and_spines(2, 2, 2)
    tree = build_tree(hns, {n: {} for n in [*names, "n8"]})
    expected = (
        next(
            (
                i
                for i in tree.by_node.get(nodes[0], ())
                if all(n in tree.islands[i].nodes for n in nodes)
            ),
            None,
        )
        if nodes
        else None
    )
    assert tree.lowest_common(nodes) == expected


def test_regex_and_label_members() -> None:
    """A regex is searched in node names (Go's MatchString); labels select nodes and
    HyperNodes by their own labels; an exact name that matches no node selects nothing."""
    nodes = {"gpu-a-1": {"rack": "a"}, "gpu-a-2": {"rack": "a"}, "gpu-b-1": {"rack": "b"}}
    hns = [
        hypernode("ra", 1, [regex("Node", "-a-")], labels={"spine": "x"}),
        hypernode("rb", 1, [labelled("Node", {"rack": "b"})], labels={"spine": "x"}),
        hypernode("rc", 1, [exact("Node", "missing")]),
        hypernode("sx", 2, [labelled("HyperNode", {"spine": "x"})]),
    ]
    tree = build_tree(hns, nodes)
    assert tree.islands["ra"].nodes == {"gpu-a-1", "gpu-a-2"}
    assert tree.islands["rb"].nodes == {"gpu-b-1"}
    assert tree.islands["rc"].nodes == frozenset()
    assert tree.islands["sx"].nodes == set(nodes)
    assert tree.islands["sx"].children == ("ra", "rb")


def test_two_parents_keep_the_lowest_tier_and_a_cycle_is_reported() -> None:
    """A HyperNode listed twice keeps one parent; a member cycle adds no nodes and is told."""
    hns = [
        hypernode("r0", 1, [exact("Node", "n0")]),
        hypernode("s0", 2, [exact("HyperNode", "r0")]),
        hypernode("z0", 3, [exact("HyperNode", "r0")]),
        hypernode("a", 2, [exact("HyperNode", "b"), exact("Node", "n1")]),
        hypernode("b", 2, [exact("HyperNode", "a")]),
    ]
    tree = build_tree(hns, {"n0": {}, "n1": {}})
    assert tree.islands["r0"].parent == "s0"
    assert any("r0 is a member of s0, z0" in p for p in tree.problems)
    assert any("cycle" in p for p in tree.problems)
    assert "n1" in tree.islands["a"].nodes


def test_member_cycle_finds_the_loop_a_new_hypernode_closes() -> None:
    """The webhook's check: a HyperNode that would contain one of its ancestors."""
    existing = [
        hypernode("r0", 1, [exact("Node", "n0")]),
        hypernode("s0", 2, [exact("HyperNode", "r0")]),
    ]
    bad = hypernode("r0", 1, [exact("HyperNode", "s0")])
    assert member_cycle(existing, bad) == ["r0", "s0", "r0"]
    assert member_cycle(existing, hypernode("s1", 2, [exact("HyperNode", "r0")])) is None
    assert member_cycle([], hypernode("x", 1, [exact("HyperNode", "x")])) == ["x", "x"]


def test_label_selector_operators() -> None:
    """In, NotIn, Exists, DoesNotExist, and the empty selector that matches nothing."""
    labels = {"a": "1", "b": "2"}

    def sel(*reqs: tuple[str, str, tuple[str, ...]]) -> LabelSelector:
        return LabelSelector(
            match_expressions=tuple(
                LabelSelectorRequirement(key=k, operator=o, values=v) for k, o, v in reqs
            )
        )

    assert label_selector_matches(sel(("a", "In", ("1", "3"))), labels)
    assert not label_selector_matches(sel(("a", "NotIn", ("1",))), labels)
    assert label_selector_matches(sel(("c", "DoesNotExist", ())), labels)
    assert not label_selector_matches(sel(("c", "Exists", ())), labels)
    assert not label_selector_matches(LabelSelector(), labels)
    assert label_selector_matches(LabelSelector(match_labels={"b": "2"}), labels)


def test_regex_error_names_the_problem() -> None:
    assert regex_error("node-[0-9]+") is None
    assert regex_error("node-[") is not None
