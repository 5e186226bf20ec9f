"""The sharding controller's pure core: Volcano's sharding configuration parsed and bounded
(controllers.sharding.config) and the assignment of nodes to shards
(controllers.sharding.assign): disjoint, within minNodes/maxNodes, deterministic and stable."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import (
    Container,
    Node,
    NodeStatus,
    Pod,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)
from caldera.api.meta import ObjectMeta
from controllers.sharding.assign import NodeFacts, assign, eligible, node_facts
from controllers.sharding.config import (
    AllocationRate,
    NodeLimit,
    ShardingConfigError,
    ShardSpec,
    Warmup,
    parse_config,
    parse_config_text,
)

VOLCANO_EXAMPLE = """
schedulerConfigs:
  - name: volcano
    type: volcano
    policies:
      - name: allocation-rate
        weight: 1
        arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.6}
      - name: warmup
        weight: 2
        arguments: {warmupLabel: "node.volcano.sh/warmup", warmupLabelValue: "true"}
      - name: node-limit
        arguments: {minNodes: 2, maxNodes: 100}
  - name: agent-scheduler
    type: agent
    policies:
      - name: allocation-rate
        weight: 1
        arguments: {minCPUUtil: 0.7, maxCPUUtil: 1.0}
      - name: warmup
        weight: 5
      - name: node-limit
        arguments: {minNodes: 2, maxNodes: 50}
shardSyncPeriod: "30s"
enableNodeEventTrigger: false
"""


def test_volcano_example_parses() -> None:
    """The user guide's ConfigMap reads as Volcano describes it."""
    config = parse_config_text(VOLCANO_EXAMPLE)
    assert [s.name for s in config.shards] == ["volcano", "agent-scheduler"]
    assert config.shards[0].policies == (
        AllocationRate(0.0, 0.6, 1),
        Warmup("node.volcano.sh/warmup", "true", 2),
        NodeLimit(2, 100),
    )
    assert config.shards[1].max_nodes == 50
    assert config.shards[1].min_nodes == 2
    assert (config.sync_period, config.node_event_trigger) == (30.0, False)


def test_legacy_entry_makes_policies() -> None:
    """Volcano's older fields become allocation-rate, warmup and node-limit policies."""
    config = parse_config(
        {
            "schedulerConfigs": [
                {
                    "name": "a",
                    "type": "agent",
                    "cpuUtilizationMin": 0.7,
                    "cpuUtilizationMax": 1.0,
                    "preferWarmupNodes": True,
                    "minNodes": 1,
                    "maxNodes": 10,
                },
                {"name": "b", "maxNodes": 5},
            ]
        }
    )
    assert config.shards[0].policies == (AllocationRate(0.7, 1.0), Warmup(), NodeLimit(1, 10))
    # No bound named: no upper bound (Volcano reads an absent maximum as 0).
    assert config.shards[1].policies == (AllocationRate(0.0, 1.0), NodeLimit(0, 5))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({}, "schedulerConfigs: sharding config must contain at least one"),
        ({"schedulerConfigs": [{"type": "x"}]}, "schedulerConfigs[0].name: must not be empty"),
        ({"schedulerConfigs": [{"name": "A_b"}]}, "is not a valid NodeShard name"),
        ({"schedulerConfigs": [{"name": "a"}, {"name": "a"}]}, "schedulerConfigs[1].name"),
        (
            {"schedulerConfigs": [{"name": "a", "minNodes": 5, "maxNodes": 2}]},
            "maxNodes (2) must be >= minNodes (5)",
        ),
        ({"schedulerConfigs": [{"name": "a", "minNodes": -1}]}, "minNodes: must be an integer"),
        (
            {"schedulerConfigs": [{"name": "a", "maxNodes": 10**9}]},
            "maxNodes: must be at most 20000",
        ),
        (
            {"schedulerConfigs": [{"name": "a", "cpuUtilizationMax": 1.5}]},
            "cpuUtilizationMax: must be a number in [0, 1]",
        ),
        (
            {"schedulerConfigs": [{"name": "a", "policies": [{"name": "spread"}]}]},
            "policies[0].name: unknown policy 'spread'",
        ),
        (
            {"schedulerConfigs": [{"name": "a", "policies": [{"name": "warmup", "weight": -1}]}]},
            "weight: must be >= 0",
        ),
        (
            {
                "schedulerConfigs": [
                    {"name": "a", "policies": [{"name": "warmup", "arguments": {"maxNodes": 3}}]}
                ]
            },
            "maxNodes is only supported by the node-limit policy",
        ),
        (
            {
                "schedulerConfigs": [
                    {
                        "name": "a",
                        "policies": [{"name": "allocation-rate", "arguments": {"minCpuUtil": 0.1}}],
                    }
                ]
            },
            "unknown argument 'minCpuUtil'",
        ),
        (
            {
                "schedulerConfigs": [
                    {
                        "name": "a",
                        "policies": [
                            {
                                "name": "allocation-rate",
                                "arguments": {"minCPUUtil": 0.8, "maxCPUUtil": 0.2},
                            }
                        ],
                    }
                ]
            },
            "min must be <= max",
        ),
        ({"schedulerConfigs": [{"name": "a"}], "shardSyncPeriod": "10ms"}, "at least 1s"),
        ({"schedulerConfigs": [{"name": "a"}], "shardSyncPeriod": "soon"}, "not a Go duration"),
        ({"schedulerConfigs": [{"name": f"s{i}"} for i in range(65)]}, "at most 64 items"),
    ],
)
def test_bad_configuration_names_the_field(doc: dict[str, Any], message: str) -> None:
    """Every malformed or unbounded configuration is refused with a message naming the field."""
    with pytest.raises(ShardingConfigError) as err:
        parse_config(doc)
    assert message in str(err.value)


def _node(name: str, util: float = 0.0, **labels: str) -> NodeFacts:
    return NodeFacts(name, util, labels)


def test_volcano_pipeline_filter_score_limit() -> None:
    """Filter by utilization range, best score first (busy, then warmup), cut at maxNodes; an
    earlier shard picks first and shards never share a node."""
    nodes = [
        _node("n1", 0.1),
        _node("n2", 0.5),
        _node("n3", 0.8),
        _node("n4", 0.0, **{"node.volcano.sh/warmup": "true"}),
        _node("n5", 0.95),
    ]
    shards = parse_config_text(VOLCANO_EXAMPLE).shards
    got = assign(shards, nodes, {})
    assert got == {"volcano": ("n1", "n2", "n4"), "agent-scheduler": ("n3", "n5")}
    one = (ShardSpec("a", policies=(AllocationRate(0.0, 0.6), NodeLimit(0, 1))),)
    assert assign(one, nodes, {}) == {"a": ("n2",)}  # the busiest within range


def test_min_nodes_taken_from_a_shard_above_its_minimum() -> None:
    """A shard below minNodes takes nodes of a shard above its own minimum (never below it)."""
    shards = (ShardSpec("a"), ShardSpec("b", policies=(NodeLimit(2, 0),)))
    nodes = [_node(f"n{i}") for i in range(3)]
    got = assign(shards, nodes, {})
    assert (len(got["a"]), len(got["b"])) == (1, 2)
    tight = (
        ShardSpec("a", policies=(NodeLimit(2, 0),)),
        ShardSpec("b", policies=(NodeLimit(2, 0),)),
    )
    got = assign(tight, nodes, {})
    assert sorted(map(len, got.values())) == [1, 2]


def test_member_stays_within_margin() -> None:
    """A node a shard holds stays while its utilization is just past the range (no flapping);
    a new node just past it is not taken."""
    shard = (ShardSpec("a", policies=(AllocationRate(0.0, 0.6),)),)
    nodes = [_node("held", 0.63), _node("new", 0.63), _node("far", 0.7)]
    assert assign(shard, nodes, {"a": ["held", "far"]}) == {"a": ("held",)}


def test_removed_shard_frees_its_nodes_for_the_others() -> None:
    """Without its entry, a shard's nodes go to the shards that have room."""
    a, b = ShardSpec("a", policies=(NodeLimit(0, 2),)), ShardSpec("b", policies=(NodeLimit(0, 2),))
    nodes = [_node(f"n{i}") for i in range(4)]
    before = assign((a, b), nodes, {})
    assert before == {"a": ("n0", "n1"), "b": ("n2", "n3")}
    wider = ShardSpec("a", policies=(NodeLimit(0, 4),))
    assert assign((wider,), nodes, before) == {"a": ("n0", "n1", "n2", "n3")}


def test_node_facts_from_pods() -> None:
    """Utilization is what active pods request over the node's CPU capacity, at most 1."""

    def pod(cpu: str, phase: str = "Running") -> Pod:
        c = Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu}))
        return Pod(spec=PodSpec(containers=(c,)), status=PodStatus(phase=phase))

    node = Node(
        metadata=ObjectMeta(name="n", labels={"x": "y"}), status=NodeStatus(capacity={"cpu": "4"})
    )
    facts = node_facts(node, [pod("1"), pod("500m"), pod("3", "Succeeded")])
    assert facts == NodeFacts("n", 0.375, {"x": "y"})
    assert node_facts(node, [pod("8")]).cpu_utilization == 1.0
    assert node_facts(Node(metadata=ObjectMeta(name="m")), [pod("1")]).cpu_utilization == 0.0


# ---- properties --------------------------------------------------------------------------------

_policies = st.lists(
    st.one_of(
        st.tuples(st.floats(0, 1), st.floats(0, 1)).map(
            lambda t: AllocationRate(min(t), max(t), 1)
        ),
        st.builds(Warmup, label=st.just("w"), value=st.just("true"), weight=st.integers(0, 3)),
        st.tuples(st.integers(0, 6), st.integers(0, 8)).map(
            lambda t: NodeLimit(t[0], 0 if t[1] == 0 else max(t))
        ),
    ),
    max_size=3,
)
_shards = st.lists(_policies, min_size=1, max_size=4).map(
    lambda ps: tuple(ShardSpec(f"s{i}", policies=tuple(p)) for i, p in enumerate(ps))
)
_nodes = st.lists(st.tuples(st.floats(0, 1), st.booleans()), max_size=25).map(
    lambda xs: [
        NodeFacts(f"n{i:02d}", u, {"w": "true"} if warm else {}) for i, (u, warm) in enumerate(xs)
    ]
)


def _random_current(
    data: st.DataObject, shards: tuple[ShardSpec, ...], nodes: list[NodeFacts]
) -> dict[str, list[str]]:
    names = [n.name for n in nodes] + ["gone"]
    return {s.name: data.draw(st.lists(st.sampled_from(names), unique=True)) for s in shards}


@settings(max_examples=150, deadline=None)
@given(shards=_shards, nodes=_nodes, data=st.data())
def test_assignment_invariants(
    shards: tuple[ShardSpec, ...], nodes: list[NodeFacts], data: st.DataObject
) -> None:
    """Whatever the shards hold now (overlapping, unknown nodes): the result is disjoint, holds
    only existing nodes, respects maxNodes, every node passes its shard's filters at least
    within the margin, a shard is below minNodes only when no node could be had, and the result
    is deterministic and a fixed point (given back, it comes back unchanged)."""
    current = _random_current(data, shards, nodes)
    got = assign(shards, nodes, current)
    assert assign(shards, nodes, current) == got
    seen: list[str] = [n for held in got.values() for n in held]
    assert len(seen) == len(set(seen))
    assert set(seen) <= {n.name for n in nodes}
    for shard in shards:
        cap = shard.max_nodes
        assert cap is None or len(got[shard.name]) <= cap
    free = {n.name for n in nodes} - set(seen)
    for shard in shards:
        if len(got[shard.name]) < shard.min_nodes:
            facts = {n.name: n for n in nodes}
            assert not [n for n in free if eligible(shard, facts[n], member=False)]
    again = assign(shards, nodes, {k: list(v) for k, v in got.items()})
    assert again == got


@settings(max_examples=100, deadline=None)
@given(shards=_shards, nodes=_nodes, data=st.data())
def test_no_flapping_on_a_small_utilization_change(
    shards: tuple[ShardSpec, ...], nodes: list[NodeFacts], data: st.DataObject
) -> None:
    """A node whose utilization moves by less than the margin stays where it is, unless a
    shard below its minNodes can now take it (minimums come first: docs/sharding.md)."""
    got = assign(shards, nodes, {})
    if not nodes:
        return
    i = data.draw(st.integers(0, len(nodes) - 1))
    delta = data.draw(st.floats(-0.04, 0.04))
    moved = list(nodes)
    n = moved[i]
    moved[i] = NodeFacts(n.name, min(1.0, max(0.0, n.cpu_utilization + delta)), n.labels)
    after = assign(shards, moved, got)
    short = {s.name for s in shards if len(got[s.name]) < s.min_nodes}
    for name, held in got.items():
        if n.name in held and n.name not in after[name]:
            assert any(n.name in after[other] for other in short), (name, after)
