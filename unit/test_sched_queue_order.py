"""Queue priority and dequeue strategy: the order victims are evicted in across queues and jobs
(Volcano's BuildVictimsPriorityQueue: the lower-priority queue loses first), capacity's
hierarchy level among victim queues, and ``spec.dequeueStrategy`` fifo holding a queue's later
jobs behind its first in enqueue and allocate."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Queue, QueueSpec
from caldera.api.why import WaitStage
from scheduler.actions.enqueue import EnqueueAction
from scheduler.actions.reclaim import ReclaimAction
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo
from scheduler.framework.plugin import Arguments, Plugin, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.capacity import CapacityPlugin, shared_depth
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.snapshot import queue_info
from unit.sched_fixtures import (
    StandInGang,
    StandInPriority,
    add_job,
    cpu,
    cpu_cluster,
    make_cluster,
    make_job,
    make_node,
    open_session,
    run,
)
from unit.sched_reference import ReferenceReclaimAction


def three_queues() -> ClusterInfo:
    """One 12-cpu node; queues low (priority 0), high (priority 5) and poor, one weight each."""
    return cpu_cluster(
        {"n0": "12"}, [QueueInfo("low"), QueueInfo("high", priority=5), QueueInfo("poor")]
    )


def reclaim_tiers() -> list[list[Plugin]]:
    return [[StandInGang(), ProportionPlugin(Arguments("proportion", {}))]]


@pytest.mark.parametrize("action", [ReclaimAction, ReferenceReclaimAction])
def test_reclaim_takes_from_the_lower_priority_queue_first(action: type) -> None:
    """low and high hold 6 cpu each on one full node and deserve 5 (poor deserves the 2 it
    asks for): poor's first pod takes its room from low, the lower-priority queue, its second
    from high, which low can no longer give; the reverse task order alone (then the key:
    job "a" before "b") would have taken high's pod first. Fast and plain paths alike."""
    cluster = three_queues()
    low = add_job(cluster, "b", queue="low", running=6)
    high = add_job(cluster, "a", queue="high", running=6)
    add_job(cluster, "c", queue="poor", pending=2)
    ssn = open_session(cluster, *reclaim_tiers())
    action().execute(ssn)
    assert [e.task.job for e in ssn.result.evictions] == [low.key, high.key]


def order(ssn: Session, preemptor: TaskInfo | None, victims: Sequence[TaskInfo]) -> list[str]:
    return [t.name for t in sorted(victims, key=ssn.victim_order_key(preemptor))]


def test_victim_order_across_queues_jobs_and_tasks() -> None:
    """Across queues the reverse of queue order; within a queue the reverse of job order (the
    lower-priority job first); within a job the reverse of task order, then the key."""
    cluster = cpu_cluster({"n0": "16"}, [QueueInfo("a", priority=1), QueueInfo("b", priority=9)])
    in_b_low = add_job(cluster, "b-low", queue="b", priority=1, running=2)
    in_b_high = add_job(cluster, "b-high", queue="b", priority=7, running=1)
    in_a = add_job(cluster, "a-top", queue="a", priority=100, running=1)
    preemptor = add_job(cluster, "p", queue="b", priority=50, pending=1)
    ssn = open_session(cluster, [StandInPriority()])

    def job_order(left: JobInfo, right: JobInfo) -> int:
        return (left.priority < right.priority) - (left.priority > right.priority)

    ssn.add_job_order_fn("priority", job_order)
    ssn.add_queue_order_fn(
        "priority", lambda lq, rq: (lq.priority < rq.priority) - (lq.priority > rq.priority)
    )
    victims = [
        *in_b_high.tasks.values(),
        *in_a.tasks.values(),
        *in_b_low.tasks.values(),
    ]
    got = order(ssn, next(iter(preemptor.tasks.values())), victims)
    assert got == ["a-top-0", "b-low-0", "b-low-1", "b-high-0"]


def test_victim_order_without_the_preemptor_job_ignores_queues() -> None:
    """A preemptor whose job is unknown: jobs are compared across queues as within one (the
    task key decides here), not by queue (which would put the lower-priority queue a's
    first)."""
    cluster = cpu_cluster({"n0": "16"}, [QueueInfo("a", priority=1), QueueInfo("b", priority=9)])
    in_b = add_job(cluster, "a-job", queue="b", running=1)
    in_a = add_job(cluster, "b-job", queue="a", running=1)
    ssn = Session(cluster, [])
    ssn.add_queue_order_fn(
        "q", lambda lq, rq: (lq.priority < rq.priority) - (lq.priority > rq.priority)
    )
    victims = [*in_a.tasks.values(), *in_b.tasks.values()]
    assert order(ssn, None, victims) == ["a-job-0", "b-job-0"]
    preemptor = add_job(cluster, "p", queue="b", pending=1)
    assert order(ssn, next(iter(preemptor.tasks.values())), victims) == ["b-job-0", "a-job-0"]


def test_victim_of_a_vanished_job_goes_first() -> None:
    """A task whose job left the session (its PodGroup deleted) is evicted before others."""
    cluster = cpu_cluster({"n0": "16"})
    kept = add_job(cluster, "z-kept", running=1)
    gone = add_job(cluster, "a-gone", running=1)
    preemptor = add_job(cluster, "p", pending=1)
    del cluster.jobs[gone.key]
    ssn = Session(cluster, [])
    victims = [*kept.tasks.values(), *gone.tasks.values()]
    assert order(ssn, next(iter(preemptor.tasks.values())), victims) == ["a-gone-0", "z-kept-0"]


def test_victim_queue_order_functions_come_before_the_reverse_queue_order() -> None:
    """A victim queue order function that has an opinion decides; one answering 0 leaves the
    reverse of queue order (then the name) to decide."""
    low, high, own = QueueInfo("low"), QueueInfo("high", priority=5), QueueInfo("own")
    ssn = Session(make_cluster([make_node("n0")], [], [low, high, own]), [])
    ssn.add_queue_order_fn(
        "q", lambda lq, rq: (lq.priority < rq.priority) - (lq.priority > rq.priority)
    )
    assert ssn.victim_queue_order(low, high, own) < 0
    assert ssn.victim_queue_order(high, low, own) > 0
    ssn.add_victim_queue_order_fn("near", lambda lq, rq, pq: -1 if lq is high else 1)
    assert ssn.victim_queue_order(low, high, own) > 0


def test_capacity_hierarchy_takes_from_the_nearer_queue_first() -> None:
    """With enableHierarchy a sibling of the reclaimer's queue loses before a cousin, whatever
    their priorities (Volcano's getQueueLevel); without it capacity has no opinion."""
    queues = [
        QueueInfo("root"),
        QueueInfo("org", parent="root", deserved=cpu("8")),
        QueueInfo("lab", parent="root", deserved=cpu("8")),
        QueueInfo("team-a", parent="org", deserved=cpu("4")),
        QueueInfo("team-b", parent="org", deserved=cpu("4")),
        QueueInfo("cousin", parent="lab", deserved=cpu("8"), priority=9),
    ]
    cluster = make_cluster([make_node("n0", "16")], [], queues)
    by_name = {q.name: q for q in queues}
    for hierarchy, expected in ((True, -1), (False, 0)):
        ssn = Session(cluster, [[PluginOption("capacity", {}, {"enableHierarchy": hierarchy})]])
        plugin = CapacityPlugin(Arguments("capacity", {}))
        plugin.on_session_open(ssn)
        answer = plugin.victim_queue_order(by_name["team-b"], by_name["cousin"], by_name["team-a"])
        assert answer == expected
        if hierarchy:
            # The session asks it: team-b, the sibling, loses first although cousin ranks
            # lower in queue order (higher priority goes first, so cousin would lose last).
            assert (
                ssn.victim_queue_order(by_name["cousin"], by_name["team-b"], by_name["team-a"]) > 0
            )


def test_shared_depth() -> None:
    """Leading ancestors in common, from the top's child down."""
    assert shared_depth(("org", "x"), ("org", "y")) == 1
    assert shared_depth(("org",), ("org", "y")) == 1
    assert shared_depth((), ("org",)) == 0
    assert shared_depth(("lab",), ("org",)) == 0


# ---- dequeueStrategy ----------------------------------------------------------------------------


def blocked_head_cluster(strategy: str) -> ClusterInfo:
    """A 2-cpu node; queue q: first a gang of 3 (cannot fit), then a job of 1 pod (fits)."""
    head = make_job("head", 3, queue="q", created=0)
    small = make_job("small", 1, queue="q", created=1)
    return make_cluster(
        [make_node("n0", "2")], [head, small], [QueueInfo("q", dequeue_strategy=strategy)]
    )


@pytest.mark.parametrize(("strategy", "placed"), [("traverse", ["small-0"]), ("fifo", [])])
def test_allocate_fifo_holds_later_jobs_behind_an_unplaceable_head(
    strategy: str, placed: list[str]
) -> None:
    """traverse skips the gang that cannot fit and places the next job; fifo places nothing
    in the queue while its first job cannot be placed, and says why."""
    ssn = run(blocked_head_cluster(strategy), actions="allocate")
    assert [b.task.name for b in ssn.result.binds] == placed
    if strategy == "fifo":
        record = ssn.result.podgroup_why["ns/small"]
        assert record.stage == WaitStage.ALLOCATE
        assert record.summary == (
            "queue q is fifo (dequeueStrategy): this job waits until job ns/head, ahead of "
            "it, is placed"
        )


def test_allocate_fifo_moves_on_once_the_head_is_placed() -> None:
    """A fifo queue whose first job is placed goes on to the next."""
    head = make_job("head", 2, queue="q", created=0)
    small = make_job("small", 1, queue="q", created=1)
    cluster = make_cluster(
        [make_node("n0", "4")], [head, small], [QueueInfo("q", dequeue_strategy="fifo")]
    )
    ssn = run(cluster, actions="allocate")
    assert sorted(b.task.name for b in ssn.result.binds) == ["head-0", "head-1", "small-0"]


def test_allocate_fifo_holds_only_its_own_queue() -> None:
    """Another queue's jobs are placed while a fifo queue waits on its head."""
    head = make_job("head", 3, queue="q", created=0)
    behind = make_job("behind", 1, queue="q", created=1)
    other = make_job("other", 1, queue="r", created=2)
    cluster = make_cluster(
        [make_node("n0", "2")],
        [head, behind, other],
        [QueueInfo("q", dequeue_strategy="fifo"), QueueInfo("r")],
    )
    ssn = run(cluster, actions="allocate")
    assert [b.task.name for b in ssn.result.binds] == ["other-0"]


@pytest.mark.parametrize(("strategy", "admitted"), [("traverse", ["ns/small"]), ("fifo", [])])
def test_enqueue_fifo_stops_at_the_first_job_not_admitted(
    strategy: str, admitted: list[str]
) -> None:
    """A job whose minResources are refused keeps the fifo queue's later jobs Pending too."""
    big = make_job("big", 1, queue="q", phase="Pending", min_resources={"cpu": "100"})
    small = make_job("small", 1, queue="q", phase="Pending", min_resources={"cpu": "1"}, created=1)
    cluster = make_cluster(
        [make_node("n0")], [big, small], [QueueInfo("q", dequeue_strategy=strategy)]
    )
    ssn = Session(cluster, [])
    ssn.add_job_enqueueable_fn("cap", lambda j: 1 if j.min_resources.get("cpu") <= 1000 else -1)
    EnqueueAction({}).execute(ssn)
    assert ssn.result.podgroup_phase_inqueue == admitted
    if strategy == "fifo":
        assert ssn.wait_notes["ns/small"] == [
            (
                WaitStage.ENQUEUE,
                "queue q is fifo (dequeueStrategy): this job waits until job ns/big, ahead of "
                "it, is admitted",
            )
        ]


def test_snapshot_reads_the_dequeue_strategy() -> None:
    """The queue's spec.dequeueStrategy reaches the session's QueueInfo."""
    fifo = queue_info(Queue(metadata=ObjectMeta(name="q"), spec=QueueSpec(dequeue_strategy="fifo")))
    assert fifo.fifo
    assert not queue_info(Queue(metadata=ObjectMeta(name="q"))).fifo
