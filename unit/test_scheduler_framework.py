"""The scheduler framework: statements commit or discard a gang whole, the session combines
plugin callbacks Volcano's way, the configuration is strict, and PodGroup status follows the
job updater's rules."""

from __future__ import annotations

import datetime as dt
from operator import attrgetter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.resources import Resources
from caldera.api.volcano import PodGroupCondition
from scheduler.api.types import ClusterInfo, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import DEFAULT_CONF, ConfError, parse_conf
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments, CallbackKind, PluginOption
from scheduler.framework.session import Session
from scheduler.framework.status import podgroup_status, queue_allocation, status_changed
from scheduler.registry import REGISTRY

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _task(
    job: str, i: int, cpu: str = "1", status: TaskStatus = TaskStatus.PENDING, node: str = ""
) -> TaskInfo:
    req = Resources.from_list({"cpu": cpu})
    return TaskInfo(
        uid=f"{job}-{i}",
        namespace="ns",
        name=f"{job}-{i}",
        job=f"ns/{job}",
        role="w",
        resreq=req,
        init_resreq=req,
        priority=0,
        status=status,
        node_name=node,
    )


def _cluster(*, jobs: dict[str, int], node_cpu: str = "4", nodes: int = 1) -> ClusterInfo:
    cluster = ClusterInfo(now=T0)
    for n in range(nodes):
        cluster.nodes[f"n{n}"] = NodeInfo(
            f"n{n}", Resources.from_list({"cpu": node_cpu, "pods": "110"})
        )
    cluster.queues["default"] = QueueInfo("default")
    for name, size in jobs.items():
        job = JobInfo(
            key=f"ns/{name}",
            namespace="ns",
            name=name,
            queue="default",
            priority=0,
            min_available=size,
            min_task_member={},
            min_resources=Resources(),
            creation=T0,
        )
        for i in range(size):
            job.add_task(_task(name, i))
        cluster.jobs[job.key] = job
    return cluster


def test_statement_discard_restores_nodes_and_jobs() -> None:
    """Allocations of a discarded statement leave no trace on nodes or the job."""
    ssn = Session(_cluster(jobs={"a": 2}), [])
    job = ssn.jobs["ns/a"]
    stmt = ssn.statement()
    for task in list(job.tasks.values()):
        stmt.allocate(task, "n0")
    assert ssn.nodes["n0"].idle == Resources.from_list({"cpu": "2", "pods": "110"})
    assert job.ready_task_num() == 2
    stmt.discard()
    assert ssn.nodes["n0"].idle == Resources.from_list({"cpu": "4", "pods": "110"})
    assert job.count(TaskStatus.PENDING) == 2
    assert job.allocated.is_empty()
    assert all(t.node_name == "" for t in job.tasks.values())
    assert ssn.result.binds == []


def test_statement_commit_binds_the_whole_gang() -> None:
    """A committed statement binds every allocated task and marks them Binding."""
    ssn = Session(_cluster(jobs={"a": 3}), [])
    job = ssn.jobs["ns/a"]
    stmt = ssn.statement()
    for task in list(job.tasks.values()):
        stmt.allocate(task, "n0")
    stmt.commit()
    assert sorted((b.task.name, b.node) for b in ssn.result.binds) == [
        ("a-0", "n0"),
        ("a-1", "n0"),
        ("a-2", "n0"),
    ]
    assert job.count(TaskStatus.BINDING) == 3


def test_evict_then_discard_restores_running_task() -> None:
    """An eviction marks the task Releasing on its node; discarding it restores Running."""
    cluster = _cluster(jobs={})
    job = JobInfo(
        key="ns/r",
        namespace="ns",
        name="r",
        queue="default",
        priority=0,
        min_available=1,
        min_task_member={},
        min_resources=Resources(),
        creation=T0,
    )
    task = _task("r", 0, status=TaskStatus.RUNNING, node="n0")
    job.add_task(task)
    cluster.jobs[job.key] = job
    cluster.nodes["n0"].add_task(task)
    ssn = Session(cluster, [])
    stmt = ssn.statement()
    stmt.evict(task, "preempted")
    assert task.status == TaskStatus.RELEASING
    assert ssn.nodes["n0"].future_idle() == Resources.from_list({"cpu": "4", "pods": "110"})
    stmt.discard()
    assert task.status.value == "Running"  # (.value: mypy narrowed task.status above)
    assert ssn.nodes["n0"].releasing.is_empty()
    assert ssn.nodes["n0"].idle == Resources.from_list({"cpu": "3", "pods": "110"})


def test_discard_gives_the_job_its_generation_back() -> None:
    """A discarded statement names the job's state as before it (what was derived from it
    holds again); a later change gets a generation the job never had."""
    ssn = Session(_cluster(jobs={"a": 2}), [])
    job = ssn.jobs["ns/a"]
    ssn.incremental.keep_for_job(job, "test", "derived before the turn")
    before, allocated = job.generation, job.allocated
    seen = set()
    stmt = ssn.statement()
    for task in list(job.tasks.values()):
        stmt.allocate(task, "n0")
        seen.add(job.generation)
        ssn.incremental.keep_for_job(job, "test", "derived during the turn")
    stmt.discard()
    assert job.generation == before
    assert job.allocated is allocated
    ssn.incremental.keep_for_job(job, "test", "derived before the turn")
    assert ssn.incremental.kept_for_job(job, "test") == "derived before the turn"
    stmt = ssn.statement()
    stmt.allocate(next(iter(job.tasks.values())), "n0")
    assert job.generation not in seen | {before}
    assert ssn.incremental.kept_for_job(job, "test") is None
    stmt.commit()  # a commit keeps the new state
    assert job.generation not in seen | {before}


def test_discard_keeps_a_change_another_statement_made_since() -> None:
    """A job changed after the statement's last operation by a statement that stays is not
    given its old generation back: its state is not the old one."""
    ssn = Session(_cluster(jobs={"a": 2}), [])
    job = ssn.jobs["ns/a"]
    first, second = list(job.tasks.values())
    before = job.generation
    outer = ssn.statement()
    outer.allocate(first, "n0")
    inner = ssn.statement()
    inner.allocate(second, "n0")
    inner.commit()
    committed = job.generation
    outer.discard()
    assert job.generation not in (before, committed)
    assert job.count(TaskStatus.BINDING) == 1
    assert job.count(TaskStatus.PENDING) == 1
    assert job.allocated == second.resreq


def test_order_functions_first_opinion_wins_in_tier_order() -> None:
    """The first plugin (tier order) with an opinion decides; disabled switches are skipped."""
    tiers = [
        [PluginOption("a", switches={"enableJobOrder": False}), PluginOption("b")],
        [PluginOption("c")],
    ]
    ssn = Session(_cluster(jobs={"x": 1, "y": 1}), tiers)
    ssn.add_job_order_fn("a", lambda a, b: -1 if a.name == "x" else 1)  # disabled
    ssn.add_job_order_fn("b", lambda a, b: 0)  # no opinion
    ssn.add_job_order_fn("c", lambda a, b: -1 if a.name == "y" else 1)
    assert [j.name for j in ssn.sorted_jobs(ssn.jobs.values())] == ["y", "x"]


@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.integers(0, 2)), min_size=1, max_size=12, unique=False
    )
)
def test_task_order_keys_sort_as_the_order_functions(specs: list[tuple[int, int]]) -> None:
    """With a sort key for every task order function, tasks sort exactly as the functions
    order them (first opinion wins, then the task key)."""
    tasks = []
    for i, (priority, weight) in enumerate(specs):
        task = _task("j", i)
        task.priority, task.role = priority, f"r{weight}"
        tasks.append(task)

    def by_priority(a: TaskInfo, b: TaskInfo) -> int:
        return -1 if a.priority > b.priority else (1 if a.priority < b.priority else 0)

    def by_role(a: TaskInfo, b: TaskInfo) -> int:
        return (a.role > b.role) - (a.role < b.role)

    tiers = [[PluginOption("p")], [PluginOption("r")]]
    plain, keyed = Session(_cluster(jobs={}), tiers), Session(_cluster(jobs={}), tiers)
    plain.add_task_order_fn("p", by_priority)
    plain.add_task_order_fn("r", by_role)
    keyed.add_task_order_fn("p", by_priority)
    keyed.add_task_order_fn("r", by_role)
    keyed.add_speedups("p", Speedups(task_order_key=lambda t: -t.priority))
    keyed.add_speedups("r", Speedups(task_order_key=lambda t: t.role))
    expected = [t.key for t in sorted(tasks, key=plain.task_order_key())]
    assert [t.key for t in sorted(tasks, key=keyed.task_order_key())] == expected
    one = Session(_cluster(jobs={}), tiers)
    one.add_task_order_fn("p", by_priority)
    one.add_speedups("p", Speedups(task_order_key=lambda t: -t.priority))
    alone = Session(_cluster(jobs={}), tiers)
    alone.add_task_order_fn("p", by_priority)
    assert [t.key for t in sorted(tasks, key=one.task_order_key())] == [
        t.key for t in sorted(tasks, key=alone.task_order_key())
    ]


def test_the_hooks_in_use_follow_registrations_and_speedups() -> None:
    """What the session resolved of the plugins' hooks (sort keys, victim screens, allocatable
    states) is resolved again after a later registration or ``add_speedups``."""
    tiers = [[PluginOption("p"), PluginOption("q")]]
    ssn = Session(_cluster(jobs={"a": 1}), tiers)
    queue = ssn.queues["default"]
    ssn.add_task_order_fn("p", lambda a, b: 0)
    ssn.add_allocatable_fn("p", lambda q, t: True)
    ssn.add_reclaimable_fn("p", lambda t, c: list(c))
    assert ssn.task_order_signature() is None
    assert ssn.allocatable_state(queue) is None
    assert ssn.victim_screens(CallbackKind.RECLAIMABLE) == []
    never = lambda preemptor, job: False  # noqa: E731
    ssn.add_speedups(
        "p",
        Speedups(
            task_order_key=lambda t: 0, allocatable_state=attrgetter("name"), victim_screen=never
        ),
    )
    assert ssn.task_order_signature() == ("p",)
    assert ssn.allocatable_state(queue) == ("default",)
    assert ssn.victim_screens(CallbackKind.RECLAIMABLE) == [("p", never)]
    ssn.add_task_order_fn("q", lambda a, b: 0)  # no key: the order is compared again
    ssn.add_allocatable_fn("q", lambda q, t: True)
    assert ssn.task_order_signature() is None
    assert ssn.allocatable_state(queue) is None
    withheld = Session(_cluster(jobs={}), tiers, speedups=False)
    withheld.add_task_order_fn("p", lambda a, b: 0)
    withheld.add_speedups("p", Speedups(task_order_key=lambda t: 0))
    assert withheld.task_order_signature() is None


def test_votes_reject_wins_and_permit_decides_a_tier() -> None:
    """A reject anywhere wins; otherwise a permit in the first tier with one decides."""
    tiers = [[PluginOption("p1"), PluginOption("p2")], [PluginOption("p3")]]
    ssn = Session(_cluster(jobs={"x": 1}), tiers)
    job = ssn.jobs["ns/x"]
    ssn.add_job_enqueueable_fn("p1", lambda j: 0)
    ssn.add_job_enqueueable_fn("p2", lambda j: 1)
    ssn.add_job_enqueueable_fn("p3", lambda j: -1)
    assert ssn.job_enqueueable(job) is True  # tier 0 permits before tier 1 is asked
    ssn.add_job_pipelined_fn("p1", lambda j: 1)
    ssn.add_job_pipelined_fn("p2", lambda j: -1)
    assert ssn.job_pipelined(job) is False


def test_victims_are_the_intersection_within_a_tier() -> None:
    """Preemptable victims are those every plugin of the deciding tier allows."""
    tiers = [[PluginOption("g"), PluginOption("p")]]
    ssn = Session(_cluster(jobs={"x": 3}), tiers)
    tasks = list(ssn.jobs["ns/x"].tasks.values())
    ssn.add_preemptable_fn("g", lambda pre, cands: list(cands[:2]))
    ssn.add_preemptable_fn("p", lambda pre, cands: list(cands[1:]))
    assert [t.name for t in ssn.preemptable(tasks[0], tasks)] == ["x-1"]


def test_default_conf_parses() -> None:
    """Volcano's default configuration parses into its actions and two tiers."""
    conf = parse_conf(
        DEFAULT_CONF,
        actions={"enqueue", "allocate", "backfill"},
        plugins={
            "priority",
            "gang",
            "conformance",
            "overcommit",
            "drf",
            "predicates",
            "proportion",
            "nodeorder",
        },
    )
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert [[p.name for p in tier] for tier in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('actions: "enqueue, allocat"\ntiers: []\n', "line 1: unknown action allocat"),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gangs\n',
            "line 4: unknown plugin gangs",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    enableJobReady: maybe\n',
            "line 5: enableJobReady must be true or false",
        ),
        (
            'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n    argument: {}\n',
            "line 5: unknown key 'argument'",
        ),
        ('action: "allocate"\n', "line 1: unknown key 'action'"),
        ("tiers: []\n", "names no actions"),
        ("actions: [\n", "not valid YAML"),
    ],
)
def test_bad_conf_names_line_and_key(text: str, message: str) -> None:
    """Every mistake in a configuration is refused with its line and key."""
    with pytest.raises(ConfError, match=message):
        parse_conf(text, actions={"enqueue", "allocate"}, plugins={"gang"})


@pytest.mark.parametrize(
    ("plugin", "arguments", "message"),
    [
        (
            "binpack",
            "binpack.weight: abc",
            "plugin binpack: argument binpack.weight must be a number",
        ),
        ("cdp", "cdp.max-cooldown-time: soon", "plugin cdp: argument cdp.max-cooldown-time"),
    ],
)
def test_bad_plugin_argument_is_refused_when_loaded(
    plugin: str, arguments: str, message: str
) -> None:
    """Given the registry's factories, a plugin argument its plugin cannot read is refused when
    the file is parsed, not by every session the scheduler then opens."""
    text = (
        f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n'
        f"    arguments:\n      {arguments}\n"
    )
    with pytest.raises(ConfError, match=message):
        parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    # The names alone cannot check arguments: the same text parses.
    assert parse_conf(text, actions={"allocate"}, plugins={plugin}).actions == ("allocate",)


def test_plugin_arguments_are_typed_with_clear_errors() -> None:
    """Plugin arguments convert to numbers and booleans or say what is wrong."""
    args = Arguments(
        "binpack", {"binpack.weight": "10", "binpack.cpu": 2, "flag": "true", "bad": "x"}
    )
    assert args.integer("binpack.weight", 1) == 10
    assert args.number("binpack.cpu", 1) == 2.0
    assert args.boolean("flag", False) is True
    assert args.number("missing", 3) == 3.0
    with pytest.raises(ValueError, match="plugin binpack: argument bad must be a number"):
        args.number("bad", 1)


def test_podgroup_phase_rules() -> None:
    """Pending until enqueued; Inqueue kept; Running once minMember are scheduled; Completed
    when all scheduled finished; Unknown when running but unschedulable this session."""
    cluster = _cluster(jobs={"a": 2})
    job = cluster.jobs["ns/a"]
    assert podgroup_status(job, None).phase == "Pending"
    job.phase = "Inqueue"
    assert podgroup_status(job, None).phase == "Inqueue"
    tasks = list(job.tasks.values())
    job.set_status(tasks[0], TaskStatus.RUNNING)
    job.set_status(tasks[1], TaskStatus.BOUND)
    status = podgroup_status(job, None)
    assert (status.phase, status.running) == ("Running", 1)
    unsched = PodGroupCondition(type="Unschedulable", status="True", reason="NotEnoughResources")
    assert podgroup_status(job, unsched).phase == "Unknown"
    job.set_status(tasks[0], TaskStatus.SUCCEEDED)
    job.set_status(tasks[1], TaskStatus.FAILED)
    assert podgroup_status(job, None).phase == "Completed"


def test_status_change_ignores_condition_ids_and_times() -> None:
    """Only a real change triggers a PodGroup write."""
    cluster = _cluster(jobs={"a": 1})
    job = cluster.jobs["ns/a"]
    c1 = PodGroupCondition(
        type="Scheduled",
        status="True",
        transition_id="1",
        last_transition_time="2026-01-01T00:00:00Z",
    )
    c2 = PodGroupCondition(
        type="Scheduled",
        status="True",
        transition_id="2",
        last_transition_time="2026-01-02T00:00:00Z",
    )
    assert not status_changed(podgroup_status(job, c1), podgroup_status(job, c2))
    assert status_changed(podgroup_status(job, c1), podgroup_status(job, None))


def test_queue_allocation_adds_up_to_parents() -> None:
    """A child queue's allocation counts in its parent and the root too."""
    cluster = _cluster(jobs={"a": 1})
    cluster.queues["root"] = QueueInfo("root")
    cluster.queues["team"] = QueueInfo("team", parent="root")
    cluster.queues["default"].parent = "team"
    job = cluster.jobs["ns/a"]
    job.set_status(next(iter(job.tasks.values())), TaskStatus.RUNNING)
    alloc = queue_allocation(Session(cluster, []))
    one = Resources.from_list({"cpu": "1"})
    assert alloc["default"] == alloc["team"] == alloc["root"] == one


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(0, 3), st.integers(0, 2)),
        min_size=1,
        max_size=10,
    ),
    st.booleans(),
)
def test_job_order_keys_sort_as_the_plugins_order_functions(
    specs: list[tuple[int, int, int, int]], sla: bool
) -> None:
    """priority, gang, drf (and sla) give job order keys: jobs sort by them exactly as the
    order functions compared at each comparison sort them."""
    cluster = _cluster(jobs={}, node_cpu="100")
    for index, (priority, size, running, minute) in enumerate(specs):
        job = JobInfo(
            key=f"ns/j{index}",
            namespace="ns",
            name=f"j{index}",
            queue="default",
            priority=priority,
            min_available=size,
            min_task_member={},
            min_resources=Resources(),
            creation=T0 + dt.timedelta(minutes=minute),
        )
        for i in range(size + 1):
            placed = i < running
            job.add_task(
                _task(
                    f"j{index}",
                    i,
                    cpu=str(1 + index % 2),
                    status=TaskStatus.RUNNING if placed else TaskStatus.PENDING,
                    node="n0" if placed else "",
                )
            )
            if placed:
                cluster.nodes["n0"].add_task(job.tasks[f"j{index}-{i}"])
        cluster.jobs[job.key] = job
    names = ["priority", "gang", "drf"] + (["sla"] if sla else [])
    arguments = {"sla": {"sla-waiting-time": "5m"}}
    tiers = [[PluginOption(name) for name in names]]
    ssn = Session(cluster, tiers)
    for name in names:
        REGISTRY.plugins[name](Arguments(name, arguments.get(name, {}))).on_session_open(ssn)
    jobs = list(ssn.jobs.values())
    keyed = [j.key for j in sorted(jobs, key=ssn.job_order_key())]
    assert keyed == [j.key for j in sorted(jobs, key=ssn.job_order_compare_key())]
    assert isinstance(ssn.job_order_key()(jobs[0]), tuple)  # the keys, not the functions


def test_answering_handlers_are_those_of_plugins_that_answer_allocatable() -> None:
    """A replayed turn tells its placements only to the plugins whose allocatable answers
    could change with them (proportion's, not drf's)."""
    told: list[str] = []
    ssn = Session(_cluster(jobs={}), [[PluginOption("q"), PluginOption("d")]])
    ssn.add_allocatable_fn("q", lambda queue, task: True)
    ssn.add_allocate_handler("q", lambda t: told.append("q+"), lambda t: told.append("q-"))
    ssn.add_allocate_handler("d", lambda t: told.append("d+"), lambda t: told.append("d-"))
    handlers = ssn.answering_handlers()
    assert len(handlers) == 1
    handlers[0][0](_task("j", 0))
    handlers[0][1](_task("j", 0))
    assert told == ["q+", "q-"]
