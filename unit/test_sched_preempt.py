"""preempt: a starving job evicts lower-priority tasks of its queue only when that makes it
whole, never takes a victim gang below minAvailable, and honours preemption toleration.

The gang and priority semantics come from the small stand-in plugins of ``sched_fixtures``, so
these tests exercise the action and the session's vote combination, not the real gang/priority
plugins.
"""

from __future__ import annotations

import pytest

from caldera.api.core import PriorityClass
from caldera.api.meta import ObjectMeta
from scheduler.actions.preempt import PreemptAction
from scheduler.api.types import QueueInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments, Plugin
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.preemption_toleration import (
    MINIMUM_PREEMPTABLE_PRIORITY,
    SIGS_K8S_PREFIX,
    PreemptionTolerationPlugin,
)
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.sched_fixtures import StandInGang, StandInPriority, add_job, cpu_cluster, open_session


def standins() -> list[Plugin]:
    """The stand-in gang and priority, in one tier."""
    return [StandInGang(), StandInPriority()]


def evicted(ssn: Session) -> list[str]:
    return sorted(e.task.name for e in ssn.result.evictions)


def test_preemption_makes_the_preemptor_whole() -> None:
    """A starving gang of 2 evicts exactly 2 lower-priority tasks and is pipelined."""
    cluster = cpu_cluster({"n0": "4"})
    low = add_job(cluster, "low", priority=1, running=["n0"] * 4)
    high = add_job(cluster, "high", priority=10, min_available=2, pending=2, phase="Inqueue")
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert len(ssn.result.evictions) == 2
    assert {e.reason for e in ssn.result.evictions} == {"preempt"}
    assert high.count(TaskStatus.PIPELINED) == 2
    assert low.count(TaskStatus.RELEASING) == 2
    assert ssn.result.binds == []


@pytest.mark.parametrize(
    ("victim_min", "preemptor_min", "preemptor_tasks", "evictions"),
    [
        pytest.param(1, 3, 3, 3, id="whole"),
        pytest.param(2, 3, 3, 0, id="would-be-half-so-nothing"),
        pytest.param(3, 1, 2, 1, id="stops-once-not-starving"),
        pytest.param(4, 1, 1, 0, id="victim-gang-at-minimum"),
    ],
)
def test_gang_on_both_sides(
    victim_min: int, preemptor_min: int, preemptor_tasks: int, evictions: int
) -> None:
    """Evict only when the preemptor becomes pipelined, and never below the victim's
    minAvailable; a discarded attempt leaves no trace."""
    cluster = cpu_cluster({"n0": "4"})
    low = add_job(cluster, "low", priority=1, min_available=victim_min, running=["n0"] * 4)
    high = add_job(
        cluster, "high", priority=10, min_available=preemptor_min, pending=preemptor_tasks
    )
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert len(ssn.result.evictions) == evictions
    assert low.ready_task_num() == 4 - evictions >= victim_min
    assert high.count(TaskStatus.PIPELINED) == evictions
    if not evictions:
        assert ssn.nodes["n0"].releasing.is_empty()
        assert ssn.nodes["n0"].pipelined.is_empty()


def test_gang_preemption_spans_nodes() -> None:
    """A gang of 3 takes victims on two nodes, committed together."""
    cluster = cpu_cluster({"n0": "2", "n1": "2"})
    add_job(cluster, "low", priority=1, running=["n0", "n0", "n1", "n1"])
    high = add_job(cluster, "high", priority=10, min_available=3, pending=3)
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert len(ssn.result.evictions) == 3
    assert {t.node_name for t in high.tasks_in(TaskStatus.PIPELINED)} == {"n0", "n1"}


@pytest.mark.parametrize(
    ("victim_queue", "victim_priority"),
    [
        pytest.param("other", 1, id="other-queue"),
        pytest.param("default", 10, id="equal-priority"),
    ],
)
def test_no_victims_outside_the_queue_or_at_equal_priority(
    victim_queue: str, victim_priority: int
) -> None:
    """Preempt stays inside the preemptor's queue and below its priority."""
    cluster = cpu_cluster({"n0": "2"}, [QueueInfo("default"), QueueInfo("other")])
    add_job(cluster, "low", queue=victim_queue, priority=victim_priority, running=["n0"] * 2)
    high = add_job(cluster, "high", priority=10, pending=1)
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert ssn.result.evictions == []
    assert high.count(TaskStatus.PENDING) == 1


def test_only_as_many_victims_as_needed_lowest_first() -> None:
    """With 1 cpu free a 2-cpu preemptor evicts one victim: the lowest-priority task."""
    cluster = cpu_cluster({"n0": "4"})
    add_job(
        cluster,
        "low",
        priority=1,
        running=["n0"] * 3,
        task_priorities=[5, 1, 3],
    )
    add_job(cluster, "high", priority=10, pending=1, size="2")
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["low-1"]


def test_pending_podgroups_do_not_preempt() -> None:
    """A job whose PodGroup is still Pending (not enqueued) never preempts."""
    cluster = cpu_cluster({"n0": "1"})
    add_job(cluster, "low", priority=1, running=["n0"])
    add_job(cluster, "high", priority=10, pending=1, phase="Pending")
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert ssn.result.evictions == []


def test_toleration_protects_victims() -> None:
    """Victims whose PriorityClass tolerates the preemptor are not evicted; others are."""
    cluster = cpu_cluster({"n0": "1", "n1": "1"})
    key = SIGS_K8S_PREFIX + MINIMUM_PREEMPTABLE_PRIORITY
    cluster.priority_classes["patient"] = PriorityClass(
        metadata=ObjectMeta(name="patient", annotations={key: "1000"}), value=1
    )
    add_job(
        cluster, "tolerant", priority=1, min_available=0, running=["n0"], priority_class="patient"
    )
    add_job(cluster, "plain", priority=1, min_available=0, running=["n1"])
    add_job(cluster, "high", priority=10, pending=1)
    toleration = PreemptionTolerationPlugin(Arguments("preemption-toleration", {}))
    ssn = open_session(cluster, [*standins(), toleration])
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["plain-0"]


def test_within_job_higher_priority_task_replaces_lower() -> None:
    """Intra-job preemption: a pending task evicts a lower-priority task of its own job."""
    cluster = cpu_cluster({"n0": "1"})
    job = add_job(
        cluster,
        "mixed",
        priority=5,
        running=["n0"],
        pending=1,
        task_priorities=[1, 9],
    )
    ssn = open_session(cluster, [StandInPriority(greedy=True)])
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["mixed-0"]
    assert [t.name for t in job.tasks_in(TaskStatus.PIPELINED)] == ["mixed-1"]


def test_free_room_is_used_before_evicting() -> None:
    """A gang of 2 with one slot free elsewhere evicts only one victim."""
    cluster = cpu_cluster({"n0": "2", "n1": "2"})
    add_job(cluster, "low", priority=1, running=["n0", "n0", "n1"])
    high = add_job(cluster, "high", priority=10, min_available=2, pending=2)
    ssn = open_session(cluster, standins())
    PreemptAction().execute(ssn)
    assert len(ssn.result.evictions) == 1
    assert sorted(t.node_name for t in high.tasks_in(TaskStatus.PIPELINED)) == ["n0", "n1"]


def test_full_cycle_with_the_real_plugins() -> None:
    """Through the registry and a Volcano configuration: allocate cannot place the gang, preempt
    evicts for it, and nothing is bound yet."""
    conf = parse_conf(
        'actions: "enqueue, allocate, preempt, backfill"\n'
        "tiers:\n"
        "- plugins: [{name: priority}, {name: gang}, {name: conformance},"
        " {name: preemption-toleration}]\n"
        "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n",
        actions=ACTIONS.keys(),
        plugins=PLUGINS.keys(),
    )
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "low", priority=1, running=["n0"] * 4 + ["n1"] * 3)
    high = add_job(cluster, "high", priority=10, min_available=3, pending=3, phase="Inqueue")
    result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
    assert len(result.evictions) == 2
    assert result.binds == []
    assert high.count(TaskStatus.PIPELINED) == 3
