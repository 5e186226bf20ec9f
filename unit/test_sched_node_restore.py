"""A discarded statement gives the nodes it placed pods on their states back: their generations
and sums (``NodeInfo.mark``, ``NodeInfo.restore``, ``Statement.discard``), unless something
else changed the node since the statement's first operation on it or the statement evicted a
task there or moved one off it. The placer then takes its verdict for the given-back state
again without evaluating (``Candidates.previous``, ``Candidates.swap_back``,
``Placer._evaluate``), the session leaves such nodes out of what it changed
(``Session.changed_nodes``) and the live snapshot does not derive them again, but tells the
verdict memory's log about them (``LiveSnapshot.after_session``).

Where a mutation is cheap to make (the log entries left out), a test shows the end-to-end
comparison then fails.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.actions.placer as placer_module
from caldera.api.meta import ObjectMeta, format_time
from caldera.api.resources import Resources
from caldera.api.volcano import Queue, QueueSpec
from scheduler.actions.placer import Placer
from scheduler.api.types import ClusterInfo, NodeInfo, NodeMark, TaskInfo, TaskStatus
from scheduler.api.verdicts import Candidates
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.framework.statement import Statement
from scheduler.live_snapshot import LiveSnapshot
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.registry import REGISTRY
from unit.sched_fixtures import add_job, cpu, cpu_cluster, make_task, open_session
from unit.test_sched_live_snapshot import (
    CONF,
    T0,
    Cache,
    _decisions,
    _gang_backlog,
    _running,
    _sized_pod,
    canonical,
)

NAMES = ("n0", "n1", "n2")

# ---- 1. NodeInfo.mark / restore and Statement.discard ------------------------------------------


def test_mark_and_restore_give_back_the_generation_and_the_very_sums() -> None:
    """``mark`` names the node's state (generation, used, releasing, pipelined); ``restore``
    puts those very objects back, and changes nothing else (the tasks stay as they are)."""
    cluster = cpu_cluster({"n0": "8"})
    add_job(cluster, "run", running=1)
    node = cluster.nodes["n0"]
    mark = node.mark()
    assert mark == (node.generation, node.used, node.releasing, node.pipelined)
    extra = make_task("x", 0, {"cpu": "2"}, status=TaskStatus.PIPELINED, node="n0")
    node.add_task(extra)
    assert node.generation != mark[0]
    assert node.pipelined == cpu("2")
    node.remove_task(extra)
    assert node.pipelined is not mark[3]  # an equal sum, another object
    node.restore(mark)
    assert node.generation == mark[0]
    assert (node.used, node.releasing, node.pipelined) == mark[1:]
    assert all(a is b for a, b in zip(node.mark()[1:], mark[1:], strict=True))
    assert set(node.tasks) == {"ns/run-0"}


def statement_cluster() -> tuple[Session, list[TaskInfo], list[TaskInfo]]:
    """Three 16-cpu nodes; job ``run`` runs a task on each (two on n0), job ``pend`` has eight
    pending 1-cpu tasks, job ``out`` 48 (for other statements). The session (no plugins),
    the running and the pending tasks."""
    cluster = cpu_cluster(dict.fromkeys(NAMES, "16"))
    running = add_job(cluster, "run", running=["n0", "n1", "n2", "n0"])
    pending = add_job(cluster, "pend", pending=8)
    add_job(cluster, "out", pending=48)
    ssn = open_session(cluster)
    return ssn, list(running.tasks.values()), list(pending.tasks.values())


def test_discard_gives_each_node_it_placed_pods_on_its_state_back() -> None:
    """Allocations and pipelined pods on two nodes, discarded: each node has the generation
    and the very sums it had before the statement's first operation on it."""
    ssn, _, pending = statement_cluster()
    n0, n1, n2 = (ssn.nodes[n] for n in NAMES)
    marks = {"n0": n0.mark(), "n1": n1.mark(), "n2": n2.mark()}
    stmt = ssn.statement()
    stmt.allocate(pending[0], "n0")
    stmt.pipeline(pending[1], "n0")
    stmt.allocate(pending[2], "n1")
    stmt.pipeline(pending[3], "n0")
    assert n0.generation != marks["n0"][0]
    assert n0.pipelined == cpu("2")
    stmt.discard()
    for name, node in (("n0", n0), ("n1", n1)):
        assert node.mark()[0] == marks[name][0]
        assert all(a is b for a, b in zip(node.mark()[1:], marks[name][1:], strict=True))
    assert n2.mark() == marks["n2"]  # untouched
    assert set(n0.tasks) == {"ns/run-0", "ns/run-3"}
    assert all(t.status == TaskStatus.PENDING and not t.node_name for t in pending)


@pytest.mark.parametrize("spoiler", ["evict", "move off"])
def test_an_eviction_or_a_move_off_the_node_keeps_the_new_generation(spoiler: str) -> None:
    """A statement that evicted a task on a node, or moved one of its pods off it, leaves it
    a generation it never had (its tasks come back in another order); a node it only placed
    pods on gets its own back."""
    ssn, running, pending = statement_cluster()
    n0, n1 = ssn.nodes["n0"], ssn.nodes["n1"]
    before = {"n0": n0.generation, "n1": n1.generation}
    stmt = ssn.statement()
    stmt.allocate(pending[0], "n0")
    seen = {n0.generation, n1.generation}
    if spoiler == "evict":
        stmt.evict(running[0], "test")  # running on n0
    else:
        stmt.allocate(pending[0], "n1")  # off n0
    stmt.allocate(pending[1], "n1")
    seen |= {n0.generation, n1.generation}
    stmt.discard()
    assert n0.generation not in seen | {before["n0"]}
    assert n0.generation > max(seen)
    assert n1.generation == before["n1"]  # only placed on (the move's pod included)
    assert running[0].status == TaskStatus.RUNNING
    assert n0.used == cpu("2")
    assert set(n0.tasks) == {"ns/run-0", "ns/run-3"}


@pytest.mark.parametrize("spoiler", ["evict", "move a kept pod off"])
def test_a_placement_after_an_eviction_or_a_move_off_is_not_given_back(spoiler: str) -> None:
    """The statement's first operation on n0 evicts its running pod, or moves off it a pod a
    kept statement pipelined there; then it places a pod on n0. The discard puts the evicted
    or moved pod back: n0 is not in the state it was in before the placement (that state
    had the pod releasing, or not there), so it gets a new generation, and sums that add up
    its tasks."""
    ssn, running, pending = statement_cluster()
    n0 = ssn.nodes["n0"]
    kept = ssn.statement()
    kept.pipeline(pending[5], "n0")
    seen = {n0.generation}
    stmt = ssn.statement()
    if spoiler == "evict":
        stmt.evict(running[0], "test")
    else:
        stmt.allocate(pending[5], "n1")
    seen.add(n0.generation)
    stmt.allocate(pending[1], "n0")
    seen.add(n0.generation)
    stmt.discard()
    assert n0.generation > max(seen)
    assert (running[0].status, pending[5].status) == (TaskStatus.RUNNING, TaskStatus.PIPELINED)
    assert n0.pipelined == cpu("1")
    assert n0.releasing.is_empty()
    assert n0.used == cpu("2")


@pytest.mark.parametrize("when", ["between", "after"])
@pytest.mark.parametrize("how", ["statement", "add_task"])
def test_another_change_of_the_node_keeps_the_new_generation(when: str, how: str) -> None:
    """Another statement (kept) or a direct ``add_task`` changed the node between the
    statement's operations on it or after its last one: the node is not given its old
    state (it is not in it) and keeps the other change; a change before the statement's
    first operation on a node does not matter."""
    ssn, _, pending = statement_cluster()
    n0, n1 = ssn.nodes["n0"], ssn.nodes["n1"]
    stmt, other = ssn.statement(), ssn.statement()
    outside = iter(ssn.jobs["ns/out"].tasks.values())

    def change(node: NodeInfo) -> None:
        task = next(outside)
        if how == "statement":
            other.allocate(task, node.name)
        else:
            task.status, task.node_name = TaskStatus.RUNNING, node.name
            node.add_task(task)

    first_n1 = n1.generation
    stmt.allocate(pending[0], "n1")
    change(n0)  # before the statement's first operation on n0: fine
    before_n0 = n0.generation
    stmt.allocate(pending[1], "n0")
    seen = {first_n1, n1.generation}
    if when == "between":
        change(n1)
        seen.add(n1.generation)
        stmt.allocate(pending[2], "n1")
    else:
        stmt.allocate(pending[2], "n1")
        seen.add(n1.generation)
        change(n1)
    seen.add(n1.generation)
    stmt.discard()
    assert n0.generation == before_n0
    assert n1.generation not in seen
    assert n1.generation > max(seen)
    assert n1.used == cpu("2")  # its running pod and the other change
    assert n0.used == cpu("3")
    assert {t.status for t in pending} == {TaskStatus.PENDING}


def test_a_nested_statement_discarded_in_between_does_not_stop_the_restore() -> None:
    """A statement placed on a node and discarded between another's operations on it gives
    the node back the state the outer statement left: the outer discard then gives it the
    state before both."""
    ssn, _, pending = statement_cluster()
    n0 = ssn.nodes["n0"]
    before = n0.mark()
    outer = ssn.statement()
    outer.allocate(pending[0], "n0")
    middle = n0.generation
    inner = ssn.statement()
    inner.pipeline(pending[1], "n0")
    inner.discard()
    assert n0.generation == middle
    outer.allocate(pending[2], "n0")
    outer.discard()
    assert n0.generation == before[0]
    assert n0.used is before[1]


State = tuple[frozenset[tuple[str, TaskStatus]], Resources, Resources, Resources]


def node_state(node: NodeInfo) -> State:
    return (
        frozenset((key, t.status) for key, t in node.tasks.items()),
        node.used,
        node.releasing,
        node.pipelined,
    )


class Generations:
    """Every generation seen on a node, with the state it named: a generation seen again
    must name the same state (the same node, tasks, statuses and sums)."""

    def __init__(self) -> None:
        self.states: dict[int, tuple[str, State]] = {}

    def observe(self, nodes: dict[str, NodeInfo]) -> None:
        for name, node in nodes.items():
            state = (name, node_state(node))
            known = self.states.setdefault(node.generation, state)
            assert known == state, f"generation {node.generation} named another state"

    def newest(self) -> int:
        return max(self.states)


KINDS = ("allocate", "pipeline", "evict", "move", "statement", "add_task")
Op = tuple[str, int, int]


class Turn:
    """One statement's random operations and the changes others make meanwhile, with what
    the discard must then do to each node. ``kept``: the pods other statements placed (in
    this turn or earlier ones), which the statement may move too."""

    def __init__(
        self, ssn: Session, running: list[TaskInfo], pending: list[TaskInfo], kept: list[TaskInfo]
    ) -> None:
        self.ssn, self.running, self.pending, self.kept = ssn, running, pending, kept
        self.stmt = ssn.statement()
        self.first: dict[str, NodeMark] = {}  # before the statement's first operation on it
        self.spoiled: set[str] = set()
        self.expected = {name: dict(node_state(n)[0]) for name, n in ssn.nodes.items()}

    def touch(self, name: str) -> None:
        if name not in self.first:
            self.first[name] = self.ssn.nodes[name].mark()

    def run(
        self,
        op: Op,
        outside: Iterator[TaskInfo],
        foreign: Iterator[TaskInfo],
        others: Statement,
    ) -> None:
        kind, index, which = op
        name = NAMES[which % len(NAMES)]
        placed = [t for t in self.pending if t.status != TaskStatus.PENDING] + self.kept
        if kind in ("allocate", "pipeline"):
            free = [t for t in self.pending if t.status == TaskStatus.PENDING]
            if free:
                self.touch(name)
                place = self.stmt.allocate if kind == "allocate" else self.stmt.pipeline
                place(free[index % len(free)], name)
        elif kind == "move" and placed:
            task = placed[index % len(placed)]
            self.touch(task.node_name)
            self.spoiled.add(task.node_name)
            self.touch(name)
            (self.stmt.allocate if index % 2 else self.stmt.pipeline)(task, name)
        elif kind == "evict":
            live = [t for t in self.running if t.status == TaskStatus.RUNNING]
            if live:
                task = live[index % len(live)]
                self.touch(task.node_name)
                self.spoiled.add(task.node_name)
                self.stmt.evict(task, "test")
        elif kind in ("statement", "add_task"):
            if kind == "statement":
                task = next(outside)
                others.allocate(task, name)
                self.kept.append(task)
            else:
                task = next(foreign)
                task.status, task.node_name = TaskStatus.RUNNING, name
                self.ssn.nodes[name].add_task(task)
            self.expected[name][task.key] = task.status
            if name in self.first:
                self.spoiled.add(name)


@settings(max_examples=150)
@given(
    turns=st.lists(
        st.lists(
            st.tuples(st.sampled_from(KINDS), st.integers(0, 7), st.integers(0, 2)), max_size=14
        ),
        min_size=1,
        max_size=3,
    )
)
def test_discard_restores_a_node_exactly_when_only_its_placements_changed_it(
    turns: list[list[Op]],
) -> None:
    """Random statements of allocations, pipelined pods, moves (of their own pods or of pods
    other statements placed) and evictions, with other statements (kept) and direct
    ``add_task`` calls changing nodes meanwhile, each discarded: every node has the tasks it
    should (as before, plus the others' changes), in the statuses they had, with sums that
    add them up; its generation is the one before the statement's first operation on it
    exactly when the statement only placed pods there and nothing else changed it since (its
    very sums back too), a generation never given before when the statement touched it
    otherwise, and the same when it did not touch it. A generation seen twice, over all the
    turns, names the same state."""
    ssn, running, pending = statement_cluster()
    outside = iter(ssn.jobs["ns/out"].tasks.values())
    foreign = iter([make_task("foreign", i, {"cpu": "1"}) for i in range(48)])
    generations = Generations()
    generations.observe(ssn.nodes)
    kept: list[TaskInfo] = []
    for ops in turns:
        turn, others = Turn(ssn, running, pending, kept), ssn.statement()
        for op in ops:
            turn.run(op, outside, foreign, others)
            generations.observe(ssn.nodes)
        before = {name: node.generation for name, node in ssn.nodes.items()}
        newest = generations.newest()
        turn.stmt.discard()
        for name, node in ssn.nodes.items():
            tasks = dict(node_state(node)[0])
            assert tasks == turn.expected[name], name
            on = list(node.tasks.values())
            pipelined = [t.resreq for t in on if t.status == TaskStatus.PIPELINED]
            releasing = [t.resreq for t in on if t.status == TaskStatus.RELEASING]
            used = [t.resreq for t in on if t.status != TaskStatus.PIPELINED]
            assert node.pipelined == Resources.sum(pipelined)
            assert node.releasing == Resources.sum(releasing)
            assert node.used == Resources.sum(used)
            if name in turn.first and name not in turn.spoiled:
                mark = turn.first[name]
                assert node.generation == mark[0], name
                assert node.used is mark[1]
                assert node.releasing is mark[2]
                assert node.pipelined is mark[3]
            elif name in turn.first:
                assert node.generation > newest, name  # never given before
            else:
                assert node.generation == before[name], name
        generations.observe(ssn.nodes)
        assert all(t.status == TaskStatus.PENDING and not t.node_name for t in pending)
        assert all(t.status == TaskStatus.RUNNING for t in running)


# ---- 2. the placer takes its previous verdict again ---------------------------------------------


def test_swap_back_takes_the_previous_verdict_for_its_generation_only() -> None:
    """``swap_back`` returns the previous verdict when the generation is the one it was for,
    making it the current one and the current one the previous; otherwise None, nothing
    changed. ``forget`` drops it."""
    cand = Candidates()
    cand.seen["n0"], cand.scores["n0"] = 7, 42.0
    assert cand.swap_back("n0", 3) is None  # no previous verdict
    cand.previous["n0"] = (3, ["Insufficient cpu"])
    assert cand.swap_back("n0", 4) is None
    assert cand.previous.get("n0") == (3, ["Insufficient cpu"])
    assert cand.seen["n0"] == 7
    assert cand.swap_back("n0", 3) == ["Insufficient cpu"]
    assert cand.seen["n0"] == 3
    assert cand.previous.get("n0") == (7, 42.0)
    cand.set_reasons("n0", ["Insufficient cpu"])
    cand.scores.pop("n0")
    assert cand.verdict("n0") == ["Insufficient cpu"]
    assert cand.swap_back("n0", 7) == 42.0
    assert cand.previous.get("n0") == (3, ["Insufficient cpu"])
    cand.forget("n0")
    assert "n0" not in cand.previous
    assert "n0" not in cand.seen


def placer_session() -> tuple[Session, dict[str, list[TaskInfo]], dict[str, TaskInfo]]:
    """Nodes of 4, 6, 8 and 2 cpu (n1 and n2 running a 2-cpu pod), predicates and binpack;
    pending pods of 1, 2 and 3 cpu (six each), and a probe of each size (never placed)."""
    cluster = cpu_cluster({"n0": "4", "n1": "6", "n2": "8", "n3": "2"})
    add_job(cluster, "run", running=["n1", "n2"], size="2")
    pods = {
        size: list(add_job(cluster, f"p{size}", pending=6, size=size).tasks.values())
        for size in ("1", "2", "3")
    }
    probes = {
        size: next(iter(add_job(cluster, f"probe{size}", pending=1, size=size).tasks.values()))
        for size in ("1", "2", "3")
    }
    ssn = open_session(
        cluster,
        [PredicatesPlugin(Arguments("predicates", {})), BinpackPlugin(Arguments("binpack", {}))],
    )
    return ssn, pods, probes


Verdicts = tuple[str | None, dict[str, float], dict[str, list[str]], dict[str, int]]


def verdicts(best: str | None, cand: Candidates) -> Verdicts:
    return best, dict(cand.scores), dict(cand.reasons), dict(cand.reason_counts)


def fresh(ssn: Session, task: TaskInfo) -> Verdicts:
    """A placer from scratch's answer for ``task`` (given the nodes: no verdict memory)."""
    return verdicts(*Placer(ssn, ssn.nodes).best(task))


class Evaluations:
    """Counts the placer's calls of ``evaluate``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        evaluate = placer_module.evaluate

        def counted(*args: Any) -> float | list[str]:
            self.count += 1
            return evaluate(*args)

        monkeypatch.setattr(placer_module, "evaluate", counted)


def test_a_discarded_placement_is_judged_again_without_evaluating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 3-cpu pod goes to n1, the class looks at n1 with the pod on it (another 3-cpu pod
    no longer fits there), the statement is discarded: asking for a 3-cpu pod again
    evaluates nothing, finds n1 again (its heap entry pushed back) and gives the verdicts
    a placer from scratch gives, reasons and their counts included; then a placement on
    another node is evaluated (that node only)."""
    ssn, pods, probes = placer_session()
    count = Evaluations(monkeypatch)
    placer = Placer(ssn)
    first = verdicts(*placer.best(probes["3"]))
    assert first[0] == "n1"  # binpack: the fullest after the pod (5 of 6)
    assert count.count == 4
    stmt = ssn.statement()
    stmt.allocate(pods["3"][0], "n1")
    during = verdicts(*placer.best(probes["3"]))
    assert count.count == 5  # n1 again, now too full for a 3-cpu pod
    assert "n1" in during[2]
    assert during[0] != "n1"
    assert during == fresh(ssn, probes["3"])
    stmt.discard()
    count.count = 0
    again = verdicts(*placer.best(probes["3"]))
    assert count.count == 0
    assert again == first
    assert again == fresh(ssn, probes["3"])
    count.count = 0
    stmt = ssn.statement()
    stmt.allocate(pods["1"][0], "n0")
    assert verdicts(*placer.best(probes["3"])) == fresh(ssn, probes["3"])
    assert count.count == 1 + 4  # n0 (now 3 of 4 cpu free), and the fresh placer's


def opened(cluster: ClusterInfo) -> Session:
    """A session over ``cluster`` with ``CONF``'s plugins opened (no action run)."""
    ssn = Session(cluster, CONF.tiers)
    for tier in CONF.tiers:
        for option in tier:
            plugin = REGISTRY.plugins[option.name](Arguments(option.name, option.arguments))
            plugin.on_session_open(ssn)
    return ssn


def test_a_kept_class_takes_its_verdict_back_across_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the live snapshot, the gang's class last looked at n0 and n1 with the gang's pods on
    them; the turn was discarded. In the next session a pod of the class (another job) finds
    n0 with nothing evaluated: the class takes its previous verdicts back (n0 and n1 were
    logged as changed), which are a placer from scratch's."""
    cache = _gang_backlog(0)
    cluster = cache.live_cluster(T0)
    cache.session(cluster)
    assert cluster.verdicts is not None
    (cand,) = cluster.verdicts.classes.values()
    for name in ("n0", "n1"):
        assert cand.seen[name] != cluster.nodes[name].generation  # looked at a later state
        assert cand.previous[name][0] == cluster.nodes[name].generation
    cache.put_group("single", queue="default", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "single-0", "single", "3"))
    cluster = cache.live_cluster(T0 + dt.timedelta(seconds=1))
    single = next(iter(cluster.jobs["ns/single"].tasks.values()))
    ssn = opened(cluster)
    count = Evaluations(monkeypatch)
    got = verdicts(*Placer(ssn).best(single))
    assert count.count == 0
    assert got[0] == "n0"
    assert got == fresh(ssn, single)
    assert count.count == 3  # the placer from scratch looked at the three nodes


PLACER_KINDS = ("open", "allocate", "pipeline", "evict", "ask", "discard", "commit")


@settings(max_examples=120)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(PLACER_KINDS), st.integers(0, 30), st.integers(0, 3)),
        max_size=40,
    )
)
def test_the_placer_answers_as_a_placer_from_scratch(ops: list[tuple[str, int, int]]) -> None:
    """Statements opened, placing pods of three classes, evicting running pods, discarded
    (in any order) or committed, the placer asked in between: every answer (best node,
    scores, reasons and their counts) is a fresh placer's, and the class has looked at
    every node in its current state."""
    ssn, pods, probes = placer_session()
    placer = Placer(ssn)
    names = sorted(ssn.nodes)
    running = list(ssn.jobs["ns/run"].tasks.values())
    waiting = [t for size in ("1", "2", "3") for t in pods[size]]
    stack: list[Statement] = []

    def ask(size: str) -> None:
        best, cand = placer.best(probes[size])
        assert verdicts(best, cand) == fresh(ssn, probes[size])
        assert cand.seen == {name: ssn.nodes[name].generation for name in names}

    for kind, index, which in ops:
        if kind == "open" or (kind in ("allocate", "pipeline", "evict") and not stack):
            stack.append(ssn.statement())
        if kind in ("allocate", "pipeline"):
            free = [t for t in waiting if t.status == TaskStatus.PENDING]
            if free:
                place = stack[-1].allocate if kind == "allocate" else stack[-1].pipeline
                place(free[index % len(free)], names[which])
        elif kind == "evict":
            live = [t for t in running if t.status == TaskStatus.RUNNING]
            if live:
                stack[-1].evict(live[index % len(live)], "test")
        elif kind == "ask":
            ask(("1", "2", "3")[index % 3])
        elif kind in ("discard", "commit") and stack:
            stmt = stack.pop(index % len(stack))
            stmt.discard() if kind == "discard" else stmt.commit()
    for size in ("1", "2", "3"):
        ask(size)
    while stack:
        stack.pop().discard()
        for size in ("1", "2", "3"):
            ask(size)


# ---- 3. the session's changed nodes and the live snapshot ---------------------------------------


def test_changed_nodes_leave_out_the_nodes_given_back() -> None:
    """A node only a discarded statement placed on is not changed; one with a pipelined pod
    of a kept statement, a committed bind, or an eviction undone is; and so is one given back
    a state the session itself made (a commit before the discarded statement)."""
    cluster = cpu_cluster({"n0": "8", "n1": "8", "n2": "8", "n3": "8"})
    running = add_job(cluster, "run", running=["n3"])
    tasks = list(add_job(cluster, "pend", pending=6).tasks.values())
    ssn = open_session(cluster)
    discarded = ssn.statement()
    discarded.allocate(tasks[0], "n0")
    discarded.pipeline(tasks[1], "n0")
    discarded.discard()
    kept = ssn.statement()
    kept.pipeline(tasks[2], "n1")  # neither committed nor discarded
    committed = ssn.statement()
    committed.allocate(tasks[3], "n2")
    committed.commit()
    evicted = ssn.statement()
    evicted.evict(next(iter(running.tasks.values())), "test")
    evicted.discard()
    assert set(ssn.node_changes) == {"n0", "n1", "n2", "n3"}
    assert ssn.changed_nodes() == {"n1", "n2", "n3"}
    after_commit = ssn.statement()
    after_commit.allocate(tasks[4], "n2")
    after_commit.discard()
    assert ssn.changed_nodes() == {"n1", "n2", "n3"}
    del ssn.nodes["n1"]  # gone: changed
    assert ssn.changed_nodes() == {"n1", "n2", "n3"}


def session_on(cache: Cache, cluster: ClusterInfo) -> tuple[SessionResult, Session]:
    """``Cache.session``, keeping the Session."""
    session = Session(cluster, CONF.tiers)
    try:
        result = run_session(session, CONF, REGISTRY)
    finally:
        cache.live.after_session(session)
    for bind in result.binds:
        cache.assumed[bind.task.uid] = bind.node
    return result, session


def test_the_live_snapshot_derives_again_only_the_nodes_a_session_left_changed() -> None:
    """The gang backlog with a 1-cpu job that fits: its bind lands on n0, the gang's turn
    places pods on n0 and n1 and is discarded. n0 is derived again; n1 keeps its NodeInfo
    and generation (as does n2, untouched) and is logged for the verdict memory once; the
    snapshot equals a fresh build."""
    cache = _gang_backlog(0)
    cache.put_group("fits", queue="default", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "fits-0", "fits", "1"))
    cluster = cache.live_cluster(T0)
    nodes = dict(cluster.nodes)
    generations = {name: node.generation for name, node in nodes.items()}
    assert cluster.verdicts is not None
    logged = len(cluster.verdicts.log)
    result, session = session_on(cache, cluster)
    assert [(b.task.name, b.node) for b in result.binds] == [("fits-0", "n0")]
    assert set(session.node_changes) == {"n0", "n1"}
    assert session.changed_nodes() == {"n0"}
    assert cluster.verdicts.log[logged:] == ["n1"]
    cache.write_back(result)
    again = cache.live_cluster(T0)
    assert again is cluster
    assert cluster.nodes["n0"] is not nodes["n0"]
    for name in ("n1", "n2"):
        assert cluster.nodes[name] is nodes[name]
        assert cluster.nodes[name].generation == generations[name]
    assert canonical(cluster) == canonical(cache.fresh_cluster(T0))


def pipelining_cache() -> Cache:
    """n0 (8 cpu) all held by a pod being deleted, n1 (4 cpu) free; job ``later`` (one 7-cpu
    pod) is pipelined on n0 and kept; then the gang ``wide`` (two 3-cpu pods) places one on
    n1, finds no node for the other, and is discarded."""
    cache = Cache(random.Random(0))  # noqa: S311 - seeded test data
    cache.queues.items["default"] = Queue(
        metadata=ObjectMeta(name="default"), spec=QueueSpec(weight=1)
    )
    cache.live.queue_changed(cache.queues.items["default"])
    cache.put_node("n0", "8", ready=True)
    cache.delete(cache.nodes, "n2")
    leaving = _running(_sized_pod(cache, "leaving", "", "8"), "n0")
    meta = msgspec.structs.replace(leaving.metadata, deletion_timestamp=format_time(T0))
    cache.put_pod(msgspec.structs.replace(leaving, metadata=meta))
    cache.put_group("later", queue="default", min_member=1, phase="Inqueue", cls="")
    cache.put_pod(_sized_pod(cache, "later-0", "later", "7"))
    cache.put_group("wide", queue="default", min_member=2, phase="Inqueue", cls="")
    for i in range(2):
        cache.put_pod(_sized_pod(cache, f"wide-{i}", "wide", "3"))
    return cache


def test_a_node_with_a_kept_pipelined_pod_is_derived_again() -> None:
    """The node holding a pipelined pod of a kept statement is changed and derived again;
    the node only the discarded gang placed on is not."""
    cache = pipelining_cache()
    cluster = cache.live_cluster(T0)
    nodes = dict(cluster.nodes)
    result, session = session_on(cache, cluster)
    assert not result.binds
    later = next(iter(cluster.jobs["ns/later"].tasks.values()))
    assert (later.status, later.node_name) == (TaskStatus.PIPELINED, "n0")
    assert set(session.node_changes) == {"n0", "n1"}
    assert session.changed_nodes() == {"n0"}
    cache.write_back(result)
    cluster = cache.live_cluster(T0)
    assert cluster.nodes["n0"] is not nodes["n0"]
    assert cluster.nodes["n0"].pipelined.is_empty()
    assert cluster.nodes["n1"] is nodes["n1"]
    assert canonical(cluster) == canonical(cache.fresh_cluster(T0))


CHANGES = (
    "small n0",
    "small n1",
    "small n2",
    "small ends",
    "holder ends",
    "binds seen",
    "another gang",
    "single",
    "too big",
)


def change(cache: Cache, what: str, step: int) -> None:
    """One change between sessions (pods come and go)."""
    smalls = sorted(k for k in cache.pods.items if k.startswith("ns/small-"))
    if what.startswith("small n"):
        pod = _running(_sized_pod(cache, f"small-{step}-{what[-1]}", "", "500m"), what[-2:])
        cache.put_pod(pod)
    elif what == "small ends" and smalls:
        cache.delete(cache.pods, smalls[0])
    elif what == "holder ends" and "ns/holder" in cache.pods.items:
        cache.delete(cache.pods, "ns/holder")
    elif what == "binds seen":
        by_uid = {pod.metadata.uid: key for key, pod in cache.pods.items.items()}
        for uid, node in sorted(cache.assumed.items()):
            key = by_uid.get(uid)
            if key is not None:
                cache.put_pod(_running(cache.pods.items[key], node))
        cache.assumed.clear()
    elif what == "another gang":
        name = f"g{step}"
        cache.put_group(name, queue="default", min_member=2, phase="Inqueue", cls="")
        for i in range(2):
            cache.put_pod(_sized_pod(cache, f"{name}-{i}", name, "3"))
    elif what == "single":
        name = f"s{step}"
        cache.put_group(name, queue="default", min_member=1, phase="Inqueue", cls="")
        cache.put_pod(_sized_pod(cache, f"{name}-0", name, "3"))
    elif what == "too big":
        name = f"big{step}"
        cache.put_group(name, queue="q1", min_member=1, phase="Inqueue", cls="")
        cache.put_pod(_sized_pod(cache, f"{name}-0", name, "6"))


Outcome = tuple[tuple[object, ...], tuple[object, ...], set[str]]


def live_and_fresh(changes: list[list[str]], seed: int = 0) -> Iterator[Outcome]:
    """The gang backlog on two caches; before each session but the first, the same changes
    on both. Each session runs on the live snapshot of one and on a snapshot built from
    scratch of the other; yields both sessions' decisions and the nodes the live session
    gave back (touched, not changed). Right after each live session, an update (nothing
    changed but the PodGroups' statuses written back) keeps the given-back nodes' NodeInfos
    and generations."""
    live, scratch = _gang_backlog(seed), _gang_backlog(seed)
    for step, between in enumerate([[], *changes]):
        for what in between:
            change(live, what, step)
            change(scratch, what, step)
        now = T0 + dt.timedelta(seconds=step)
        cluster, built = live.live_cluster(now), scratch.fresh_cluster(now)
        assert canonical(cluster) == canonical(live.fresh_cluster(now)), f"step {step}"
        nodes = dict(cluster.nodes)
        result, session = session_on(live, cluster)
        built_result = scratch.session(built)
        given_back = set(session.node_changes) - session.changed_nodes()
        decided = _decisions(result, cluster), _decisions(built_result, built)
        live.write_back(result)
        scratch.write_back(built_result)
        live.live_cluster(now)
        for name in given_back:
            assert cluster.nodes[name] is nodes[name], f"step {step}: {name}"
        for name in session.changed_nodes() & nodes.keys():
            assert cluster.nodes[name] is not nodes[name], f"step {step}: {name}"
        yield *decided, given_back


@settings(max_examples=60)
@given(
    changes=st.lists(st.lists(st.sampled_from(CHANGES), max_size=3), min_size=2, max_size=6),
    seed=st.integers(0, 3),
)
def test_live_sessions_with_discarded_turns_decide_as_fresh_snapshots(
    changes: list[list[str]], seed: int
) -> None:
    """Over several sessions of a gang backlog whose turns are discarded every session (the
    given-back nodes not derived again), with pods coming and going between sessions, every
    session decides and reports as a session on a snapshot built from scratch."""
    given_back = 0
    for step, (mine, theirs, back) in enumerate(live_and_fresh(changes, seed)):
        assert mine == theirs, f"step {step}"
        given_back += len(back)
    assert given_back > 0  # the first session gives n0 and n1 back


def test_without_logging_the_given_back_nodes_a_kept_class_decides_wrongly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were the given-back nodes not logged for the verdict memory, the gang's class, which
    looked at n0 and n1 with its pods on them, would keep finding them full: the next
    session's turn finds no node for its first pod, unlike a session from scratch."""
    after_session = LiveSnapshot.after_session

    def unlogged(self: LiveSnapshot, session: Session) -> None:
        cluster = self.cluster
        memory = cluster.verdicts if cluster is not None else None
        kept = len(memory.log) if memory is not None else 0
        after_session(self, session)
        if memory is not None:
            del memory.log[kept:]

    runs = list(live_and_fresh([[], []]))
    assert all(mine == theirs for mine, theirs, _ in runs)
    monkeypatch.setattr(LiveSnapshot, "after_session", unlogged)
    runs = list(live_and_fresh([[], []]))
    first, second = runs[0], runs[1]
    assert first[0] == first[1]
    assert second[0] != second[1]
