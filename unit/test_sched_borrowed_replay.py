"""A waiting gang given the outcome of another gang's failed turn in the same session
(``Retries._replay_borrowed``): it decides as a session from scratch does.

Gangs of pods that each ask a whole node (4 cpu) wait in one or two queues on a cluster of a
few free 4-cpu nodes and some 3-cpu ones (too small for a gang pod, they keep the queues'
deserved shares large enough that the gangs' turns fail on the nodes, not on the queue). Two
caches take the same changes; sessions on the first replay turns (the live snapshot's verdict
memory), sessions on the second start from nothing and run every turn. Every session's
decisions must be the same, with each pod's fit error and last placement.

Sections: 1. the property over random gangs, queues, free nodes and changes; 2. a gang that
borrows; 3. gangs that must not (and, for the queue's state and the nodes, a mutant that
skips the condition, caught); 4. a mutant without the readiness count, caught by the
comparison and by the property. Last, an expected failure: a gang already pipelined when
allocate starts (preempt configured before it) borrows where its turn, run, would be kept.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import msgspec
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import unit.test_sched_live_snapshot as live_snapshot_tests
from caldera.api.core import Node, NodeStatus, PodStatus, PriorityClass, ResourceRequirements
from caldera.api.meta import Condition, ObjectMeta, format_time
from caldera.api.volcano import Queue, QueueSpec
from scheduler.actions.allocate import AllocateAction
from scheduler.actions.retry import Retries, job_state
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.api.verdicts import FailedTurn
from scheduler.framework.session import Session, SessionResult
from scheduler.framework.statement import Statement
from unit.test_sched_live_snapshot import T0, Cache, _decisions, _forget, _sized_pod, canonical

QUEUES = ("default", "q1")
WHOLE = "4"  # a gang pod asks a whole big node
SMALL_NODES = 6  # 3-cpu nodes: no gang pod fits, the queues deserve their cpu


@dataclasses.dataclass(frozen=True)
class Gang:
    """A PodGroup ``name`` of ``size`` pods of ``cpu`` each, minMember ``min_member``."""

    name: str
    size: int
    min_member: int
    queue: str = "default"
    cpu: str = WHOLE
    memory: str = ""  # a memory request too: another class on the same nodes
    running: int = 0  # pods besides ``size`` already running, each on a full node of its own
    requests: tuple[tuple[str, str], ...] = ()  # the pods' requests instead of cpu and memory


# ---- the cluster and its changes ----------------------------------------------------------------


def gang_pod(cache: Cache, name: str, gang: Gang, *, best_effort: bool = False) -> None:
    """A waiting pod of the gang (asking for nothing if ``best_effort``)."""
    pod = _sized_pod(cache, name, gang.name, gang.cpu)
    requests: dict[str, str | int | float] = {"cpu": gang.cpu}
    if best_effort:
        requests = {}
    elif gang.requests:
        requests = dict(gang.requests)
    elif gang.memory:
        requests["memory"] = gang.memory
    container = msgspec.structs.replace(
        pod.spec.containers[0], resources=ResourceRequirements(requests=requests)
    )
    cache.put_pod(
        msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, containers=(container,))
        )
    )


def put_big(cache: Cache, name: str, max_pods: int = 110, cpu: str = "4") -> None:
    """A ready node of ``cpu`` (a big one: 4) that holds ``max_pods`` pods."""
    node = Node(
        metadata=ObjectMeta(name=name, resource_version=str(cache.serial)),
        status=NodeStatus(
            allocatable={"cpu": cpu, "memory": "16Gi", "pods": str(max_pods)},
            conditions=(Condition(type="Ready", status="True"),),
        ),
    )
    cache.serial += 1
    cache.nodes.items[name] = node
    cache.live.node_changed(node)


def bare_cache() -> Cache:
    """A cache without nodes, with the queues default and q1 (weight 1, no deserved given)."""
    cache = Cache(random.Random(0))  # noqa: S311 - seeded test data
    for name in list(cache.nodes.items):
        cache.delete(cache.nodes, name)
    for name in QUEUES:
        cache.queues.items[name] = queue = Queue(
            metadata=ObjectMeta(name=name), spec=QueueSpec(weight=1)
        )
        cache.live.queue_changed(queue)
    return cache


def build(
    free: int, gangs: Sequence[Gang], small: int = SMALL_NODES, *, max_pods: int = 110
) -> Cache:
    """``free`` 4-cpu nodes ``big-<i>``, ``small`` 3-cpu nodes, queues default and q1 (weight
    1, no deserved given), and the gangs, Inqueue, with their pods ``<gang>-<i>``."""
    cache = bare_cache()
    for i in range(free):
        put_big(cache, f"big-{i}", max_pods)
    for i in range(small):
        cache.put_node(f"small-{i}", "3", ready=True)
    for gang in gangs:
        put_gang(cache, gang)
        for i in range(gang.size):
            gang_pod(cache, f"{gang.name}-{i}", gang)
        for i in range(gang.running):
            node = f"held-{gang.name}-{i}"
            cache.put_node(node, gang.cpu, ready=True)
            running_pod(cache, f"{gang.name}-r{i}", gang.name, gang.cpu, node)
    return cache


def running_pod(
    cache: Cache,
    name: str,
    group: str,
    cpu: str,
    node: str,
    *,
    terminating: bool = False,
    preemptable: bool = True,
) -> None:
    """A pod of ``group`` running on ``node`` (being deleted: ``terminating``; annotated
    ``volcano.sh/preemptable: "false"`` unless ``preemptable``)."""
    pod = _sized_pod(cache, name, group, cpu)
    meta = pod.metadata
    if terminating:
        meta = msgspec.structs.replace(meta, deletion_timestamp=format_time(T0))
    if not preemptable:
        annotations = {**meta.annotations, "volcano.sh/preemptable": "false"}
        meta = msgspec.structs.replace(meta, annotations=annotations)
    cache.put_pod(
        msgspec.structs.replace(
            pod,
            metadata=meta,
            spec=msgspec.structs.replace(pod.spec, node_name=node),
            status=PodStatus(phase="Running"),
        )
    )


def put_gang(cache: Cache, gang: Gang) -> None:
    cache.put_group(
        gang.name, queue=gang.queue, min_member=gang.min_member, phase="Inqueue", cls=""
    )


def see_session(cache: Cache, result: SessionResult) -> None:
    """The cache sees what the last session did: the pods it evicted gone, those it bound
    running on their nodes."""
    by_uid = {pod.metadata.uid: key for key, pod in cache.pods.items.items()}
    for eviction in result.evictions:
        key = by_uid.pop(eviction.task.uid, None)
        if key is not None:
            cache.assumed.pop(eviction.task.uid, None)
            cache.delete(cache.pods, key)
    for uid, node in sorted(cache.assumed.items()):
        key = by_uid.get(uid)
        if key is None:
            continue
        pod = cache.pods.items[key]
        cache.put_pod(
            msgspec.structs.replace(
                pod,
                spec=msgspec.structs.replace(pod.spec, node_name=node),
                status=PodStatus(phase="Running"),
            )
        )
    cache.assumed.clear()


# An operation between sessions: ("add", gang) a pod; ("best-effort", gang) a pod that asks
# for nothing; ("drop", gang) its last pod by name (waiting or running); ("finish", gang) its
# first running pod is gone; ("terminate", gang) it is being deleted (its room is released:
# later turns pipeline onto it); ("min", gang, m) minMember m; ("node", +1 / -1) a big node
# added or removed.
Op = tuple[str, int, int]


def apply(cache: Cache, gangs: list[Gang], op: Op, serial: int) -> None:
    kind, index, value = op
    gang = gangs[index % len(gangs)]
    mine = sorted(k for k in cache.pods.items if k.startswith(f"ns/{gang.name}-"))
    if kind == "add":
        gang_pod(cache, f"{gang.name}-x{serial}", gang)
    elif kind == "best-effort":
        gang_pod(cache, f"{gang.name}-x{serial}", gang, best_effort=True)
    elif kind == "drop" and mine:
        cache.assumed.pop(cache.pods.items[mine[-1]].metadata.uid, None)
        cache.delete(cache.pods, mine[-1])
    elif kind in ("finish", "terminate"):
        running = [
            pod
            for pod in (cache.pods.items[k] for k in mine)
            if pod.spec.node_name and not pod.metadata.deletion_timestamp
        ]
        if running and kind == "finish":
            cache.delete(cache.pods, f"ns/{running[0].metadata.name}")
        elif running:
            meta = msgspec.structs.replace(running[0].metadata, deletion_timestamp=format_time(T0))
            cache.put_pod(msgspec.structs.replace(running[0], metadata=meta))
    elif kind == "min":
        gangs[index % len(gangs)] = gang = dataclasses.replace(gang, min_member=value)
        put_gang(cache, gang)
    elif kind == "node":
        bigs = sorted(n for n in cache.nodes.items if n.startswith("big-"))
        if value > 0:
            cache.put_node(f"big-x{serial}", "4", ready=True)
        elif bigs:
            cache.delete(cache.nodes, bigs[-1])


Replay = Callable[[Retries, QueueInfo, JobInfo, "deque[TaskInfo]"], bool]


# The checks of ``Retries._lendable`` that a mutant may skip, by name.
CHECKS = {
    "readiness": "_stays_unready",
    "queue": "_same_queue_state",
    "nodes": "_same_start",
}
CHANGE_BORROWS = Retries._replay_borrowed


@contextmanager
def skipping(*skip: str) -> Iterator[None]:
    """``Retries``' checks named in ``skip`` pass whatever they are asked, while the block runs."""
    with pytest.MonkeyPatch.context() as mp:
        for name in skip:
            mp.setattr(Retries, CHECKS[name], lambda *args: True)
        yield


def borrowing_without(*skip: str) -> Replay:
    """A mutant of ``Retries._replay_borrowed`` whose checks ``skip`` names always pass (only
    while it borrows: a gang's own replays still check everything)."""

    def borrow(self: Retries, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        with skipping(*skip):
            return CHANGE_BORROWS(self, queue, job, tasks)

    return borrow


def lendable_but_for_readiness(
    retries: Retries, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]
) -> bool:
    """Whether every condition of a lent turn but the readiness count holds."""
    with skipping("readiness"):
        return retries._lendable(queue, job, tasks) is not None


# ---- what a session did ----------------------------------------------------------------------


@dataclasses.dataclass
class Spy:
    """What the last session on the live snapshot did: borrowed and own replays' outcomes by
    job, and the jobs of the pods a statement placed in allocate, in order."""

    borrowed: dict[str, bool] = dataclasses.field(default_factory=dict)
    own: dict[str, bool] = dataclasses.field(default_factory=dict)
    placed: list[str] = dataclasses.field(default_factory=list)
    # Jobs refused a lent turn for the readiness count alone (every other condition held).
    ready_refused: list[str] = dataclasses.field(default_factory=list)
    allocating: bool = False

    def clear(self) -> None:
        self.borrowed.clear()
        self.own.clear()
        self.placed.clear()
        self.ready_refused.clear()

    def placed_by(self, job: str) -> int:
        return self.placed.count(job)


@contextmanager
def spying(borrowed: Replay | None = None) -> Iterator[Spy]:
    """Count ``Retries``' replays and the statements' placements (``borrowed``: the borrowing
    replay to use instead of ``Retries._replay_borrowed``)."""
    spy = Spy()
    own_replay = Retries._replay_own
    borrow = borrowed or Retries._replay_borrowed
    allocate, pipeline = Statement.allocate, Statement.pipeline

    def own(self: Retries, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        spy.own[job.key] = outcome = own_replay(self, queue, job, tasks)
        return outcome

    def lent(self: Retries, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        spy.borrowed[job.key] = outcome = borrow(self, queue, job, tasks)
        if not outcome and lendable_but_for_readiness(self, queue, job, tasks):
            spy.ready_refused.append(job.key)
        return outcome

    execute = AllocateAction.execute

    def allocating(self: AllocateAction, ssn: Session) -> None:
        spy.allocating = True
        try:
            execute(self, ssn)
        finally:
            spy.allocating = False

    def allocated(self: Statement, task: TaskInfo, node: str) -> None:
        if spy.allocating:
            spy.placed.append(task.job)
        allocate(self, task, node)

    def pipelined(self: Statement, task: TaskInfo, node: str) -> None:
        if spy.allocating:
            spy.placed.append(task.job)
        pipeline(self, task, node)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Retries, "_replay_own", own)
        mp.setattr(Retries, "_replay_borrowed", lent)
        mp.setattr(Statement, "allocate", allocated)
        mp.setattr(Statement, "pipeline", pipelined)
        mp.setattr(AllocateAction, "execute", allocating)
        yield spy


def marks(cluster: ClusterInfo) -> list[tuple[str, str, object]]:
    """Each pod's fit error and last placement, as the session left them."""
    return sorted(
        (t.uid, t.fit_error, t.last_transaction)
        for job in cluster.jobs.values()
        for t in job.tasks.values()
    )


@dataclasses.dataclass
class Step:
    """One session on each cache: the decisions (and marks) with replays and from scratch,
    and what the replaying session did."""

    mine: tuple[object, ...]
    theirs: tuple[object, ...]
    borrowed: dict[str, bool]
    own: dict[str, bool]
    placed: list[str]
    binds: list[str]
    their_binds: list[str]
    ready_refused: list[str]
    pods: dict[str, tuple[str, tuple[TaskStatus, str] | None]]  # by name: fit error, placement

    @property
    def same(self) -> bool:
        return self.mine == self.theirs


def session(kept: Cache, plain: Cache, spy: Spy, step: int) -> Step:
    """One session on each cache (``plain`` forgetting everything carried over: it replays
    nothing), each written back."""
    now = T0 + dt.timedelta(seconds=step)
    with_memory, without = kept.live_cluster(now), plain.live_cluster(now)
    assert canonical(with_memory) == canonical(kept.fresh_cluster(now)), f"step {step}"
    _forget(without)
    spy.clear()
    kept_result = kept.session(with_memory)
    done = Step(
        (*_decisions(kept_result, with_memory), marks(with_memory)),
        (),
        dict(spy.borrowed),
        dict(spy.own),
        list(spy.placed),
        [b.task.name for b in kept_result.binds],
        [],
        list(spy.ready_refused),
        {
            t.name: (t.fit_error, t.last_transaction)
            for job in with_memory.jobs.values()
            for t in job.tasks.values()
        },
    )
    plain_result = plain.session(without)
    done.theirs = (*_decisions(plain_result, without), marks(without))
    done.their_binds = [b.task.name for b in plain_result.binds]
    for cache, result in ((kept, kept_result), (plain, plain_result)):
        cache.write_back(result)
        see_session(cache, result)
    return done


def run_sessions(
    free: int,
    gangs: Sequence[Gang],
    ops: Sequence[Sequence[Op]] = ((),),
    *,
    borrowed: Replay | None = None,
    small: int = SMALL_NODES,
    max_pods: int = 110,
) -> list[Step]:
    """A session on each side for each list of ``ops`` (applied before it, once the cache
    has seen the last session's binds and evictions)."""
    kept = build(free, gangs, small, max_pods=max_pods)
    plain = build(free, gangs, small, max_pods=max_pods)
    sides = ([*gangs], [*gangs])
    steps = []
    with spying(borrowed) as spy:
        for step, changes in enumerate(ops):
            for serial, op in enumerate(changes):
                for cache, mine in zip((kept, plain), sides, strict=True):
                    apply(cache, mine, op, step * 100 + serial)
            steps.append(session(kept, plain, spy, step))
    return steps


# ---- 1. every session decides as a session from scratch -----------------------------------------

gang_specs = st.lists(
    st.tuples(
        st.sampled_from((1, 2, 3, 3, 4)),  # size
        st.sampled_from((0, 0, 1, 2, -1)),  # minMember below size (-1: beyond, invalid)
        st.sampled_from(("default", "default", "q1")),
        st.sampled_from((WHOLE, WHOLE, WHOLE, "3")),  # a 3-cpu gang: another class
    ),
    min_size=2,
    max_size=5,
)
free_nodes = st.sampled_from((0, 1, 2, 2, 3, 4))
ops = st.lists(
    st.lists(
        st.one_of(
            st.tuples(
                st.sampled_from(("add", "add", "best-effort", "drop", "finish", "terminate")),
                st.integers(0, 4),
                st.just(0),
            ),
            st.tuples(st.just("min"), st.integers(0, 4), st.integers(1, 4)),
            st.tuples(st.just("node"), st.just(0), st.sampled_from((-1, 1))),
        ),
        max_size=3,
    ),
    min_size=2,
    max_size=4,
)


def gangs_of(specs: Sequence[tuple[int, int, str, str]]) -> list[Gang]:
    return [
        Gang(f"g{i}", size, max(1, size - slack), queue, cpu)
        for i, (size, slack, queue, cpu) in enumerate(specs)
    ]


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def check_sessions(
    specs: Sequence[tuple[int, int, str, str]],
    free: int,
    changes: Sequence[Sequence[Op]],
    borrowed: Replay | None = None,
) -> list[Step]:
    steps = run_sessions(free, gangs_of(specs), changes, borrowed=borrowed)
    for number, step in enumerate(steps):
        assert step.same, f"session {number} decides unlike a session from scratch"
    return steps


@PROPERTY
@given(specs=gang_specs, free=free_nodes, changes=ops)
def test_borrowing_sessions_decide_as_sessions_from_scratch(
    specs: list[tuple[int, int, str, str]], free: int, changes: list[list[Op]]
) -> None:
    """Gangs of whole-node pods (and some of 3-cpu pods) in one or two queues, too few free
    nodes, over several sessions with pods added, deleted, finished, minMember changed and
    big nodes added or removed between them: each session's binds, evictions, PodGroup
    statuses and conditions, fit errors, pods' messages, Events, and each pod's fit error and
    last placement are those of a session that runs every turn (whether gangs borrowed, or,
    made ready by the other turn's placements, ran and bound)."""
    check_sessions(specs, free, changes)


def test_the_property_draws_lending_and_refusals_for_readiness() -> None:
    """The property is not vacuous: over its first draws (derandomized), gangs borrow, and
    gangs that the lent turn's placements would make ready are refused it for that alone
    (every other condition held), run their turn and bind pods."""
    seen: Counter[str] = Counter()

    @settings(PROPERTY, max_examples=100, derandomize=True, database=None)
    @given(specs=gang_specs, free=free_nodes, changes=ops)
    def draw(specs: list[tuple[int, int, str, str]], free: int, changes: list[list[Op]]) -> None:
        for step in check_sessions(specs, free, changes):
            seen["borrowed"] += sum(step.borrowed.values())
            bound = {name.rsplit("-", 1)[0] for name in step.binds}
            for key in step.ready_refused:
                seen["refused for readiness"] += 1
                seen["refused, ran and bound"] += key.removeprefix("ns/") in bound

    draw()
    assert seen["borrowed"] >= 20, seen
    assert seen["refused, ran and bound"] >= 10, seen


# ---- 2. a gang borrows the turn of the gang before it -------------------------------------------


def test_a_gang_borrows_the_failed_turn_of_the_gang_before_it() -> None:
    """Gangs a and b, three whole-node pods each and minMember 3, in one queue, two free big
    nodes: a's turn places two pods and finds no node for the third; b is given that outcome
    without a statement placing any of its pods (its first two pods' last placements are a's,
    its third gets the fit error), and decides as a session from scratch. The next session
    replays b's own remembered turn."""
    gangs = [Gang("a", 3, 3), Gang("b", 3, 3)]
    first, second = run_sessions(2, gangs, [[], []])
    assert first.same
    assert first.borrowed == {"ns/a": False, "ns/b": True}  # a had nothing to borrow
    assert first.placed == ["ns/a", "ns/a"]  # a's turn; none of b's pods
    pods = first.pods
    assert {pods["a-0"], pods["a-1"]} == {
        ("", (TaskStatus.ALLOCATED, "big-0")),
        ("", (TaskStatus.ALLOCATED, "big-1")),
    }
    for i in range(3):
        assert pods[f"b-{i}"] == pods[f"a-{i}"]
    assert pods["b-2"][0].startswith("0/8 nodes are available: ")
    assert first.binds == []
    assert second.same
    assert second.own == {"ns/a": True, "ns/b": True}  # b's own turn, remembered
    assert second.borrowed == {}
    assert second.placed == []


def test_the_borrowed_turn_is_remembered_as_the_gangs_own() -> None:
    """After b borrowed a's turn, the verdict memory holds a failed turn of b's own: b's
    state, b's pods, a's steps given to b's pods in task order."""
    cache = build(2, [Gang("a", 3, 3), Gang("b", 4, 3)])
    cluster = cache.live_cluster(T0)
    with spying() as spy:
        cache.session(cluster)
    assert spy.borrowed == {"ns/a": False, "ns/b": True}
    assert cluster.verdicts is not None
    turns = cluster.verdicts.failed_turns
    a, b = turns["ns/a"], turns["ns/b"]
    job = cluster.jobs["ns/b"]
    assert isinstance(b, FailedTurn)
    assert b.job == job_state(job)
    waiting = sorted(job.tasks.values(), key=lambda t: t.name)
    assert b.pods == tuple(waiting)  # the very TaskInfos (compared by identity)
    assert [s.uid for s in b.steps] == [t.uid for t in waiting[:3]]
    assert [(s.node, s.status) for s in b.steps] == [(s.node, s.status) for s in a.steps]
    assert b.start == a.start
    assert b.tail == a.tail
    assert b.cls is a.cls
    assert b.queue_state == a.queue_state


CHAIN = [Gang("a", 3, 3), Gang("b", 3, 3), Gang("c", 4, 3)]


def test_a_lent_turn_is_lent_on() -> None:
    """a's turn fails; b borrows it, and c (four pods) borrows b's in turn (the same steps):
    neither places a pod, and both decide as a session from scratch."""
    (step,) = run_sessions(2, CHAIN)
    assert step.same
    assert step.borrowed == {"ns/a": False, "ns/b": True, "ns/c": True}
    assert step.placed == ["ns/a", "ns/a"]
    assert step.pods["c-2"] == step.pods["a-2"]
    assert step.pods["c-3"] == ("", None)


# ---- 3. each condition is needed ----------------------------------------------------------------

A = Gang("a", 3, 3)
# b after a, whose turn places two pods on the two free big nodes and finds none for the third;
# how many pods b's own turn places.
CASES = {
    # b waits in another queue (q1 deserves as much: b's turn fails the same way)
    "another queue": (Gang("b", 3, 3, queue="q1"), 2),
    # b's pods ask for memory too: another class, fitting the same nodes
    "another class": (Gang("b", 3, 3, memory="1Gi"), 2),
    # b has two waiting pods, a's turn three steps. b is then made ready too: a gang with
    # fewer waiting pods than a failed turn's steps always is (a turn of one class has no
    # pod passed over before its failing one), unless it holds Pipelined pods (see the last
    # test), so this condition is never the only one that refuses
    "fewer pods": (Gang("b", 2, 2), 2),
    # a's two placements would make b ready: it runs and binds two pods
    "made ready": (Gang("b", 3, 2), 2),
    # ... counting b's running pod
    "made ready with its running pod": (Gang("b", 3, 3, running=1), 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_gang_that_may_not_borrow_runs_its_turn(case: str) -> None:
    """a's turn fails; b (in another queue, of another class, with fewer waiting pods than
    a's steps, or that a's two placements would make ready) does not borrow it: its turn
    runs, a statement places its pods, and it decides as a session from scratch."""
    b, placed = CASES[case]
    step, later = run_sessions(2, [A, b], [[], []])
    assert step.same
    assert later.same
    assert step.borrowed.get("ns/b") is False
    assert step.placed == ["ns/a"] * 2 + ["ns/b"] * placed
    made_ready = b.running + 2 >= b.min_member
    assert step.binds == ([f"b-{i}" for i in range(2)] if made_ready else [])


NODE_TAKER = Gang("ab", 1, 1, requests=(("pods", "1"),))


def changed_nodes(*, borrowed: Replay | None = None) -> list[Step]:
    """Big nodes that hold one pod each. a's turn fails (two pods placed); then ab, in the
    same queue, binds a pod asking only for a pod slot (no resource the queue counts: its
    state is as it was) on big-0, which no longer fits a gang pod; then b."""
    return run_sessions(
        2, [A, NODE_TAKER, Gang("b", 3, 3)], [[], []], max_pods=1, borrowed=borrowed
    )


def test_a_turn_that_changed_the_nodes_ends_the_lending() -> None:
    """After ab took big-0, b's class's fitting nodes are not a's start: b does not borrow,
    its turn runs (one pod placed on big-1, no node for the second) and decides as a session
    from scratch."""
    step, later = changed_nodes()
    assert step.same
    assert later.same
    assert step.binds == ["ab-0"]
    assert step.borrowed == {"ns/a": False, "ns/ab": False, "ns/b": False}
    assert step.placed == ["ns/a", "ns/a", "ns/ab", "ns/b"]
    assert step.pods["b-0"] == ("", (TaskStatus.ALLOCATED, "big-1"))
    assert "Too many pods" in step.pods["b-1"][0]


def test_lending_over_changed_nodes_is_caught() -> None:
    """Were the start not compared (condition (d) skipped), b would borrow a's turn, its
    pods told to go to big-0 and big-1: the comparison with a session from scratch finds
    it."""
    step = changed_nodes(borrowed=borrowing_without("nodes"))[0]
    assert step.borrowed["ns/b"] is True
    assert step.pods["b-1"] == ("", (TaskStatus.ALLOCATED, "big-1"))
    assert not step.same


def queue_changed(*, borrowed: Replay | None = None) -> list[Step]:
    """a's turn fails (two pods placed, the third fits no node; its queue could take it);
    then ab, in the same queue, binds a 3-cpu pod on a small node (the big nodes are as they
    were); then b. Queue q1 asks for 30 cpu (pods that fit nowhere), so that default
    deserves 13 of the 26: with ab's 3, b's queue takes two of its pods, not three."""
    gangs = [A, Gang("ab", 1, 1, cpu="3"), Gang("b", 3, 3), Gang("z", 6, 6, "q1", cpu="5")]
    return run_sessions(2, gangs, [[], []], borrowed=borrowed)


def test_a_turn_that_changed_the_queue_ends_the_lending() -> None:
    """After ab's bind, default's state is not the one a's turn started from: b does not
    borrow, its turn runs (two pods placed, the third passed over by the queue: no fit
    error) and decides as a session from scratch."""
    step, later = queue_changed()
    assert step.same
    assert later.same
    assert step.binds == ["ab-0"]
    assert step.borrowed["ns/b"] is False
    assert step.placed == ["ns/a", "ns/a", "ns/ab", "ns/b", "ns/b"]
    assert step.pods["a-2"][0]
    assert step.pods["b-2"] == ("", None)


def test_lending_over_a_changed_queue_is_caught() -> None:
    """Were the queue's state not compared (condition (c) skipped), b would borrow a's turn
    and its third pod report a fit error: the comparison finds it."""
    step = queue_changed(borrowed=borrowing_without("queue"))[0]
    assert step.borrowed["ns/b"] is True
    assert step.pods["b-2"][0]
    assert not step.same


# ---- 4. the readiness condition is what keeps such gangs running --------------------------------


WITHOUT_READINESS = borrowing_without("readiness")


def test_the_mutant_without_the_readiness_condition_still_borrows_as_the_change() -> None:
    """The mutant borrows where the change does (b after a, both minMember 3), and decides
    the same there: what it breaks is only the readiness condition."""
    (step,) = run_sessions(2, [A, Gang("b", 3, 3)], borrowed=WITHOUT_READINESS)
    assert step.borrowed == {"ns/a": False, "ns/b": True}
    assert step.same


@pytest.mark.parametrize(
    "b",
    [Gang("b", 3, 2), Gang("b", 3, 3, running=1)],
    ids=["minMember 2", "one pod running"],
)
def test_lending_to_a_gang_that_would_be_made_ready_is_caught(b: Gang) -> None:
    """Without the readiness condition, b (which a's two placements would make ready) is
    given a's failed turn: it binds nothing, where a session from scratch binds two of its
    pods; the comparison of the sessions finds it."""
    (step,) = run_sessions(2, [A, b], borrowed=WITHOUT_READINESS)
    assert step.borrowed == {"ns/a": False, "ns/b": True}
    assert step.binds == []
    assert step.their_binds == ["b-0", "b-1"]
    assert not step.same


def test_the_property_finds_a_lender_that_skips_readiness() -> None:
    """The property itself, drawing (derandomized, no shrinking) against the mutant, finds a
    session that decides unlike a session from scratch."""

    @settings(PROPERTY, max_examples=600, derandomize=True, database=None, phases=[Phase.generate])
    @given(specs=gang_specs, free=free_nodes, changes=ops)
    def draw(specs: list[tuple[int, int, str, str]], free: int, changes: list[list[Op]]) -> None:
        check_sessions(specs, free, changes, borrowed=WITHOUT_READINESS)

    with pytest.raises(AssertionError, match="decides unlike a session from scratch"):
        draw()


# ---- what looks wrong: a gang already pipelined before allocate ----------------------------------

# The live snapshot tests' configuration, preempt first (allocate sees gangs it pipelined).
PREEMPT_FIRST = dataclasses.replace(
    live_snapshot_tests.CONF, actions=("enqueue", "preempt", "allocate", "backfill")
)


def pipelined_by_preempt() -> Cache:
    """Node r0 (4 cpu) whose only pod is being deleted; node w (8 cpu) running v-0 (6 cpu,
    priority low); v-1 (10 cpu, not preemptable) fills node bulk; ten 1-cpu nodes. Gangs a
    (four 4-cpu pods, minMember 4) and p (five 4-cpu pods, minMember 2), priority mid.

    Preempt (first): a cannot be pipelined whole (its try is undone); p gets p-0 on r0 (the
    room being released) and p-1 on w (v-0 evicted): pipelined, committed, and w keeps 4 cpu
    being released. Allocate: a pipelines a-0 on w, finds no node for a-1, is discarded; then
    p (three waiting pods, none ready): a's one placement would not make it ready."""
    cache = bare_cache()
    for name, value in (("mid", 50), ("low", 0)):
        cache.classes.items[name] = pc = PriorityClass(metadata=ObjectMeta(name=name), value=value)
        cache.live.priority_class_changed(pc)
    put_big(cache, "r0")
    put_big(cache, "w", cpu="8")
    put_big(cache, "bulk", cpu="10")
    for i in range(10):
        put_big(cache, f"tiny-{i}", cpu="1")
    cache.put_group("h", queue="default", min_member=1, phase="Running", cls="low")
    running_pod(cache, "h-0", "h", "4", "r0", terminating=True)
    cache.put_group("v", queue="default", min_member=1, phase="Running", cls="low")
    running_pod(cache, "v-0", "v", "6", "w")
    running_pod(cache, "v-1", "v", "10", "bulk", preemptable=False)
    for gang in (Gang("a", 4, 4), Gang("p", 5, 2)):
        cache.put_group(
            gang.name, queue="default", min_member=gang.min_member, phase="Inqueue", cls="mid"
        )
        for i in range(gang.size):
            gang_pod(cache, f"{gang.name}-{i}", gang)
    return cache


def test_a_gang_pipelined_before_allocate_does_not_borrow() -> None:
    """With preempt before allocate, p enters allocate pipelined (two pods, minMember 2):
    run, its turn pipelines p-2 on w and is kept (p is pipelined), not discarded. Lent a's
    turn (were its Pipelined pods not counted: ready 0 + one placement < 2), p-2 would be
    left waiting, with a's placement as its last one, and the session would report p with
    two pods pipelined where a session from scratch reports three (PodGroup condition,
    Event, drf shares): p must run its turn."""
    kept, plain = pipelined_by_preempt(), pipelined_by_preempt()
    with pytest.MonkeyPatch.context() as mp, spying() as spy:
        mp.setattr(live_snapshot_tests, "CONF", PREEMPT_FIRST)
        step = session(kept, plain, spy, 0)
    assert step.pods["p-2"] == ("", None)  # from scratch: pipelined on w, statement kept
    assert step.borrowed["ns/p"] is False
    assert step.same
