"""Volcano's feasible-node sampling (``scheduler.api.feasible_nodes``): the count, the rotation,
the flags, and the placer's search for cross-node tasks only."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.settings import SchedulerSettings, SettingsError, from_command_line, parse_settings
from scheduler.actions.placer import Placer, sampled_count
from scheduler.api.feasible_nodes import FeasibleNodes, Rotation, search
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments, Plugin, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from unit.sched_fixtures import add_job, cpu_cluster


@pytest.mark.parametrize(
    ("nodes", "wanted"),
    # Volcano's defaults: every node up to 100; then 50% less one point per 125 nodes, at least
    # 5% (46% of 500, 10% of 5,000, 5% of 15,000).
    [(0, 0), (50, 50), (100, 100), (101, 100), (500, 230), (5000, 500), (15000, 750)],
)
def test_volcanos_count_at_its_defaults(nodes: int, wanted: int) -> None:
    assert FeasibleNodes().to_find(nodes) == wanted


@pytest.mark.parametrize(
    ("percentage", "nodes", "wanted"),
    # Volcano's scheduler_helper_test.go cases.
    [(40, 1000, 400), (0, 6000, 300), (40, 6000, 2400), (100, 6000, 6000), (1, 1000, 100)],
)
def test_a_set_percentage_as_volcanos(percentage: int, nodes: int, wanted: int) -> None:
    assert FeasibleNodes(percentage_nodes_to_find=percentage).to_find(nodes) == wanted


def test_the_minimum_percentage_bounds_the_adaptive_share() -> None:
    assert FeasibleNodes(minimum_percentage_nodes_to_find=20).to_find(5000) == 1000
    assert FeasibleNodes(minimum_feasible_nodes=1000).to_find(5000) == 1000


@pytest.mark.parametrize(
    "bad",
    [
        {"minimum_feasible_nodes": 0},
        {"percentage_nodes_to_find": 101},
        {"minimum_percentage_nodes_to_find": -1},
    ],
)
def test_bad_options_are_refused_by_name(bad: Mapping[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        FeasibleNodes(**bad)
    with pytest.raises(SettingsError, match=next(iter(bad))):
        parse_settings(SchedulerSettings, dict(bad), {})


def test_the_flags_have_volcanos_names_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for f in dataclasses.fields(SchedulerSettings):
        monkeypatch.delenv("CALDERA_" + f.name.upper(), raising=False)
    default = from_command_line(SchedulerSettings, [], "caldera")
    assert (
        default.minimum_feasible_nodes,
        default.minimum_percentage_nodes_to_find,
        default.percentage_nodes_to_find,
    ) == (100, 5, 0)
    given_ = from_command_line(
        SchedulerSettings,
        [
            "--minimum-feasible-nodes=20",
            "--minimum-percentage-nodes-to-find=2",
            "--percentage-nodes-to-find=30",
        ],
        "caldera",
    )
    assert (
        given_.minimum_feasible_nodes,
        given_.minimum_percentage_nodes_to_find,
        given_.percentage_nodes_to_find,
    ) == (20, 2, 30)


NAMES = [f"n{i}" for i in range(6)]


def test_search_rotates_from_where_the_last_one_stopped() -> None:
    rotation = Rotation()
    every = set(NAMES)
    assert search(NAMES, rotation, 2, every.__contains__) == ["n0", "n1"]
    assert rotation.start == 2
    assert search(NAMES, rotation, 2, {"n0", "n5"}.__contains__) == ["n5", "n0"]
    assert rotation.start == 1  # past n0, where it stopped (wrapped round)
    assert search(NAMES, rotation, 3, {"n4"}.__contains__) == ["n4"]
    assert rotation.start == 1  # every node looked at: it starts where it did
    assert search([], rotation, 3, every.__contains__) == []


@given(
    st.lists(st.booleans(), min_size=1, max_size=30),
    st.integers(0, 100),
    st.integers(1, 30),
)
def test_search_finds_the_first_fitting_nodes_in_rotation_order(
    fit: list[bool], start: int, wanted: int
) -> None:
    names = [f"n{i}" for i in range(len(fit))]
    fits = {n for n, f in zip(names, fit, strict=True) if f}
    rotation = Rotation()
    rotation.start = start
    found = search(names, rotation, wanted, fits.__contains__)
    begin = start % len(names)
    order = names[begin:] + names[:begin]
    expected = [n for n in order if n in fits][:wanted]
    assert found == expected
    if len(expected) < wanted:
        assert rotation.start == begin
    else:
        assert order[(rotation.start - begin - 1) % len(names)] == expected[-1]


# ---- the placer ------------------------------------------------------------------------------


class Claims:
    """Claims the tasks named in ``claimed`` cross-node (layered when ``layered``), refuses
    the nodes in ``barred`` for them and records the batches it scores."""

    name = "claims"

    def __init__(self, claimed: set[str], *, layered: bool) -> None:
        self.claimed = claimed
        self.layered = layered
        self.barred: set[str] = set()
        self.batches: list[list[str]] = []
        self.ssn: Session | None = None

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        # Its verdicts read nothing else node-local: the placer's speed layer keeps them.
        ssn.add_speedups(self.name, Speedups(node_class=lambda task: 0))
        ssn.add_predicate_fn(self.name, self.predicate)
        ssn.add_batch_node_order_fn(self.name, self.batch)
        claim = self.claims
        if self.layered:
            ssn.add_layered_cross_node_fn(self.name, claim)
        else:
            ssn.add_cross_node_fn(self.name, claim)

    def on_session_close(self, ssn: Session) -> None:
        return None

    def claims(self, task: TaskInfo) -> bool:
        return task.job in self.claimed

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        assert self.ssn is not None
        if self.ssn.node_local or not self.claims(task):
            return None
        return "barred" if node.name in self.barred else None

    def batch(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> Mapping[str, float]:
        self.batches.append(sorted(n.name for n in nodes))
        return {}


def placer(
    layered: bool, options: FeasibleNodes, *, speedups: bool = True
) -> tuple[Placer, Claims, TaskInfo, TaskInfo]:
    cluster = cpu_cluster({f"n{i}": "4" for i in range(10)})
    cross = next(iter(add_job(cluster, "cross", pending=1).tasks.values()))
    plain = next(iter(add_job(cluster, "plain", pending=1).tasks.values()))
    plugin = Claims({cross.job}, layered=layered)
    tiers: list[list[Plugin]] = [
        [PredicatesPlugin(Arguments("predicates", {})), plugin],
        [NodeOrderPlugin(Arguments("nodeorder", {}))],
    ]
    ssn = Session(
        cluster, [[PluginOption(p.name) for p in tier] for tier in tiers], speedups=speedups
    )
    for tier in tiers:
        for p in tier:
            p.on_session_open(ssn)
    ssn.feasible_nodes = options
    return Placer(ssn), plugin, cross, plain


SMALL = FeasibleNodes(minimum_feasible_nodes=3, percentage_nodes_to_find=10)


@pytest.mark.parametrize("layered", [False, True])
def test_a_cross_node_task_stops_at_enough_fitting_nodes_and_rotates(layered: bool) -> None:
    place, plugin, cross, _ = placer(layered, SMALL)
    assert place.reuse
    assert place.sampled_count == 3
    plugin.barred = {"n1"}
    best, cand = place.best(cross)
    assert plugin.batches == [["n0", "n2", "n3"]]  # n1 refused: one more looked at
    assert set(cand.scores) == {"n0", "n2", "n3"}
    assert cand.reasons == {"n1": ["barred"]}
    assert best in cand.scores
    place.best(cross)
    assert plugin.batches[-1] == ["n4", "n5", "n6"]  # from where the last search stopped
    place.best(cross)
    assert plugin.batches[-1] == ["n7", "n8", "n9"]
    place.best(cross)
    assert plugin.batches[-1] == ["n0", "n2", "n3"]  # wrapped round
    plugin.barred = {f"n{i}" for i in range(10)}
    best, cand = place.best(cross)
    assert best is None
    assert len(cand.reasons) == 10  # every node looked at: the fit error names them all


def test_plain_tasks_choose_among_every_node() -> None:
    place, plugin, _, plain = placer(True, SMALL)
    _, cand = place.best(plain)
    assert len(cand.scores) == 10
    assert plugin.batches == []
    assert place.ssn.node_rotation.start == 0


def test_no_sampling_up_to_the_minimum() -> None:
    assert sampled_count(FeasibleNodes(), 100) is None
    place, plugin, cross, _ = placer(True, FeasibleNodes())
    assert place.sampled_count is None
    place.best(cross)
    assert plugin.batches == [[f"n{i}" for i in range(10)]]


def test_the_same_nodes_are_looked_at_without_the_speed_layer() -> None:
    looked = []
    for layered, speedups in ((True, True), (False, True), (True, False)):
        place, plugin, cross, _ = placer(layered, SMALL, speedups=speedups)
        plugin.barred = {"n2", "n5"}
        for _ in range(4):
            place.best(cross)
        looked.append(plugin.batches)
    assert looked[0] == looked[1] == looked[2]
