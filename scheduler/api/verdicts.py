"""Nodes' verdicts for classes of equivalent pods, kept within a session and across sessions.

A verdict is a node's score for a pod, or why the pod does not fit there. With node-local
plugins it depends on the pod's class (its requests and scheduling constraints), the node's
state and the configuration only, so it stays true until the node changes. A node's state is
named by its ``NodeInfo.generation``, which is unique over every NodeInfo of the process
(``scheduler.api.types``): a verdict stamped with the generation a node still has is still
true, in this session or a later one.

``scheduler.actions.placer`` fills and reads these. What it needs to know is which nodes
changed since a class last looked: within a session, the session's log
(``Session.node_changes``); between sessions, ``VerdictMemory.log``, which the live snapshot
appends to for every node it derives again, comes, goes or whose tasks it changes
(``scheduler.live_snapshot``). A snapshot built from scratch has no memory: its classes live
one session, as they did before the memory existed.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduler.api.types import TaskStatus  # types imports this module

# A class whose catching up would read more than this many logged changes per node is
# forgotten instead (evaluating every node again costs no more than reading such a log).
_LOG_SLACK = 2
# A heap with more stale entries than this many times its live ones is rebuilt.
_HEAP_SLACK = 3
# Classes kept at most (each holds a verdict per node): the least recently used go first.
MAX_CLASSES = 256


class NodeSetHeap:
    """A class's verdicts on one set of nodes, best first (stale entries are skipped)."""

    __slots__ = ("heap", "position")

    def __init__(self) -> None:
        self.heap: list[tuple[float, str, int]] = []  # (-score, node, node generation)
        self.position = 0  # how much of the session's change log the heap has seen


class Candidates:
    """One class of equivalent pods: the verdict of each node as of its generation."""

    __slots__ = (
        "between",
        "heap",
        "position",
        "previous",
        "reason_counts",
        "reasons",
        "scores",
        "seen",
        "session",
        "views",
    )

    def __init__(self) -> None:
        self.heap: list[tuple[float, str, int]] = []  # (-score, node, node generation)
        self.scores: dict[str, float] = {}  # nodes that fit, and their score
        self.reasons: dict[str, list[str]] = {}  # nodes that do not fit, and why
        # How many nodes give each reason (with ``reasons``): a pod that fits nowhere is told
        # the histogram without a pass over every node.
        self.reason_counts: dict[str, int] = {}
        self.seen: dict[str, int] = {}  # node -> generation evaluated
        # node -> the verdict before the last one, and the generation it was for: a node
        # that a discarded statement gave its generation back (``NodeInfo.restore``) has it
        # again without being looked at.
        self.previous: dict[str, tuple[int, float | list[str]]] = {}
        self.position = -1  # how much of the session's change log it has seen; -1: nothing
        self.views: dict[frozenset[str], NodeSetHeap] = {}  # see ``Placer.best_among``
        # For a class kept in a ``VerdictMemory``: the session it last looked in, and how
        # much of the memory's between-session log it has seen (an absolute position).
        self.session = 0
        self.between = 0

    def forget(self, node: str) -> None:
        """The node is gone: no verdict about it."""
        self.seen.pop(node, None)
        self.scores.pop(node, None)
        self.previous.pop(node, None)
        self.drop_reasons(node)

    def verdict(self, node: str) -> float | list[str]:
        """The node's current verdict (a score, or why it does not fit)."""
        score = self.scores.get(node)
        return score if score is not None else self.reasons.get(node, [])

    def swap_back(self, node: str, generation: int) -> float | list[str] | None:
        """The verdict for the node at ``generation`` when it is the previous one, made the
        current one again (the current one becoming the previous); None when it is not."""
        previous = self.previous.get(node)
        if previous is None or previous[0] != generation:
            return None
        self.previous[node] = (self.seen[node], self.verdict(node))
        self.seen[node] = generation
        return previous[1]

    def set_reasons(self, node: str, reasons: list[str]) -> None:
        """The node does not fit, for ``reasons``."""
        self.drop_reasons(node)
        self.reasons[node] = reasons
        counts = self.reason_counts
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1

    def drop_reasons(self, node: str) -> None:
        """The node fits, or is gone: it gives no reason."""
        old = self.reasons.pop(node, None)
        if old:
            counts = self.reason_counts
            for reason in old:
                left = counts[reason] - 1
                if left:
                    counts[reason] = left
                else:
                    del counts[reason]

    def compact(self) -> None:
        """Drop the heap's stale entries when they outnumber the live ones (across sessions
        a class's heap keeps an entry per node change)."""
        if len(self.heap) > _HEAP_SLACK * (len(self.scores) + 16):
            seen = self.seen
            self.heap = [(-score, name, seen[name]) for name, score in self.scores.items()]
            self.heap.sort()


@dataclass(frozen=True, slots=True)
class TurnStep:
    """One pod of a gang's failed turn in allocate, in task order: whether its queue could
    take it, and where it went (``status`` Allocated or Pipelined; "" and None when it was
    not placed: passed over, or, for the turn's last step, no node fit)."""

    uid: str
    allocatable: bool
    node: str = ""
    status: TaskStatus | None = None


@dataclass(frozen=True, slots=True)
class FailedTurn:
    """A gang's turn in allocate that placed some of its pods, found no node for the next and
    was discarded, with what it read (``scheduler.actions.retry``): the job's state, its
    pods' class, the nodes that fitted at the start with their states and scores, the steps,
    and the reasons those nodes gave once the turn had placed pods on them."""

    job: object
    cls: object
    pods: tuple[object, ...]  # the waiting TaskInfos: the same objects are of the same class
    start: dict[str, tuple[float, object]]
    steps: tuple[TurnStep, ...]
    tail: tuple[str, ...]
    # The JobInfo and its generation once the turn was discarded: while both are the same, so
    # is the job's state, and ``job`` needs no comparing.
    known: tuple[object, int] | None = None
    # What the queue's allocatable functions read as the turn started
    # (``Session.allocatable_state``; None: they do not say).
    queue_state: object = None


class VerdictMemory:
    """Classes' verdicts carried from one session to the next (see the module docstring)."""

    def __init__(self) -> None:
        self.classes: dict[Hashable, Candidates] = {}
        # Each waiting gang's last failed turn, by job key (``scheduler.actions.retry``).
        self.failed_turns: dict[str, FailedTurn] = {}
        # Replayed turns' fit errors, by class, node count and tail: the class's reason
        # counts they were told for, and the message (``scheduler.actions.retry``).
        self.fit_errors: dict[
            tuple[Hashable, int, tuple[str, ...]], tuple[dict[str, int], str]
        ] = {}
        self.log: list[str] = []  # nodes changed between sessions, in order
        self.base = 0  # the absolute position of ``log[0]``
        self.session = 0  # bumped by ``begin``
        self.tiers: Sequence[object] | None = None  # the configuration the verdicts are for

    @property
    def end(self) -> int:
        return self.base + len(self.log)

    def begin(self, tiers: Sequence[object], node_count: int) -> None:
        """A session starts: forget everything when the configuration changed, forget the
        classes too far behind, and drop the log no class still needs."""
        self.session += 1
        if self.tiers != tiers:
            self.tiers = tiers
            self.classes.clear()
            self.failed_turns.clear()
        end = self.end
        limit = _LOG_SLACK * max(node_count, 64)
        for key in [k for k, cand in self.classes.items() if end - cand.between > limit]:
            del self.classes[key]
        if len(self.classes) > MAX_CLASSES:
            by_use = sorted(self.classes, key=lambda k: self.classes[k].session)
            for key in by_use[: len(self.classes) - MAX_CLASSES]:
                del self.classes[key]
        low = min((cand.between for cand in self.classes.values()), default=end)
        del self.log[: low - self.base]
        self.base = low

    def changed_since(self, position: int) -> list[str]:
        """The nodes logged between sessions from the absolute ``position`` on."""
        return self.log[position - self.base :]
