"""rescheduling and shuffle: lowNodeUtilization's node groups and victims, the plugin's
arguments and interval, the session's victim-tasks combination with pdb's screen, and the
shuffle action's bound."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus
from caldera.api.meta import LabelSelector, ObjectMeta
from scheduler.actions.shuffle import ShuffleAction
from scheduler.api.types import ClusterInfo, JobInfo, NodeUsage, TaskInfo
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.low_node_utilization import (
    LowNodeUtilization,
    choose_victims,
    group_nodes,
    qos_rank,
    utilization,
)
from scheduler.plugins.rescheduling import (
    LAST_RUN_KEY,
    ReschedulingPlugin,
    due,
    parse_duration,
)
from scheduler.registry import REGISTRY
from scheduler.snapshot import by_namespace
from unit.sched_fixtures import T0, add_job, cpu_cluster, make_task, run_conf

CPU_ONLY = LowNodeUtilization({"cpu": 20.0}, {"cpu": 50.0})


def busy_cluster() -> tuple[ClusterInfo, JobInfo, JobInfo]:
    """n0 at 90% cpu (9 one-cpu pods, the first three of priority 10), n1 at 10%, n2 at 40%."""
    cluster = cpu_cluster({"n0": "10", "n1": "10", "n2": "10"})
    hot = add_job(cluster, "hot", running=9, task_priorities=(10, 10, 10))
    cool = add_job(cluster, "cool", running=["n1", "n2", "n2", "n2", "n2"])
    return cluster, hot, cool


def running(cluster: ClusterInfo) -> list[TaskInfo]:
    return [t for job in cluster.jobs.values() for t in job.tasks.values() if t.node_name]


def test_utilization_and_groups() -> None:
    cluster, _, _ = busy_cluster()
    usages = {n: utilization(node) for n, node in cluster.nodes.items()}
    assert usages["n0"].percent == {"cpu": 90.0, "memory": 0.0}
    assert usages["n2"].percent["cpu"] == 40.0
    low, high = group_nodes(usages.values(), CPU_ONLY)
    assert [u.node.name for u in low] == ["n1"]
    assert [u.node.name for u in high] == ["n0"]  # n2: neither


def test_victims_lowest_priority_first_until_the_room_is_used() -> None:
    """The low node offers (50% - 10%) of 10 cpu = 4 cpu: four pods go, the cheapest first."""
    cluster, hot, _ = busy_cluster()
    victims = choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY)
    assert [t.name for t in victims] == ["hot-3", "hot-4", "hot-5", "hot-6"]
    assert all(t.job == hot.key for t in victims)


def test_victims_stop_once_the_node_is_below_its_target() -> None:
    """With two low nodes (room 4 + 5 cpu), n0 sheds down to 50%: 90 -> 50 is four pods, and at
    50% (at the target) it still sheds one more, as Volcano's >= does."""
    cluster = cpu_cluster({"n0": "10", "n1": "10", "n2": "10"})
    add_job(cluster, "hot", running=9)
    add_job(cluster, "cool", running=["n1"])
    victims = choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY)
    assert len(victims) == 5


@pytest.mark.parametrize(
    ("cpus", "placed"),
    [
        ({"n0": "10", "n1": "10"}, ["n0"] * 9 + ["n1"] * 3),  # no node low
        ({"n0": "10", "n1": "10"}, ["n0", "n1"]),  # every node low
        ({"n0": "10", "n1": "10"}, ["n0"] * 4 + ["n1"]),  # no node high
    ],
)
def test_nothing_moves_without_both_kinds_of_node(cpus: dict[str, str], placed: list[str]) -> None:
    cluster = cpu_cluster(cpus)
    add_job(cluster, "j", running=placed)
    assert choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY) == []


def test_protected_pods_are_passed_over() -> None:
    """Pods at or above the priority threshold, not preemptable, or not candidates stay."""
    cluster, hot, _ = busy_cluster()
    tasks = sorted(hot.tasks.values(), key=lambda t: t.name)
    tasks[3].preemptable = False
    conf = LowNodeUtilization({"cpu": 20.0}, {"cpu": 50.0}, threshold_priority=10)
    candidates = [t for t in running(cluster) if t.name != "hot-4"]
    victims = choose_victims(cluster.nodes.values(), candidates, conf)
    assert [t.name for t in victims] == ["hot-5", "hot-6", "hot-7", "hot-8"]


def test_unschedulable_node_is_not_low() -> None:
    cluster, _, _ = busy_cluster()
    cluster.nodes["n1"].unschedulable = True
    assert choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY) == []


def test_qos_classes() -> None:
    best = make_task("j", 0, {})
    burst = make_task("j", 1, {"cpu": "1"})
    assert best.pod is not None
    assert burst.pod is not None
    containers = burst.pod.spec.containers
    guaranteed_container = msgspec.structs.replace(
        containers[0],
        resources=msgspec.structs.replace(
            containers[0].resources, limits={"cpu": "1", "memory": "1Gi"}, requests={}
        ),
    )
    guaranteed = make_task("j", 2)
    guaranteed.pod = msgspec.structs.replace(
        burst.pod, spec=msgspec.structs.replace(burst.pod.spec, containers=(guaranteed_container,))
    )
    assert [qos_rank(t) for t in (best, burst, guaranteed)] == [0, 1, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=8), min_size=2, max_size=5),
    st.integers(min_value=0, max_value=100),
    st.integers(min_value=0, max_value=100),
)
def test_victims_are_running_candidates_of_high_nodes(
    loads: list[int], low: int, target: int
) -> None:
    """Each victim once, from a high node, among the candidates; the low nodes' cpu room is
    not overrun by more than the last pod taken."""
    cluster = cpu_cluster({f"n{i}": "8" for i in range(len(loads))})
    placed = [f"n{i}" for i, load in enumerate(loads) for _ in range(load)]
    if placed:
        add_job(cluster, "j", running=placed)
    conf = LowNodeUtilization({"cpu": float(low)}, {"cpu": float(target)})
    usages = [utilization(n) for n in cluster.nodes.values()]
    lows, highs = group_nodes(usages, conf)
    victims = choose_victims(cluster.nodes.values(), running(cluster), conf)
    assert len({t.uid for t in victims}) == len(victims)
    assert {t.node_name for t in victims} <= {u.node.name for u in highs}
    room = sum((target - u.percent["cpu"]) * 8 / 100 for u in lows)
    assert len(victims) <= max(room, 0) + 1


def test_durations_and_interval() -> None:
    assert parse_duration("5m") == dt.timedelta(minutes=5)
    assert parse_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_duration("1.5s") == dt.timedelta(seconds=1.5)
    for bad in ("", "5", "m", "5 m", "-5m", "5d"):
        assert parse_duration(bad) is None
    minute = dt.timedelta(minutes=1)
    assert not due(None, T0, minute)
    assert not due(T0, T0 + minute, minute)
    assert due(T0, T0 + minute + dt.timedelta(seconds=1), minute)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"interval": "soon"}, "interval"),
        ({"interval": "0s"}, "interval"),
        ({"strategies": [{"name": "highNodeUtilization"}]}, "highNodeUtilization"),
        ({"strategies": "lowNodeUtilization"}, "strategies"),
        (
            {"strategies": [{"name": "lowNodeUtilization", "params": {"threshold": {}}}]},
            "unknown parameter threshold",
        ),
        (
            {"strategies": [{"name": "lowNodeUtilization", "params": {"thresholds": {"gpu": 5}}}]},
            "thresholds.gpu",
        ),
        (
            {
                "strategies": [
                    {"name": "lowNodeUtilization", "params": {"targetThresholds": {"cpu": 120}}}
                ]
            },
            "targetThresholds.cpu",
        ),
    ],
)
def test_bad_arguments_are_named(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReschedulingPlugin(Arguments("rescheduling", arguments))


@pytest.mark.parametrize("value", [0, -1, 10_001, "5", True, 2.5])
def test_shuffle_bound_is_checked(value: object) -> None:
    with pytest.raises(ValueError, match="maxEvictions"):
        ShuffleAction({"maxEvictions": value})


CONF = """
actions: "shuffle"
tiers:
- plugins:
  - name: pdb
  - name: rescheduling
    arguments:
      interval: 1m
      strategies:
      - name: lowNodeUtilization
        params:
          thresholds: {cpu: 20}
          targetThresholds: {cpu: 50}
"""


def test_shuffle_evicts_what_rescheduling_proposes_once_the_interval_is_over() -> None:
    cluster, _, _ = busy_cluster()
    first = run_conf(cluster, CONF)
    assert first.result.evictions == []  # the first session starts the clock
    assert first.result.revisit_after == 61.0
    assert cluster.derived[LAST_RUN_KEY] == (None, T0)
    cluster.now = T0 + dt.timedelta(seconds=61)
    second = run_conf(cluster, CONF)
    evicted = [(e.task.name, e.reason) for e in second.result.evictions]
    assert evicted == [(f"hot-{i}", "shuffle") for i in (3, 4, 5, 6)]
    assert cluster.derived[LAST_RUN_KEY] == (None, cluster.now)
    third = run_conf(cluster, CONF)  # same clock: not again
    assert third.result.evictions == []


def test_shuffle_is_bounded_and_pdb_screens_its_victims() -> None:
    cluster, hot, _ = busy_cluster()
    for task in hot.tasks.values():
        assert task.pod is not None
        meta = msgspec.structs.replace(task.pod.metadata, labels={"app": "hot"})
        task.pod = msgspec.structs.replace(task.pod, metadata=meta)
    cluster.disruption_budgets = by_namespace(
        [
            PodDisruptionBudget(
                metadata=ObjectMeta(name="hot", namespace="ns", generation=1),
                spec=PodDisruptionBudgetSpec(selector=LabelSelector(match_labels={"app": "hot"})),
                status=PodDisruptionBudgetStatus(observed_generation=1, disruptions_allowed=3),
            )
        ]
    )
    cluster.derived[LAST_RUN_KEY] = (None, T0 - dt.timedelta(hours=1))
    ssn = run_conf(cluster, CONF)
    assert [e.task.name for e in ssn.result.evictions] == ["hot-3", "hot-4", "hot-5"]
    cluster, _, _ = busy_cluster()
    cluster.derived[LAST_RUN_KEY] = (None, T0 - dt.timedelta(hours=1))
    bounded = CONF.replace(
        'actions: "shuffle"',
        'actions: "shuffle"\nconfigurations:\n- name: shuffle\n  arguments: {maxEvictions: 2}',
    )
    assert [e.task.name for e in run_conf(cluster, bounded).result.evictions] == [
        "hot-3",
        "hot-4",
    ]


def test_victim_tasks_unite_the_first_proposing_tier_then_screen() -> None:
    cluster, hot, cool = busy_cluster()
    a, b, c = sorted(hot.tasks.values(), key=lambda t: t.name)[:3]
    ssn = Session(cluster, [[PluginOption("p"), PluginOption("q")], [PluginOption("r")]])
    assert not ssn.proposes_victim_tasks()
    ssn.add_victim_tasks_fn("p", lambda tasks: [a, b])
    ssn.add_victim_tasks_fn("q", lambda tasks: [b, c])
    ssn.add_victim_tasks_fn("r", lambda tasks: list(cool.tasks.values()))
    ssn.add_victim_tasks_screen("r", lambda tasks: [t for t in tasks if t is not b])
    assert ssn.proposes_victim_tasks()
    assert ssn.victim_tasks(running(cluster)) == [a, c]


def test_not_configured_costs_nothing() -> None:
    """Without shuffle, pdb registers no screen and rescheduling asks for no session; without
    rescheduling, shuffle lists nothing and evicts nothing."""
    cluster, _, _ = busy_cluster()
    cluster.derived[LAST_RUN_KEY] = (None, T0 - dt.timedelta(hours=1))
    ssn = run_conf(cluster, CONF.replace('"shuffle"', '"allocate"'))
    assert ssn.result.evictions == []
    assert ssn.result.revisit_after is None
    cluster, _, _ = busy_cluster()
    plain = run_conf(cluster, 'actions: "shuffle"\ntiers:\n- plugins:\n  - name: pdb\n')
    assert plain.result.evictions == []


def test_the_configuration_accepts_the_names_and_checks_the_arguments() -> None:
    conf = parse_conf(CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    assert conf.actions == ("shuffle",)
    with pytest.raises(ConfError, match="maxEvictions"):
        parse_conf(
            CONF + "configurations:\n- name: shuffle\n  arguments: {maxEvictions: 0}\n",
            actions=REGISTRY.actions,
            plugins=REGISTRY.plugins,
        )
    with pytest.raises(ConfError, match="interval"):
        parse_conf(
            CONF.replace("interval: 1m", "interval: often"),
            actions=REGISTRY.actions,
            plugins=REGISTRY.plugins,
        )


# ---- measured load (a metrics source configured) ------------------------------------------------


def test_measured_load_replaces_what_pods_request() -> None:
    """By requests n0 is the hot node; measured, n2 is (85%) and n1 the cool one: n2's pods
    go, the cheapest first, until n1's room (50% - 5% of 10 cpu, 4.5 cpu) is used."""
    cluster, _, _ = busy_cluster()
    measured = {"n0": (30.0, 10.0), "n1": (5.0, 10.0), "n2": (85.0, 10.0)}
    victims = choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY, measured)
    assert [t.node_name for t in victims] == ["n2"] * 4
    # n1 measured above its threshold (20%): no node is low, nothing moves.
    no_low = {"n0": (30.0, 10.0), "n1": (48.0, 10.0), "n2": (85.0, 10.0)}
    assert choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY, no_low) == []


def test_a_node_without_measured_load_takes_no_part() -> None:
    """Without n1's load nothing is low (n1 would be by requests): nothing moves; and when only
    the unmeasured nodes were low, no node counts as 'every node low'."""
    cluster, _, _ = busy_cluster()
    measured = {"n0": (90.0, 10.0), "n2": (40.0, 10.0)}
    assert choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY, measured) == []
    assert choose_victims(cluster.nodes.values(), running(cluster), CPU_ONLY, {}) == []


def _measured(cluster: ClusterInfo, loads: dict[str, float], age: dt.timedelta) -> None:
    cluster.load_measured = True
    cluster.node_usage = {
        name: NodeUsage(cpu, 10.0, cluster.now - age) for name, cpu in loads.items()
    }


def test_shuffle_weighs_the_measured_load_when_a_source_is_read() -> None:
    cluster, _, cool = busy_cluster()
    cluster.derived[LAST_RUN_KEY] = (None, T0 - dt.timedelta(hours=1))
    _measured(cluster, {"n0": 30.0, "n1": 5.0, "n2": 85.0}, dt.timedelta(minutes=1))
    evicted = [e.task for e in run_conf(cluster, CONF).result.evictions]
    assert evicted
    assert all(t.job == cool.key and t.node_name == "n2" for t in evicted)


def test_shuffle_evicts_nothing_on_stale_or_missing_load() -> None:
    """A source configured but silent for over five minutes (or not read yet): nothing moves,
    where weighing requests would evict four of n0's pods."""
    for loads, age in (({"n0": 90.0, "n1": 5.0}, dt.timedelta(minutes=6)), ({}, dt.timedelta())):
        cluster, _, _ = busy_cluster()
        cluster.derived[LAST_RUN_KEY] = (None, T0 - dt.timedelta(hours=1))
        _measured(cluster, loads, age)
        assert run_conf(cluster, CONF).result.evictions == []
