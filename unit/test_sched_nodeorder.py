"""The nodeorder plugin: kube-scheduler's least/most requested, balanced allocation and
preferred node affinity, with their weights."""

from __future__ import annotations

from collections import Counter

import pytest

from caldera.api.core import NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm
from caldera.api.resources import Resources
from scheduler.framework.plugin import Arguments
from scheduler.plugins.nodeorder import (
    NodeOrderPlugin,
    balanced_allocation,
    least_requested,
    most_requested,
)
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task, run


def test_kube_scheduler_formulas() -> None:
    """Integer arithmetic as in kube-scheduler: cpu 3/4 and memory 2/8 requested."""
    node = make_node("n", "4", "8Gi")
    node.used = Resources.from_list({"cpu": "2", "memory": "1Gi"})
    request = Resources.from_list({"cpu": "1", "memory": "1Gi"})
    assert least_requested(request, node) == (25 + 75) // 2
    assert most_requested(request, node) == (75 + 25) // 2
    assert balanced_allocation(request, node) == int((1 - abs(0.75 - 0.25) / 2) * 100)
    too_big = Resources.from_list({"cpu": "3", "memory": "1Gi"})
    assert least_requested(too_big, node) == (0 + 75) // 2
    assert most_requested(too_big, node) == (100 + 25) // 2


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, 50 + 75),
        ({"leastrequested.weight": 2, "balancedresource.weight": 0}, 100),
        (
            {"leastrequested.weight": 0, "balancedresource.weight": 0, "mostrequested.weight": 3},
            150,
        ),
    ],
)
def test_weights(arguments: dict[str, float], expected: float) -> None:
    """Each score is multiplied by its weight and the products are summed."""
    node = make_node("n", "4", "8Gi")
    node.used = Resources.from_list({"cpu": "2", "memory": "1Gi"})
    task = make_task("a", 0, {"cpu": "1", "memory": "1Gi"})
    assert NodeOrderPlugin(Arguments("nodeorder", arguments)).score(task, node) == expected


def test_most_requested_packs() -> None:
    """With mostrequested as the only scorer, pods pile onto one node."""
    nodes = [make_node(f"n{i}", "8", "32Gi") for i in range(3)]
    ssn = run(
        make_cluster(nodes, [make_job("a", 6, min_available=1)]),
        tiers=(("priority", "gang"), ("predicates", "nodeorder")),
        arguments={
            "nodeorder": {
                "leastrequested.weight": 0,
                "balancedresource.weight": 0,
                "mostrequested.weight": 1,
            }
        },
    )
    assert Counter(binds(ssn).values()) == {"n0": 6}


def test_preferred_node_affinity() -> None:
    """Matching preferred terms add their weights (times nodeaffinity.weight), so the pod
    goes to the preferred zone even though the other node is emptier."""
    prefer = PreferredSchedulingTerm(
        weight=80,
        preference=NodeSelectorTerm(
            match_expressions=(NodeSelectorRequirement(key="zone", operator="In", values=("b",)),)
        ),
    )
    busy = make_node("b-node", "8", "16Gi", labels={"zone": "b"})
    busy.used = Resources.from_list({"cpu": "4", "memory": "8Gi"})
    nodes = [make_node("a-node", "8", "16Gi", labels={"zone": "a"}), busy]
    task = make_task("p", 0, preferred=[prefer])
    assert binds(run(make_cluster(nodes, [make_job("p", [task])]))) == {"p-0": "b-node"}
    doubled = NodeOrderPlugin(Arguments("nodeorder", {"nodeaffinity.weight": 2}))
    without = NodeOrderPlugin(Arguments("nodeorder", {"nodeaffinity.weight": 0}))
    assert doubled.score(task, busy) - without.score(task, busy) == 160
    assert doubled.score(task, nodes[0]) == without.score(task, nodes[0])


def test_rejects_non_numeric_weight() -> None:
    """A typo in a weight is an error naming the plugin and key."""
    with pytest.raises(ValueError, match=r"plugin nodeorder: argument leastrequested\.weight"):
        NodeOrderPlugin(Arguments("nodeorder", {"leastrequested.weight": "heavy"}))
