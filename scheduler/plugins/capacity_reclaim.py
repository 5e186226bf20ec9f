"""capacity's ``ancestorReclaimLevel``: how far up the queue tree reclaim looks before it takes
a pod from another branch (Volcano's capacity plugin argument of that name; with
``enableHierarchy`` only).

A queue's ancestor at depth 1 is its parent, at depth 2 its grandparent, and so on; root is
never one (it holds the whole cluster, so it is never above or below its share). At level ``L``:

- preemptive: a queue that may not reclaim on its own (it would pass its deserved amount, or
  deserves none of what the pods ask for) may still reclaim when one of its ancestors at depths
  1..L, the nearest first, would stay within its deserved amount with the pods (the same rule
  as the queue's own). Caldera's addition: that ancestor is the one reclaiming, so the pods
  are taken from outside its branch only (a pod moved between two of its queues leaves it
  where it was, and two such queues would take the pod back and forth);
- reclaimable: for a victim in another branch, each of the victim queue's ancestors at depths
  1..L that is not the reclaimer's ancestor at the same depth (where the two branches are
  apart) must keep at least its deserved amount of some resource the victim asks for once it
  has lost the victim (the leaf's own rule), or deserve none of them; judged cumulatively, as
  the leaf is;
- a victim whose queue deserves none of what it asks for (an "immediate victim") is still
  spared when the two queues share an ancestor at depths 1..L (other than root) and the
  reclaimer's queue deserves none of what the reclaimer asks for either: two best-effort
  queues under one ancestor do not reclaim from each other.

Level 0, the default, checks nothing of this: reclaim is judged on the leaf queues alone.

Pure: an import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from caldera.api.resources import Resources
from scheduler.framework.plugin import Arguments
from scheduler.plugins.queue_tree import ROOT, QueueLimits

RECLAIM_LEVEL = "ancestorReclaimLevel"


def reclaim_level(arguments: Arguments) -> int:
    """The configured level: a whole number, 0 or more (0 when absent). Volcano falls back to 0
    with a warning for a negative or non-integer value; Caldera refuses the configuration."""
    value = arguments.raw.get(RECLAIM_LEVEL, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"plugin {arguments.plugin}: argument {RECLAIM_LEVEL} must be a whole number, "
            f"0 or more, got {value!r}"
        )
    return value


def ancestor_at(limits: QueueLimits, depth: int) -> str | None:
    """The queue's ancestor ``depth`` levels up (1: its parent), or None when the tree is not
    that deep there or the ancestor is root."""
    if depth < 1 or depth > len(limits.ancestors):
        return None
    name = limits.ancestors[-depth]
    return None if name == ROOT else name


def ancestors_within(limits: QueueLimits, level: int) -> list[str]:
    """The queue's ancestors at depths 1..level, nearest first, root left out."""
    found = (
        ancestor_at(limits, depth) for depth in range(1, min(level, len(limits.ancestors)) + 1)
    )
    return [name for name in found if name is not None]


def share_ancestor_within(left: QueueLimits, right: QueueLimits, level: int) -> bool:
    """Whether the two queues have a common ancestor (not root) among each one's ancestors at
    depths 1..level: depths may differ in an unbalanced tree, as in Volcano."""
    return not set(ancestors_within(left, level)).isdisjoint(ancestors_within(right, level))


def apart_ancestors(reclaimer: QueueLimits, victim: QueueLimits, level: int) -> list[str]:
    """The victim queue's ancestors at depths 1..level that reclaim must check: those that are
    not the reclaimer queue's ancestor at the same depth."""
    checked = []
    for depth in range(1, min(level, len(victim.ancestors)) + 1):
        name = ancestor_at(victim, depth)
        if name is not None and name != ancestor_at(reclaimer, depth):
            checked.append(name)
    return checked


def keeps_deserved(after: Resources, deserved: Resources, requested: Iterable[str]) -> bool:
    """A queue may lose a pod asking for ``requested``: it deserves none of them, or, once it
    has lost the pod (``after``), still holds at least its deserved amount of one of them."""
    relevant = [name for name in requested if name in deserved]
    return not relevant or any(after.get(name) >= deserved.get(name) for name in relevant)


def within_deserved(allocated: Resources, request: Resources, deserved: Resources) -> bool:
    """A queue may reclaim for ``request``: it deserves some resource the request asks for, and
    with the request stays within its deserved amount of every such resource."""
    relevant = [name for name, amount in request.items() if amount > 0 and name in deserved]
    return bool(relevant) and all(
        allocated.get(name) + request.get(name) <= deserved.get(name) for name in relevant
    )


@dataclass(frozen=True)
class ReclaimScope:
    """The reclaimer's side of the checks, worked out once per reclaimer."""

    own: QueueLimits  # the reclaimer's queue
    level: int
    grant: str | None  # the ancestor reclaiming for a queue that may not on its own
    deserves_request: bool  # the reclaimer's queue deserves some of what the reclaimer asks

    def checked(self, victim: QueueLimits, requested: set[str]) -> list[str] | None:
        """The victim queue's ancestors that must keep their deserved amount (``requested``:
        what the victim asks for), or None when the victim is spared whatever they hold."""
        if self.grant is not None and self.grant in victim.ancestors:
            return None  # moved within the reclaiming ancestor's branch: it gains nothing
        if (
            not self.deserves_request
            and requested.isdisjoint(victim.deserved.names())
            and share_ancestor_within(self.own, victim, self.level)
        ):
            return None  # two best-effort queues under one ancestor
        return apart_ancestors(self.own, victim, self.level)
