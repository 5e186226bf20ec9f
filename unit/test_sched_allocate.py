"""The allocate action: gangs placed whole or not at all, best node by score, pipelining onto
releasing resources, fit errors in Kubernetes' words, turns shared between queues and jobs.

The builders live in ``unit/sched_fixtures.py``.
"""

from __future__ import annotations

from typing import Any

from caldera.api.core import (
    Taint,
)
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import PodGroup
from scheduler.actions.allocate import AllocateAction, waiting_in_order
from scheduler.api.types import ClusterInfo, QueueInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.incremental import (
    JOB_LOCAL_PLUGINS,
    NODE_LOCAL_PLUGINS,
    Incremental,
    Speedups,
)
from scheduler.framework.plugin import Arguments, CallbackKind, PluginOption
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session
from scheduler.plugins.task_topology import TaskTopologyPlugin
from scheduler.registry import PLUGINS
from unit.sched_fixtures import (
    REGISTRY,
    binds,
    make_cluster,
    make_job,
    make_node,
    make_task,
    run,
)

# Memos kept as the session's incremental layer keeps them (no cluster-wide state read).
MEMOS = Incremental(ClusterInfo(), ())

# ---- tests -------------------------------------------------------------------------------------


def test_gang_of_six_on_room_for_five_binds_nothing() -> None:
    """Five cpus free for a six-pod gang: no pod binds, and the sixth pod says why."""
    cluster = make_cluster([make_node("n0", "3"), make_node("n1", "2")], [make_job("a", 6)])
    ssn = run(cluster)
    assert ssn.result.binds == []
    job = ssn.jobs["ns/a"]
    assert job.count(TaskStatus.PENDING) == 6
    assert list(job.fit_errors.values()) == ["0/2 nodes are available: 2 Insufficient cpu."]
    assert all(n.used.get("cpu") == 0 for n in ssn.nodes.values())


def test_gang_of_six_on_room_for_six_binds_all_in_one_session() -> None:
    """With room for six, the whole gang binds in the same session."""
    cluster = make_cluster([make_node("n0", "3"), make_node("n1", "3")], [make_job("a", 6)])
    ssn = run(cluster)
    placed = binds(ssn)
    assert len(placed) == 6
    assert sorted(placed.values()).count("n0") == 3
    assert ssn.result.podgroup_status["ns/a"].phase == "Running"
    assert ssn.jobs["ns/a"].count(TaskStatus.BINDING) == 6


def test_least_requested_spreads_pods() -> None:
    """nodeorder's default (least requested, balanced) puts pods on the emptier node."""
    cluster = make_cluster(
        [make_node("n0", "8", "16Gi"), make_node("n1", "8", "16Gi")],
        [make_job("a", 4, min_available=1)],
    )
    placed = binds(run(cluster))
    assert sorted(placed.values()) == ["n0", "n0", "n1", "n1"]


def test_ties_go_to_the_node_name() -> None:
    """Equal scores pick the alphabetically first node, so runs are reproducible."""
    cluster = make_cluster([make_node("b"), make_node("a")], [make_job("j", 1)])
    assert binds(run(cluster)) == {"j-0": "a"}


def test_pipelines_onto_releasing_resources() -> None:
    """A pod that only fits once a releasing pod is gone is pipelined, not bound; the gang
    stays unbound and its pods say they wait for resources to be released."""
    leaving = make_task("old", 0, {"cpu": "4"}, status=TaskStatus.RELEASING, node="n0")
    cluster = make_cluster([make_node("n0", "4")], [make_job("old", [leaving]), make_job("a", 1)])
    ssn = run(cluster)
    assert ssn.result.binds == []
    task = next(iter(ssn.jobs["ns/a"].tasks.values()))
    assert (task.status, task.node_name) == (TaskStatus.PIPELINED, "n0")
    assert ssn.result.unschedulable["ns/a-0"] == (
        "Pod ns/a-0 can possibly be assigned to n0, once resource is released and "
        "minAvailable is satisfied"
    )


def test_pending_job_waits_for_enqueue_unless_enqueue_is_not_configured() -> None:
    """With enqueue configured, allocate leaves Pending jobs alone (enqueue admits them first
    in the same session); without it, allocate moves them to Inqueue itself."""
    ssn = Session(make_cluster([make_node("n0")], [make_job("a", 1, phase="Pending")]), [])
    ssn.configured_actions = ("enqueue", "allocate")
    AllocateAction({}).execute(ssn)
    assert ssn.result.binds == []
    ssn = Session(make_cluster([make_node("n0")], [make_job("a", 1, phase="Pending")]), [])
    ssn.configured_actions = ("allocate",)
    AllocateAction({}).execute(ssn)
    assert ssn.result.podgroup_phase_inqueue == ["ns/a"]
    assert binds(ssn) == {"a-0": "n0"}


def test_invalid_job_is_skipped_with_its_reason() -> None:
    """A gang with fewer pods than minAvailable is not placed; its condition says why."""
    cluster = make_cluster([make_node("n0")], [make_job("a", 2, min_available=3)])
    ssn = run(cluster)
    assert ssn.result.binds == []
    condition = ssn.job_conditions["ns/a"]
    assert (condition.type, condition.reason) == ("Unschedulable", "NotEnoughTasks")
    assert condition.message == "Not enough valid tasks for gang-scheduling, valid: 2, min: 3"


def test_higher_priority_job_goes_first() -> None:
    """With room for one gang, the higher-priority job gets it even if created later."""
    cluster = make_cluster(
        [make_node("n0", "2")],
        [make_job("low", 2, created=0), make_job("high", 2, priority=10, created=5)],
    )
    assert sorted(binds(run(cluster))) == ["high-0", "high-1"]


def test_queues_take_turns() -> None:
    """Queues are asked again after every job turn, in the queue order of that moment: with a
    share-like order (fewer placed pods first), two queues alternate instead of one queue
    taking all the room."""
    jobs = [make_job(f"a{i}", 1, queue="qa", created=i) for i in range(3)]
    jobs += [make_job(f"b{i}", 1, queue="qb", created=i) for i in range(3)]
    cluster = make_cluster([make_node("n0", "4")], jobs, [QueueInfo("qa"), QueueInfo("qb")])
    ssn = Session(cluster, [])

    def placed(queue: QueueInfo) -> int:
        return sum(j.ready_task_num() for j in ssn.jobs.values() if j.queue == queue.name)

    ssn.add_queue_order_fn("share", lambda a, b: placed(a) - placed(b))
    AllocateAction({}).execute(ssn)
    assert sorted(binds(ssn)) == ["a0-0", "a1-0", "b0-0", "b1-0"]


def test_jobs_below_minimum_go_before_extra_pods() -> None:
    """Pods beyond minAvailable go one per turn and gang puts jobs that are not ready first,
    so the later job gets its minimum before the earlier one takes more."""
    jobs = [make_job("a", 4, min_available=1), make_job("b", 4, min_available=1, created=1)]
    cluster = make_cluster([make_node("n0", "4")], jobs)
    placed = sorted(binds(run(cluster)))
    assert placed == ["a-0", "a-1", "a-2", "b-0"]


def test_best_effort_pods_are_left_to_backfill() -> None:
    """allocate skips pods without requests; backfill places them."""
    job = make_job("be", [make_task("be", 0, {})], min_available=1)
    cluster = make_cluster([make_node("n0")], [job])
    ssn = run(cluster, actions="enqueue, allocate")
    assert ssn.result.binds == []
    cluster = make_cluster([make_node("n0")], [make_job("be", [make_task("be", 0, {})])])
    assert binds(run(cluster)) == {"be-0": "n0"}


def test_reuse_matches_a_full_scan() -> None:
    """The per-class node cache gives the same placements as scanning every node for every
    pod (forced by a configured plugin allocate does not know)."""

    class Unknown:
        name = "unknown"

        def __init__(self, args: Any) -> None:
            pass

        def on_session_open(self, ssn: Session) -> None:
            pass

        def on_session_close(self, ssn: Session) -> None:
            pass

    def build() -> ClusterInfo:
        nodes = [make_node(f"n{i}", str(2 + i % 3), f"{4 + i % 5}Gi") for i in range(7)]
        jobs = [
            make_job(f"j{k}", 3 + k % 3, requests={"cpu": "1", "memory": f"{1 + k % 2}Gi"})
            for k in range(8)
        ]
        return make_cluster(nodes, jobs)

    cached = run(build(), tiers=(("priority", "gang"), ("predicates", "nodeorder", "binpack")))
    registry = Registry({**REGISTRY.plugins, "unknown": Unknown}, REGISTRY.actions)
    conf_tiers = (("priority", "gang"), ("predicates", "nodeorder", "binpack", "unknown"))
    conf = SchedulerConf(
        actions=("enqueue", "allocate"),
        tiers=tuple(tuple(PluginOption(p) for p in t) for t in conf_tiers),
    )
    full = Session(build(), conf.tiers)
    run_session(full, conf, registry)
    assert len(binds(cached)) > 10
    assert binds(cached) == binds(full)
    assert {k: j.fit_errors for k, j in cached.jobs.items()} == {
        k: j.fit_errors for k, j in full.jobs.items()
    }


def test_reuse_with_task_topology_matches_a_full_scan() -> None:
    """With task-topology (scores depend on the job's pods on each node) the cache, limited to
    one task of one job, still places exactly as a full scan does."""

    class Unknown:
        name = "unknown"

        def __init__(self, args: Any) -> None:
            pass

        def on_session_open(self, ssn: Session) -> None:
            pass

        def on_session_close(self, ssn: Session) -> None:
            pass

    def build() -> ClusterInfo:
        nodes = [make_node(f"n{i}", "4", "16Gi") for i in range(6)]
        jobs = []
        for k in range(3):
            pods = [make_task(f"j{k}", i, role="ps" if i < 2 else "worker") for i in range(6)]
            job = make_job(f"j{k}", pods, created=k)
            job.podgroup = PodGroup(
                metadata=ObjectMeta(
                    name=f"j{k}",
                    namespace="ns",
                    annotations={
                        "volcano.sh/task-topology-anti-affinity": "ps",
                        "volcano.sh/task-topology-affinity": "ps,worker",
                    },
                )
            )
            jobs.append(job)
        return make_cluster(nodes, jobs)

    registry = Registry(
        {**REGISTRY.plugins, "unknown": Unknown, "task-topology": TaskTopologyPlugin},
        REGISTRY.actions,
    )
    placements = []
    for extra in ((), ("unknown",)):
        names = (("priority", "gang"), ("predicates", "nodeorder", "task-topology", *extra))
        conf = SchedulerConf(
            actions=("enqueue", "allocate"),
            tiers=tuple(tuple(PluginOption(p) for p in t) for t in names),
        )
        ssn = Session(build(), conf.tiers)
        run_session(ssn, conf, registry)
        placements.append(binds(ssn))
    assert len(placements[0]) == 18
    assert placements[0] == placements[1]
    ps_nodes = [placements[0][f"j0-{i}"] for i in (0, 1)]
    assert ps_nodes[0] != ps_nodes[1]  # anti-affinity spread the ps pods


def test_fit_error_counts_every_reason() -> None:
    """The fit error histogram counts each node's reasons, sorted as Kubernetes does."""
    nodes = [
        make_node("n0", "1"),
        make_node("n1", "8", unschedulable=True),
        make_node("n2", "8", taints=[Taint(key="gpu", value="true", effect="NoSchedule")]),
    ]
    cluster = make_cluster(nodes, [make_job("a", [make_task("a", 0, {"cpu": "2"})])])
    ssn = run(cluster)
    assert ssn.jobs["ns/a"].fit_errors["uid-ns-a-0"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
        "{gpu: true}, 1 node(s) were unschedulable."
    )


def test_queue_allocatable_limits_placements() -> None:
    """A plugin's allocatable veto keeps the pod off every node."""
    cluster = make_cluster([make_node("n0")], [make_job("a", 2, min_available=1)])
    ssn = Session(cluster, [])
    ssn.add_allocatable_fn("cap", lambda q, t: t.name != "a-1")
    AllocateAction({}).execute(ssn)
    assert binds(ssn) == {"a-0": "n0"}


def test_host_ports_spread_a_gang_and_limit_it() -> None:
    """Pods of one gang asking for the same host port land on different nodes; a third such
    pod on two nodes makes the gang wait with the ports reason."""
    pods = [make_task("a", i, host_ports=[8080]) for i in range(2)]
    ssn = run(make_cluster([make_node("n0", "8"), make_node("n1", "8")], [make_job("a", pods)]))
    assert sorted(binds(ssn).values()) == ["n0", "n1"]
    pods = [make_task("b", i, host_ports=[8080]) for i in range(3)]
    ssn = run(make_cluster([make_node("n0", "8"), make_node("n1", "8")], [make_job("b", pods)]))
    assert ssn.result.binds == []
    assert ssn.result.unschedulable["ns/b-2"] == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    )


def test_selector_and_taints_steer_placement() -> None:
    """A pod selecting zone b avoids the emptier zone-a node; a pod without toleration avoids
    the tainted node."""
    nodes = [
        make_node("a", "16", labels={"zone": "a"}),
        make_node("b", "4", labels={"zone": "b"}),
        make_node("c", "64", taints=[Taint(key="k", value="v", effect="NoExecute")]),
    ]
    pods = [make_task("s", 0, node_selector={"zone": "b"}), make_task("s", 1)]
    assert binds(run(make_cluster(nodes, [make_job("s", pods)]))) == {"s-0": "b", "s-1": "a"}


def test_too_many_pods() -> None:
    """A node's pod limit counts: the second pod does not fit a node allowing one."""
    ssn = run(make_cluster([make_node("n0", "8", max_pods=1)], [make_job("a", 2)]))
    assert ssn.result.binds == []
    assert ssn.result.unschedulable["ns/a-1"] == "0/1 nodes are available: 1 Too many pods."


def test_plugins_without_node_functions_let_the_placer_reuse_verdicts() -> None:
    """Every plugin the scheduler provides that registers no predicate and no node order is
    node-local for the placer: configuring it must not make allocate score every node for
    every pod (it once did for capacity, 10x slower)."""
    cluster = make_cluster([make_node("n0")], [make_job("j", 1)])
    for name, factory in PLUGINS.items():
        if name == "extender":
            # Needs a URL, and what it registers follows its verbs: never node-local by name.
            continue
        ssn = Session(cluster, [[PluginOption(name)]])
        factory(Arguments(name, {})).on_session_open(ssn)
        places = ssn._registered(CallbackKind.PREDICATE) or ssn._registered(CallbackKind.NODE_ORDER)
        if not places:
            assert name in NODE_LOCAL_PLUGINS | JOB_LOCAL_PLUGINS, name


def test_waiting_pods_in_order_are_kept_while_the_job_and_the_task_order_are_the_same() -> None:
    """A job's waiting pods in task order are sorted once and kept with the job: the same
    list while the job and the task order's signature stay; sorted again when either changes,
    and never kept without a signature (an order function without a key)."""
    job = make_job("a", 3)
    pods = list(job.tasks.values())
    pods[1].priority = 5
    by_priority = lambda t: (-t.priority, t.key)  # noqa: E731
    waiting = job.by_status[TaskStatus.PENDING]
    first = waiting_in_order(MEMOS, job, waiting, ("priority",), by_priority)
    assert [t.key for t in first] == [pods[1].key, pods[0].key, pods[2].key]
    assert waiting_in_order(MEMOS, job, waiting, ("priority",), by_priority) is first
    by_key = lambda t: t.key  # noqa: E731
    other = waiting_in_order(MEMOS, job, waiting, ("other",), by_key)
    assert [t.key for t in other] == sorted(t.key for t in pods)
    unsigned = waiting_in_order(MEMOS, job, waiting, None, by_priority)
    assert unsigned is not first
    assert unsigned == first
    assert waiting_in_order(MEMOS, job, waiting, None, by_priority) is not unsigned
    job.set_status(pods[1], TaskStatus.ALLOCATED)  # a new generation: sorted again
    waiting = job.by_status[TaskStatus.PENDING]
    assert [t.key for t in waiting_in_order(MEMOS, job, waiting, ("priority",), by_priority)] == [
        pods[0].key,
        pods[2].key,
    ]


def test_task_order_signature_names_keyed_orders_only() -> None:
    """The signature names the plugins giving the task order when each has a key."""
    tiers = [[PluginOption("priority")]]
    keyed = Session(make_cluster([make_node("n0", "1")], []), tiers)
    keyed.add_task_order_fn("priority", lambda a, b: 0)
    keyed.add_speedups("priority", Speedups(task_order_key=lambda t: 0))
    assert keyed.task_order_signature() == ("priority",)
    plain = Session(make_cluster([make_node("n0", "1")], []), tiers)
    plain.add_task_order_fn("priority", lambda a, b: 0)
    assert plain.task_order_signature() is None
