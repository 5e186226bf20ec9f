"""The placer's split verdicts (scheduler.actions.verdict_split): nodegroup's verdict applied on
top of the rest, which the classes of the queues' affinities share, decides as whole verdicts
do, and as the plain walk does; the split is taken only where it is exact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.volcano import NODEGROUP_NAME_KEY
from scheduler.actions import placer as placer_module
from scheduler.actions.placer import Placer
from scheduler.actions.verdict_split import VerdictSplit, split
from scheduler.api.types import ClusterInfo, NodeInfo, QueueInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.registry import REGISTRY
from unit.sched_fixtures import add_job, make_cluster, make_node, make_task
from unit.test_sched_nodegroup import placed, queue, run

LAST = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack},
            {name: nodegroup, arguments: {enablePreferredOrder: true}}]
"""
# nodegroup's predicate and score before others': no split (whole verdicts, as before).
EARLY = LAST.replace(
    "{name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack},\n"
    "            {name: nodegroup, arguments: {enablePreferredOrder: true}}",
    "{name: nodegroup, arguments: {enablePreferredOrder: true}}, {name: predicates},\n"
    "            {name: proportion}, {name: nodeorder}, {name: binpack}",
)

GROUPS = ("a", "b", "c")
# (name, cpus, group) per node; the queues; (pending pods, size, queue index) per job
Shape = tuple[list[tuple[str, str, str | None]], list[QueueInfo], list[tuple[int, str, int]]]
groups = st.lists(st.sampled_from(GROUPS), max_size=2, unique=True).map(tuple)


@st.composite
def queues(draw: st.DrawFn) -> list[QueueInfo]:
    made = []
    for i in range(draw(st.integers(1, 4))):
        limits = draw(st.sampled_from([None, {"a": {"cpu": "3"}}, {"b": {"cpu": "2"}}]))
        made.append(
            queue(
                f"q{i}",
                required=draw(groups),
                preferred=draw(groups),
                anti_required=draw(groups),
                anti_preferred=draw(st.lists(st.sampled_from(GROUPS), max_size=1).map(tuple)),
                limits=limits,
            )
        )
    return made


@st.composite
def clusters(draw: st.DrawFn) -> Shape:
    nodes = [
        (f"n{i}", draw(st.sampled_from(["2", "4", "8"])), draw(st.sampled_from([*GROUPS, None])))
        for i in range(draw(st.integers(1, 7)))
    ]
    made_queues = draw(queues())
    jobs = [
        (
            draw(st.integers(1, 4)),
            draw(st.sampled_from(["1", "2", "500m"])),
            draw(st.integers(0, len(made_queues) - 1)),
        )
        for _ in range(draw(st.integers(1, 6)))
    ]
    return nodes, made_queues, jobs


def build(shape: Shape) -> ClusterInfo:
    nodes, made_queues, jobs = shape
    cluster = make_cluster(
        [
            make_node(name, cpu, labels={NODEGROUP_NAME_KEY: group} if group else None)
            for name, cpu, group in nodes
        ],
        (),
        made_queues,
    )
    for i, (pending, size, q) in enumerate(jobs):
        add_job(cluster, f"j{i}", pending=pending, size=size, queue=f"q{q}", phase="Inqueue")
    return cluster


def decisions(ssn: Session) -> tuple[dict[str, str], dict[str, str]]:
    return placed(ssn), dict(ssn.result.unschedulable)


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_split_verdicts_decide_as_whole_ones_and_as_the_plain_walk(
    shape: Shape,
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        shared = decisions(run(build(shape), LAST))
        patch.setattr(placer_module, "split", lambda *_: None)
        whole = decisions(run(build(shape), LAST))
    plain = decisions(run(build(shape), LAST, speedups=False))
    assert shared == whole
    assert shared == plain


def reopened(ssn: Session) -> Session:
    """The session's plugins opened again (run_session closed them)."""
    for tier in ssn.tiers:
        for option in tier:
            REGISTRY.plugins[option.name](Arguments(option.name, option.arguments)).on_session_open(
                ssn
            )
    return ssn


def two_queue_cluster() -> ClusterInfo:
    cluster = make_cluster(
        [make_node(f"n{i}", labels={NODEGROUP_NAME_KEY: "ab"[i % 2]}) for i in range(4)],
        (),
        [queue("qa", required=("a",), preferred=("b",)), queue("qb", required=("b",))],
    )
    add_job(cluster, "ja", pending=1, queue="qa", phase="Inqueue")
    add_job(cluster, "jb", pending=1, queue="qb", phase="Inqueue")
    return cluster


def test_classes_of_two_affinities_share_one_base_verdict_per_node() -> None:
    cluster = two_queue_cluster()
    ssn = reopened(run(cluster, LAST.replace("allocate, ", "")))  # nothing placed
    found = Placer(ssn)
    assert found.split is not None
    tasks = [next(iter(cluster.jobs[f"ns/{j}"].tasks.values())) for j in ("ja", "jb")]
    best = [found.best(task)[0] for task in tasks]
    assert best == ["n0", "n1"]  # each queue's required group
    assert found.class_key(tasks[0]) != found.class_key(tasks[1])  # two classes
    (base,) = found.bases.values()  # sharing one base class
    assert sorted(base) == ["n0", "n1", "n2", "n3"]


def test_no_split_when_nodegroup_is_not_asked_last() -> None:
    ssn = reopened(run(two_queue_cluster(), EARLY))
    assert Placer(ssn).split is None
    assert Placer(reopened(run(two_queue_cluster(), LAST, speedups=False))).split is None


def fixed(answer: Any) -> Callable[[TaskInfo, NodeInfo], Any]:
    """A node function that gives ``answer`` whatever the pod and node."""
    return lambda _task, _node: answer


def test_split_requires_the_overlay_functions_last() -> None:
    a, b, own = fixed(None), fixed(None), fixed(None)
    assert split([("x", a), ("ng", own)], [("x", b), ("ng", own)], {"ng"}) == VerdictSplit(
        (a,), (b,), (own,), (own,)
    )
    assert split([("ng", own), ("x", a)], [("x", b)], {"ng"}) is None
    assert split([("x", a)], [("ng", own), ("x", b)], {"ng"}) is None
    assert split([("x", a)], [("x", b)], set()) is None


def test_apply_keeps_earlier_reasons_then_asks_the_overlay() -> None:
    task, node = make_task("t", 0), make_node("n")
    refusing = VerdictSplit((), (), (fixed("no"),), (fixed(5.0),))
    adding = VerdictSplit((), (), (fixed(None),), (fixed(5.0), fixed(0.25)))
    assert refusing.apply(["Insufficient cpu"], task, node) == ["Insufficient cpu"]
    assert refusing.apply(1.5, task, node) == ["no"]
    assert adding.apply(1.5, task, node) == 1.5 + 5.0 + 0.25
