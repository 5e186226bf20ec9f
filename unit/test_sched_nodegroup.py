"""nodegroup: a queue's pods go to the node groups (``volcano.sh/nodegroup-name``) its
``spec.affinity`` names, within the queue's per-group limits; Volcano's predicate and scores."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from caldera.api.volcano import (
    NODEGROUP_NAME_KEY,
    NODEGROUP_RESOURCE_LIMITS_KEY,
    NodeGroupAffinity,
    Queue,
    QueueAffinity,
    QueueSpec,
)
from scheduler.actions.placer import Placer
from scheduler.api.types import ClusterInfo, QueueInfo
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.nodegroup import (
    AFFINITY_NOT_FOUND,
    LABEL_NOT_FOUND,
    LIMIT_EXCEEDED,
    LIMIT_INVALID,
    GroupAffinity,
    NodeGroupPlugin,
    parse_limits,
    resolve_affinities,
)
from scheduler.registry import REGISTRY
from unit.sched_fixtures import add_job, make_cluster, make_node


def conf(arguments: str = "", switches: str = "") -> str:
    args = f", arguments: {{{arguments}}}" if arguments else ""
    return f"""\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins: [{{name: predicates}}, {{name: proportion}}, {{name: nodeorder}},
            {{name: nodegroup{switches}{args}}}]
"""


def queue(
    name: str,
    *,
    required: tuple[str, ...] = (),
    preferred: tuple[str, ...] = (),
    anti_required: tuple[str, ...] = (),
    anti_preferred: tuple[str, ...] = (),
    affinity: bool = True,
    parent: str = "",
    limits: dict[str, dict[str, str]] | str | None = None,
) -> QueueInfo:
    """A queue with that affinity (none at all unless ``affinity``) and limits annotation."""
    spec_affinity = (
        QueueAffinity(
            node_group_affinity=NodeGroupAffinity(
                required_during_scheduling_ignored_during_execution=required,
                preferred_during_scheduling_ignored_during_execution=preferred,
            ),
            node_group_anti_affinity=NodeGroupAffinity(
                required_during_scheduling_ignored_during_execution=anti_required,
                preferred_during_scheduling_ignored_during_execution=anti_preferred,
            ),
        )
        if affinity
        else None
    )
    notes = {}
    if limits is not None:
        notes[NODEGROUP_RESOURCE_LIMITS_KEY] = (
            limits if isinstance(limits, str) else json.dumps(limits)
        )
    return QueueInfo(
        name,
        parent=parent,
        queue=Queue(
            metadata=ObjectMeta(name=name, annotations=notes),
            spec=QueueSpec(affinity=spec_affinity, parent=parent),
        ),
    )


def grouped_cluster(*queues: QueueInfo, unlabelled: bool = False) -> ClusterInfo:
    """Nodes a0, a1 in group a, b0 in group b (4 cpu each), and u0 without the label."""
    nodes = [
        make_node("a0", labels={NODEGROUP_NAME_KEY: "a"}),
        make_node("a1", labels={NODEGROUP_NAME_KEY: "a"}),
        make_node("b0", labels={NODEGROUP_NAME_KEY: "b"}),
    ]
    if unlabelled:
        nodes.append(make_node("u0"))
    return make_cluster(nodes, (), queues)


def run(cluster: ClusterInfo, text: str, *, speedups: bool = True) -> Session:
    parsed = parse_conf(text, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    ssn = Session(cluster, parsed.tiers, speedups=speedups)
    run_session(ssn, parsed, REGISTRY)
    return ssn


def placed(ssn: Session) -> dict[str, str]:
    return {bind.task.name: bind.node for bind in ssn.result.binds}


# ---- the pure core -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("affinity", "group", "allows", "score"),
    [
        pytest.param(GroupAffinity(required=frozenset({"a"})), "a", True, 100.0, id="required"),
        pytest.param(GroupAffinity(preferred=("a",)), "a", True, 50.0, id="preferred"),
        pytest.param(GroupAffinity(required=frozenset({"a"})), "b", False, 0.0, id="other"),
        pytest.param(
            GroupAffinity(required=frozenset({"a"}), anti_required=frozenset({"a"})),
            "a",
            False,
            100.0,
            id="anti-required-wins",
        ),
        pytest.param(
            GroupAffinity(anti_required=frozenset({"a"}), anti_preferred=frozenset({"a"})),
            "a",
            True,
            -1.0,
            id="anti-preferred-lets-in-and-scores-minus-one",
        ),
        pytest.param(
            GroupAffinity(required=frozenset({"a"}), preferred=("a",)),
            "a",
            True,
            150.0,
            id="required-and-preferred",
        ),
    ],
)
def test_volcano_predicate_and_score(
    affinity: GroupAffinity, group: str, allows: bool, score: float
) -> None:
    """Volcano's queueGroupAffinity.predicate and score, case by case."""
    assert affinity.allows(group) is allows
    assert affinity.score(group, preferred_order=False) == score


def test_preferred_order_scores_earlier_groups_higher() -> None:
    """With enablePreferredOrder the i-th of n preferred groups adds 50 * (n - i) / n."""
    affinity = GroupAffinity(preferred=("x", "y", "z", "w"))
    scores = [affinity.score(g, preferred_order=True) for g in ("x", "y", "z", "w")]
    assert scores == [50.0, 37.5, 25.0, 12.5]
    assert affinity.score("y", preferred_order=False) == 50.0


@given(
    st.sets(st.sampled_from("abcd")),
    st.lists(st.sampled_from("abcd"), unique=True),
    st.sets(st.sampled_from("abcd")),
    st.sets(st.sampled_from("abcd")),
    st.sampled_from("abcde"),
)
def test_anti_preferred_always_scores_minus_one_and_fits(
    required: set[str], preferred: list[str], anti_req: set[str], anti_pref: set[str], group: str
) -> None:
    """Whatever else the queue says, a preferred-anti group fits and scores -1; a group the
    queue names nowhere never fits and scores 0."""
    affinity = GroupAffinity(
        frozenset(required), tuple(preferred), frozenset(anti_req), frozenset(anti_pref)
    )
    if group in anti_pref:
        assert affinity.allows(group)
        assert affinity.score(group, preferred_order=True) == -1.0
    elif group not in required | set(preferred) | anti_req:
        assert not affinity.allows(group)
        assert affinity.score(group, preferred_order=True) == 0.0


def test_hierarchy_takes_the_nearest_ancestors_affinity() -> None:
    """With enableHierarchy a queue without affinity takes its nearest ancestor's; a queue with
    its own (even empty) affinity keeps it; without the switch each keeps only its own."""
    queues = {
        q.name: q
        for q in (
            queue("root", required=("r",)),
            queue("team", affinity=False, parent="root"),
            queue("proj", affinity=False, parent="team"),
            queue("mid", required=("m",), parent="root"),
            queue("leaf", affinity=False, parent="mid"),
            queue("own-empty", parent="root"),
            queue("orphan", affinity=False, parent="missing"),
        )
    }
    resolved = resolve_affinities(queues, hierarchy=True)
    assert resolved["proj"] == resolved["team"] == resolved["root"]
    assert resolved["leaf"] == resolved["mid"] != resolved["root"]
    assert resolved["own-empty"] is not None
    assert resolved["own-empty"].is_empty()
    assert resolved["orphan"] is None
    flat = resolve_affinities(queues, hierarchy=False)
    assert flat["proj"] is None
    assert flat["leaf"] is None


def test_a_cycle_of_parents_ends_the_walk() -> None:
    """Parents naming each other (the webhook refuses it, the cache may still hold it) do not
    loop: the queues inherit nothing."""
    queues = {
        "x": queue("x", affinity=False, parent="y"),
        "y": queue("y", affinity=False, parent="x"),
    }
    assert resolve_affinities(queues, hierarchy=True) == {"x": None, "y": None}


def test_limits_parse_and_bad_ones_name_the_annotation() -> None:
    """The limits annotation is JSON of group -> resource list; errors name the annotation."""
    assert parse_limits('{"a": {"cpu": "2", "memory": "1Gi"}}') == {
        "a": Resources.from_list({"cpu": "2", "memory": "1Gi"})
    }
    for bad in ("{", "[]", '{"a": "2"}', '{"a": {"cpu": "two"}}', '{"a": {"cpu": true}}'):
        with pytest.raises(ValueError, match=NODEGROUP_RESOURCE_LIMITS_KEY):
            parse_limits(bad)


def test_arguments_are_checked_by_name() -> None:
    """A bad argument names itself."""
    with pytest.raises(ValueError, match="argument strict"):
        NodeGroupPlugin(Arguments("nodegroup", {"strict": "sometimes"}))
    with pytest.raises(ValueError, match="argument enablePreferredOrder"):
        NodeGroupPlugin(Arguments("nodegroup", {"enablePreferredOrder": 3}))


# ---- sessions ------------------------------------------------------------------------------


def test_required_group_places_the_queues_pods_there() -> None:
    """A queue requiring group a gets only a's nodes; one preferring b goes to b first."""
    cluster = grouped_cluster(queue("qa", required=("a",)), queue("qb", preferred=("b",)))
    add_job(cluster, "ja", pending=6, queue="qa", phase="Inqueue")
    add_job(cluster, "jb", pending=1, queue="qb", phase="Inqueue")
    where = placed(run(cluster, conf()))
    assert {where[f"ja-{i}"] for i in range(6)} == {"a0", "a1"}
    assert where["jb-0"] == "b0"


def test_strict_keeps_everyone_off_unlabelled_nodes() -> None:
    """Strict (the default): a node without the label fits nobody; strict false lets a queue
    without affinity use it, and only it."""
    cluster = grouped_cluster(queue("free", affinity=False), unlabelled=True)
    add_job(cluster, "j", pending=1, queue="free", phase="Inqueue")
    ssn = run(cluster, conf())
    assert placed(ssn) == {}
    message = ssn.result.unschedulable["ns/j-0"]
    assert f"1 {LABEL_NOT_FOUND}" in message
    assert f"3 {AFFINITY_NOT_FOUND}" in message

    cluster = grouped_cluster(queue("free", affinity=False), unlabelled=True)
    add_job(cluster, "j", pending=1, queue="free", phase="Inqueue")
    assert placed(run(cluster, conf("strict: false"))) == {"j-0": "u0"}


def test_anti_affinity_rejects_the_group() -> None:
    """A required-anti group is refused even when also required."""
    cluster = grouped_cluster(queue("q", required=("a", "b"), anti_required=("a",)))
    add_job(cluster, "j", pending=2, queue="q", phase="Inqueue")
    ssn = run(cluster, conf())
    assert set(placed(ssn).values()) == {"b0"}


def test_hierarchy_switch_lets_children_inherit() -> None:
    """enableHierarchy: a child queue without affinity uses its parent's; without the switch it
    has none and fits no labelled node."""
    for switches, expected in (("", set()), (", enableHierarchy: true", {"b0"})):
        cluster = grouped_cluster(
            queue("root", required=("b",)), queue("child", affinity=False, parent="root")
        )
        add_job(cluster, "j", pending=1, queue="child", phase="Inqueue")
        assert set(placed(run(cluster, conf(switches=switches))).values()) == expected


def test_group_limits_cap_what_the_queue_gets_in_the_group() -> None:
    """A queue limited to 3 cpu in group a gets 3 one-cpu pods there (one already running
    counts), however much room a has; the others wait with the limit's reason."""
    cluster = grouped_cluster(queue("q", required=("a",), limits={"a": {"cpu": "3"}}))
    add_job(cluster, "old", running=["a0"], queue="q")
    add_job(cluster, "j", pending=4, queue="q", phase="Inqueue")
    ssn = run(cluster, conf())
    assert len(placed(ssn)) == 2
    waiting = [m for k, m in ssn.result.unschedulable.items() if k.startswith("ns/j-")]
    assert any(f"2 {LIMIT_EXCEEDED}" in m for m in waiting)


def test_a_bad_limits_annotation_rejects_every_node_for_the_queue() -> None:
    """An annotation that does not parse holds the queue's pods back, naming why."""
    cluster = grouped_cluster(queue("q", required=("a",), limits="{not json"))
    add_job(cluster, "j", pending=1, queue="q", phase="Inqueue")
    ssn = run(cluster, conf())
    assert placed(ssn) == {}
    assert f"3 {LIMIT_INVALID}" in ssn.result.unschedulable["ns/j-0"]


def test_reused_verdicts_decide_as_the_plain_walk() -> None:
    """With the node class hook the placer reuses verdicts; the decisions equal those of the
    session with every speed-up withheld (queues with and without limits, several groups)."""

    def build() -> ClusterInfo:
        cluster = grouped_cluster(
            queue("qa", required=("a",), limits={"a": {"cpu": "5"}}),
            queue("qb", preferred=("b", "a"), anti_preferred=("b",)),
            queue("qc", required=("a", "b"), anti_required=("b",)),
        )
        for i, q in enumerate(("qa", "qb", "qc", "qa", "qb")):
            add_job(cluster, f"j{i}", pending=3, queue=q, phase="Inqueue")
        return cluster

    text = conf("enablePreferredOrder: true")
    fast, plain = run(build(), text), run(build(), text, speedups=False)
    assert placed(fast) == placed(plain)
    assert fast.result.unschedulable == plain.result.unschedulable
    assert len(placed(fast)) > 0


def test_the_placer_keeps_reusing_verdicts_with_nodegroup() -> None:
    """nodegroup names its node class, so the placer reuses verdicts; withheld, it walks."""
    for speedups in (True, False):
        ssn = run(grouped_cluster(queue("q", required=("a",))), conf(), speedups=speedups)
        for tier in ssn.tiers:  # run_session closed it: open the plugins again
            for option in tier:
                REGISTRY.plugins[option.name](
                    Arguments(option.name, option.arguments)
                ).on_session_open(ssn)
        assert Placer(ssn).reuse is speedups
