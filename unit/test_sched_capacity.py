"""capacity: per-resource deserved, guarantee and capability, flat and hierarchical; the
callbacks one by one, then whole sessions that lend idle resources and reclaim them, on
hand-made clusters and (hypothesis) on random queue trees, where reclaim must settle on the
deserved split and stop evicting."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskStatus
from scheduler.conf import ConfError, parse_conf
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session, SessionResult
from scheduler.plugins.capacity import CapacityPlugin, capacity_share, insufficient_message
from scheduler.registry import ACTIONS, PLUGINS
from unit.sched_fixtures import (
    add_job,
    cpu,
    cpu_cluster,
    make_cluster,
    make_node,
    make_task,
    run_conf,
)

CONF = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
    enableHierarchy: {hierarchy}
  - name: nodeorder
"""


def queue(name: str, parent: str = "", **amounts: str | int) -> QueueInfo:
    """A queue with deserved/guarantee/capability in cpu (``deserved=4``)."""

    def listed(key: str) -> Resources | None:
        value = amounts.get(key)
        return None if value is None else cpu(str(value))

    return QueueInfo(
        name,
        parent=parent,
        deserved=listed("deserved") or Resources(),
        guarantee=listed("guarantee") or Resources(),
        capability=listed("capability"),
    )


def tree_queues() -> list[QueueInfo]:
    """root -> org (deserved 8) -> team-a (4, guarantee 1), team-b (4)."""
    return [
        queue("root"),
        queue("org", "root", deserved=8),
        queue("team-a", "org", deserved=4, guarantee=1),
        queue("team-b", "org", deserved=4),
    ]


def open_capacity(cluster: ClusterInfo, hierarchy: bool = True) -> tuple[Session, CapacityPlugin]:
    switches = {"enableHierarchy": hierarchy}
    ssn = Session(cluster, [[PluginOption("capacity", {}, switches)]])
    plugin = CapacityPlugin(Arguments("capacity", {}))
    plugin.on_session_open(ssn)
    return ssn, plugin


def session(cluster: ClusterInfo, hierarchy: bool = True) -> Session:
    return run_conf(cluster, CONF.format(hierarchy=str(hierarchy).lower()))


# ---- the callbacks ----------------------------------------------------------------------------


def test_allocatable_holds_every_ancestor_to_its_real_capability() -> None:
    """team-a may borrow beyond its deserved 4 while the cluster has room; not beyond what
    team-b's guarantee leaves, nor into a queue that has children, nor into a closed one."""
    queues = [*tree_queues(), queue("team-c", "org", guarantee=2)]
    cluster = cpu_cluster({"n0": "8", "n1": "4"}, queues)
    add_job(cluster, "busy", queue="team-a", running=["n0"] * 8)
    ssn, plugin = open_capacity(cluster)
    one = make_task("x", 0, {"cpu": "1"})
    assert plugin.attrs["team-a"].limits.real_capability == cpu("10")  # 12 - 3 + 1
    assert plugin.allocatable(ssn.queues["team-a"], one)
    add_job(cluster, "more", queue="team-a", running=["n1", "n1"])
    ssn, plugin = open_capacity(cluster)
    assert not plugin.allocatable(ssn.queues["team-a"], one)  # 10 of 10
    assert not plugin.allocatable(ssn.queues["org"], one)  # not a leaf
    assert plugin.allocatable(ssn.queues["team-c"], one)  # its guarantee is its own
    closed = cluster.queues["team-c"]
    closed.state = "Closed"
    assert not plugin.allocatable(closed, one)


def test_flat_mode_ignores_parents() -> None:
    """Without enableHierarchy the tree is not read: org runs jobs, nobody inherits."""
    cluster = cpu_cluster({"n0": "8"}, tree_queues())
    ssn, plugin = open_capacity(cluster, hierarchy=False)
    one = make_task("x", 0, {"cpu": "1"})
    assert plugin.allocatable(ssn.queues["org"], one)
    assert plugin.attrs["team-a"].limits.ancestors == ()


def test_enqueue_gate_names_the_queue_that_is_full() -> None:
    """A job whose minResources exceed what an ancestor may still hold is refused with
    Volcano's event and a wait note naming the ancestor; a leaf's own check comes first."""
    queues = [
        queue("root"),
        queue("org", "root", deserved=4, capability=4),
        queue("a", "org", deserved=2),
        queue("b", "org", deserved=2),
    ]
    cluster = cpu_cluster({"n0": "8"}, queues)
    add_job(cluster, "busy", queue="b", running=["n0"] * 3, min_resources={"cpu": "3"})
    waiting = add_job(cluster, "big", queue="a", phase="Pending", min_resources={"cpu": "2"})
    ssn, plugin = open_capacity(cluster)
    assert plugin.job_enqueueable(waiting) == -1
    [event] = ssn.result.events
    assert event.message == "queue resource quota insufficient: insufficient cpu"
    [(stage, text)] = ssn.wait_notes[waiting.key]
    assert stage == WaitStage.ENQUEUE
    assert text.startswith("queue org (an ancestor of queue a) has 3 cpu of 4 cpu allocated")
    small = add_job(cluster, "small", queue="a", phase="Pending", min_resources={"cpu": "1"})
    assert plugin.job_enqueueable(small) == 1
    plugin.job_enqueued(small)
    assert plugin.attrs["org"].inqueue == cpu("1")  # up the tree
    assert plugin.job_enqueueable(small) == -1  # the room is now reserved


def test_jobs_in_inner_or_detached_queues_wait_with_a_reason() -> None:
    """With hierarchy only leaves run jobs; a queue whose parent is gone runs none."""
    queues = [*tree_queues(), queue("lost", "gone")]
    cluster = cpu_cluster({"n0": "8"}, queues)
    inner = add_job(cluster, "inner", queue="org", phase="Pending", min_resources={"cpu": "1"})
    lost = add_job(cluster, "lost", queue="lost", phase="Pending", min_resources={"cpu": "1"})
    ssn, plugin = open_capacity(cluster)
    assert plugin.job_enqueueable(inner) == -1
    assert plugin.job_enqueueable(lost) == -1
    assert "only in leaf queues" in ssn.wait_notes[inner.key][0][1]
    assert ssn.wait_notes[lost.key][0] == (
        WaitStage.QUEUE,
        "queue lost is not in the queue tree: its parent queue gone does not exist",
    )


@pytest.mark.parametrize(
    ("held", "asked", "deserved", "expected"),
    [
        pytest.param(2, 1, 4, True, id="below-deserved"),
        pytest.param(4, 1, 4, False, id="at-deserved"),
        pytest.param(3, 2, 4, False, id="would-pass-deserved"),
        pytest.param(0, 1, None, False, id="deserves-nothing"),
    ],
)
def test_preemptive(held: int, asked: int, deserved: int | None, expected: bool) -> None:
    """A queue reclaims only for tasks that keep it within what it deserves."""
    q = QueueInfo("q", deserved=cpu(str(deserved)) if deserved is not None else Resources())
    cluster = cpu_cluster({"n0": "16"}, [q, QueueInfo("other")])
    if held:
        add_job(cluster, "held", queue="q", running=["n0"] * held)
    ssn, plugin = open_capacity(cluster, hierarchy=False)
    task = make_task("x", 0, {"cpu": str(asked)})
    assert plugin.preemptive(ssn.queues["q"], [task]) is expected


def test_memory_the_queue_deserves_nothing_of_is_not_compared() -> None:
    """A queue deserving cpu only may reclaim for pods that also ask for memory."""
    q = QueueInfo("q", deserved=cpu("4"))
    cluster = make_cluster([make_node("n0", "16", "64Gi")], [], [q])
    ssn, plugin = open_capacity(cluster, hierarchy=False)
    task = make_task("x", 0, {"cpu": "1", "memory": "1Gi"})
    assert plugin.preemptive(ssn.queues["q"], [task])


def test_reclaimable_keeps_deserved_and_guarantee() -> None:
    """Victims come from a queue above its deserved share only down to it; a queue that
    deserves nothing is best effort; a guarantee is never reclaimed; a victim must free
    something the reclaimer asks for."""
    queues = [
        QueueInfo("rich", deserved=cpu("2")),
        QueueInfo("besteffort"),
        QueueInfo("guarded", guarantee=cpu("2")),
        QueueInfo("poor", deserved=cpu("8")),
    ]
    cluster = cpu_cluster({"n0": "4", "n1": "4", "n2": "4"}, queues)
    rich = add_job(cluster, "rich", queue="rich", running=["n0"] * 4)
    besteffort = add_job(cluster, "be", queue="besteffort", running=["n1"] * 2)
    guarded = add_job(cluster, "g", queue="guarded", running=["n2"] * 2)
    _, plugin = open_capacity(cluster, hierarchy=False)
    reclaimer = make_task("poor", 0, {"cpu": "1"})
    candidates = [
        *rich.tasks.values(),
        *besteffort.tasks.values(),
        *guarded.tasks.values(),
    ]
    victims = plugin.reclaimable(reclaimer, candidates)
    assert [v.job for v in victims].count(rich.key) == 2  # 4 -> 2, its deserved
    assert [v.job for v in victims].count(besteffort.key) == 2
    assert guarded.key not in {v.job for v in victims}  # deserved = its guarantee 2
    gpu_reclaimer = make_task("poor", 1, {"nvidia.com/gpu": "1"})
    assert plugin.reclaimable(gpu_reclaimer, candidates) == []
    assert plugin.may_give(reclaimer, rich)
    assert not plugin.may_give(reclaimer, guarded)


def test_hierarchical_queue_order_compares_branches() -> None:
    """Leaves first; two leaves under different teams are ordered by their teams' shares,
    under one team by their own."""
    queues = [
        queue("root"),
        queue("a", "root", deserved=8),
        queue("b", "root", deserved=8),
        queue("a1", "a", deserved=4),
        queue("a2", "a", deserved=4),
        queue("b1", "b", deserved=4),
    ]
    cluster = cpu_cluster({"n0": "16"}, queues)
    add_job(cluster, "x", queue="a1", running=["n0"] * 6)  # a: 6/8, a1: 6/4
    add_job(cluster, "y", queue="b1", running=["n0"] * 7)  # b: 7/8, b1: 7/4
    ssn, plugin = open_capacity(cluster)
    q = ssn.queues
    assert plugin.queue_order(q["a1"], q["b1"]) == -1  # a's 0.75 before b's 0.875
    assert plugin.queue_order(q["a2"], q["a1"]) == -1  # 0 before 1.5
    assert plugin.queue_order(q["a1"], q["a"]) == -1  # a leaf before an inner queue
    assert plugin.queue_order(q["a"], q["b"]) == -1


def test_share_and_message_helpers() -> None:
    """Share over deserved resources, 1 for a queue that deserves nothing; Volcano's text."""
    assert capacity_share(cpu("3"), cpu("4")) == 0.75
    assert capacity_share(cpu("3"), Resources()) == 1.0
    assert insufficient_message(Resources({"cpu": 1, "memory": 2})) == (
        "queue resource quota insufficient: insufficient cpu, insufficient memory"
    )


def test_proportion_and_capacity_together_are_refused() -> None:
    """Both divide the cluster between queues: the configuration must pick one."""
    text = CONF.format(hierarchy="false").replace("- name: nodeorder", "- name: proportion")
    with pytest.raises(ConfError, match="configure one of them"):
        parse_conf(text, actions=ACTIONS.keys(), plugins=PLUGINS.keys())


# ---- whole sessions ---------------------------------------------------------------------------


def advance(cluster: ClusterInfo, result: SessionResult) -> None:
    """What the cluster looks like a moment after a session: evicted pods are gone and come
    back Pending (a Job's controller recreates them), pipelined and bound pods run."""
    cluster.now = cluster.now + dt.timedelta(seconds=1)
    for job in cluster.jobs.values():
        tasks = list(job.tasks.values())
        for task in tasks:
            job.remove_task(task)
            if task.status == TaskStatus.RELEASING:
                task.status, task.node_name = TaskStatus.PENDING, ""
            elif task.status in (TaskStatus.PIPELINED, TaskStatus.BINDING, TaskStatus.BOUND):
                task.status = TaskStatus.RUNNING
            task.last_transaction, task.fit_error = None, ""
            job.add_task(task)
        job.fit_errors.clear()
        status = result.podgroup_status.get(job.key)
        if status is not None:
            job.phase = status.phase
        elif job.key in result.podgroup_phase_inqueue:
            job.phase = "Inqueue"
    for name, node in list(cluster.nodes.items()):
        fresh = NodeInfo(name, node.allocatable, node=node.node)
        cluster.nodes[name] = fresh
    for job in cluster.jobs.values():
        for task in job.tasks_in(TaskStatus.RUNNING):
            cluster.nodes[task.node_name].add_task(task)


def running(cluster: ClusterInfo, job: JobInfo) -> int:
    return job.count(TaskStatus.RUNNING)


def run_sessions(cluster: ClusterInfo, count: int, hierarchy: bool = True) -> list[SessionResult]:
    results = []
    for _ in range(count):
        ssn = session(cluster, hierarchy)
        results.append(ssn.result)
        advance(cluster, ssn.result)
    return results


def greedy_job(cluster: ClusterInfo, name: str, queue_name: str, pending: int) -> JobInfo:
    return add_job(cluster, name, queue=queue_name, pending=pending, phase="Pending")


def test_idle_share_is_lent_then_reclaimed_to_the_deserved_split() -> None:
    """team-b alone borrows all but team-a's guarantee; when team-a's job arrives it takes
    back its deserved 4 within a few sessions; then nothing is evicted any more."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"}, tree_queues())
    b = greedy_job(cluster, "b", "team-b", 10)
    run_sessions(cluster, 2)
    assert running(cluster, b) == 7  # 8 - team-a's guarantee 1
    a = greedy_job(cluster, "a", "team-a", 10)
    results = run_sessions(cluster, 6)
    assert running(cluster, a) == 4
    assert running(cluster, b) == 4
    settled = next(i for i, r in enumerate(results) if not r.evictions and not r.binds)
    assert settled <= 4, f"still moving pods after {settled} sessions"
    assert all(not r.evictions for r in results[settled:])


def test_flat_deserved_split_holds() -> None:
    """Flat queues of deserved 6 and 2 on 8 cpu, both greedy: 6:2, whoever came first."""
    queues = [QueueInfo("big", deserved=cpu("6")), QueueInfo("small", deserved=cpu("2"))]
    cluster = cpu_cluster({"n0": "4", "n1": "4"}, queues)
    small = greedy_job(cluster, "small", "small", 12)
    run_sessions(cluster, 2, hierarchy=False)
    assert running(cluster, small) == 8
    big = greedy_job(cluster, "big", "big", 12)
    results = run_sessions(cluster, 8, hierarchy=False)
    assert (running(cluster, big), running(cluster, small)) == (6, 2)
    assert not results[-1].evictions


@st.composite
def contested_trees(draw: st.DrawFn) -> tuple[list[QueueInfo], dict[str, int], int]:
    """root -> 2 teams -> 2 projects each, deserved shares adding up to the cluster, and the
    order in which the projects' greedy jobs arrive. Each project deserves at least one pod:
    a job keeps its minAvailable pod whatever its queue deserves (gang)."""
    nodes = draw(st.integers(2, 3))
    total = nodes * 4
    team_a = draw(st.integers(2, total - 2))
    split = {
        "a1": draw(st.integers(1, team_a - 1)),
        "b1": draw(st.integers(1, total - team_a - 1)),
    }
    split["a2"] = team_a - split["a1"]
    split["b2"] = total - team_a - split["b1"]
    queues = [
        queue("root"),
        queue("org", "root", deserved=total),
        queue("team-a", "org", deserved=team_a),
        queue("team-b", "org", deserved=total - team_a),
    ]
    for name, amount in split.items():
        queues.append(queue(name, f"team-{name[0]}", deserved=amount))
    return queues, split, nodes


@settings(max_examples=40, deadline=None)
@given(contested_trees(), st.permutations(["a1", "a2", "b1", "b2"]))
def test_random_trees_settle_on_the_deserved_split(
    case: tuple[list[QueueInfo], dict[str, int], int], arrival: list[str]
) -> None:
    """Whatever the deserved split of a 3-level tree and the order in which greedy jobs
    arrive (one per session), reclaim ends with every project holding what it deserves,
    and then evicts nothing."""
    queues, split, nodes = case
    cluster = cpu_cluster({f"n{i}": "4" for i in range(nodes)}, queues)
    jobs = {}
    for project in arrival:
        jobs[project] = greedy_job(cluster, project, project, 4 * nodes)
        run_sessions(cluster, 1)
    results = run_sessions(cluster, 8)
    held = {p: running(cluster, job) for p, job in jobs.items()}
    assert held == split
    assert not results[-1].evictions
    assert not results[-2].evictions
