"""resource-strategy-fit: MostAllocated / LeastAllocated per resource with weights and suffix
wildcards, a pod's own strategy by annotation, sra keeping pods off scarce-resource nodes, and
the proportional predicate; Volcano's formulas and its design document's worked example."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.plugins.resource_strategy_fit import (
    LEAST,
    MOST,
    SCORING_TYPE_KEY,
    WEIGHT_KEY,
    Proportional,
    ResourceStrategyFitPlugin,
    Sra,
    Strategies,
    strategy_score,
)
from unit.sched_fixtures import add_job, make_cluster, make_node, make_task
from unit.test_sched_nodegroup import placed, run

T4, A10 = "nvidia.com/t4", "nvidia.com/a10"


def plugin(**arguments: Any) -> ResourceStrategyFitPlugin:
    return ResourceStrategyFitPlugin(Arguments("resource-strategy-fit", arguments))


def used(node: NodeInfo, requests: dict[str, str]) -> NodeInfo:
    node.add_task(make_task("busy", len(node.tasks), requests, node=node.name))
    return node


def annotated(task: TaskInfo, notes: dict[str, str]) -> TaskInfo:
    assert task.pod is not None
    meta = msgspec.structs.replace(task.pod.metadata, annotations=notes)
    task.pod = msgspec.structs.replace(task.pod, metadata=meta)
    return task


# ---- resources ---------------------------------------------------------------------------------


def test_default_is_least_allocated_cpu_and_memory_weight_ten() -> None:
    """Without arguments: cpu and memory LeastAllocated, weight 1 each, plugin weight 10. A
    1-cpu/1Gi pod on an empty 4-cpu/8Gi node: ((3/4) + (7/8)) / 2 * 100 * 10."""
    task = make_task("j", 0, {"cpu": "1", "memory": "1Gi"})
    assert plugin().score(task, make_node("n")) == pytest.approx((0.75 + 0.875) / 2 * 1000)


def test_most_allocated_gathers_and_least_allocated_spreads() -> None:
    """MostAllocated scores the fuller node higher; LeastAllocated the emptier; a node where a
    configured resource does not fit scores 0."""
    gather = plugin(resources={"cpu": {"type": MOST, "weight": 1}})
    spread = plugin(resources={"cpu": {"type": LEAST, "weight": 1}})
    task = make_task("j", 0, {"cpu": "1"})
    empty, busy = make_node("empty"), used(make_node("busy"), {"cpu": "2"})
    assert gather.score(task, busy) > gather.score(task, empty)
    assert spread.score(task, busy) < spread.score(task, empty)
    full = used(make_node("full"), {"cpu": "4"})
    assert gather.score(task, full) == spread.score(task, full) == 0.0


def test_exact_names_win_over_wildcards_and_longer_prefixes_over_shorter() -> None:
    """An exact name first, then the longest ``prefix*`` that matches."""
    strategies = Strategies.parse(
        {
            "nvidia.com/*": {"type": MOST, "weight": 2},
            "nvidia.*": {"type": LEAST, "weight": 3},
            "nvidia.com/gpu": {"type": LEAST, "weight": 5},
        }
    )
    assert strategies.of("nvidia.com/gpu") == (LEAST, 5)
    assert strategies.of("nvidia.com/a100") == (MOST, 2)
    assert strategies.of("nvidia.io/x") == (LEAST, 3)
    assert strategies.of("amd.com/gpu") is None


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"resources": {"*": {"type": MOST}}}, "argument resources.*"),
        ({"resources": {"a*b": {"type": MOST}}}, "argument resources.a\\*b"),
        ({"resources": {"cpu": {"type": "MostAlocated"}}}, "argument resources.cpu.type"),
        ({"resources": {"cpu": {"weight": "2"}}}, "argument resources.cpu.weight"),
        ({"resources": ["cpu"]}, "argument resources"),
        ({"resourceStrategyFitWeight": 1.5}, "argument resourceStrategyFitWeight"),
        ({"sra": {"enable": True, "weight": "x"}}, "argument sra.weight"),
        ({"sra": {"enable": True, "resources": 3}}, "argument sra.resources"),
        (
            {
                "proportional": {
                    "enable": True,
                    "resources": T4,
                    "resourceProportion": {f"{T4}.cpu": "4"},
                }
            },
            f"argument proportional.resourceProportion.{T4}.cpu",
        ),
    ],
)
def test_bad_arguments_are_named(arguments: dict[str, Any], named: str) -> None:
    """A bad argument stops the start, naming the argument."""
    with pytest.raises(ValueError, match=f"resource-strategy-fit: {named}"):
        plugin(**arguments)


def test_volcano_value_rules() -> None:
    """As in Volcano: a weight of 0 or less counts 1, a negative plugin weight is 10."""
    assert Strategies.parse({"cpu": {"type": MOST, "weight": 0}}).of("cpu") == (MOST, 1)
    assert plugin(resourceStrategyFitWeight=-3).weight == 10


@given(
    st.integers(0, 16_000),
    st.integers(1, 16_000),
    st.integers(0, 16_000),
    st.sampled_from([MOST, LEAST]),
    st.integers(1, 100),
)
def test_scores_stay_between_zero_and_the_maximum(
    used_cpu: int, capacity: int, request: int, kind: str, weight: int
) -> None:
    """Whatever the node's state, a score is within [0, 100 * plugin weight]."""
    node = make_node("n", f"{capacity}m")
    if used_cpu:
        used(node, {"cpu": f"{used_cpu}m"})
    task = make_task("j", 0, {"cpu": f"{request}m"} if request else {"cpu": "1m"})
    strategies = Strategies.parse({"cpu": {"type": kind, "weight": weight}})
    assert 0.0 <= strategy_score(task, node, strategies, 7) <= 700.0 + 1e-9


def test_a_pods_own_strategy_replaces_the_configured_one() -> None:
    """The annotations choose the pod's type and weights (only the resources named count); a
    type without weights, or weights that are not JSON, score 0."""
    spread = plugin(resources={"cpu": {"type": LEAST, "weight": 1}})
    node = used(make_node("n"), {"cpu": "2"})
    gathering = annotated(
        make_task("j", 0, {"cpu": "1"}),
        {SCORING_TYPE_KEY: MOST, WEIGHT_KEY: json.dumps({"cpu": 1})},
    )
    assert spread.score(gathering, node) == pytest.approx(3 / 4 * 1000)
    assert spread.score(make_task("j", 1, {"cpu": "1"}), node) == pytest.approx(1 / 4 * 1000)
    broken = annotated(make_task("j", 2, {"cpu": "1"}), {SCORING_TYPE_KEY: MOST})
    assert spread.score(broken, node) == 0.0
    bad_json = annotated(
        make_task("j", 3, {"cpu": "1"}), {SCORING_TYPE_KEY: MOST, WEIGHT_KEY: "{cpu"}
    )
    assert spread.score(bad_json, node) == 0.0


# ---- sra ---------------------------------------------------------------------------------------


def test_sra_matches_the_design_documents_example() -> None:
    """Volcano's design document: t4 and a10 of weight 1 each, sra.weight 2; node1 has no
    GPU, node2 t4, node3 both."""
    sra = Sra.parse(
        {
            "enable": True,
            "resources": f"{T4}, {A10}",
            "weight": 2,
            "resourceWeight": {T4: 1, A10: 1},
        }
    )
    assert sra is not None
    node1 = make_node("node1", "32", "64Gi")
    node2 = make_node("node2", "16", "32Gi", extra={T4: "10"})
    node3 = make_node("node3", "16", "32Gi", extra={T4: "5", A10: "10"})
    cpu_task = make_task("cpu-task", 0, {"cpu": "2", "memory": "4Gi"})
    gpu_task = make_task("gpu-task", 0, {"cpu": "2", "memory": "4Gi", T4: "2"})
    both = make_task("gpu-task", 1, {"cpu": "2", "memory": "4Gi", T4: "1", A10: "2"})
    assert [sra.score(cpu_task, n) for n in (node1, node2, node3)] == [200.0, 100.0, 0.0]
    assert [sra.score(gpu_task, n) for n in (node1, node2, node3)] == [0.0, 100.0, 0.0]
    assert [sra.score(both, n) for n in (node1, node2, node3)] == [0.0, 0.0, 0.0]


def test_sra_without_weight_scores_nothing_as_in_volcano() -> None:
    """sra enabled without a weight: Volcano's zero, so no sra score and no node order."""
    sra = Sra.parse({"enable": True, "resources": T4})
    assert sra is not None
    assert sra.weight == 0
    assert Sra.parse({"enable": False, "resources": T4}) is None


def test_cpu_pods_stay_off_gpu_nodes_in_a_session() -> None:
    """With sra, CPU-only pods go to the CPU node while it has room, though the GPU node is
    emptier; without it, LeastAllocated spreads them onto the GPU node too."""
    conf = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion},
            {name: resource-strategy-fit, arguments: {%s}}]
"""
    sra = f"sra: {{enable: true, resources: '{T4}', weight: 10}}"
    for arguments, gpu_node_pods in (("", 2), (sra, 0)):
        cluster = make_cluster(
            [make_node("cpu", "4", "8Gi"), make_node("gpu", "8", "16Gi", extra={T4: "4"})], ()
        )
        add_job(cluster, "j", pending=4, phase="Inqueue")
        where = placed(run(cluster, conf % arguments))
        assert len(where) == 4
        assert list(where.values()).count("gpu") >= gpu_node_pods
        if gpu_node_pods == 0:
            assert set(where.values()) == {"cpu"}


# ---- proportional ------------------------------------------------------------------------------


def test_proportional_keeps_cpu_and_memory_for_each_idle_gpu() -> None:
    """4 cpu and 8 GB per idle t4: a 2-t4 node of 16 cpu keeps 8 cpu; a CPU pod may take 8,
    not 9; a pod requesting t4 is not held to it."""
    rule = Proportional.parse(
        {"enable": True, "resources": T4, "resourceProportion": {f"{T4}.cpu": 4, f"{T4}.memory": 8}}
    )
    assert rule is not None
    node = make_node("n", "16", "64Gi", extra={T4: "2"})
    assert rule.check(make_task("j", 0, {"cpu": "8", "memory": "1Gi"}), node) is None
    assert rule.check(make_task("j", 1, {"cpu": "9", "memory": "1Gi"}), node) == (
        f"proportional of resource {T4} check failed"
    )
    assert rule.check(make_task("j", 2, {"cpu": "9", T4: "1"}), node) is None
    assert rule.check(make_task("j", 3, {"cpu": "9"}), make_node("plain", "16")) is None


def test_reused_verdicts_tell_pods_with_their_own_strategy_apart() -> None:
    """Pods alike but for the strategy annotations are different classes to the placer: the
    decisions equal those of the session with every speed-up withheld, and the annotated pods
    gather where the others spread."""
    conf = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: resource-strategy-fit}]
"""

    def build() -> Any:
        nodes = [make_node(f"n{i}", "8", "16Gi") for i in range(4)]
        used(nodes[0], {"cpu": "5"})
        cluster = make_cluster(nodes, ())
        job = add_job(cluster, "j", pending=6, phase="Inqueue")
        for i, task in enumerate(sorted(job.tasks.values(), key=lambda t: t.name)):
            if i % 2:
                notes = {SCORING_TYPE_KEY: MOST, WEIGHT_KEY: json.dumps({"cpu": 1})}
                annotated(task, notes)
        return cluster

    fast, plain = placed(run(build(), conf)), placed(run(build(), conf, speedups=False))
    assert fast == plain
    assert len(fast) == 6
    assert {fast[f"j-{i}"] for i in (1, 3, 5)} == {"n0"}
