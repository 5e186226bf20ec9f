"""The HyperNode tree as `caldera hypernode list|get` draws it (cli.topology_view)."""

from __future__ import annotations

from caldera.api.topology_tree import build_tree
from cli.topology_view import render_tree
from scheduler.framework.hypernodes import island_resources
from unit.sched_fixtures import add_job, make_cluster, make_node
from unit.topology_fixtures import racks_and_spines


def test_tree_with_free_resources_per_island() -> None:
    """Spines hold their racks, drawn as branches; each island shows free/total GPUs, cpu and
    memory after the pods bound there."""
    names, hns, _ = racks_and_spines(1, 2, 2)
    nodes = [make_node(n, "16", "64Gi", extra={"nvidia.com/gpu": "8"}) for n in names]
    cluster = make_cluster(nodes, [])
    add_job(cluster, "busy", running=["n0"], size="4")
    tree = build_tree(hns, {n: {} for n in names})
    resources = {n: island_resources(cluster.nodes, i.nodes) for n, i in tree.islands.items()}
    text = render_tree(tree, resources, tree.roots())
    lines = text.splitlines()
    assert lines[0].split() == [
        "NAME",
        "TIER",
        "TIERNAME",
        "NODES",
        "GPU",
        "FREE",
        "CPU",
        "FREE",
        "MEMORY",
        "FREE",
    ]
    assert lines[1].split() == ["s0", "2", "spine", "4", "32/32", "60/64", "256Gi/256Gi"]
    assert lines[2].split() == ["├─", "r0", "1", "rack", "2", "16/16", "28/32", "128Gi/128Gi"]
    assert lines[3].split()[:2] == ["└─", "r1"]
    assert render_tree(tree, resources, []) == "No resources found\n"


def test_job_view_shows_the_topology_and_the_hypernode() -> None:
    """The PodGroup section of `caldera job view` names the mode, the tier and the HyperNode."""
    from caldera.api.meta import ObjectMeta
    from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY
    from caldera.api.volcano import NetworkTopologySpec, PodGroup, PodGroupSpec
    from cli.output import _job_podgroup

    pg = PodGroup(
        metadata=ObjectMeta(name="llm-1234", annotations={JOB_ALLOCATED_HYPERNODE_KEY: "spine-0"}),
        spec=PodGroupSpec(
            min_member=32, network_topology=NetworkTopologySpec(highest_tier_allowed=2)
        ),
    )
    lines = _job_podgroup(pg, [])
    assert "  Network topology: hard mode, tier <= 2" in lines
    assert "  HyperNode: spine-0" in lines
    named = PodGroup(
        spec=PodGroupSpec(
            network_topology=NetworkTopologySpec(mode="soft", highest_tier_name="rack")
        )
    )
    assert "  Network topology: soft mode, tier 'rack'" in _job_podgroup(named, [])
