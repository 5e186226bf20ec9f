"""The dependency graph of a JobFlow (caldera.api.flowgraph): undefined targets, cycles, order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.flow import Flow, FlowDependsOn
from caldera.api.flowgraph import find_cycle, graph_of, topological_order, undefined


def flow(name: str, *targets: str) -> Flow:
    return Flow(name=name, depends_on=FlowDependsOn(targets=targets) if targets else None)


def test_graph_merges_the_targets_of_repeated_names() -> None:
    """A name listed twice waits for the targets of both entries, each once, in order."""
    flows = [flow("a"), flow("b", "a"), flow("b", "c", "a"), flow("c")]
    assert graph_of(flows) == {"a": (), "b": ("a", "c"), "c": ()}


def test_undefined_targets_are_named_with_their_path() -> None:
    """Every target that names no flow is reported where it is written."""
    found = undefined([flow("a"), flow("b", "a", "x"), flow("c", "y")])
    assert [(u.target, u.path) for u in found] == [
        ("x", "spec.flows[1].dependsOn.targets[1]"),
        ("y", "spec.flows[2].dependsOn.targets[0]"),
    ]
    assert undefined([flow("a"), flow("b", "a")]) == []


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": ("a",)}, ("a", "a")),
        ({"a": ("b",), "b": ("a",)}, ("a", "b", "a")),
        ({"s": (), "a": ("s", "c"), "b": ("a",), "c": ("b",)}, ("a", "c", "b", "a")),
        ({"a": (), "b": ("a",), "c": ("a", "b"), "d": ("c", "x")}, None),
        ({}, None),
    ],
    ids=["self", "pair", "three-behind-a-root", "dag-with-undefined-target", "empty"],
)
def test_find_cycle(graph: dict[str, tuple[str, ...]], cycle: tuple[str, ...] | None) -> None:
    """The first cycle a walk in graph order meets, written as the waits along it."""
    assert find_cycle(graph) == cycle


def test_topological_order_puts_each_flow_after_its_targets() -> None:
    """Ties keep graph order; a cycle has no order."""
    graph = {"evaluate": ("train",), "preprocess": (), "train": ("preprocess",), "report": ()}
    assert topological_order(graph) == ["preprocess", "report", "train", "evaluate"]
    assert topological_order({"a": ("b",), "b": ("a",), "c": ()}) is None


def test_a_long_chain_needs_no_recursion() -> None:
    """10,000 flows in a line: no RecursionError, and the cycle closing it is found."""
    n = 10_000
    graph = {f"f{i}": (f"f{i + 1}",) for i in range(n - 1)} | {f"f{n - 1}": ()}
    assert find_cycle(graph) is None
    graph[f"f{n - 1}"] = ("f0",)
    cycle = find_cycle(graph)
    assert cycle is not None
    assert len(cycle) == n + 1


NAMES = st.sampled_from(["a", "b", "c", "d", "e", "f"])
GRAPHS = st.dictionaries(NAMES, st.lists(NAMES, max_size=4, unique=True).map(tuple), max_size=6)


@settings(max_examples=500, deadline=None)
@given(GRAPHS)
def test_a_cycle_is_found_exactly_when_there_is_no_order(graph: dict[str, tuple[str, ...]]) -> None:
    """find_cycle and topological_order agree; a cycle found is made of real edges and closes on
    itself; an order puts every flow after each defined target."""
    cycle = find_cycle(graph)
    order = topological_order(graph)
    assert (cycle is None) == (order is not None)
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        assert len(set(cycle[:-1])) == len(cycle) - 1
        for waiter, target in itertools.pairwise(cycle):
            assert target in graph[waiter]
    if order is not None:
        assert sorted(order) == sorted(graph)
        position = {name: i for i, name in enumerate(order)}
        for name, targets in graph.items():
            for target in targets:
                if target in graph:
                    assert position[target] < position[name]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_flows_that_only_wait_for_earlier_ones_form_a_dag(data: st.DataObject) -> None:
    """Any flow list where targets name only earlier flows has no cycle and no undefined
    target; adding one wait on a later flow that reaches back makes a cycle."""
    n = data.draw(st.integers(1, 8))
    flows = []
    for i in range(n):
        targets = data.draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True)) if i else []
        flows.append(flow(f"s{i}", *(f"s{t}" for t in targets)))
    assert undefined(flows) == []
    assert find_cycle(graph_of(flows)) is None
    if n > 1:
        flows[0] = flow("s0", f"s{n - 1}")
        chain = [flow(f"s{i}", f"s{i - 1}") for i in range(1, n)]
        assert find_cycle(graph_of([flows[0], *chain])) is not None
