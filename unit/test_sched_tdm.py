"""tdm: the daily windows, the arguments' checks, the predicate and score of revocable nodes,
the disruption budgets, the victims of preempt and shuffle and their pacing, the job votes."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import PodGroup
from scheduler.api.types import ClusterInfo, JobInfo, TaskInfo, TaskStatus
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.plugins.tdm import (
    LAST_EVICT_KEY,
    TdmConf,
    TdmPlugin,
    Window,
    closed_zone_victims,
    job_order,
    job_preemptable,
    max_evictions,
    parse_window,
    predicate,
    preemptable_victims,
    score,
    starving,
    task_zone,
)
from scheduler.registry import REGISTRY
from unit.sched_fixtures import (
    T0,
    add_job,
    binds,
    make_cluster,
    make_job,
    make_node,
    make_task,
    open_session,
    run_conf,
)

RZ = {"volcano.sh/revocable-zone": "rz1"}
MAY_REVOKE = {"volcano.sh/preemptable": "true"}
NOT_PREEMPTABLE = {"volcano.sh/preemptable": "false"}


def at(hour: int, minute: int = 0, second: int = 0) -> dt.datetime:
    return T0.replace(hour=hour, minute=minute, second=second)


def annotate(task: TaskInfo, annotations: dict[str, str]) -> TaskInfo:
    assert task.pod is not None
    meta = msgspec.structs.replace(task.pod.metadata, annotations=annotations)
    task.pod = msgspec.structs.replace(task.pod, metadata=meta)
    task.preemptable = annotations.get("volcano.sh/preemptable", "true") != "false"
    return task


def cluster_of(now: dt.datetime) -> ClusterInfo:
    """n0 ordinary, r0 and r1 revocable in zone rz1, 4 cpu each."""
    cluster = make_cluster(
        [make_node("n0", "4", None), make_node("r0", "4", None, labels=RZ)],
        (),
    )
    cluster.nodes["r1"] = make_node("r1", "4", None, labels=RZ)
    cluster.now = now
    return cluster


# ---- windows and arguments ----------------------------------------------------------------


def test_windows_open_from_start_up_to_end_and_wrap_past_midnight() -> None:
    day = parse_window("k", "10:00-21:00")
    assert [day.is_open(at(*t)) for t in ((10,), (20, 59, 59), (21,), (9, 59, 59))] == [
        True,
        True,
        False,
        False,
    ]
    night = parse_window("k", " 22:00-6:00 ")
    assert [night.is_open(at(h)) for h in (3, 23, 22, 6, 12)] == [True, True, True, False, False]
    always = parse_window("k", "8:00-8:00")
    assert all(always.is_open(at(h)) for h in range(24))
    assert always.seconds_to_change(at(3)) is None
    assert day.seconds_to_change(at(9, 59)) == 60
    assert day.seconds_to_change(at(10)) == 11 * 3600  # at the edge: the other edge next
    assert night.seconds_to_change(at(23)) == 7 * 3600


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 1439),
    st.integers(0, 1439),
    st.integers(0, 86399),
)
def test_window_changes_exactly_when_it_says(start: int, end: int, second: int) -> None:
    """Open or not as a minute-by-minute reading of the range says, and unchanged until the
    announced change, changed right at it."""
    window = Window(start * 60, end * 60)
    now = T0 + dt.timedelta(seconds=second)
    minute = second // 60
    if start == end:
        expected = True
    elif start < end:
        expected = start <= minute < end
    else:
        expected = minute >= start or minute < end
    assert window.is_open(now) is expected
    change = window.seconds_to_change(now)
    if change is None:
        assert start == end
        return
    assert 0 < change <= 86400
    assert window.is_open(now + dt.timedelta(seconds=change - 1)) is expected
    assert window.is_open(now + dt.timedelta(seconds=change)) is not expected


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"tdm.revocable-zone.rz1": "25:00-01:00"}, "tdm.revocable-zone.rz1"),
        ({"tdm.revocable-zone.rz1": "10:61-11:00"}, "tdm.revocable-zone.rz1"),
        ({"tdm.revocable-zone.rz1": "10-12"}, "tdm.revocable-zone.rz1"),
        ({"tdm.revocable-zone.rz1": 600}, "tdm.revocable-zone.rz1"),
        ({"tdm.revocable-zone.": "10:00-12:00"}, "names no zone"),
        ({"tdm.evict.period": "soon"}, "tdm.evict.period"),
        ({"tdm.evict.period": "0s"}, "tdm.evict.period"),
        ({"tdm.evict.period": "-1m"}, "tdm.evict.period"),
        ({"tdm.evict.max-num": 0}, "tdm.evict.max-num"),
        ({"tdm.evict.max-num": "many"}, "tdm.evict.max-num"),
        ({"tdm.evict.perod": "1m"}, "unknown argument tdm.evict.perod"),
    ],
)
def test_bad_arguments_are_named(arguments: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        TdmPlugin(Arguments("tdm", arguments))


def test_arguments_parsed() -> None:
    conf = TdmConf.parse(
        {
            "tdm.revocable-zone.rz1": "10:00-21:00",
            "tdm.revocable-zone.rz2": "12:00-14:00",
            "tdm.evict.period": "90s",
            "tdm.evict.max-num": 5,
            "other": "ignored",
        }
    )
    assert set(conf.zones) == {"rz1", "rz2"}
    assert conf.evict_period == dt.timedelta(seconds=90)
    assert conf.evict_max_num == 5
    assert conf.open_zones(at(13)) == {"rz1", "rz2"}
    assert conf.open_zones(at(15)) == {"rz1"}
    assert TdmConf.parse({}).evict_period == dt.timedelta(minutes=1)


def test_the_configuration_names_a_bad_window() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: tdm\n    arguments:\n'
    good = parse_conf(
        text + '      tdm.revocable-zone.rz1: "10:00-21:00"\n',
        actions=REGISTRY.actions,
        plugins=REGISTRY.plugins,
    )
    assert good.tiers[0][0].name == "tdm"
    with pytest.raises(ConfError, match=r"tdm\.revocable-zone\.rz1"):
        parse_conf(
            text + '      tdm.revocable-zone.rz1: "late"\n',
            actions=REGISTRY.actions,
            plugins=REGISTRY.plugins,
        )


# ---- pods, nodes, predicate and score -----------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "zone"),
    [
        ({}, ""),
        ({"volcano.sh/revocable-zone": "*"}, "*"),
        ({"volcano.sh/revocable-zone": "rz1"}, ""),  # only "*" counts, as in Volcano
        ({"volcano.sh/revocable-zone": "rz1", "volcano.sh/preemptable": "true"}, ""),
        ({"volcano.sh/preemptable": "true"}, "*"),
        ({"volcano.sh/preemptable": "1"}, "*"),
        ({"volcano.sh/preemptable": "false"}, ""),
        ({"volcano.sh/preemptable": "yes"}, ""),
    ],
)
def test_which_pods_may_use_revocable_nodes(annotations: dict[str, str], zone: str) -> None:
    assert task_zone(annotate(make_task("j", 0), annotations)) == zone


def test_predicate_and_score() -> None:
    cluster = cluster_of(T0)
    cluster.nodes["x0"] = make_node("x0", labels={"volcano.sh/revocable-zone": "unknown"})
    zones = {"rz1": parse_window("k", "00:00-08:00")}
    plain = make_task("j", 0)
    revocable = annotate(make_task("j", 1), MAY_REVOKE)
    opened, closed = frozenset({"rz1"}), frozenset[str]()
    n0, r0, x0 = cluster.nodes["n0"], cluster.nodes["r0"], cluster.nodes["x0"]
    assert predicate(plain, n0, zones, closed) is None
    assert predicate(revocable, n0, zones, closed) is None
    assert predicate(revocable, r0, zones, opened) is None
    assert predicate(plain, r0, zones, opened) == "not allow to dispatch to revocable node"
    assert "beyond revocable zone rz1" in (predicate(revocable, r0, zones, closed) or "")
    assert "not support" in (predicate(revocable, x0, zones, opened) or "")
    assert score(revocable, r0, opened) == 100.0
    assert score(revocable, r0, closed) == 0.0
    assert score(plain, r0, opened) == 0.0
    assert score(revocable, n0, opened) == 0.0


CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "00:00-08:00"
"""


def test_allocate_puts_revocable_pods_on_open_revocable_nodes_only() -> None:
    """At 01:00 the revocable pods go to r0/r1 (score 100), the plain one to n0; at 09:00 the
    revocable nodes take nothing, and the session asks to be run again when rz1 opens."""
    for now, expect_revocable in ((at(1), {"r0", "r1"}), (at(9), {"n0"})):
        cluster = cluster_of(now)
        job = add_job(cluster, "rev", pending=2, min_available=1, phase="Inqueue")
        for task in job.tasks.values():
            annotate(task, MAY_REVOKE)
        add_job(cluster, "plain", pending=1, min_available=1, phase="Inqueue")
        ssn = run_conf(cluster, CONF)
        placed = binds(ssn)
        assert placed["plain-0"] == "n0"
        assert {placed["rev-0"], placed["rev-1"]} <= expect_revocable
        change = (8 * 3600 - 3600) if now == at(1) else (15 * 3600)
        assert ssn.result.revisit_after == change + 1.0


def test_node_class_changes_with_the_window() -> None:
    """The placer's reuse of node verdicts sees the open zones and the pod's zone."""
    plugin = TdmPlugin(Arguments("tdm", {"tdm.revocable-zone.rz1": "00:00-08:00"}))
    task = annotate(make_task("j", 0), MAY_REVOKE)
    classes = []
    for now in (at(1), at(2), at(9)):
        ssn = open_session(cluster_of(now), [plugin])
        node_class = ssn.incremental.of("tdm").node_class
        assert node_class is not None
        classes.append(node_class(task))
        assert node_class(make_task("j", 1)) != node_class(task)
    assert classes[0] == classes[1] != classes[2]


# ---- budgets and victims ------------------------------------------------------------------


def job_with(annotations: dict[str, str], running: int, pending: int = 0) -> JobInfo:
    tasks = [make_task("j", i, status=TaskStatus.RUNNING, node="n0") for i in range(running)] + [
        make_task("j", running + i) for i in range(pending)
    ]
    return make_job("j", tasks, annotations=annotations)


@pytest.mark.parametrize(
    ("annotations", "running", "pending", "allowed"),
    [
        ({}, 4, 0, 1),
        ({"volcano.sh/jdb-min-available": "2"}, 4, 0, 2),
        ({"volcano.sh/jdb-min-available": "50%"}, 3, 1, 1),  # ceil(2) of 4
        ({"volcano.sh/jdb-min-available": "5"}, 4, 0, 0),  # below: none (Volcano: one)
        ({"volcano.sh/jdb-max-unavailable": "2"}, 4, 0, 2),
        ({"volcano.sh/jdb-max-unavailable": "2"}, 3, 1, 1),  # one already unavailable
        ({"volcano.sh/jdb-max-unavailable": "25%"}, 3, 1, 0),
        ({"volcano.sh/jdb-max-unavailable": "lots"}, 4, 0, 0),
    ],
)
def test_disruption_budgets(
    annotations: dict[str, str], running: int, pending: int, allowed: int
) -> None:
    assert max_evictions(job_with(annotations, running, pending)) == allowed


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["n0", "r0", "r1"]), st.booleans(), st.integers(0, 2)),
        max_size=12,
    ),
    st.sampled_from(
        [{}, {"volcano.sh/jdb-min-available": "1"}, {"volcano.sh/jdb-max-unavailable": "50%"}]
    ),
    st.one_of(st.none(), st.integers(1, 4)),
)
def test_closed_zone_victims_keep_budgets(
    pods: list[tuple[str, bool, int]], budget: dict[str, str], max_num: int | None
) -> None:
    """Victims are Running preemptable pods of closed-zone nodes, each once, in the order
    given, never more per job than its budget allows, nor more than max-num in all."""
    cluster = cluster_of(at(9))
    jobs = []
    for j in range(3):
        placed = [node for node, _, owner in pods if owner == j]
        job = add_job(cluster, f"j{j}", running=placed, annotations=dict(budget))
        for task, (_, preemptable, _) in zip(
            sorted(job.tasks.values(), key=lambda t: int(t.name.split("-")[1])),
            [p for p in pods if p[2] == j],
            strict=True,
        ):
            if not preemptable:
                annotate(task, NOT_PREEMPTABLE)
        jobs.append(job)
    conf = TdmConf.parse({"tdm.revocable-zone.rz1": "00:00-08:00"})
    if max_num is not None:
        conf = TdmConf(conf.zones, conf.evict_period, max_num)
    tasks = [t for job in jobs for t in job.tasks.values()]
    victims = closed_zone_victims(tasks, cluster.nodes, cluster.jobs, conf, frozenset())
    assert len({t.uid for t in victims}) == len(victims)
    assert all(t.preemptable and t.node_name in ("r0", "r1") for t in victims)
    assert victims == [t for t in tasks if t in victims]
    for job in jobs:
        assert sum(t.job == job.key for t in victims) <= max_evictions(job)
    if max_num is not None:
        assert len(victims) <= max_num
    opened = closed_zone_victims(tasks, cluster.nodes, cluster.jobs, conf, frozenset({"rz1"}))
    assert opened == []


def test_preempt_takes_only_preemptable_pods_of_ordinary_nodes_within_budgets() -> None:
    cluster = cluster_of(T0)
    a = add_job(cluster, "a", running=["n0", "n0", "r0"])
    b = add_job(
        cluster, "b", running=["n0", "n0"], annotations={"volcano.sh/jdb-min-available": "0"}
    )
    keep = sorted(b.tasks.values(), key=lambda t: t.name)[1]
    annotate(keep, NOT_PREEMPTABLE)
    candidates = [t for job in (a, b) for t in sorted(job.tasks.values(), key=lambda t: t.name)]
    urgent = annotate(make_task("u", 0), NOT_PREEMPTABLE)
    chosen = preemptable_victims(urgent, candidates, cluster.nodes, cluster.jobs)
    assert [t.name for t in chosen] == ["a-0", "b-0"]  # a: budget 1; a-2 on r0; b-1 kept
    assert preemptable_victims(make_task("u", 1), candidates, cluster.nodes, cluster.jobs) == []
    revocable = annotate(make_task("u", 2), {"volcano.sh/revocable-zone": "*"})
    assert preemptable_victims(revocable, candidates, cluster.nodes, cluster.jobs) == []


SHUFFLE = """
actions: "shuffle"
tiers:
- plugins:
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "00:00-08:00"
      tdm.evict.period: 1m
"""


def revoked_cluster() -> tuple[ClusterInfo, JobInfo, JobInfo]:
    """At 09:00, rz1 closed: job a has 3 preemptable pods on r0/r1 (and one on n0), job b two
    on r0, one of them not preemptable."""
    cluster = cluster_of(at(9))
    a = add_job(
        cluster,
        "a",
        running=["r0", "r1", "r1", "n0"],
        annotations={"volcano.sh/jdb-max-unavailable": "2"},
    )
    b = add_job(cluster, "b", running=["r0", "r0"], annotations={})
    annotate(b.tasks["uid-ns-b-1"], NOT_PREEMPTABLE)
    return cluster, a, b


def test_shuffle_evicts_from_closed_zones_within_budgets_paced_by_the_period() -> None:
    cluster, _, _ = revoked_cluster()
    first = run_conf(cluster, SHUFFLE)
    assert sorted(e.task.name for e in first.result.evictions) == ["a-0", "a-1", "b-0"]
    assert cluster.derived[LAST_EVICT_KEY] == (None, at(9))
    assert first.result.revisit_after == 60.0
    again = run_conf(cluster, SHUFFLE)  # same clock: the period has not passed
    assert again.result.evictions == []
    assert again.result.revisit_after == 60.0
    cluster.now = at(9, 1)
    third = run_conf(cluster, SHUFFLE)
    # Due again; the evicted pods are releasing, so a's budget (2 unavailable at most) is
    # spent and b's other pod is not preemptable: nothing, and no round asked for.
    assert cluster.derived[LAST_EVICT_KEY] == (None, at(9, 1))
    assert third.result.evictions == []
    assert third.result.revisit_after == (24 * 60 - 9 * 60 - 1) * 60 + 1.0  # rz1 opens


def test_shuffle_is_bounded_by_max_num_and_idle_while_windows_are_open() -> None:
    cluster, _, _ = revoked_cluster()
    bounded = SHUFFLE + "      tdm.evict.max-num: 1\n"
    assert len(run_conf(cluster, bounded).result.evictions) == 1
    cluster, _, _ = revoked_cluster()
    cluster.now = at(7)
    ssn = run_conf(cluster, SHUFFLE)
    assert ssn.result.evictions == []
    assert LAST_EVICT_KEY not in cluster.derived
    cluster, _, _ = revoked_cluster()
    without = run_conf(cluster, SHUFFLE.replace('"shuffle"', '"allocate"'))
    assert without.result.evictions == []
    assert LAST_EVICT_KEY not in cluster.derived


# ---- job votes ----------------------------------------------------------------------------


def test_job_preemptable_order_and_votes() -> None:
    plain = make_job("p", 2)
    marked = make_job("m", 2, annotations=MAY_REVOKE)
    labelled = make_job("l", 2)
    labelled.podgroup = PodGroup(metadata=ObjectMeta(name="l", namespace="ns", labels=MAY_REVOKE))
    assert [job_preemptable(j) for j in (plain, marked, labelled)] == [False, True, True]
    assert job_order(plain, marked) < 0 < job_order(marked, plain)
    assert job_order(marked, labelled) == 0
    assert starving(plain) == 1  # pending pods, not preemptable
    assert starving(marked) == -1
    done = job_with({}, running=2)
    assert starving(done) == -1
