"""A waiting gang's failed turn in allocate, replayed instead of run again when nothing it reads
has changed since.

A backlog of gangs that do not fit costs every session a turn per gang: allocate places the
pods that fit, finds no node for the next one, finds the gang not ready and discards the
statement (Volcano does the same every session). What such a turn leaves behind is only the
placed pods' last placements (``TaskInfo.last_transaction``) and the fit error of the pod that
found no node. On the live snapshot, a turn like that is remembered (``FailedTurn`` in the
verdict memory), and the gang's next turn gives the same outcome without placing anything when
everything the turn reads is as it was:

- the job: the same pods, statuses and nodes, the same minAvailable and minTaskMember (gang's
  readiness is a function of these), and all its waiting pods of one placer class, the class
  recorded;
- the nodes: the class's nodes that fit, brought up to date as the turn's first pod would
  bring them, are the same nodes with the same scores and the same states. Every other node
  did not fit then and does not now; placing pods only takes room, so it would not fit during
  the turn either, and the pods would go where they went;
- the queue: each pod is asked of the queue's plugins again (``Session.allocatable``) with the
  earlier pods' allocation told to those plugins' handlers, as the statement tells them (the
  other plugins' handlers, drf's, are not: no answer reads what they keep), and must get the
  answer it got; the handlers are then told of the release, as a discard tells them.

The fit error is then the class's current reasons (the nodes that did not fit) plus the reasons
the fitting nodes gave once the turn's pods were on them, recorded with the turn. When the
queue's plugins say what their answers read (``Session.allocatable_state``) and it is as it
was, with the same pods, the answers are not asked again.

A gang whose own turn cannot be replayed may borrow one that another gang of its class ran
and failed in the same queue earlier in the session: with the same fitting nodes (states and
scores) and the same queue state, its pods would go where that gang's went, step by step, and
the same step would find no node, provided it has at least as many waiting pods and the pods
placed would make it neither ready nor pipelined (gang's counts; its roles only hold a job
back further). A backlog of gangs of one class then runs one turn per session, not one each,
when the nodes that fit change.

A turn of pods the session judges cross-node (``Session.cross_node``: inter-pod affinity reads
the pods of a node's whole topology domain, which no class's node states show) is neither
remembered nor replayed.

Only configurations of ``REPLAY_PLUGINS`` (``scheduler.framework.incremental``) are
replayed: their readiness, allocatable and handler functions read nothing but the job, the
queue and what the handlers kept; any other plugin makes every turn run. Nor is a turn of
pods whose verdicts read other nodes (``Session.cross_node``: topology spread): placing its
pods changes the verdicts of nodes they did not go to.
``unit/test_sched_live_snapshot.py`` and ``unit/test_sched_borrowed_replay.py`` compare
sessions that replay with sessions that run every turn.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from scheduler.actions.placer import Placer, fit_error_histogram
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.api.verdicts import Candidates, FailedTurn, TurnStep, VerdictMemory
from scheduler.framework.incremental import REPLAY_PLUGINS

if TYPE_CHECKING:
    from scheduler.framework.session import Session

# A turn that started with more fitting nodes than this is not remembered (its check would
# cost more than the turn saves).
MAX_START_NODES = 64
# Replayed fit errors kept (``VerdictMemory.fit_errors``) before they are all forgotten.
MAX_TOLD = 256


def job_state(job: JobInfo) -> object:
    """What a turn reads of the job (its pods' classes are checked apart)."""
    return (
        frozenset((t.uid, t.status, t.node_name) for t in job.tasks.values()),
        job.min_available,
        tuple(sorted(job.min_task_member.items())),
    )


def node_state(node: NodeInfo) -> tuple[object, ...]:
    """What a verdict about the node reads: its object, flags, resources (listed zeros
    included) and the pods on it (compared by identity first, then by value)."""
    return (
        node.node,
        node.ready,
        node.unschedulable,
        node.max_pods,
        *(frozenset(r.items()) for r in (node.allocatable, node.used, node.releasing)),
        frozenset(node.pipelined.items()),
        sorted(((t.uid, t.status, t.pod) for t in node.tasks.values()), key=_uid),
    )


def _uid(entry: tuple[str, object, object]) -> str:
    return entry[0]


def _start(cand: Candidates, nodes: Mapping[str, NodeInfo]) -> dict[str, tuple[float, object]]:
    return {name: (score, node_state(nodes[name])) for name, score in cand.scores.items()}


class TurnRecord:
    """What a turn read and did, noted as it runs (``allocate``), for ``Retries.keep``."""

    __slots__ = ("cls", "job", "pods", "queue_state", "start", "steps", "usable")

    def __init__(
        self, job: JobInfo, cls: object, pods: list[TaskInfo], queue_state: object
    ) -> None:
        self.job = job_state(job)
        self.cls = cls
        self.pods = tuple(pods)
        self.queue_state = queue_state
        self.start: dict[str, tuple[float, object]] | None = None
        self.steps: list[TurnStep] = []
        self.usable = True

    def looked(self, cand: Candidates, nodes: Mapping[str, NodeInfo]) -> None:
        """The placer's verdicts for a pod; the first time, the turn's start."""
        if self.start is None:
            if len(cand.scores) > MAX_START_NODES:
                self.usable = False
                self.start = {}
            else:
                self.start = _start(cand, nodes)

    def passed_over(self, task: TaskInfo) -> None:
        self.steps.append(TurnStep(task.uid, allocatable=False))

    def placed(self, task: TaskInfo, node: str) -> None:
        self.steps.append(TurnStep(task.uid, True, node, task.status))

    def failed(self, task: TaskInfo, cand: Candidates) -> FailedTurn | None:
        """The pod no node fits: the turn as remembered, None when it cannot be replayed
        (a node that fitted at the start fits still: the failing pod is of another class)."""
        self.steps.append(TurnStep(task.uid, allocatable=True))
        if not self.usable or self.start is None:
            return None
        tail: list[str] = []
        for name in self.start:
            reasons = cand.reasons.get(name)
            if reasons is None:
                return None
            tail.extend(reasons)
        return FailedTurn(
            self.job,
            self.cls,
            self.pods,
            self.start,
            tuple(self.steps),
            tuple(tail),
            queue_state=self.queue_state,
        )


class Retries:
    """The session's failed turns: remembered in the verdict memory, replayed when valid."""

    def __init__(self, ssn: Session, placer: Placer, memory: VerdictMemory) -> None:
        self.ssn = ssn
        self.placer = placer
        self.memory = memory
        # Told of a replayed turn's placements: only the plugins the answers come from.
        self.handlers = ssn.answering_handlers()
        # This session's failed turns, by class and queue: lent to gangs of the same class in
        # the same queue (``_replay_borrowed``).
        self.fresh: dict[tuple[object, str], FailedTurn] = {}

    @staticmethod
    def of(ssn: Session, placer: Placer) -> Retries | None:
        """None when turns cannot be replayed here: no verdict memory (a snapshot built from
        scratch), a placer over some nodes only, or a plugin outside ``REPLAY_PLUGINS``."""
        memory = placer.memory
        if memory is None or placer.per_task or not placer.reuse:
            return None
        configured = {opt.name for tier in ssn.tiers for opt in tier}
        if not configured <= REPLAY_PLUGINS:
            return None
        return Retries(ssn, placer, memory)

    def record(self, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> TurnRecord | None:
        """A record for the job's turn, when its waiting pods are of one class."""
        pending = [t for t in tasks if t.status == TaskStatus.PENDING]
        if not pending or any(t.pod is not None and t.pod.spec.resource_claims for t in pending):
            return None  # a turn with DRA claims read devices, which no node generation names
        if self._cross_node(pending):
            return None
        cls = self.placer.class_key(pending[0])
        if any(self.placer.class_key(t) != cls for t in pending[1:]):
            return None
        return TurnRecord(job, cls, pending, self.ssn.allocatable_state(queue))

    def keep(self, job: JobInfo, turn: FailedTurn | None) -> None:
        """Remember the job's failed turn (None: forget any), once its statement is
        discarded (the job as the turn found it)."""
        turns = self.memory.failed_turns
        if turn is None:
            turns.pop(job.key, None)
            return
        turns[job.key] = dataclasses.replace(turn, known=(job, job.generation))
        self.fresh[(turn.cls, job.queue)] = turn
        jobs = self.ssn.jobs
        if len(turns) > 2 * len(jobs) + 64:
            for gone in [k for k in turns if k not in jobs]:
                del turns[gone]

    def replay(self, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        """Give the job's turn the outcome of its remembered failed one, or of another gang's
        failed in this session, when valid (see the module docstring); False, with nothing
        changed, when the turn must run."""
        if self._cross_node(tasks):
            return False
        return self._replay_own(queue, job, tasks) or self._replay_borrowed(queue, job, tasks)

    def _cross_node(self, tasks: Iterable[TaskInfo]) -> bool:
        """Whether a waiting pod's verdicts read other nodes than the one judged
        (``Session.cross_node``: topology spread, inter-pod affinity): placing the turn's pods
        changes them, so its turn is never replayed (nor lent: such a pod may share its class
        with pods without)."""
        if not self.ssn.has_cross_node:
            return False
        cross_node = self.ssn.cross_node
        for task in tasks:  # noqa: SIM110 - a loop: asked per turn
            if task.status == TaskStatus.PENDING and cross_node(task):
                return True
        return False

    def _replay_own(self, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        turn = self.memory.failed_turns.get(job.key)
        if turn is None:
            return False
        known = turn.known
        if (known is None or known[0] is not job or known[1] != job.generation) and (
            turn.job != job_state(job)
        ):
            return False
        pending = [t for t in tasks if t.status == TaskStatus.PENDING]
        if len(pending) < len(turn.steps):
            return False
        # TaskInfos compare by identity (eq=False): the same objects, compared in C.
        same_pods = tuple(pending) == turn.pods
        if not same_pods and any(self.placer.class_key(t) != turn.cls for t in pending):
            return False
        cand = self.placer.candidates(pending[0])
        if not self._same_start(cand, turn):
            return False
        if not (same_pods and self._same_queue_state(queue, turn)) and not self._same_answers(
            queue, pending, turn
        ):
            return False
        self._tell(job, turn, cand)
        return True

    def _replay_borrowed(self, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]) -> bool:
        """The outcome of a failed turn that another gang of the class ran in this session,
        in the same queue (``_lendable``): the gang's pods go where that gang's went, step by
        step, and the same step finds no node; remembered as the gang's own turn."""
        lent = self._lendable(queue, job, tasks)
        if lent is None:
            return False
        turn, pending, cand = lent
        steps = tuple(
            dataclasses.replace(step, uid=task.uid)
            for step, task in zip(turn.steps, pending, strict=False)
        )
        own = FailedTurn(
            job_state(job),
            turn.cls,
            tuple(pending),
            turn.start,
            steps,
            turn.tail,
            queue_state=turn.queue_state,
        )
        self._tell(job, own, cand)
        self.keep(job, own)
        return True

    def _lendable(
        self, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]
    ) -> tuple[FailedTurn, list[TaskInfo], Candidates] | None:
        """This session's failed turn of the class of the job's waiting pods, in its queue,
        with those pods and the class's candidates, when it may be lent: the job has at least
        as many waiting pods, all of the class, and would stay unready; the queue's state and
        the fitting nodes are as they were. None when not."""
        pending = [t for t in tasks if t.status == TaskStatus.PENDING]
        if not pending:
            return None
        placer = self.placer
        cls = placer.class_key(pending[0])
        turn = self.fresh.get((cls, job.queue))
        if turn is None or len(pending) < len(turn.steps) or not self._stays_unready(job, turn):
            return None
        if any(placer.class_key(t) != cls for t in pending[1:]) or self._cross_node(pending):
            return None
        if not self._same_queue_state(queue, turn):
            return None
        cand = placer.candidates(pending[0])
        if not self._same_start(cand, turn):
            return None
        return turn, pending, cand

    @staticmethod
    def _stays_unready(job: JobInfo, turn: FailedTurn) -> bool:
        """Whether the pods ``turn`` placed would leave the job neither ready nor pipelined
        (gang's counts, pods pipelined before the turn by preempt included; its role counts
        only hold a job back further), so that its turn is discarded."""
        placed = sum(1 for step in turn.steps if step.node)
        return job.pipelined_task_num() + placed < job.min_available

    def _same_queue_state(self, queue: QueueInfo, turn: FailedTurn) -> bool:
        """Whether the queue's plugins read what they read when the turn started."""
        return turn.queue_state is not None and turn.queue_state == self.ssn.allocatable_state(
            queue
        )

    def _same_start(self, cand: Candidates, turn: FailedTurn) -> bool:
        """Whether the class's fitting nodes are the turn's first pod's: the same nodes, with
        the same scores and states."""
        if cand.scores.keys() != turn.start.keys():
            return False
        nodes = self.ssn.nodes
        for name, (score, state) in turn.start.items():
            if cand.scores[name] != score or node_state(nodes[name]) != state:
                return False
        return True

    def _tell(self, job: JobInfo, turn: FailedTurn, cand: Candidates) -> None:
        """What a replayed turn leaves: the placed pods' last placements, the fit error."""
        for step in turn.steps:
            if step.node:
                assert step.status is not None
                job.tasks[step.uid].last_transaction = (step.status, step.node)
        failing = job.tasks[turn.steps[-1].uid]
        message = self._fit_error(turn, cand, len(self.ssn.nodes))
        job.fit_errors[failing.uid] = failing.fit_error = message

    def _fit_error(self, turn: FailedTurn, cand: Candidates, node_count: int) -> str:
        """The replayed turn's fit error: the class's reasons and the turn's tail, told again
        only when the class's reasons changed (the gangs of a class waiting together share
        their messages)."""
        told = self.memory.fit_errors
        key = (turn.cls, node_count, turn.tail)
        kept = told.get(key)
        if kept is not None and kept[0] == cand.reason_counts:
            return kept[1]
        counts = dict(cand.reason_counts)
        for reason in turn.tail:
            counts[reason] = counts.get(reason, 0) + 1
        message = fit_error_histogram(node_count, counts)
        if len(told) > MAX_TOLD:
            told.clear()
        told[key] = (dict(cand.reason_counts), message)
        return message

    def _same_answers(self, queue: QueueInfo, pending: list[TaskInfo], turn: FailedTurn) -> bool:
        """Whether the queue's plugins answer each step as they did, told of the earlier
        steps' allocations as the statement tells them; told of the releases after."""
        ssn = self.ssn
        handlers = self.handlers
        told: list[TaskInfo] = []
        same = True
        for task, step in zip(pending, turn.steps, strict=False):
            if task.uid != step.uid or ssn.allocatable(queue, task) != step.allocatable:
                same = False
                break
            if step.node:
                for handler in handlers:
                    handler[0](task)
                told.append(task)
        for task in reversed(told):
            for handler in reversed(handlers):
                handler[1](task)
        return same
