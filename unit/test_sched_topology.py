"""Network-topology-aware gang scheduling in one session: hard and soft mode, HyperNode
binpack, placement remembered, and the trial shortcut held to Volcano's try-every-HyperNode
choice (scheduler.actions.topology, scheduler.plugins.network_topology_aware)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta
from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY
from caldera.api.topology_tree import HyperNodeTree, build_tree
from caldera.api.volcano import NetworkTopologySpec, PodGroup, PodGroupSpec
from scheduler.actions.topology import gradient, search_space
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo
from scheduler.framework.hypernodes import HyperNodeState, constraint, island_resources
from scheduler.framework.plugin import Arguments
from scheduler.plugins.network_topology_aware import scorer_from
from unit.sched_fixtures import add_job, binds, cpu, cpu_cluster, open_session, run
from unit.topology_fixtures import racks_and_spines

TOPOLOGY_PLUGINS = (
    ("priority", "gang", "conformance"),
    ("overcommit", "predicates", "nodeorder", "network-topology-aware"),
)


def topology_cluster(
    spines: int = 2, racks: int = 2, nodes: int = 2, cpus: str = "8"
) -> tuple[ClusterInfo, dict[str, tuple[str, str]]]:
    names, hns, where = racks_and_spines(spines, racks, nodes)
    cluster = cpu_cluster(dict.fromkeys(names, cpus))
    cluster.hypernodes = build_tree(hns, {n: {} for n in names})
    return cluster, where


def with_topology(job: JobInfo, annotations: Mapping[str, str] | None = None, **spec: Any) -> None:
    """Give ``job`` a PodGroup asking for networkTopology ``spec``."""
    job.podgroup = PodGroup(
        metadata=ObjectMeta(
            name=job.name, namespace=job.namespace, annotations=dict(annotations or {})
        ),
        spec=PodGroupSpec(
            min_member=job.min_available, network_topology=NetworkTopologySpec(**spec)
        ),
    )


def gang(cluster: ClusterInfo, name: str, pods: int, size: str = "4", **spec: Any) -> JobInfo:
    job = add_job(cluster, name, pending=pods, size=size, min_available=pods, phase="Inqueue")
    if spec:
        with_topology(job, **spec)
    return job


def racks_of(ssn_binds: Mapping[str, str], where: Mapping[str, tuple[str, str]]) -> set[str]:
    return {where[node][0] for node in ssn_binds.values()}


def spines_of(ssn_binds: Mapping[str, str], where: Mapping[str, tuple[str, str]]) -> set[str]:
    return {where[node][1] for node in ssn_binds.values()}


def test_hard_mode_places_a_gang_in_one_rack() -> None:
    """Four 4-cpu pods fill one rack (2 nodes of 8 cpu), not two half racks."""
    cluster, where = topology_cluster()
    gang(cluster, "a", 4, highest_tier_allowed=1)
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    placed = binds(ssn)
    assert len(placed) == 4
    assert len(racks_of(placed, where)) == 1
    assert ssn.result.podgroup_hypernode == {"ns/a": next(iter(racks_of(placed, where)))}


def test_hard_mode_waits_rather_than_span_racks() -> None:
    """Six 4-cpu pods fit no rack: nothing is placed, and the condition says why."""
    cluster, _ = topology_cluster()
    gang(cluster, "a", 6, highest_tier_allowed=1)
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    assert binds(ssn) == {}
    message = ssn.job_conditions["ns/a"].message
    assert "no hypernode of tier <= 1 fits 6 pods" in message
    assert ssn.result.unschedulable["ns/a-0"] == "no hypernode of tier <= 1 fits 6 pods"


def test_highest_tier_name_allows_a_spine() -> None:
    """highestTierName "spine" is tier 2: six pods land within one spine, over two racks."""
    cluster, where = topology_cluster()
    gang(cluster, "a", 6, highest_tier_name="spine")
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    assert len(placed) == 6
    assert len(spines_of(placed, where)) == 1
    assert len(racks_of(placed, where)) == 2


def test_an_unknown_tier_name_fits_nowhere() -> None:
    cluster, _ = topology_cluster()
    gang(cluster, "a", 1, highest_tier_name="zone")
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    assert binds(ssn) == {}
    assert "no hypernode of tier 'zone' fits 1 pods" in ssn.job_conditions["ns/a"].message


def test_soft_mode_prefers_a_rack_then_spans() -> None:
    """Soft mode takes one rack when one fits, and is placed anyway when none does."""
    cluster, where = topology_cluster()
    gang(cluster, "a-small", 4, mode="soft", highest_tier_allowed=1)  # ordered first (key)
    gang(cluster, "b-big", 10, mode="soft", highest_tier_allowed=1)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    small = {k: v for k, v in placed.items() if k.startswith("a-small")}
    assert len(small) == 4
    assert len(racks_of(small, where)) == 1
    assert sum(1 for k in placed if k.startswith("b-big")) == 10


def test_hypernode_binpack_keeps_free_racks_whole() -> None:
    """A 2-pod gang goes to the rack already half used, not to an empty one."""
    cluster, where = topology_cluster()
    add_job(cluster, "busy", running=["n5"], size="4")  # r2 has 4 of 16 cpu used
    gang(cluster, "a", 2, highest_tier_allowed=1)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    assert racks_of(placed, where) == {"r2"}


def test_later_pods_join_the_hypernode_the_job_sits_in() -> None:
    """A job with a pod running in r3 places its restarted pod in r3, even where another
    rack would score higher."""
    cluster, where = topology_cluster()
    add_job(cluster, "busy", running=["n0", "n1"], size="4")  # r0 is the fullest
    job = add_job(cluster, "a", running=["n6"], pending=1, size="4", min_available=2)
    with_topology(job, highest_tier_allowed=1)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    assert racks_of(placed, where) == {"r3"}


def test_a_remembered_hypernode_brings_a_restarted_job_back() -> None:
    """No pod placed, the PodGroup's annotation names r1: the gang goes back there."""
    cluster, where = topology_cluster()
    job = gang(cluster, "a", 2)
    with_topology(job, {JOB_ALLOCATED_HYPERNODE_KEY: "r1"}, highest_tier_allowed=1)
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    assert racks_of(binds(ssn), where) == {"r1"}
    assert ssn.result.podgroup_hypernode == {}  # unchanged: nothing to write


def test_without_the_plugin_network_topology_is_ignored() -> None:
    """As in Volcano: the plugin provides the HyperNode search."""
    cluster, _ = topology_cluster()
    gang(cluster, "a", 6, highest_tier_allowed=1)
    assert len(binds(run(cluster))) == 6


def test_plugin_arguments_are_checked_and_defaulted() -> None:
    scorer = scorer_from(
        Arguments(
            "network-topology-aware",
            {
                "weight": 10,
                "hypernode.binpack.cpu": -1,
                "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
                "hypernode.binpack.resources.nvidia.com/gpu": 2,
            },
        )
    )
    assert scorer.weight == 10
    assert scorer.resource_weights == {
        "cpu": 1,
        "memory": 1,
        "nvidia.com/gpu": 2,
        "example.com/foo": 1,
    }
    with pytest.raises(ValueError, match="network-topology-aware: argument weight"):
        scorer_from(Arguments("network-topology-aware", {"weight": "heavy"}))


def _volcano_choice(cluster: ClusterInfo, job: JobInfo) -> str | None:
    """Volcano's allocateForJob: per tier, trial every HyperNode with room, keep the
    best-scored success (ties: name)."""
    ssn = open_session(cluster, [])
    from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin

    NetworkTopologyAwarePlugin(Arguments("network-topology-aware", {})).on_session_open(ssn)
    assert ssn.topology is not None
    assert job.podgroup is not None
    tree = cluster.hypernodes
    rule = constraint(job.podgroup.spec.network_topology, tree)
    assert rule is not None
    request = job.total_request()
    by_tier: dict[int, list[str]] = {}
    for name in search_space(tree, rule, None):
        by_tier.setdefault(tree.islands[name].tier, []).append(name)
    for tier in sorted(by_tier):
        successes = []
        for name in by_tier[tier]:
            free = [cluster.nodes[n].idle.get("cpu") // 4000 for n in tree.islands[name].nodes]
            if sum(free) >= len(job.tasks):
                res = island_resources(cluster.nodes, tree.islands[name].nodes)
                successes.append((-ssn.topology.scorer.score(request, res), name))
        if successes:
            return min(successes)[1]
    return None


@settings(max_examples=60, deadline=None)
@given(
    busy=st.lists(st.integers(0, 2), min_size=8, max_size=8),
    pods=st.integers(1, 8),
    tier=st.integers(1, 2),
)
def test_first_success_in_score_order_is_volcanos_best_success(
    busy: Sequence[int], pods: int, tier: int
) -> None:
    """Trying HyperNodes in score order and stopping at the first that takes the gang picks
    the HyperNode Volcano picks by trying them all."""
    cluster, _ = topology_cluster()
    for i, count in enumerate(busy):
        if count:
            add_job(cluster, f"busy{i}", running=[f"n{i}"] * count, size="4")
    job = gang(cluster, "a", pods, highest_tier_allowed=tier)
    expected = _volcano_choice(cluster, job)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    if expected is None:
        assert placed == {}
    else:
        assert len(placed) == pods
        holders = set(build_tree_holders(cluster, placed.values()))
        assert expected in holders


def build_tree_holders(cluster: ClusterInfo, nodes: Any) -> list[str]:
    """The HyperNodes holding every one of ``nodes``."""
    nodes = list(nodes)
    common = cluster.hypernodes.lowest_common(nodes)
    return cluster.hypernodes.ancestors(common) if common else []


def test_gradient_puts_the_holding_hypernode_first() -> None:
    cluster, _ = topology_cluster()
    job = gang(cluster, "a", 1, highest_tier_allowed=2)
    ssn = open_session(cluster, [])
    from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin

    NetworkTopologyAwarePlugin(Arguments("network-topology-aware", {})).on_session_open(ssn)
    order = gradient(ssn, ["r0", "r1", "r2", "s0"], job.total_request(), "r2")
    assert [name for name, _ in order][:1] == ["r2"]
    assert order[-1] == ("s0", True)


def test_preempt_takes_victims_within_one_rack() -> None:
    """A hard-mode gang of two 8-cpu pods preempts in the one rack where both can fit: r0
    holds a pod that may not be preempted, so both victims come from r1, not one from each."""
    from scheduler.actions.preempt import PreemptAction
    from scheduler.conf import SchedulerConf
    from scheduler.framework.plugin import PluginOption
    from scheduler.framework.runner import Registry, run_session
    from scheduler.framework.session import Session
    from unit.sched_fixtures import REGISTRY

    cluster, where = topology_cluster(spines=1, racks=2, nodes=2)
    for i, node in enumerate(["n0", "n1", "n2", "n3"]):
        add_job(
            cluster,
            f"low{i}",
            running=[node],
            size="8",
            priority=1,
            task_priorities=[1],
            min_available=0,
        )
    blocker = next(iter(cluster.jobs["ns/low1"].tasks.values()))
    blocker.preemptable = False
    job = add_job(
        cluster,
        "high",
        pending=2,
        size="8",
        min_available=2,
        priority=100,
        phase="Inqueue",
        task_priorities=[100, 100],
    )
    with_topology(job, highest_tier_allowed=1)
    tiers = (
        ("priority", "gang", "conformance"),
        ("predicates", "nodeorder", "network-topology-aware"),
    )
    conf = SchedulerConf(
        actions=("enqueue", "allocate", "preempt"),
        tiers=tuple(tuple(PluginOption(p) for p in tier) for tier in tiers),
    )
    registry = Registry(
        plugins=REGISTRY.plugins, actions={**REGISTRY.actions, "preempt": PreemptAction}
    )
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, registry)
    evicted = {e.task.node_name for e in ssn.result.evictions}
    assert evicted == {"n2", "n3"}
    assert {t.node_name for t in job.tasks.values()} == {"n2", "n3"}
    assert {where[n][0] for n in evicted} == {"r1"}


@settings(max_examples=60, deadline=None)
@given(
    moves=st.lists(
        st.tuples(st.sampled_from(("allocate", "pipeline")), st.integers(0, 7), st.booleans()),
        max_size=12,
    ),
    asks=st.lists(st.integers(0, 3), min_size=1, max_size=4),
)
def test_hypernode_sums_kept_by_difference_match_a_fresh_sum(
    moves: Sequence[tuple[str, int, bool]], asks: Sequence[int]
) -> None:
    """After any allocations and pipelines (some discarded), a HyperNode's kept resources are
    the sum over its nodes, a spine's included (summed from its racks), and a tier's HyperNodes
    with room come highest score first, then name, whether the groups' scores were kept from
    before the moves or not."""
    from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin

    cluster, _ = topology_cluster()
    add_job(cluster, "busy", running=["n1", "n2"], size="3")
    job = add_job(cluster, "moving", pending=len(moves), size="2")
    ssn = open_session(cluster, [])
    NetworkTopologyAwarePlugin(Arguments("network-topology-aware", {})).on_session_open(ssn)
    state, tree = ssn.topology, cluster.hypernodes
    assert state is not None
    tasks = sorted(job.tasks.values(), key=lambda t: t.name)
    for step, ((how, node, keep), task) in enumerate(zip(moves, tasks, strict=False)):
        stmt = ssn.statement()
        getattr(stmt, how)(task, f"n{node}")
        stmt.commit() if keep else stmt.discard()
        if step % 2 == 0:  # ask between moves too, so the sums are kept, not rebuilt
            state.resources("s0")
            # and rank, so the groups and their scores are kept across moves
            assert_ranked(state, tree, ssn.nodes, asks)
        for name, island in tree.islands.items():
            assert state.resources(name) == island_resources(ssn.nodes, island.nodes)
    assert_ranked(state, tree, ssn.nodes, asks)


def assert_ranked(
    state: HyperNodeState, tree: HyperNodeTree, nodes: Mapping[str, NodeInfo], asks: Sequence[int]
) -> None:
    """``in_tier`` gives, for each asked request, what a fresh sum of every HyperNode ranks."""
    for cpus in asks:
        request = cpu(str(cpus + 1)) if cpus else cpu("9")
        for tier in tree.tiers:
            expected = sorted(
                (-state.scorer.score(request, res), name)
                for name, island in tree.islands.items()
                if island.tier == tier
                and (
                    (res := island_resources(nodes, island.nodes)).idle.get("cpu")
                    >= request.get("cpu")
                    or res.future_idle.get("cpu") >= request.get("cpu")
                )
            )
            assert list(state.in_tier(tier, request)) == [name for _, name in expected]
