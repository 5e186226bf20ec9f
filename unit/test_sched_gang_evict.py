"""gangpreempt and gangreclaim: a gang evicts only when it is then placed whole, victim gangs go
whole or keep minAvailable, and the pure bundle model underneath.

The action tests run in the stepped simulator (``simulator.stepping``) with the real plugins:
evicted pods terminate and their jobs' pods come back Pending, as on a cluster. The property
test runs random small clusters session after session and checks, in every session, (a) no pod
is evicted unless a gang the same action pipelined is then whole, (b) no victim gang is left
running below its minAvailable, and (c) once settled, nothing is evicted while nothing changes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.actions import gang_victims
from scheduler.actions.gang_evict import gang_arguments, nothing_evicted
from scheduler.actions.gangpreempt import GangPreemptAction
from scheduler.actions.gangreclaim import GangReclaimAction
from scheduler.api.types import JobInfo, TaskStatus
from scheduler.framework.runner import Registry
from scheduler.framework.session import Session
from scheduler.registry import ACTIONS, PLUGINS
from scheduler.why import DETAIL
from simulator.results import JobResult, PodRun, evictions_without_placement
from simulator.stepping import SteppedSimulation
from unit.sched_fixtures import (
    StandInGang,
    StandInPriority,
    add_job,
    cpu_cluster,
    make_job,
    make_task,
    open_session,
)
from unit.test_sched_settle import evictions, simulation, submit

# No enqueue action: allocate admits jobs itself, so a high-priority gang arriving to a full
# cluster is a preemptor (with enqueue, proportion's gate would hold it Pending).
GANG = """\
actions: "allocate, backfill, gangreclaim, gangpreempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: binpack}]
"""
LEGACY = GANG.replace("gangreclaim, gangpreempt", "reclaim, preempt")
CPU = {"cpu": "1"}
NODE = {"cpu": "4", "memory": "16Gi"}


def running(sim: SteppedSimulation, job: str) -> int:
    return sim.running_in_group(group_key(sim, job))


def group_key(sim: SteppedSimulation, job: str) -> str:
    """The PodGroup of ``job`` (the controller names it ``<job>-<uid>``)."""
    (key,) = (
        f"{pg.metadata.namespace}/{pg.metadata.name}"
        for pg in sim.podgroups()
        if pg.metadata.name.startswith(f"{job}-")
    )
    return key


# ---- the pure core ----------------------------------------------------------------------------


def _running_job(name: str, count: int, min_available: int, **kw: Any) -> JobInfo:
    tasks = [
        make_task(name, i, CPU, status=TaskStatus.RUNNING, node=f"n{i % 2}", priority=i)
        for i in range(count)
    ]
    return make_job(name, tasks, min_available=min_available, **kw)


def _order(task: Any) -> Any:
    return (task.priority, task.uid)


def test_split_gives_pods_above_min_available_then_the_rest_whole() -> None:
    """A gang of 5 with minAvailable 3: its two lowest-priority pods are safe, the other three
    go only together."""
    job = _running_job("v", 5, 3)
    local = list(job.tasks.values())
    safe, whole = gang_victims.split(job, local, local, order=_order)
    assert [t.name for t in safe] == ["v-0", "v-1"]
    assert sorted(t.name for t in whole) == ["v-2", "v-3", "v-4"]


def test_split_keeps_each_tasks_min_available() -> None:
    """Per-task minimums hold: a role at its minimum gives no safe pod."""
    tasks = [
        make_task("v", 0, CPU, status=TaskStatus.RUNNING, node="n0", role="ps"),
        make_task("v", 1, CPU, status=TaskStatus.RUNNING, node="n0", role="worker"),
        make_task("v", 2, CPU, status=TaskStatus.RUNNING, node="n0", role="worker"),
    ]
    job = make_job("v", tasks, min_available=2, min_task_member={"ps": 1, "worker": 1})
    safe, whole = gang_victims.split(job, tasks, tasks, order=_order)
    assert [t.role for t in safe] == ["worker"]
    assert sorted(t.role for t in whole) == ["ps", "worker"]


def test_a_gang_below_min_available_has_no_safe_pod() -> None:
    """Volcano lets a broken gang's pods go one by one; here it goes whole."""
    job = _running_job("v", 2, 3)
    local = list(job.tasks.values())
    safe, whole = gang_victims.split(job, local, local, order=_order)
    assert safe == []
    assert len(whole) == 2


def test_whole_bundle_needs_every_pod_inside_the_domain() -> None:
    """A gang with a pod outside the HyperNode offers no whole bundle there (evicting only its
    pods inside would leave it running broken), but still its safe pods."""
    job = _running_job("v", 4, 3)
    inside = [t for t in job.tasks.values() if t.node_name == "n0"]
    offered = gang_victims.bundles_of(
        job,
        inside,
        nodes=frozenset({"n0"}),
        evictable=lambda t: True,
        order=_order,
        allow_whole=True,
    )
    assert [b.kind for b in offered] == [gang_victims.SAFE]
    everywhere = gang_victims.bundles_of(
        job,
        list(job.tasks.values()),
        nodes=None,
        evictable=lambda t: True,
        order=_order,
        allow_whole=True,
    )
    assert [b.kind for b in everywhere] == [gang_victims.SAFE, gang_victims.WHOLE]
    assert sum(len(b.tasks) for b in everywhere) == 4


def test_whole_bundle_needs_every_pod_evictable() -> None:
    """A gang one of whose pods may not go (not preemptable, or refused) is not offered whole."""
    job = _running_job("v", 3, 3)
    local = list(job.tasks.values())
    offered = gang_victims.bundles_of(
        job,
        local,
        nodes=None,
        evictable=lambda t: t.name != "v-2",
        order=_order,
        allow_whole=True,
    )
    assert offered == []


def test_order_safe_first_then_lowest_ranked_job() -> None:
    """Safe bundles come before whole ones; among whole ones the job last in job order first."""
    a = _running_job("a", 2, 2)
    b = _running_job("b", 2, 2)
    c = _running_job("c", 3, 2)
    bundles = [
        gang_victims.Bundle(gang_victims.WHOLE, a, tuple(a.tasks.values()), a.allocated),
        gang_victims.Bundle(gang_victims.WHOLE, b, tuple(b.tasks.values()), b.allocated),
        gang_victims.Bundle(gang_victims.SAFE, c, (next(iter(c.tasks.values())),), c.allocated),
    ]
    need = bundles[0].local
    ranked = gang_victims.ordered(bundles, need, job_rank={"ns/a": 0, "ns/b": 1, "ns/c": 2})
    assert [(b.kind, b.job.name) for b in ranked] == [
        (gang_victims.SAFE, "c"),
        (gang_victims.WHOLE, "b"),
        (gang_victims.WHOLE, "a"),
    ]


def test_allowed_only_drops_a_whole_bundle_with_a_refused_pod() -> None:
    """A safe bundle keeps the pods the plugins allow; a whole bundle goes only complete."""
    job = _running_job("v", 4, 2)
    safe, _ = gang_victims.split(job, list(job.tasks.values()), [], order=_order)
    bundles = [
        gang_victims.Bundle(gang_victims.SAFE, job, tuple(safe), job.allocated),
        gang_victims.Bundle(gang_victims.WHOLE, job, tuple(safe), job.allocated),
    ]
    kept = gang_victims.allowed_only(bundles, {safe[0].uid})
    assert [(b.kind, len(b.tasks)) for b in kept] == [(gang_victims.SAFE, 1)]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, (8, True)),
        ({"maxDomains": 3, "allowWholeBundle": "false"}, (3, False)),
        ({"maxDomains": 0}, (8, True)),
        ({"maxDomains": "-2"}, (8, True)),
    ],
)
def test_arguments(raw: Mapping[str, Any], expected: tuple[int, bool]) -> None:
    """Volcano's arguments and defaults; maxDomains at or below 0 falls back to 8."""
    assert gang_arguments("gangpreempt", raw) == expected


@pytest.mark.parametrize(
    "raw", [{"maxDomains": "many"}, {"maxDomains": 1.5}, {"allowWholeBundle": "maybe"}]
)
def test_bad_arguments_name_the_action_and_argument(raw: Mapping[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"action gangpreempt: argument (maxDomains|allowWh)"):
        gang_arguments("gangpreempt", raw)


# ---- the actions in the simulator -------------------------------------------------------------


def test_high_priority_gang_preempts_a_low_priority_gang_whole() -> None:
    """A full cluster of one gang (8 of 8 at minAvailable): preempt cannot take a pod from it
    without breaking it and evicts nothing; gangpreempt evicts the gang whole, once, and the
    high-priority gang runs."""
    for text, expected in ((LEGACY, 0), (GANG, 8)):
        sim = simulation(text, nodes=[NODE, NODE], queues=[{"name": "a"}])
        submit(sim, "low", "a", 8, 8, CPU, "p0")
        assert sim.settle(20) is not None
        submit(sim, "high", "a", 4, 4, CPU, "p100")
        start = len(sim.history)
        assert sim.settle(30) is not None
        evicted = evictions(sim.history[start:])
        assert len(evicted) == expected, text
        if expected:
            assert {reason for _, reason in evicted} == {"gangpreempt"}
            assert running(sim, "high") == 4
            assert running(sim, "low") == 0


def test_pods_above_min_available_go_first() -> None:
    """A victim gang of 8 with minAvailable 4 gives its 4 spare pods and keeps running."""
    sim = simulation(GANG, nodes=[NODE, NODE], queues=[{"name": "a"}])
    submit(sim, "low", "a", 8, 4, CPU, "p0")
    assert sim.settle(20) is not None
    submit(sim, "high", "a", 4, 4, CPU, "p100")
    start = len(sim.history)
    assert sim.settle(30) is not None
    assert len(evictions(sim.history[start:])) == 4
    assert running(sim, "low") == 4
    assert running(sim, "high") == 4


def test_a_gang_that_cannot_fit_evicts_nothing() -> None:
    """A gang bigger than the cluster can ever hold for it evicts nothing, and its wait record
    says so."""
    sim = simulation(GANG, nodes=[NODE, NODE], queues=[{"name": "a"}])
    submit(sim, "low", "a", 8, 8, CPU, "p0")
    assert sim.settle(20) is not None
    submit(sim, "huge", "a", 3, 3, {"cpu": "3"}, "p100")
    start = len(sim.history)
    for _ in range(10):
        sim.step()
    assert evictions(sim.history[start:]) == []
    assert running(sim, "low") == 8


def test_abandoned_preemption_is_in_the_wait_record() -> None:
    """Room by resources alone but on no node (a 4.5-cpu pod, 4-cpu nodes): the low gang's 4
    pods are tried, the trial fails, nothing is evicted, and the wait record says so."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "keep", priority=100, running=["n0", "n1"], size="1500m", min_available=2)
    low = add_job(cluster, "low", priority=1, running=["n0", "n0", "n1", "n1"], min_available=4)
    big = add_job(cluster, "big", priority=100, pending=1, size="4500m", phase="Inqueue")
    ssn = open_session(cluster, [StandInGang(), StandInPriority()])
    GangPreemptAction().execute(ssn)
    assert ssn.result.evictions == []
    assert low.count(TaskStatus.RUNNING) == 4
    assert (DETAIL, nothing_evicted("gangpreempt", 4)) in ssn.wait_notes[big.key]


def test_victims_fit_then_the_gang_is_pipelined_in_one_session() -> None:
    """The same cluster with a gang that fits once the low gang is gone: 4 evictions, the
    preemptor pipelined whole, the other high-priority job untouched."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    keep = add_job(cluster, "keep", priority=100, running=["n0", "n1"], size="1500m")
    low = add_job(cluster, "low", priority=1, running=["n0", "n0", "n1", "n1"], min_available=4)
    big = add_job(
        cluster, "big", priority=100, pending=2, size="2500m", min_available=2, phase="Inqueue"
    )
    ssn = open_session(cluster, [StandInGang(), StandInPriority()])
    GangPreemptAction().execute(ssn)
    assert sorted(e.task.name for e in ssn.result.evictions) == sorted(
        t.name for t in low.tasks.values()
    )
    assert big.count(TaskStatus.PIPELINED) == 2
    assert keep.count(TaskStatus.RUNNING) == 2


def test_the_note_names_the_pods_tried() -> None:
    assert nothing_evicted("gangpreempt", 6) == (
        "gangpreempt: gang would not fit after evicting 6 pods: nothing evicted"
    )


def test_gangreclaim_takes_whole_gangs_from_an_overused_queue() -> None:
    """Queue a holds the cluster with two gangs of 4 (minAvailable 4); queue b's gang of 4
    arrives: gangreclaim evicts one of a's gangs whole (reclaim, unable to take a pod from a
    gang at minAvailable, evicts nothing)."""
    for text, expected in ((LEGACY, 0), (GANG, 4)):
        sim = simulation(text, nodes=[NODE, NODE], queues=[{"name": "a"}, {"name": "b"}])
        submit(sim, "a1", "a", 4, 4, CPU)
        submit(sim, "a2", "a", 4, 4, CPU)
        assert sim.settle(20) is not None
        submit(sim, "b1", "b", 4, 4, CPU)
        start = len(sim.history)
        assert sim.settle(30) is not None
        evicted = evictions(sim.history[start:])
        assert len(evicted) == expected, text
        if expected:
            assert {reason for _, reason in evicted} == {"gangreclaim"}
            assert running(sim, "b1") == 4
            assert sorted((running(sim, "a1"), running(sim, "a2"))) == [0, 4]


# ---- the invariant over random clusters -------------------------------------------------------


class Checked:
    """Wraps a gang action: after it runs, (a) every job it pipelined pods for is pipelined
    whole, and it evicted nothing unless it pipelined a gang; (b) no job that lost a pod to it
    keeps pods while below its minAvailable."""

    def __init__(self, inner: GangPreemptAction | GangReclaimAction) -> None:
        self.inner = inner
        self.name = inner.name

    def execute(self, ssn: Session) -> None:
        before = {k: j.count(TaskStatus.PIPELINED) for k, j in ssn.jobs.items()}
        evicted_before = len(ssn.result.evictions)
        self.inner.execute(ssn)
        gained = [k for k, j in ssn.jobs.items() if j.count(TaskStatus.PIPELINED) > before[k]]
        ours = ssn.result.evictions[evicted_before:]
        for key in gained:
            job = ssn.jobs[key]
            assert job.is_pipelined(), key  # (a)
        if ours:
            assert gained, [e.task.name for e in ours]  # (a)
        for key in {e.task.job for e in ours}:
            job = ssn.jobs[key]
            holding = job.ready_task_num()
            assert holding == 0 or holding >= job.min_available, key  # (b)


def checked_registry() -> Registry:
    actions = dict(ACTIONS)
    actions["gangpreempt"] = lambda args: Checked(GangPreemptAction(args))
    actions["gangreclaim"] = lambda args: Checked(GangReclaimAction(args))
    return Registry(plugins=PLUGINS, actions=actions)


JobRow = tuple[str, str, int, int, str, str]  # name, queue, replicas, min, cpu, class
Scenario = tuple[int, list[int], list[list[JobRow]]]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """(queue count, node cpus, two waves of gangs): the first low-priority, filling the
    cluster; the second of any priority, arriving to it full."""
    queue_count = draw(st.integers(1, 3))
    node_cpus = draw(st.lists(st.integers(2, 6), min_size=1, max_size=4))
    waves: list[list[JobRow]] = [[], []]
    for index in range(draw(st.integers(2, 8))):
        replicas = draw(st.integers(1, 6))
        wave = draw(st.integers(0, 1))
        row = (
            f"j{index}",
            f"q{draw(st.integers(0, queue_count - 1))}",
            replicas,
            draw(st.integers(1, replicas)),
            draw(st.sampled_from(["500m", "1", "2"])),
            draw(st.sampled_from(["p0", "p10"] if wave == 0 else ["p0", "p10", "p100"])),
        )
        waves[wave].append(row)
    return queue_count, node_cpus, waves


EXAMPLES = int(os.environ.get("CALDERA_GANG_EVICT_EXAMPLES", "60"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(scenario=scenarios())
def test_gang_eviction_invariants(scenario: Scenario) -> None:
    """(a) and (b) in every session (``Checked``), and (c): once settled, 10 more sessions
    evict nothing."""
    queue_count, node_cpus, waves = scenario
    nodes = [{"cpu": str(cpu), "memory": "32Gi"} for cpu in node_cpus]
    sim = simulation(GANG, nodes=nodes, queues=[{"name": f"q{i}"} for i in range(queue_count)])
    sim.registry = checked_registry()
    for wave in waves:
        for name, queue, replicas, min_available, cpu, priority in wave:
            submit(sim, name, queue, replicas, min_available, {"cpu": cpu}, priority)
        assert sim.settle(60) is not None, "did not settle in 60 sessions"
    settled = len(sim.history)
    for _ in range(10):
        sim.step()
    assert evictions(sim.history[settled:]) == []  # (c)


# ---- the simulator's measure ------------------------------------------------------------------


def test_evictions_without_placement_counts_room_nobody_took() -> None:
    """An evicted pod whose node gets another job's pod within the window made room for it;
    one whose node gets only its own job's pod back, or nothing, led to no placement."""
    victim = JobResult(
        job="ns/low",
        queue="q",
        arrival=0,
        pods=[
            PodRun(pod="low-0", attempt=1, node="n0", bound=1, ended=100, outcome="Evicted"),
            PodRun(pod="low-1", attempt=1, node="n1", bound=1, ended=100, outcome="Evicted"),
            PodRun(pod="low-1", attempt=2, node="n1", bound=102),
            PodRun(pod="low-2", attempt=1, node="n2", bound=1, ended=100, outcome="Evicted"),
        ],
    )
    preemptor = JobResult(
        job="ns/high",
        queue="q",
        arrival=90,
        pods=[
            PodRun(pod="high-0", attempt=1, node="n0", bound=101),
            PodRun(pod="high-1", attempt=1, node="n2", bound=500),
        ],
    )
    assert evictions_without_placement([victim, preemptor], within=10) == 2
    assert evictions_without_placement([victim, preemptor], within=1000) == 1


# ---- hard network topology --------------------------------------------------------------------


@pytest.mark.parametrize(("wide_min", "evicted_nodes"), [(2, set()), (1, {"n0", "n1"})])
def test_victims_stay_in_one_rack_and_no_gang_is_cut_across_racks(
    wide_min: int, evicted_nodes: set[str]
) -> None:
    """Two racks of two 8-cpu nodes, full: gang 'wide' has a pod in each rack (n0, n2), 'l1' on
    n1 and 'l3' on n3. A hard-mode gang of two 8-cpu pods must take one rack. With wide at its
    minAvailable (2) neither rack can be freed without cutting wide in two, so nothing is
    evicted (Volcano evicts wide's pod in the rack and leaves it running broken); with wide's
    minAvailable 1 its pod on n0 is spare, and r0 is freed: both victims in r0."""
    from scheduler.conf import SchedulerConf
    from scheduler.framework.plugin import PluginOption
    from scheduler.framework.runner import run_session
    from unit.test_sched_topology import topology_cluster, with_topology

    cluster, where = topology_cluster(spines=1, racks=2, nodes=2)
    wide = add_job(cluster, "wide", running=["n0", "n2"], size="8", priority=1)
    wide.min_available = wide_min
    add_job(cluster, "l1", running=["n1"], size="8", priority=1)
    add_job(cluster, "l3", running=["n3"], size="8", priority=1)
    job = add_job(
        cluster, "high", pending=2, size="8", min_available=2, priority=100, phase="Inqueue"
    )
    with_topology(job, highest_tier_allowed=1)
    tiers = (
        ("priority", "gang", "conformance"),
        ("predicates", "nodeorder", "network-topology-aware"),
    )
    conf = SchedulerConf(
        actions=("allocate", "gangpreempt"),
        tiers=tuple(tuple(PluginOption(p) for p in tier) for tier in tiers),
    )
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, Registry(plugins=PLUGINS, actions=ACTIONS))
    evicted = {e.task.node_name for e in ssn.result.evictions}
    assert evicted == evicted_nodes
    if evicted_nodes:
        assert {where[n][0] for n in evicted} == {"r0"}
        assert {t.node_name for t in job.tasks.values()} == evicted_nodes
        assert wide.count(TaskStatus.RUNNING) == 1  # its spare pod went, the gang runs on
    else:
        assert job.count(TaskStatus.PIPELINED) == 0
        assert wide.count(TaskStatus.RUNNING) == 2
