"""What a waiting backlog costs each gang per session, cut without changing a decision: readiness
counted as tasks move (``JobInfo.ready_tasks``, ``pending_best_effort``), job and queue order
keys as tuples (``Session.job_order_key``, ``queue_order_key`` with proportion's ``queue_key``),
the votes' per-tier grouping kept until the next registration (``Session._vote``), replayed
turns that skip asking the queue again while its state (``Session.allocatable_state``) is the
same, replayed fit errors kept by class (``Retries._fit_error``) and class keys shared as one
object (``Placer.class_key``).

Each check is paired, where a mutation is cheap to make, with one that breaks the code under
test by monkeypatching and shows the check then fails.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.framework.session as session_module
from caldera.api.core import Node, NodeSpec, NodeStatus, Taint
from caldera.api.meta import Condition, ObjectMeta
from caldera.api.resources import Resources
from scheduler.actions.placer import Placer
from scheduler.actions.retry import Retries
from scheduler.api.task_topology import AFFINITY_KEY
from scheduler.api.types import (
    READY_STATUSES,
    ClusterInfo,
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from scheduler.api.verdicts import Candidates, FailedTurn
from scheduler.framework.incremental import job_key_tuple
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.capacity import CapacityPlugin
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.plugins.sla import WAITING_TIME_ANNOTATION
from scheduler.plugins.task_topology import TaskTopologyPlugin
from scheduler.registry import REGISTRY
from unit.sched_fixtures import (
    add_job,
    cpu,
    cpu_cluster,
    make_cluster,
    make_job,
    make_node,
    make_task,
    open_session,
)
from unit.test_sched_live_snapshot import T0, Cache, _decisions, _forget, _gang_backlog, _sized_pod

STATUSES = list(TaskStatus)
# Where ``_decisions`` lists the jobs' fit errors and the pods' messages.
FIT_ERRORS, POD_MESSAGES = 3, 4


def proportion() -> ProportionPlugin:
    return ProportionPlugin(Arguments("proportion", {}))


# ---- 1. readiness counted as tasks move ---------------------------------------------------------


def assert_counted(job: JobInfo) -> None:
    """The job's counters equal what its tasks say, counted one by one (and by its buckets)."""
    tasks = list(job.tasks.values())
    ready = sum(1 for t in tasks if t.status in READY_STATUSES)
    waiting_best_effort = sum(1 for t in tasks if t.best_effort and t.status == TaskStatus.PENDING)
    assert job.ready_task_num() == ready
    assert job.pending_best_effort_num() == waiting_best_effort
    assert job.count(*READY_STATUSES) == ready
    assert job.is_ready() == (ready + waiting_best_effort >= job.min_available)


def task_pool(kinds: Sequence[tuple[bool, TaskStatus]]) -> list[TaskInfo]:
    """Pods of job ``j``: best-effort ones (requesting nothing) and 1-cpu ones, in ``kinds``'
    statuses (placed ones on ``n0``)."""
    return [
        make_task(
            "j",
            i,
            {} if best_effort else {"cpu": "1"},
            status=status,
            node="" if status == TaskStatus.PENDING else "n0",
        )
        for i, (best_effort, status) in enumerate(kinds)
    ]


@given(
    kinds=st.lists(st.tuples(st.booleans(), st.sampled_from(STATUSES)), min_size=1, max_size=6),
    ops=st.lists(
        st.tuples(
            st.sampled_from(("add", "remove", "status")),
            st.integers(0, 5),
            st.sampled_from(STATUSES),
        ),
        max_size=40,
    ),
    min_available=st.integers(0, 4),
)
def test_readiness_counters_follow_adds_removes_and_status_moves(
    kinds: list[tuple[bool, TaskStatus]],
    ops: list[tuple[str, int, TaskStatus]],
    min_available: int,
) -> None:
    """After any sequence of add_task, remove_task (of a task the job has or has not) and
    set_status (or, for a task out of the job, a status changed while it is out), the job's
    ready count and pending best-effort count are those of its tasks."""
    tasks = task_pool(kinds)
    job = make_job("j", [], min_available=min_available)
    assert_counted(job)
    for op, index, status in ops:
        task = tasks[index % len(tasks)]
        present = task.uid in job.tasks
        if op == "add" and not present:
            job.add_task(task)
        elif op == "remove":
            job.remove_task(task)
        elif op == "status":
            if present:
                job.set_status(task, status)
            else:
                task.status = status  # out of the job: the job must count it as it comes back
        assert_counted(job)


@settings(max_examples=60)
@given(
    kinds=st.lists(
        st.tuples(
            st.booleans(),
            st.sampled_from(
                (TaskStatus.PENDING, TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    moves=st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=8),
)
def test_a_discarded_statement_gives_the_counters_back(
    kinds: list[tuple[bool, TaskStatus]], moves: list[tuple[int, bool]]
) -> None:
    """Pending pods allocated or pipelined by a statement count as they move; once it is
    discarded the counters are what they were; once committed, what the tasks say."""
    tasks = task_pool(kinds)
    job = make_job("j", tasks, min_available=len(tasks))
    ssn = open_session(make_cluster([make_node("n0", "64", "64Gi")], [job]))
    before = (job.ready_task_num(), job.pending_best_effort_num())
    chosen: dict[str, bool] = {}
    for index, pipeline in moves:
        task = tasks[index % len(tasks)]
        if task.status == TaskStatus.PENDING:
            chosen.setdefault(task.uid, pipeline)
    for commit in (False, True):
        stmt = ssn.statement()
        for uid, pipeline in chosen.items():
            if pipeline:
                stmt.pipeline(job.tasks[uid], "n0")
            else:
                stmt.allocate(job.tasks[uid], "n0")
            assert_counted(job)
        if commit:
            stmt.commit()
        else:
            stmt.discard()
            assert (job.ready_task_num(), job.pending_best_effort_num()) == before
        assert_counted(job)


def _miscounts_by_the_tasks_current_status(
    counted: Callable[[JobInfo, TaskInfo, TaskStatus, int], None],
) -> Callable[[JobInfo, TaskInfo, TaskStatus, int], None]:
    def wrong(self: JobInfo, task: TaskInfo, status: TaskStatus, by: int) -> None:
        counted(self, task, task.status, by)  # set_status would move nothing

    return wrong


def _forgets_best_effort(self: JobInfo, task: TaskInfo, status: TaskStatus, by: int) -> None:
    if status in READY_STATUSES:
        self.ready_tasks += by


def allocate_each(job: JobInfo) -> None:
    """Allocate the job's tasks one by one, checking the counters before and after each."""
    for task in list(job.tasks.values()):
        assert_counted(job)
        job.set_status(task, TaskStatus.ALLOCATED)
        assert_counted(job)


@pytest.mark.parametrize("mutant", ["current-status", "no-best-effort"])
def test_the_counter_check_fails_on_a_miscounting_job(
    monkeypatch: pytest.MonkeyPatch, mutant: str
) -> None:
    """``assert_counted`` catches a job whose counters go wrong: counted by the task's current
    status rather than the one it leaves and enters, or never counting best-effort pods."""
    wrong = (
        _miscounts_by_the_tasks_current_status(JobInfo._count)
        if mutant == "current-status"
        else _forgets_best_effort
    )
    monkeypatch.setattr(JobInfo, "_count", wrong)
    job = make_job("j", [make_task("j", 0), make_task("j", 1, {})], min_available=2)
    with pytest.raises(AssertionError):
        allocate_each(job)


# ---- 2. job order keys as tuples ----------------------------------------------------------------

# Configurations of one, two, three and four job order plugins that give keys.
KEYED_JOB_ORDERS = [
    ("priority",),
    ("gang",),
    ("drf",),
    ("sla",),
    ("priority", "gang"),
    ("gang", "drf"),
    ("sla", "priority"),
    ("priority", "gang", "drf"),
    ("drf", "sla", "gang"),
    ("priority", "gang", "drf", "sla"),
    ("sla", "drf", "gang", "priority"),
]

# priority, minAvailable, running pods, cpu per pod, creation second, sla minutes (0: none)
JobSpec = tuple[int, int, int, int, int, int]
job_specs = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(1, 3),
        st.integers(0, 3),
        st.integers(1, 2),
        st.integers(0, 2),
        st.integers(0, 3),
    ),
    min_size=2,
    max_size=8,
)


def ordering_session(names: Sequence[str], specs: Sequence[JobSpec]) -> Session:
    """A session of the job order plugins ``names`` (one tier) over jobs of ``specs``: each
    job has its running pods on ``n0`` and one pending pod more than it needs."""
    jobs = []
    for index, (priority, min_available, running, size, created, sla) in enumerate(specs):
        name = f"j{index}"
        tasks = [
            make_task(
                name,
                i,
                {"cpu": str(size)},
                status=TaskStatus.RUNNING if i < running else TaskStatus.PENDING,
                node="n0" if i < running else "",
            )
            for i in range(max(min_available, running) + 1)
        ]
        annotations = {WAITING_TIME_ANNOTATION: f"{sla}m"} if sla else {}
        jobs.append(
            make_job(
                name,
                tasks,
                min_available=min_available,
                priority=priority,
                created=created,
                annotations=annotations,
            )
        )
    cluster = make_cluster([make_node("n0", "64", "64Gi")], jobs)
    plugins = [REGISTRY.plugins[name](Arguments(name, {})) for name in names]
    return open_session(cluster, plugins)


def job_orders(ssn: Session) -> tuple[list[str], list[str]]:
    """The jobs sorted by ``job_order_key`` and by ``job_order_compare_key``."""
    jobs = list(ssn.jobs.values())
    keyed = [j.key for j in sorted(jobs, key=ssn.job_order_key())]
    compared = [j.key for j in sorted(jobs, key=ssn.job_order_compare_key())]
    return keyed, compared


@pytest.mark.parametrize("names", KEYED_JOB_ORDERS, ids="+".join)
@settings(max_examples=40)
@given(specs=job_specs)
def test_job_order_keys_sort_as_the_compared_order(
    names: tuple[str, ...], specs: list[JobSpec]
) -> None:
    """With one to four plugins giving job order keys, jobs sorted by the keys come out as
    the order functions compared at each comparison put them (then creation, then key)."""
    ssn = ordering_session(names, specs)
    key = ssn.job_order_key()
    assert isinstance(key(next(iter(ssn.jobs.values()))), tuple)  # the keys' path
    keyed, compared = job_orders(ssn)
    assert keyed == compared


def test_the_job_order_check_catches_swapped_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuple whose first two plugins' keys were swapped sorts a high-priority ready job
    behind a low-priority waiting one: ``job_orders`` tells the two orders apart."""
    built = job_key_tuple

    def swapped(funcs: list[Callable[[JobInfo], Any]]) -> Callable[[JobInfo], tuple[Any, ...]]:
        return built([*funcs[1::-1], *funcs[2:]])

    specs: list[JobSpec] = [(1, 1, 1, 1, 0, 0), (0, 1, 0, 1, 0, 0)]
    keyed, compared = job_orders(ordering_session(("priority", "gang"), specs))
    assert keyed == compared == ["ns/j0", "ns/j1"]
    monkeypatch.setattr(session_module, "job_key_tuple", swapped)
    keyed, compared = job_orders(ordering_session(("priority", "gang"), specs))
    assert keyed != compared


# ---- 3. queue order keys ----------------------------------------------------------------------

# priority, weight, running pods, pending pods (1 cpu each)
QueueSpec = tuple[int, int, int, int]
queue_specs = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(0, 4), st.integers(0, 4)),
    min_size=2,
    max_size=6,
)


def queue_cluster(specs: Sequence[QueueSpec]) -> tuple[list[QueueInfo], ClusterInfo]:
    queues = [
        QueueInfo(f"q{i}", weight=weight, priority=priority, deserved=cpu(str(1 + i % 3)))
        for i, (priority, weight, _, _) in enumerate(specs)
    ]
    cluster = cpu_cluster({"n0": "64"}, queues)
    for i, (_, _, running, pending) in enumerate(specs):
        if running or pending:
            add_job(cluster, f"j{i}", queue=f"q{i}", running=running, pending=pending)
    return queues, cluster


def allocate_some(ssn: Session, picks: Sequence[int], count: int) -> None:
    """Allocate (and keep) a pending pod of job ``j<pick % count>`` for each pick: the
    queues' allocations move within the session, through the allocate handlers."""
    stmt = ssn.statement()
    for pick in picks:
        job = ssn.jobs.get(f"ns/j{pick % count}")
        waiting = list(job.tasks_in(TaskStatus.PENDING)) if job is not None else []
        if waiting:
            stmt.allocate(waiting[0], "n0")


def by_name(a: QueueInfo, b: QueueInfo) -> int:
    return (a.name > b.name) - (a.name < b.name)


def compared_order(
    queues: Sequence[QueueInfo], orders: Sequence[Callable[[QueueInfo, QueueInfo], int]]
) -> list[str]:
    """The queues sorted by ``orders`` (the first opinion wins), then by name."""

    def compare(a: QueueInfo, b: QueueInfo) -> int:
        for order in orders:
            answer = order(a, b)
            if answer:
                return answer
        return by_name(a, b)

    return [q.name for q in sorted(queues, key=functools.cmp_to_key(compare))]


@settings(max_examples=60)
@given(specs=queue_specs, picks=st.lists(st.integers(0, 5), max_size=6))
def test_queue_keys_sort_as_proportions_queue_order(
    specs: list[QueueSpec], picks: list[int]
) -> None:
    """Queues sorted by ``queue_order_key`` (proportion's keys) come out as proportion's
    ``queue_order`` then their names put them, with the allocations of the session's
    statements counted."""
    queues, cluster = queue_cluster(specs)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    allocate_some(ssn, picks, len(specs))
    key = ssn.queue_order_key()
    assert isinstance(key(queues[0]), tuple)  # the keys' path
    expected = compared_order(queues, [plugin.queue_order])
    assert [q.name for q in sorted(queues, key=key)] == expected


class ByWeight:
    """A queue order without a key: the heavier queue first."""

    name = "by-weight"

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_queue_order_fn(self.name, self.queue_order)

    @staticmethod
    def queue_order(a: QueueInfo, b: QueueInfo) -> int:
        return (a.weight < b.weight) - (a.weight > b.weight)

    def on_session_close(self, ssn: Session) -> None:
        return None


@settings(max_examples=60)
@given(specs=queue_specs, picks=st.lists(st.integers(0, 5), max_size=6))
def test_queue_orders_without_keys_are_compared(specs: list[QueueSpec], picks: list[int]) -> None:
    """A queue order registered without a key (capacity's, or one beside proportion's) makes
    ``queue_order_key`` compare the functions: the queues still come out in their order."""
    queues, cluster = queue_cluster(specs)
    capacity = CapacityPlugin(Arguments("capacity", {}))
    ssn = open_session(cluster, [capacity])
    allocate_some(ssn, picks, len(specs))
    key = ssn.queue_order_key()
    assert not isinstance(key(queues[0]), tuple)
    assert [q.name for q in sorted(queues, key=key)] == compared_order(
        queues, [capacity.queue_order]
    )

    queues, cluster = queue_cluster(specs)
    plugin = proportion()
    ssn = open_session(cluster, [plugin], [ByWeight()])
    allocate_some(ssn, picks, len(specs))
    key = ssn.queue_order_key()
    assert not isinstance(key(queues[0]), tuple)
    assert [q.name for q in sorted(queues, key=key)] == compared_order(
        queues, [plugin.queue_order, ByWeight.queue_order]
    )


# ---- 4. the votes' grouping and later registrations -------------------------------------------

VOTES: list[tuple[str, bool]] = [
    ("job_pipelined", True),
    ("job_enqueueable", True),
    ("job_starving", False),
]


@pytest.mark.parametrize(("kind", "default"), VOTES)
def test_a_function_registered_after_a_vote_counts_in_the_next(kind: str, default: bool) -> None:
    """A vote taken, a function registered in the later tier that decides against the
    default: the next vote follows it; then one in the earlier tier that decides for the
    default: its tier is asked first, and the vote follows it."""
    ssn = Session(
        make_cluster([make_node("n0")], [make_job("j", 1)]),
        [[PluginOption("early")], [PluginOption("late")]],
    )
    job = ssn.jobs["ns/j"]
    add: Callable[[str, Callable[[JobInfo], int]], None] = getattr(ssn, f"add_{kind}_fn")
    vote: Callable[[JobInfo], bool] = getattr(ssn, kind)
    against, for_default = (-1, 1) if default else (1, -1)
    assert vote(job) is default
    assert vote(job) is default  # asked again: the kept grouping
    add("late", lambda j: against)
    assert vote(job) is not default
    add("early", lambda j: for_default)
    assert vote(job) is default


def test_a_readiness_function_registered_after_a_check_counts_in_the_next() -> None:
    """``job_ready`` asked, then a function that finds the job not ready registered: the next
    check says not ready."""
    ssn = Session(make_cluster([make_node("n0")], [make_job("j", 1)]), [[PluginOption("g")]])
    job = ssn.jobs["ns/j"]
    ssn.add_job_ready_fn("g", lambda j: True)
    assert ssn.job_ready(job) is True
    ssn.add_job_ready_fn("g", lambda j: False)
    assert ssn.job_ready(job) is False


# ---- 5. the queue's state and replayed turns ----------------------------------------------------


def test_allocatable_state_is_none_when_a_function_does_not_say() -> None:
    """Proportion says what its answers read; a plugin whose allocatable function has no
    ``Speedups.allocatable_state`` (capacity, or any other), before or after it, makes the
    queue's state unknown."""
    cluster = cpu_cluster({"n0": "8"}, [QueueInfo("a", deserved=cpu("4"))])
    add_job(cluster, "ja", queue="a", pending=2)
    queue = cluster.queues["a"]
    assert open_session(cluster, [proportion()]).allocatable_state(queue) is not None
    assert open_session(cluster).allocatable_state(queue) == ()  # nothing to ask: all say yes
    capacity = CapacityPlugin(Arguments("capacity", {}))
    assert open_session(cluster, [capacity]).allocatable_state(queue) is None
    for first in (True, False):
        ssn = Session(cluster, [[PluginOption("proportion"), PluginOption("plain")]])
        if first:
            ssn.add_allocatable_fn("plain", lambda q, t: True)
        proportion().on_session_open(ssn)
        if not first:
            ssn.add_allocatable_fn("plain", lambda q, t: True)
        assert ssn.allocatable_state(queue) is None


def test_proportions_state_is_what_the_queue_holds_and_deserves() -> None:
    """Two queues of weights 3 and 1 that both ask for more than the 8-cpu cluster deserve 6
    and 2 cpu: proportion's state of each is (allocated, deserved), and follows a statement's
    allocation and its discard."""
    cluster = cpu_cluster({"n0": "8"}, [QueueInfo("a", weight=3), QueueInfo("b", weight=1)])
    ja = add_job(cluster, "ja", queue="a", pending=20)
    add_job(cluster, "jb", queue="b", pending=20)
    ssn = open_session(cluster, [proportion()])
    a, b = ssn.queues["a"], ssn.queues["b"]
    assert ssn.allocatable_state(a) == ((Resources(), cpu("6")),)
    assert ssn.allocatable_state(b) == ((Resources(), cpu("2")),)
    stmt = ssn.statement()
    stmt.allocate(next(ja.tasks_in(TaskStatus.PENDING)), "n0")
    assert ssn.allocatable_state(a) == ((cpu("1"), cpu("6")),)
    assert ssn.allocatable_state(b) == ((Resources(), cpu("2")),)
    stmt.discard()
    assert ssn.allocatable_state(a) == ((Resources(), cpu("6")),)


class Spy:
    """What ``Retries`` did in the last session: each replay's outcome by job, and each time
    the queue was asked again (``_same_answers``) with its outcome."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.replays: dict[str, bool] = {}
        self.asked: list[bool] = []
        replay, same_answers = Retries.replay, Retries._same_answers

        def replayed(self_: Retries, queue: QueueInfo, job: JobInfo, tasks: Any) -> bool:
            self.replays[job.key] = outcome = replay(self_, queue, job, tasks)
            return outcome

        def asked(self_: Retries, queue: QueueInfo, pending: Any, turn: Any) -> bool:
            outcome = same_answers(self_, queue, pending, turn)
            self.asked.append(outcome)
            return outcome

        monkeypatch.setattr(Retries, "replay", replayed)
        monkeypatch.setattr(Retries, "_same_answers", asked)

    def clear(self) -> None:
        self.replays.clear()
        self.asked.clear()


# One session's decisions on each side, and the gang's fit errors (by pod uid) on the kept one.
Outcome = tuple[tuple[object, ...], tuple[object, ...], dict[str, str]]


def sessions(kept: Cache, plain: Cache, spy: Spy, step: int) -> Outcome:
    """One session on each cache (``plain`` forgetting everything carried over, so that it
    replays nothing), written back: both sides' decisions, and the gang's fit errors."""
    now = T0 + dt.timedelta(seconds=step)
    with_memory, without = kept.live_cluster(now), plain.live_cluster(now)
    _forget(without)
    spy.clear()
    kept_result, plain_result = kept.session(with_memory), plain.session(without)
    kept.write_back(kept_result)
    plain.write_back(plain_result)
    return (
        _decisions(kept_result, with_memory),
        _decisions(plain_result, without),
        dict(with_memory.jobs["ns/gang"].fit_errors),
    )


def add_rival(cache: Cache) -> None:
    """A job of queue q1, too big to fit anywhere: the queues' deserved shares change, and
    the gang's queue can take two of its three pods, not three."""
    cache.put_group("rival", queue="q1", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "rival-0", "rival", "6"))


def shrinking_share(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[tuple[object, ...], tuple[object, ...], dict[str, str], Spy]]:
    """The gang of ``_gang_backlog`` (two pods placed, the third fits nowhere): its turn runs,
    is replayed while nothing changed, then its queue's deserved share shrinks (nodes, pods
    and allocations as they were). Yields each session's two decisions, the gang's fit errors
    and the spy."""
    spy = Spy(monkeypatch)
    kept, plain = _gang_backlog(0), _gang_backlog(0)
    for step in range(3):
        if step == 2:
            add_rival(kept)
            add_rival(plain)
        mine, theirs, errors = sessions(kept, plain, spy, step)
        yield mine, theirs, errors, spy


def test_a_replay_asks_the_queue_again_once_its_share_shrank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same pods and an equal queue state: the turn is replayed without asking the queue
    again. The queue's deserved share shrunk: the queue is asked, refuses, and the turn runs
    (the third pod is passed over, no fit error), deciding as a session from scratch does."""
    runs = list(shrinking_share(monkeypatch))
    assert all(mine == theirs for mine, theirs, _, _ in runs)
    (first, _, errors, _), (second, _, _, _), (third, _, shrunk, _) = runs
    # The replay reports as the turn did (fit errors, pods' messages); the shrunk share
    # changes them.
    assert first[FIT_ERRORS] == second[FIT_ERRORS] != third[FIT_ERRORS]
    assert first[POD_MESSAGES] == second[POD_MESSAGES] != third[POD_MESSAGES]
    assert errors
    assert not shrunk  # the third pod passed over: none found no node


def test_replays_skip_and_take_the_queues_answers_by_its_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which of the three sessions replay and which ask the queue again."""
    outcomes: list[tuple[dict[str, bool], list[bool]]] = []
    for _, _, _, spy in shrinking_share(monkeypatch):
        outcomes.append((dict(spy.replays), list(spy.asked)))
    assert outcomes[0] == ({"ns/gang": False}, [])  # nothing remembered yet
    assert outcomes[1] == ({"ns/gang": True}, [])  # an equal state: not asked
    assert outcomes[2][0]["ns/gang"] is False
    assert outcomes[2][1] == [False]  # a changed state: asked, and the answers changed


def test_a_state_blind_to_the_share_would_replay_wrongly(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a queue state that does not see the deserved share, the shrunk share's session
    replays the old turn and decides unlike a session from scratch: the comparison of the
    decisions above is what catches it."""
    monkeypatch.setattr(Session, "allocatable_state", lambda self, queue: ("blind",))
    runs = list(shrinking_share(monkeypatch))
    mine, theirs, _, spy = runs[2]
    assert spy.replays["ns/gang"] is True
    assert mine != theirs


# ---- 6. replayed fit errors kept by class ------------------------------------------------------


def taint_n2(cache: Cache) -> None:
    """n2 (half taken by the holder) becomes an 8-cpu node with a taint the gang does not
    tolerate: it still does not fit the gang's pods, for another reason. The cluster's cpu
    grows, but the gang's queue asks for less than it has, so its share is what it was."""
    node = Node(
        metadata=ObjectMeta(name="n2", resource_version=f"tainted-{cache.serial}"),
        spec=NodeSpec(taints=(Taint(key="dedicated", value="other", effect="NoSchedule"),)),
        status=NodeStatus(
            allocatable={"cpu": "8", "memory": "16Gi", "pods": "110"},
            conditions=(Condition(type="Ready", status="True"),),
        ),
    )
    cache.serial += 1
    cache.nodes.items["n2"] = node
    cache.live.node_changed(node)


def changed_reasons(monkeypatch: pytest.MonkeyPatch) -> list[Outcome]:
    """The gang's turn runs, is replayed (its fit error kept), then n2's reason changes and
    the turn is replayed again, twice: each session's decisions and the gang's fit errors."""
    spy = Spy(monkeypatch)
    kept, plain = _gang_backlog(0), _gang_backlog(0)
    runs = []
    for step in range(4):
        if step == 2:
            taint_n2(kept)
            taint_n2(plain)
        runs.append(sessions(kept, plain, spy, step))
        assert spy.replays["ns/gang"] is (step > 0), f"step {step}"
    return runs


def test_a_replayed_fit_error_follows_the_classs_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replayed turns report the fit error a session from scratch reports: the kept message
    while the class's reasons are the same, a new one once n2 gives another reason."""
    runs = changed_reasons(monkeypatch)
    for step, (mine, theirs, _) in enumerate(runs):
        assert mine == theirs, f"step {step}"
    messages = [list(errors.values()) for _, _, errors in runs]
    assert messages[0] == messages[1]
    assert messages[2] == messages[3]
    assert messages[1] != messages[2]
    assert "taint" in messages[2][0]


def test_a_fit_error_kept_without_its_reasons_would_be_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were the kept message reused whatever the class's reasons, the replay after n2's
    change would report the old message: the comparison with a session from scratch fails."""
    told = Retries._fit_error

    def stale(self: Retries, turn: FailedTurn, cand: Candidates, node_count: int) -> str:
        kept = self.memory.fit_errors.get((turn.cls, node_count, turn.tail))
        return kept[1] if kept is not None else told(self, turn, cand, node_count)

    monkeypatch.setattr(Retries, "_fit_error", stale)
    runs = changed_reasons(monkeypatch)
    mine, theirs, _ = runs[2]
    assert mine != theirs


# ---- 7. class keys ------------------------------------------------------------------------------


def test_equal_pods_share_one_class_key_object() -> None:
    """Pods of any job with equal requests and scheduling constraints get the very same key
    object (in one placer and the next session's); other requests or constraints, another
    key."""
    pods = {
        "a0": make_task("a", 0),
        "a1": make_task("a", 1),
        "b0": make_task("b", 0),  # another job, the same requests (other Resources objects)
        "big": make_task("c", 0, {"cpu": "2", "memory": "1Gi"}),
        "picky": make_task("d", 0, node_selector={"zone": "a"}),
    }
    jobs = [make_job(name, [t for t in pods.values() if t.job == f"ns/{name}"]) for name in "abcd"]
    cluster = make_cluster([make_node("n0")], jobs)
    placer = Placer(open_session(cluster))
    keys = {name: placer.class_key(task) for name, task in pods.items()}
    assert pods["a0"].resreq is not pods["b0"].resreq
    assert keys["a0"] is keys["a1"] is keys["b0"]
    assert keys["big"] != keys["a0"]
    assert keys["picky"] != keys["a0"]
    assert keys["big"] != keys["picky"]
    fresh = make_task("e", 0)  # a pod the first placer never saw, in a later session
    assert Placer(open_session(cluster)).class_key(fresh) is keys["a0"]


def test_a_job_local_pod_keeps_a_key_of_its_job_and_task() -> None:
    """With task-topology configured, a pod of a job whose PodGroup describes a topology is
    of its own job's and task's class, even once a placer without task-topology gave it the
    shared key; a pod of a job without one keeps the shared key."""
    cluster = cpu_cluster({"n0": "8"})
    topology = {AFFINITY_KEY: "ps,worker"}
    tf = add_job(cluster, "tf", roles={"ps": 1, "worker": 2}, annotations=topology)
    other = add_job(cluster, "tf2", roles={"worker": 1}, annotations=topology)
    plain = add_job(cluster, "plain", roles={"worker": 1}, annotations={})
    ps, w0, w1 = (tf.tasks[f"uid-ns-tf-{n}"] for n in ("ps-0", "worker-0", "worker-1"))
    w_other = next(iter(other.tasks.values()))
    w_plain = next(iter(plain.tasks.values()))

    blind = Placer(open_session(cluster))
    shared = blind.class_key(w_plain)
    assert all(blind.class_key(t) is shared for t in (ps, w0, w1, w_other))

    local = Placer(open_session(cluster, [TaskTopologyPlugin(Arguments("task-topology", {}))]))
    assert local.class_key(w_plain) is shared
    assert local.class_key(w0) == local.class_key(w1)  # one job, one task
    assert local.class_key(w0) != shared
    assert local.class_key(w0) != local.class_key(ps)  # another task of the job
    assert local.class_key(w0) != local.class_key(w_other)  # the same task of another job
