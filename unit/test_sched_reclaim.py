"""reclaim: a queue below its deserved share takes resources back from other, reclaimable and
overused queues, down to their deserved share and never below a victim gang's minAvailable.

Proportion is the real plugin; gang is the stand-in of ``sched_fixtures``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from caldera.api.core import PriorityClass
from caldera.api.meta import ObjectMeta
from scheduler.actions.reclaim import ReclaimAction
from scheduler.api.types import ClusterInfo, QueueInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments, Plugin
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.preemption_toleration import (
    SIGS_K8S_PREFIX,
    TOLERATION_SECONDS,
    PreemptionTolerationPlugin,
)
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.sched_fixtures import StandInGang, add_job, cpu_cluster, open_session


def tiers(*extra: Plugin) -> list[list[Plugin]]:
    return [[StandInGang(), ProportionPlugin(Arguments("proportion", {})), *extra]]


def two_queues(reclaimable: bool = True) -> ClusterInfo:
    return cpu_cluster({"n0": "4"}, [QueueInfo("rich", reclaimable=reclaimable), QueueInfo("poor")])


def run(cluster: ClusterInfo, plugins: Sequence[Sequence[Plugin]]) -> Session:
    ssn = open_session(cluster, *plugins)
    ReclaimAction().execute(ssn)
    return ssn


def test_reclaims_from_an_overused_reclaimable_queue() -> None:
    """The poor queue's gang of 2 gets room from the rich queue, which keeps its share."""
    cluster = two_queues()
    rich = add_job(cluster, "hog", queue="rich", running=["n0"] * 4)
    poor = add_job(cluster, "new", queue="poor", min_available=2, pending=2)
    ssn = run(cluster, tiers())
    assert len(ssn.result.evictions) == 2
    assert {e.reason for e in ssn.result.evictions} == {"reclaim"}
    assert {e.task.job for e in ssn.result.evictions} == {rich.key}
    assert poor.count(TaskStatus.PIPELINED) == 2


def test_non_reclaimable_queue_is_left_alone() -> None:
    """spec.reclaimable false: its tasks are never reclaim candidates."""
    cluster = two_queues(reclaimable=False)
    add_job(cluster, "hog", queue="rich", running=["n0"] * 4)
    poor = add_job(cluster, "new", queue="poor", min_available=2, pending=2)
    ssn = run(cluster, tiers())
    assert ssn.result.evictions == []
    assert poor.count(TaskStatus.PENDING) == 2


@pytest.mark.parametrize(
    ("poor_min", "poor_tasks", "evictions"),
    [
        pytest.param(1, 4, 2, id="up-to-deserved"),
        pytest.param(3, 3, 0, id="gang-beyond-deserved-so-nothing"),
    ],
)
def test_reclaim_stops_at_the_victim_queue_deserved_share(
    poor_min: int, poor_tasks: int, evictions: int
) -> None:
    """The rich queue keeps its deserved 2 cpu; a gang that needs more gets nothing at all."""
    cluster = two_queues()
    rich = add_job(cluster, "hog", queue="rich", running=["n0"] * 4)
    poor = add_job(cluster, "new", queue="poor", min_available=poor_min, pending=poor_tasks)
    ssn = run(cluster, tiers())
    assert len(ssn.result.evictions) == evictions
    assert rich.ready_task_num() == 4 - evictions
    assert poor.count(TaskStatus.PIPELINED) == evictions


def test_overused_queue_does_not_reclaim() -> None:
    """A queue already at its deserved share takes nothing more."""
    cluster = two_queues()
    add_job(cluster, "a", queue="rich", running=["n0"] * 2)
    poor = add_job(cluster, "b", queue="poor", running=["n0"] * 2, pending=2)
    ssn = run(cluster, tiers())
    assert ssn.result.evictions == []
    assert poor.count(TaskStatus.PENDING) == 2


def test_same_queue_is_not_reclaimed_from() -> None:
    """Reclaim only takes from other queues (within a queue, preempt decides)."""
    cluster = cpu_cluster({"n0": "2"})
    add_job(cluster, "old", running=["n0"] * 2)
    add_job(cluster, "new", pending=1)
    ssn = run(cluster, tiers())
    assert ssn.result.evictions == []


def test_victim_gang_kept_at_min_available() -> None:
    """A victim job at its minAvailable loses nothing, even from an overused queue."""
    cluster = two_queues()
    add_job(cluster, "hog", queue="rich", min_available=4, running=["n0"] * 4)
    add_job(cluster, "new", queue="poor", pending=1)
    ssn = run(cluster, tiers())
    assert ssn.result.evictions == []


def test_reclaim_honours_preemption_toleration() -> None:
    """A victim whose PriorityClass tolerates the reclaimer for now is not evicted."""
    cluster = two_queues()
    cluster.priority_classes["patient"] = PriorityClass(
        metadata=ObjectMeta(
            name="patient", annotations={SIGS_K8S_PREFIX + TOLERATION_SECONDS: "-1"}
        ),
        value=0,
    )
    add_job(cluster, "hog", queue="rich", running=["n0"] * 4, priority_class="patient")
    add_job(cluster, "new", queue="poor", pending=1)
    toleration = PreemptionTolerationPlugin(Arguments("preemption-toleration", {}))
    assert run(cluster, tiers(toleration)).result.evictions == []


def test_full_cycle_with_the_real_plugins() -> None:
    """Through the registry and a Volcano configuration, the poor queue's gang gets its
    deserved half of the cluster back from the rich queue."""
    conf = parse_conf(
        'actions: "enqueue, allocate, reclaim, backfill"\n'
        "tiers:\n"
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
        "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n",
        actions=ACTIONS.keys(),
        plugins=PLUGINS.keys(),
    )
    cluster = two_queues()
    add_job(cluster, "hog", queue="rich", running=["n0"] * 4)
    poor = add_job(cluster, "new", queue="poor", min_available=2, pending=3, phase="Inqueue")
    result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
    assert sorted(e.task.name for e in result.evictions) == ["hog-0", "hog-1"]
    assert poor.count(TaskStatus.PIPELINED) == 2


def test_every_tier_must_allow_a_victim() -> None:
    """Gang in the first tier would give up a pod of queue a; proportion in the second tier
    refuses, since a would drop below its deserved share, so nothing is reclaimed (Volcano lets
    the first tier decide, and two such queues then reclaim from each other forever)."""
    cluster = cpu_cluster(
        {"n0": "4"}, [QueueInfo("a"), QueueInfo("b"), QueueInfo("c", reclaimable=False)]
    )
    add_job(cluster, "ja", queue="a", running=["n0"] * 2)
    add_job(cluster, "jc", queue="c", running=["n0"] * 2)
    poor = add_job(cluster, "jb", queue="b", pending=2)
    ssn = run(cluster, [[StandInGang()], [ProportionPlugin(Arguments("proportion", {}))]])
    assert ssn.result.evictions == []
    assert poor.count(TaskStatus.PENDING) == 2
