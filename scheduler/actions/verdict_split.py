"""A node's verdict in two parts: what every plugin but a few says, kept once for the classes
of pods that differ only in those few plugins' classes, and those plugins' own, applied on top.

A plugin that offers ``Speedups.node_overlay`` (nodegroup: its verdict is a queue's affinity
against the node's group label) splits pods into classes by its node class, and each class
judges every changed node. Most of a verdict (the resources fit, the other predicates and
scores) does not read that class, so the placer keeps it per *base* class, stamped with the
node's generation as a class's verdicts are, and the overlay plugins' predicates and scores are
asked per class on top.

This gives the verdict ``scheduler.actions.placer.evaluate`` gives only when the overlay
plugins' predicates are the last the session asks, and their node scores the last it adds
(the first failing predicate names the reason; float sums depend on their order): ``split``
returns None otherwise, and the placer evaluates whole verdicts as before.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from scheduler.api.fit import shortfall
from scheduler.api.types import NodeInfo, TaskInfo

if TYPE_CHECKING:
    from scheduler.framework.session import NodeOrderFn, PredicateFn

Verdict = float | list[str]
F = TypeVar("F")


@dataclass(frozen=True, slots=True)
class VerdictSplit:
    """The session's predicates and node scores, split into the shared part and the
    overlay."""

    predicates: tuple[PredicateFn, ...]
    scores: tuple[NodeOrderFn, ...]
    overlay_predicates: tuple[PredicateFn, ...]
    overlay_scores: tuple[NodeOrderFn, ...]

    def base(self, task: TaskInfo, node: NodeInfo) -> Verdict:
        """The verdict without the overlay plugins: the init request against the node's
        future idle resources, then the other predicates, then the other scores summed in
        the session's order."""
        reasons = shortfall(task.init_resreq, node)
        if reasons:
            return reasons
        for predicate in self.predicates:
            reason = predicate(task, node)
            if reason:
                return [reason]
        score = 0.0
        for scorer in self.scores:
            score += float(scorer(task, node))
        return score

    def apply(self, base: Verdict, task: TaskInfo, node: NodeInfo) -> Verdict:
        """The whole verdict from the base one: a node that does not fit without the overlay
        plugins keeps its reasons (theirs are asked last); otherwise their predicates, then
        their scores added last."""
        if isinstance(base, list):
            return base
        for predicate in self.overlay_predicates:
            reason = predicate(task, node)
            if reason:
                return [reason]
        score = base
        for scorer in self.overlay_scores:
            score += float(scorer(task, node))
        return score


def _tail_split(
    registered: Sequence[tuple[str, F]], overlay: Collection[str]
) -> tuple[tuple[F, ...], tuple[F, ...]] | None:
    """(the others' functions, the overlay plugins'), both in order; None unless every
    overlay function comes after every other one."""
    others = tuple(fn for plugin, fn in registered if plugin not in overlay)
    own = tuple(fn for plugin, fn in registered if plugin in overlay)
    if tuple(fn for _, fn in registered) != others + own:
        return None
    return others, own


def split(
    predicates: Sequence[tuple[str, PredicateFn]],
    scores: Sequence[tuple[str, NodeOrderFn]],
    overlay: Collection[str],
) -> VerdictSplit | None:
    """The split of the session's node functions (``Session.node_fns``) for the ``overlay``
    plugins; None when there are none, or their functions are not the last asked."""
    if not overlay:
        return None
    checks, ranks = _tail_split(predicates, overlay), _tail_split(scores, overlay)
    if checks is None or ranks is None:
        return None
    return VerdictSplit(checks[0], ranks[0], checks[1], ranks[1])
