"""preempt: a starving job evicts lower-priority tasks of its queue only when that makes it
whole, never takes a victim gang below minAvailable, and honours preemption toleration.

The gang and priority semantics come from small stand-in plugins defined here, so these tests
exercise the action and the session's vote combination, not the real gang/priority plugins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from caldera.api.core import Pod, PodSpec, PriorityClass
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from scheduler.actions.preempt import PreemptAction
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments, Plugin, PluginOption
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.preemption_toleration import (
    MINIMUM_PREEMPTABLE_PRIORITY,
    SIGS_K8S_PREFIX,
    PreemptionTolerationPlugin,
)
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class StandInGang:
    """Gang for the tests: a job can lose only tasks beyond minAvailable; it is starving
    below minAvailable and pipelined at it."""

    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            spare: dict[str, int] = {}
            chosen = []
            for task in candidates:
                job = ssn.jobs[task.job]
                left = spare.get(task.job, job.ready_task_num() - job.min_available)
                if left > 0:
                    chosen.append(task)
                    left -= 1
                spare[task.job] = left
            return chosen

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        ssn.add_job_starving_fn(self.name, lambda j: 1 if j.is_starving() else -1)
        ssn.add_job_pipelined_fn(self.name, lambda j: 1 if j.is_pipelined() else -1)

    def on_session_close(self, ssn: Session) -> None:
        return None


class StandInPriority:
    """Priority for the tests: higher task priority first; victims of lower-priority jobs, or
    lower-priority tasks of the preemptor's own job. With ``greedy`` a job starves while any
    of its tasks is unplaced (Volcano's priority plugin)."""

    name = "priority"

    def __init__(self, greedy: bool = False) -> None:
        self.greedy = greedy

    def on_session_open(self, ssn: Session) -> None:
        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            mine = ssn.jobs[preemptor.job].priority
            return [
                t
                for t in candidates
                if (t.job != preemptor.job and ssn.jobs[t.job].priority < mine)
                or (t.job == preemptor.job and t.priority < preemptor.priority)
            ]

        def task_order(left: TaskInfo, right: TaskInfo) -> int:
            return (left.priority < right.priority) - (left.priority > right.priority)

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_task_order_fn(self.name, task_order)
        if self.greedy:
            ssn.add_job_starving_fn(self.name, lambda j: 1 if j.count(TaskStatus.PENDING) else -1)

    def on_session_close(self, ssn: Session) -> None:
        return None


def new_cluster(nodes: dict[str, str], queues: Sequence[QueueInfo] = ()) -> ClusterInfo:
    cluster = ClusterInfo(now=T0)
    for queue in queues or [QueueInfo("default")]:
        cluster.queues[queue.name] = queue
    for name, cpu in nodes.items():
        cluster.nodes[name] = NodeInfo(name, Resources.from_list({"cpu": cpu, "pods": "110"}))
    return cluster


def add_job(
    cluster: ClusterInfo,
    name: str,
    *,
    queue: str = "default",
    priority: int = 0,
    min_available: int = 1,
    running: Sequence[str] = (),
    pending: int = 0,
    size: str = "1",
    phase: str = "Running",
    task_priorities: Sequence[int] = (),
    class_name: str = "",
) -> JobInfo:
    """A job with tasks running on the given nodes, then ``pending`` pending tasks."""
    job = JobInfo(
        key=f"ns/{name}",
        namespace="ns",
        name=name,
        queue=queue,
        priority=priority,
        min_available=min_available,
        min_task_member={},
        min_resources=Resources(),
        creation=T0,
        phase=phase,
    )
    req = Resources.from_list({"cpu": size})
    nodes = list(running) + [""] * pending
    for i, node in enumerate(nodes):
        task_priority = task_priorities[i] if i < len(task_priorities) else priority
        task = TaskInfo(
            uid=f"{name}-{i}",
            namespace="ns",
            name=f"{name}-{i}",
            job=job.key,
            role="w",
            resreq=req,
            init_resreq=req,
            priority=task_priority,
            status=TaskStatus.RUNNING if node else TaskStatus.PENDING,
            node_name=node,
            pod=Pod(
                metadata=ObjectMeta(name=f"{name}-{i}", namespace="ns"),
                spec=PodSpec(priority=task_priority, priority_class_name=class_name),
            ),
            scheduled_at=T0 - dt.timedelta(hours=1) if node else None,
        )
        job.add_task(task)
        if node:
            cluster.nodes[node].add_task(task)
    cluster.jobs[job.key] = job
    return job


def open_session(cluster: ClusterInfo, tiers: Sequence[Sequence[Plugin]]) -> Session:
    ssn = Session(cluster, [[PluginOption(p.name) for p in tier] for tier in tiers])
    for tier in tiers:
        for plugin in tier:
            plugin.on_session_open(ssn)
    return ssn


def default_tiers() -> list[list[Plugin]]:
    return [[StandInGang(), StandInPriority()]]


def evicted(ssn: Session) -> list[str]:
    return sorted(e.task.name for e in ssn.result.evictions)


def test_preemption_makes_the_preemptor_whole() -> None:
    """A starving gang of 2 evicts exactly 2 lower-priority tasks and is pipelined."""
    cluster = new_cluster({"n0": "4"})
    low = add_job(cluster, "low", priority=1, running=["n0"] * 4)
    high = add_job(cluster, "high", priority=10, min_available=2, pending=2, phase="Inqueue")
    ssn = open_session(cluster, default_tiers())
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
    cluster = new_cluster({"n0": "4"})
    low = add_job(cluster, "low", priority=1, min_available=victim_min, running=["n0"] * 4)
    high = add_job(
        cluster, "high", priority=10, min_available=preemptor_min, pending=preemptor_tasks
    )
    ssn = open_session(cluster, default_tiers())
    PreemptAction().execute(ssn)
    assert len(ssn.result.evictions) == evictions
    assert low.ready_task_num() == 4 - evictions >= victim_min
    assert high.count(TaskStatus.PIPELINED) == evictions
    if not evictions:
        assert ssn.nodes["n0"].releasing.is_empty()
        assert ssn.nodes["n0"].pipelined.is_empty()


def test_gang_preemption_spans_nodes() -> None:
    """A gang of 3 takes victims on two nodes, committed together."""
    cluster = new_cluster({"n0": "2", "n1": "2"})
    add_job(cluster, "low", priority=1, running=["n0", "n0", "n1", "n1"])
    high = add_job(cluster, "high", priority=10, min_available=3, pending=3)
    ssn = open_session(cluster, default_tiers())
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
    cluster = new_cluster({"n0": "2"}, [QueueInfo("default"), QueueInfo("other")])
    add_job(cluster, "low", queue=victim_queue, priority=victim_priority, running=["n0"] * 2)
    high = add_job(cluster, "high", priority=10, pending=1)
    ssn = open_session(cluster, default_tiers())
    PreemptAction().execute(ssn)
    assert ssn.result.evictions == []
    assert high.count(TaskStatus.PENDING) == 1


def test_only_as_many_victims_as_needed_lowest_first() -> None:
    """With 1 cpu free a 2-cpu preemptor evicts one victim: the lowest-priority task."""
    cluster = new_cluster({"n0": "4"})
    add_job(
        cluster,
        "low",
        priority=1,
        running=["n0"] * 3,
        task_priorities=[5, 1, 3],
    )
    add_job(cluster, "high", priority=10, pending=1, size="2")
    ssn = open_session(cluster, default_tiers())
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["low-1"]


def test_pending_podgroups_do_not_preempt() -> None:
    """A job whose PodGroup is still Pending (not enqueued) never preempts."""
    cluster = new_cluster({"n0": "1"})
    add_job(cluster, "low", priority=1, running=["n0"])
    add_job(cluster, "high", priority=10, pending=1, phase="Pending")
    ssn = open_session(cluster, default_tiers())
    PreemptAction().execute(ssn)
    assert ssn.result.evictions == []


def test_toleration_protects_victims() -> None:
    """Victims whose PriorityClass tolerates the preemptor are not evicted; others are."""
    cluster = new_cluster({"n0": "1", "n1": "1"})
    key = SIGS_K8S_PREFIX + MINIMUM_PREEMPTABLE_PRIORITY
    cluster.priority_classes["patient"] = PriorityClass(
        metadata=ObjectMeta(name="patient", annotations={key: "1000"}), value=1
    )
    add_job(cluster, "tolerant", priority=1, min_available=0, running=["n0"], class_name="patient")
    add_job(cluster, "plain", priority=1, min_available=0, running=["n1"])
    add_job(cluster, "high", priority=10, pending=1)
    tiers: list[list[Plugin]] = [
        [
            StandInGang(),
            StandInPriority(),
            PreemptionTolerationPlugin(Arguments("preemption-toleration", {})),
        ]
    ]
    ssn = open_session(cluster, tiers)
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["plain-0"]


def test_within_job_higher_priority_task_replaces_lower() -> None:
    """Intra-job preemption: a pending task evicts a lower-priority task of its own job."""
    cluster = new_cluster({"n0": "1"})
    job = add_job(
        cluster,
        "mixed",
        priority=5,
        running=["n0"],
        pending=1,
        task_priorities=[1, 9],
    )
    ssn = open_session(cluster, [[StandInPriority(greedy=True)]])
    PreemptAction().execute(ssn)
    assert evicted(ssn) == ["mixed-0"]
    assert [t.name for t in job.tasks_in(TaskStatus.PIPELINED)] == ["mixed-1"]


def test_free_room_is_used_before_evicting() -> None:
    """A gang of 2 with one slot free elsewhere evicts only one victim."""
    cluster = new_cluster({"n0": "2", "n1": "2"})
    add_job(cluster, "low", priority=1, running=["n0", "n0", "n1"])
    high = add_job(cluster, "high", priority=10, min_available=2, pending=2)
    ssn = open_session(cluster, default_tiers())
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
    cluster = new_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "low", priority=1, running=["n0"] * 4 + ["n1"] * 3)
    high = add_job(cluster, "high", priority=10, min_available=3, pending=3, phase="Inqueue")
    result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
    assert len(result.evictions) == 2
    assert result.binds == []
    assert high.count(TaskStatus.PIPELINED) == 3
