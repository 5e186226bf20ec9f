"""The capacity plugin's queue limits: what each queue deserves, may hold and is guaranteed,
flat or as a tree through ``spec.parent`` (Volcano's capacity plugin, its ``buildQueueAttrs``
and, with ``enableHierarchy``, ``buildHierarchicalQueueAttrs`` and ``checkHierarchicalQueue``).

Input: each queue's terms (``QueueTerms``: spec.deserved, spec.guarantee.resource,
spec.capability, spec.parent) and the cluster's total allocatable. Output: each queue's
``QueueLimits``. Amounts are per resource; an amount a spec does not list is *unset*.

The tree. With hierarchy a queue's parent is spec.parent, or ``root`` when it names none, and
root has none. Without hierarchy every queue is a child of the cluster itself, which is also
the parent of root in the tree (the *top*: it has the cluster's total, no capability and no
deserved). A queue whose chain does not reach the top (its parent does not exist, or the
chain loops) is *detached*, and so is everything below it: it gets no limits and the plugin
schedules nothing there (Volcano stops scheduling the whole cluster instead).

Per queue, from the top down (``capability`` and ``real capability`` first, then deserved):

- capability: the queue's own (cpu or memory set to 0 or less are unset, Volcano's rule), each
  resource it leaves unset inherited from its parent, and each it sets held to the parent's
  where the parent has one (the smaller wins);
- real capability, the most the queue may ever hold: for the top, the cluster's total; for a
  queue, what its parent may hold minus the guarantees of all the parent's children (never
  below 0), plus its own guarantee, held to its capability. Guaranteed resources are reserved
  for their queue: its siblings cannot use them even while they are idle;
- deserved, what the queue keeps when others want resources back: its spec.deserved, where a
  queue with children that leaves a resource unset deserves the sum its children deserve of it
  (Volcano does this for root only); raised to its guarantee; held to its parent's deserved and
  to its real capability (0 for a resource the cluster lacks); raised to its guarantee again: a
  guarantee wins over both caps (the webhook refuses the configurations where it would have
  to). A deserved amount of 0 is unset.

Pure: an import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from caldera.api.resources import Resources

ROOT = "root"
TOP = ""  # the cluster: the parent of root (or of every queue, without hierarchy)


@dataclass(frozen=True)
class QueueTerms:
    """What a queue's spec says about its share, for ``queue_tree``."""

    name: str
    parent: str = ""  # spec.parent; "" names root (with hierarchy)
    deserved: Resources = field(default_factory=Resources)
    guarantee: Resources = field(default_factory=Resources)
    capability: Resources | None = None  # None: no limit; cpu/memory <= 0 already dropped


@dataclass(frozen=True)
class QueueLimits:
    """One queue's place in the tree and its limits (see the module docstring)."""

    name: str
    parent: str  # TOP for root, or for every queue without hierarchy
    ancestors: tuple[str, ...]  # from the top's child down to the parent; () under the top
    children: tuple[str, ...]
    guarantee: Resources
    deserved: Resources  # resources listed are set (> 0)
    capability: Resources  # resources listed are limited; the others are not
    real_capability: Resources  # a resource not listed may not be held at all

    @property
    def leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class QueueTree:
    """The limits of every attached queue, and why the others are detached."""

    limits: Mapping[str, QueueLimits]
    detached: Mapping[str, str]


def _positive(amounts: Resources) -> Resources:
    return Resources({name: amount for name, amount in amounts.items() if amount > 0})


def capped(amounts: Resources, limit: Resources) -> Resources:
    """``amounts`` held to ``limit`` in the resources ``limit`` lists; the others kept."""
    return Resources(
        {
            name: min(amount, limit.get(name)) if name in limit else amount
            for name, amount in amounts.items()
        }
    )


def inherited(own: Resources | None, parent: Resources) -> Resources:
    """A child's capability: its own, held to its parent's, and the parent's where it has
    none."""
    mine = own if own is not None else Resources()
    names = set(mine.names()) | set(parent.names())
    return Resources(
        {
            name: min(mine.get(name), parent.get(name))
            if name in mine and name in parent
            else (mine.get(name) if name in mine else parent.get(name))
            for name in names
        }
    )


def _parents(
    terms: Mapping[str, QueueTerms], hierarchy: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """Each queue's parent in the tree (TOP for the top's children), and the detached queues
    with the reason: where the chain breaks (a missing parent, a loop), and for the queues
    below such a queue, that queue and its reason."""
    parent: dict[str, str] = {}
    for name, term in terms.items():
        if not hierarchy or name == ROOT:
            parent[name] = TOP
        else:
            named = term.parent or ROOT
            # Without a root queue (tests, or before the scheduler created it) the queues
            # naming root hang under the top.
            parent[name] = TOP if named == ROOT and ROOT not in terms else named
    # None: attached; else (the queue where the chain breaks, why it breaks there).
    status: dict[str, tuple[str, str] | None] = {}
    for name in terms:
        chain: list[str] = []
        current = name
        while current != TOP and current not in status and current not in chain:
            if current not in terms:
                break
            chain.append(current)
            current = parent[current]
        if current == TOP or current in status:
            known = None if current == TOP else status[current]
            for member in chain:
                status[member] = known
        elif current not in terms:
            last = chain[-1]
            status[last] = (last, f"its parent queue {current} does not exist")
            for member in chain[:-1]:
                status[member] = status[last]
        else:  # a loop: chain[chain.index(current):]
            loop = chain[chain.index(current) :]
            why = f"its parent chain is a loop ({', '.join(sorted(loop))})"
            for member in loop:
                status[member] = (member, why)
            for member in chain[: chain.index(current)]:
                status[member] = status[current]
    detached = {}
    for name, found in status.items():
        if found is not None:
            broken_at, why = found
            detached[name] = (
                why if broken_at == name else f"its ancestor queue {broken_at} is detached: {why}"
            )
    return parent, detached


def queue_tree(terms: Sequence[QueueTerms], total: Resources, *, hierarchy: bool) -> QueueTree:
    """Every queue's limits; see the module docstring."""
    by_name = {term.name: term for term in terms}
    parent, detached = _parents(by_name, hierarchy)
    children: dict[str, list[str]] = {TOP: []}
    for name in sorted(by_name):
        if name not in detached:
            children.setdefault(parent[name], []).append(name)
            children.setdefault(name, [])

    # Bottom up: what each queue deserves before the caps (a parent leaving a resource unset
    # deserves its children's sum of it), raised to its guarantee.
    raw: dict[str, Resources] = {}

    def deserve(name: str) -> Resources:
        for child in children[name]:
            deserve(child)
        term = by_name[name]
        own = _positive(term.deserved)
        sums = Resources.sum(raw[child] for child in children[name])
        defaulted = Resources({n: a for n, a in sums.items() if n not in own and a > 0})
        raw[name] = (own + defaulted).max(term.guarantee)
        return raw[name]

    for top_child in children[TOP]:
        deserve(top_child)

    # Top down: capability, real capability, then deserved under the parent's caps.
    limits: dict[str, QueueLimits] = {}
    stack: list[tuple[str, tuple[str, ...], Resources, Resources, Resources | None]] = [
        (name, (), Resources(), total, None) for name in reversed(children[TOP])
    ]
    reserved = {
        name: Resources.sum(by_name[child].guarantee for child in members)
        for name, members in children.items()
    }
    while stack:
        name, ancestors, parent_capability, parent_real, parent_deserved = stack.pop()
        term = by_name[name]
        free = parent_real.sub_clamped(reserved[parent[name]])
        capability = inherited(term.capability, parent_capability)
        real = capped(free + term.guarantee, capability)
        deserved = raw[name]
        if parent_deserved is not None:
            deserved = capped(deserved, parent_deserved)
        deserved = Resources({n: min(a, real.get(n)) for n, a in deserved.items()})
        deserved = _positive(deserved.max(term.guarantee))
        limits[name] = QueueLimits(
            name=name,
            parent=parent[name],
            ancestors=ancestors,
            children=tuple(children[name]),
            guarantee=term.guarantee,
            deserved=deserved,
            capability=capability,
            real_capability=real,
        )
        below = (*ancestors, name)
        for child in reversed(children[name]):
            stack.append((child, below, capability, real, deserved))
    return QueueTree(limits=limits, detached=detached)
