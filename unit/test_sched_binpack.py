"""The binpack plugin: Volcano's post-placement utilisation score, and packing in practice."""

from __future__ import annotations

from collections import Counter

import pytest

from caldera.api.resources import Resources
from scheduler.framework.plugin import Arguments
from scheduler.plugins.binpack import BinpackPlugin, binpack_score
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task, run


def test_sixteen_small_pods_fill_one_node_first() -> None:
    """16 one-cpu pods on four 16-cpu nodes: binpack (weight 10, outweighing nodeorder's
    spreading) puts all of them on one node."""
    nodes = [make_node(f"n{i}", "16", "64Gi") for i in range(4)]
    ssn = run(
        make_cluster(nodes, [make_job("a", 16, min_available=1)]),
        tiers=(("priority", "gang"), ("predicates", "nodeorder", "binpack")),
        arguments={"binpack": {"binpack.weight": 10}},
    )
    assert Counter(binds(ssn).values()) == {"n0": 16}


def test_without_binpack_the_same_pods_spread() -> None:
    """The control: nodeorder alone spreads them evenly."""
    nodes = [make_node(f"n{i}", "16", "64Gi") for i in range(4)]
    ssn = run(
        make_cluster(nodes, [make_job("a", 16, min_available=1)]),
        tiers=(("priority", "gang"), ("predicates", "nodeorder")),
    )
    assert Counter(binds(ssn).values()) == {"n0": 4, "n1": 4, "n2": 4, "n3": 4}


def test_score_formula() -> None:
    """((2+1)/4 * 1 + (1+1)/8 * 1) / 2 * 100 * weight; a request that does not fit scores 0."""
    node = make_node("n", "4", "8")
    node.used = Resources.from_list({"cpu": "2", "memory": "1"})
    request = Resources.from_list({"cpu": "1", "memory": "1"})
    weights = {"cpu": 1, "memory": 1}
    assert binpack_score(request, node, weights, 1) == pytest.approx((0.75 + 0.25) / 2 * 100)
    assert binpack_score(request, node, weights, 3) == pytest.approx(150)
    assert binpack_score(Resources.from_list({"cpu": "3"}), node, weights, 1) == 0


def test_weights_and_extended_resources() -> None:
    """binpack.resources adds a weighted resource; resources the pod does not request and
    resources without a weight do not count."""
    plugin = BinpackPlugin(
        Arguments(
            "binpack",
            {
                "binpack.cpu": 2,
                "binpack.memory": 0,
                "binpack.resources": "nvidia.com/gpu, example.com/x",
                "binpack.resources.nvidia.com/gpu": 6,
            },
        )
    )
    assert plugin.weights == {"cpu": 2, "memory": 0, "nvidia.com/gpu": 6, "example.com/x": 1}
    node = make_node("n", "4", "8", extra={"nvidia.com/gpu": "4", "other": "4"})
    task = make_task("a", 0, {"cpu": "2", "nvidia.com/gpu": "1", "other": "4"})
    # cpu 2/4 * 2 = 1, gpu 1/4 * 6 = 1.5 -> 2.5 / 8 * 100
    assert plugin.score(task, node) == pytest.approx(2.5 / 8 * 100)


def test_negative_weight_counts_as_one() -> None:
    """As in Volcano, a negative weight is replaced by 1."""
    plugin = BinpackPlugin(Arguments("binpack", {"binpack.cpu": -3}))
    assert plugin.weights["cpu"] == 1
