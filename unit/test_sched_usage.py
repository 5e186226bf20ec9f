"""usage: nodes over the load thresholds refused, less loaded nodes preferred, pods the metrics
cannot see yet estimated on top (Volcano's formulas), and stale or missing load ignored."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import PodStatus
from caldera.api.meta import format_time
from scheduler.api.types import ClusterInfo, NodeInfo, NodeUsage, TaskInfo, TaskStatus
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import EventFn, NodeOrderFn, PredicateFn, Session
from scheduler.plugins.usage import (
    CPU_OVER,
    MEMORY_OVER,
    MIB,
    Estimator,
    UsagePlugin,
    composite,
    estimate,
    node_score,
)
from scheduler.registry import REGISTRY
from unit.sched_fixtures import T0, add_job, make_cluster, make_node, make_task
from unit.test_sched_nodegroup import placed, run


@dataclass
class FakeSession:
    """What the plugin reads of a session and the callbacks it registers."""

    cluster: ClusterInfo
    now: dt.datetime = T0
    predicates: list[PredicateFn] = field(default_factory=list)
    scores: list[NodeOrderFn] = field(default_factory=list)

    def add_predicate_fn(self, plugin: str, fn: PredicateFn) -> None:
        self.predicates.append(fn)

    def add_node_order_fn(self, plugin: str, fn: NodeOrderFn) -> None:
        self.scores.append(fn)

    def add_speedups(self, plugin: str, speedups: Speedups) -> None:
        self.speedups = speedups

    def add_allocate_handler(
        self, plugin: str, on_allocate: EventFn, on_deallocate: EventFn
    ) -> None:
        self.handlers = (on_allocate, on_deallocate)

    @property
    def nodes(self) -> dict[str, NodeInfo]:
        return self.cluster.nodes


def plugin(**arguments: Any) -> UsagePlugin:
    return UsagePlugin(Arguments("usage", arguments))


def opened(
    usage: dict[str, NodeUsage],
    *,
    now: dt.datetime = T0,
    nodes: Sequence[NodeInfo] = (),
    **arguments: Any,
) -> FakeSession:
    cluster = ClusterInfo(now=now, node_usage=usage, nodes={n.name: n for n in nodes})
    ssn = FakeSession(cluster, now)
    plugin(**arguments).on_session_open(cast(Session, ssn))
    assert len(ssn.predicates) == len(ssn.scores) == 1
    return ssn


def load(cpu: float, memory: float, age: float = 0.0) -> NodeUsage:
    return NodeUsage(cpu, memory, T0 - dt.timedelta(seconds=age))


def started(task: TaskInfo, seconds_ago: float) -> TaskInfo:
    assert task.pod is not None
    status = PodStatus(start_time=format_time(T0 - dt.timedelta(seconds=seconds_ago)))
    task.pod = msgspec.structs.replace(task.pod, status=status)
    return task


POD = make_task("j", 0)


# ---- arguments ---------------------------------------------------------------------------------


def test_defaults_are_volcanos() -> None:
    p = plugin()
    assert (p.usage_weight, p.cpu_weight, p.memory_weight) == (5, 1, 1)
    assert (p.cpu_threshold, p.memory_threshold) == (80, 80)
    assert p.estimator == Estimator(0.7, 0.0, 0.6, 1.2, 250.0, 200.0 * MIB)


def test_out_of_range_values_keep_the_default_as_in_volcano() -> None:
    p = plugin(
        **{"usage.weight": -1, "cpu.weight": -2, "memory.weight": 3},
        thresholds={"cpu": 101, "mem": 50},
        estimator={"request_ratio": 2, "burst_ratio": 0.5, "risk_factor": 0.5, "be_cpu": -1},
    )
    assert (p.usage_weight, p.cpu_weight, p.memory_weight) == (5, 1, 3)
    assert (p.cpu_threshold, p.memory_threshold) == (80, 50)
    assert (p.estimator.request_ratio, p.estimator.burst_ratio) == (0.7, 0.5)
    assert (p.estimator.risk_factor, p.estimator.be_cpu) == (1.2, 250.0)


def test_best_effort_estimates_read_quantities_and_whole_numbers() -> None:
    """be_cpu in milli-cpu, be_mem in bytes; a whole be_mem is MiB, as Volcano reads it."""
    est = plugin(estimator={"be_cpu": "500m", "be_mem": "1Gi"}).estimator
    assert (est.be_cpu, est.be_memory) == (500.0, 1024.0 * MIB)
    est = plugin(estimator={"be_cpu": 300, "be_mem": 100}).estimator
    assert (est.be_cpu, est.be_memory) == (300.0, 100.0 * MIB)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        pytest.param({"usage.weight": "heavy"}, "usage.weight", id="weight"),
        pytest.param({"thresholds": [80]}, "thresholds", id="thresholds-shape"),
        pytest.param({"thresholds": {"cpu": "high"}}, "cpu", id="threshold"),
        pytest.param({"estimator": {"be_mem": "lots"}}, "be_mem", id="be_mem"),
        pytest.param({"estimator": {"risk_factor": True}}, "risk_factor", id="risk"),
    ],
)
def test_bad_arguments_are_named(arguments: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        plugin(**arguments)


def test_the_configuration_accepts_usage_and_refuses_bad_arguments_at_load() -> None:
    text = """\
actions: "enqueue, allocate"
tiers:
- plugins: [{name: usage, arguments: {%s}}]
"""
    parsed = parse_conf(
        text % "'usage.weight': 3", actions=REGISTRY.actions, plugins=REGISTRY.plugins
    )
    assert parsed.tiers[0][0].name == "usage"
    with pytest.raises(ConfError, match=r"usage\.weight"):
        parse_conf(text % "'usage.weight': x", actions=REGISTRY.actions, plugins=REGISTRY.plugins)


# ---- predicate ---------------------------------------------------------------------------------


def test_nodes_over_a_threshold_are_refused() -> None:
    ssn = opened({"cpu": load(81, 10), "mem": load(10, 90), "edge": load(80, 80)})
    (predicate,) = ssn.predicates
    assert predicate(POD, make_node("cpu")) == CPU_OVER
    assert predicate(POD, make_node("mem")) == MEMORY_OVER
    assert predicate(POD, make_node("edge")) is None  # above, not at, the threshold


def test_configured_thresholds_apply() -> None:
    (predicate,) = opened({"n": load(50, 10)}, thresholds={"cpu": 40}).predicates
    assert predicate(POD, make_node("n")) == CPU_OVER


def test_stale_or_missing_load_is_ignored() -> None:
    """Load measured more than five minutes ago, or never, neither refuses nor scores."""
    ssn = opened({"old": load(99, 99, age=301), "recent": load(99, 99, age=299)})
    (predicate,), (score,) = ssn.predicates, ssn.scores
    for name in ("old", "unknown"):
        assert predicate(POD, make_node(name)) is None
        assert score(POD, make_node(name)) == 0.0
    assert predicate(POD, make_node("recent")) == CPU_OVER


# ---- score -------------------------------------------------------------------------------------


def test_score_is_volcanos_formula() -> None:
    """cpu 20%, memory 40%, nothing unseen: ((1-0.2) + (1-0.4)) / 2 * 100 * 5."""
    (score,) = opened({"n": load(20, 40)}).scores
    assert score(POD, make_node("n")) == pytest.approx(350.0)
    weights: dict[str, Any] = {"cpu.weight": 3, "usage.weight": 1}
    (score,) = opened({"n": load(20, 40)}, **weights).scores
    assert score(POD, make_node("n")) == pytest.approx((0.8 * 3 + 0.6) / 4 * 100)


def test_less_loaded_nodes_score_higher() -> None:
    (score,) = opened({"busy": load(70, 50), "idle": load(10, 50)}).scores
    assert score(POD, make_node("idle")) > score(POD, make_node("busy"))


def test_pods_the_metrics_cannot_see_yet_count_as_estimated() -> None:
    """On a 4-cpu/8Gi node at 20% cpu and 0% memory: an allocated 1-cpu/1Gi pod adds 0.7 cpu
    and 0.7Gi; a pod running for 10s (inside the 30s metrics interval) too; one running for a
    minute is in the measured load already."""
    usage = {"n": load(20, 0)}
    expected = node_score(0.2 + 0.7 / 4, 0.7 / 8, 1, 1, 5)
    for task in (
        make_task("o", 0, status=TaskStatus.ALLOCATED, node="n"),
        started(make_task("o", 0, status=TaskStatus.RUNNING, node="n"), 10),
    ):
        node = make_node("n")
        node.add_task(task)
        (score,) = opened(usage).scores
        assert score(POD, node) == pytest.approx(expected)
    node = make_node("n")
    node.add_task(started(make_task("o", 0, status=TaskStatus.RUNNING, node="n"), 60))
    (score,) = opened(usage).scores
    assert score(POD, node) == pytest.approx(node_score(0.2, 0.0, 1, 1, 5))


def test_best_effort_pods_count_the_configured_estimate() -> None:
    node = make_node("n")
    node.add_task(make_task("o", 0, {}, status=TaskStatus.BOUND, node="n"))
    (score,) = opened({"n": load(0, 0)}).scores
    mem = 200 * MIB / (8 * 1024 * MIB)
    assert score(POD, node) == pytest.approx(node_score(250 / 4000, mem, 1, 1, 5))


def test_the_risk_factor_applies_once_the_node_is_loaded() -> None:
    """At 70% cpu and memory (above risk_threshold 0.6) an unseen pod counts 1.2 times."""
    node = make_node("n")
    node.add_task(make_task("o", 0, status=TaskStatus.ALLOCATED, node="n"))
    (score,) = opened({"n": load(70, 70)}).scores
    cpu, mem = 0.7 + 0.7 * 1.2 / 4, 0.7 + 0.7 * 1.2 / 8
    assert score(POD, node) == pytest.approx(node_score(cpu, mem, 1, 1, 5))


def test_allocations_in_the_session_are_added_and_taken_back() -> None:
    """The estimate follows the allocate events: a pod allocated after the first score lowers
    the next by its estimate; its deallocation restores the score exactly."""
    node = make_node("n")
    ssn = opened({"n": load(20, 20)}, nodes=[node])
    (score,) = ssn.scores
    allocate, deallocate = ssn.handlers
    before = score(POD, node)
    task = make_task("o", 0, status=TaskStatus.ALLOCATED, node="n")
    node.add_task(task)
    allocate(task)
    assert score(POD, node) == pytest.approx(node_score(0.2 + 0.7 / 4, 0.2 + 0.7 / 8, 1, 1, 5))
    assert score(POD, node) < before
    node.remove_task(task)
    deallocate(task)
    assert score(POD, node) == pytest.approx(before)


def test_an_allocation_on_a_node_not_yet_scored_is_counted_once() -> None:
    node = make_node("n")
    ssn = opened({"n": load(20, 20)}, nodes=[node])
    (score,) = ssn.scores
    task = make_task("o", 0, status=TaskStatus.ALLOCATED, node="n")
    node.add_task(task)
    ssn.handlers[0](task)
    assert score(POD, node) == pytest.approx(node_score(0.2 + 0.7 / 4, 0.2 + 0.7 / 8, 1, 1, 5))


def test_without_fresh_load_no_handler_is_registered() -> None:
    ssn = opened({"n": load(20, 20, age=600)})
    assert not hasattr(ssn, "handlers")


# ---- the pure core's invariants ----------------------------------------------------------------

fractions = st.floats(min_value=0, max_value=1)
amounts = st.floats(min_value=0, max_value=1e12)


@given(amounts, amounts, fractions, fractions, st.floats(min_value=1, max_value=10))
def test_an_estimate_stays_within_the_pods_limit(
    request: float, limit: float, ratio: float, burst: float, risk: float
) -> None:
    est = Estimator(request_ratio=ratio, burst_ratio=burst)
    value = estimate(request, limit, est, risk)
    assert 0 <= value <= max(request, limit)


@given(
    st.floats(min_value=0, max_value=100),
    st.floats(min_value=0, max_value=100),
    amounts,
    st.floats(min_value=1, max_value=1e12),
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=10),
    st.integers(min_value=0, max_value=10),
)
def test_scores_are_bounded_and_fall_as_the_load_rises(
    low: float, high: float, shadow: float, capacity: float, cw: int, mw: int, uw: int
) -> None:
    low, high = min(low, high), max(low, high)
    light = node_score(composite(low, 0, capacity), composite(low, 0, capacity), cw, mw, uw)
    heavy = node_score(
        composite(high, shadow, capacity), composite(high, shadow, capacity), cw, mw, uw
    )
    assert 0 <= heavy <= light + 1e-9 <= 100 * uw + 1e-9


# ---- sessions ----------------------------------------------------------------------------------

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}%s]
"""


def build(usage: dict[str, NodeUsage]) -> ClusterInfo:
    cluster = make_cluster([make_node(f"n{i}", "8", "16Gi") for i in range(3)], ())
    cluster.node_usage = usage
    add_job(cluster, "j", pending=4, phase="Inqueue")
    return cluster


def test_pods_avoid_the_loaded_nodes_in_a_session() -> None:
    """n0 is over the cpu threshold and n1 busier than n2: every pod goes to n2 while it has
    room; the decisions equal those with every speed-up withheld."""
    usage = {"n0": load(95, 10), "n1": load(60, 60), "n2": load(5, 5)}
    with_usage = CONF % ", {name: usage}"
    where = placed(run(build(usage), with_usage))
    assert len(where) == 4
    assert "n0" not in where.values()
    assert list(where.values()).count("n2") >= 3
    assert where == placed(run(build(usage), with_usage, speedups=False))


def test_without_load_the_plugin_changes_nothing() -> None:
    """No metrics (or only stale ones): the same placements as without the plugin."""
    stale = {name: load(99, 99, age=600) for name in ("n0", "n1", "n2")}
    plain = placed(run(build({}), CONF % ""))
    assert placed(run(build({}), CONF % ", {name: usage}")) == plain
    assert placed(run(build(stale), CONF % ", {name: usage}")) == plain


def test_enable_predicate_false_scores_without_refusing() -> None:
    """With the predicate switched off, a node over the threshold still takes pods once the
    others are full."""
    conf = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: usage%s}]
"""
    usage = {"n0": load(95, 10), "n1": load(5, 5), "n2": load(5, 5)}

    def busy() -> ClusterInfo:
        cluster = make_cluster([make_node(f"n{i}", "2", "16Gi") for i in range(3)], ())
        cluster.node_usage = usage
        add_job(cluster, "j", pending=6, phase="Inqueue")
        return cluster

    refused = placed(run(busy(), conf % ""))
    assert len(refused) == 4
    assert "n0" not in refused.values()
    scored = placed(run(busy(), conf % ", enablePredicate: false"))
    assert len(scored) == 6
    assert list(scored.values()).count("n0") == 2
