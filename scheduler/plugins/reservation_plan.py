"""Where and when a waiting gang would start, and what other pods may take meanwhile: the
pure core of the reservation plugin (``scheduler.plugins.reservation``).

The model, in seconds from now:

- a node offers what is idle on it now, and every pod on it frees its resources at its
  expected end (``Release``): known when it follows from the pod's ``activeDeadlineSeconds``
  or a declared runtime, a guess otherwise (``expected_end``);
- the gang's pods fit on a set of nodes at time ``t`` when they pack, first fit decreasing,
  into what each node offers at ``t`` (idle now plus what ends by ``t``);
- ``earliest_plan`` finds the first such ``t`` among the ends (binary search over the ends:
  what a node offers only grows with ``t``) and the nodes it packs onto, preferring nodes with
  fewer pods to wait for. The ``Plan`` holds, per node, what the gang will take there.

The backfill rule (``admits``): while a plan holds a node, another pod may go there only
where it leaves the held amount idle (its request fits in what is idle beyond the hold), or
when its known end comes before the plan's start (with a margin). Either way, if every pod
ends by its expected end, the gang finds its held amount free on every node at the planned
start: backfill never delays the reservation. ``unit/test_reservation_plan.py`` checks that
over random clusters, runtimes and arrivals.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caldera.api.resources import Resources


def fits(request: Resources, room: Resources) -> bool:
    """Whether every positive amount of ``request`` fits in ``room`` (absent counts as 0)."""
    return all(amount <= room.get(name) for name, amount in request.items() if amount > 0)


@dataclass(frozen=True, slots=True)
class Release:
    """A pod's resources, free again ``end`` seconds from now (0: being released now)."""

    resources: Resources
    end: float
    known: bool  # from activeDeadlineSeconds or a declared runtime; False: a guess


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What a node offers a gang: ``idle`` now, and its pods' releases in order of end."""

    name: str
    idle: Resources
    releases: tuple[Release, ...] = ()

    @staticmethod
    def of(name: str, idle: Resources, releases: Iterable[Release]) -> NodeRoom:
        return NodeRoom(name, idle, tuple(sorted(releases, key=lambda r: r.end)))

    def freed_by(self, t: float) -> tuple[Release, ...]:
        """The releases that have come by ``t``."""
        ends = [r.end for r in self.releases]
        return self.releases[: bisect.bisect_right(ends, t)]

    def offers_at(self, t: float) -> Resources:
        """Idle now plus every release that has come by ``t``."""
        return Resources.sum([self.idle, *(r.resources for r in self.freed_by(t))])


@dataclass(frozen=True, slots=True)
class Plan:
    """Where and when a gang starts: ``held`` per node (what its pods take there, all of them
    packed), ``start`` seconds from now; ``known`` when every pod it waits for has a known end;
    ``waits_for`` those pods."""

    start: float
    held: Mapping[str, Resources]
    known: bool
    waits_for: int

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.held))

    def total(self) -> Resources:
        return Resources.sum(self.held.values())


def _size_key(request: Resources) -> tuple[int, ...]:
    return tuple(-amount for _, amount in sorted(request.items()))


def pack(
    tasks: Sequence[Resources], rooms: Sequence[tuple[str, Resources]]
) -> dict[str, Resources] | None:
    """First fit decreasing: each task, largest first, onto the first room (in the order
    given) where it fits what is left; what each used room takes, or None when one does not
    fit anywhere."""
    left = dict(rooms)
    held: dict[str, Resources] = {}
    for task in sorted(tasks, key=_size_key):
        for name, _ in rooms:
            if fits(task, left[name]):
                left[name] = left[name] - task
                held[name] = held.get(name, Resources()) + task
                break
        else:
            return None
    return held


def _copies(task: Resources, room: Resources) -> int:
    """How many pods of ``task`` fit in ``room``."""
    counts = [room.get(name) // amount for name, amount in task.items() if amount > 0]
    return min(counts) if counts else 0


def pack_at(tasks: Sequence[Resources], rooms: Sequence[NodeRoom], t: float) -> Plan | None:
    """The gang packed at time ``t``: nodes with fewer pods to wait for first, then those
    taking more of its largest pod, then by name."""
    if not tasks:
        return Plan(start=t, held={}, known=True, waits_for=0)
    largest = min(tasks, key=_size_key)
    offers = []
    for room in rooms:
        offer = room.offers_at(t)
        if _copies(largest, offer) > 0 or any(fits(task, offer) for task in tasks):
            offers.append((len(room.freed_by(t)), -_copies(largest, offer), room.name, offer))
    offers.sort(key=lambda o: o[:3])
    held = pack(tasks, [(name, offer) for _, _, name, offer in offers])
    if held is None:
        return None
    by_name = {room.name: room for room in rooms}
    waited = [r for name in held for r in by_name[name].freed_by(t) if r.end > 0]
    return Plan(start=t, held=held, known=all(r.known for r in waited), waits_for=len(waited))


def earliest_plan(tasks: Sequence[Resources], rooms: Sequence[NodeRoom]) -> Plan | None:
    """The plan at the earliest end (or now) at which the gang packs onto ``rooms``; None when
    it does not pack even once every pod there has ended."""
    times = sorted({0.0, *(r.end for room in rooms for r in room.releases)})
    last = pack_at(tasks, rooms, times[-1])
    if last is None:
        return None
    # What a node offers grows with t, so packing is (all but always) monotone in t: the
    # first feasible end by bisection; the plan returned is always checked feasible.
    lo, hi, found = 0, len(times) - 1, last
    while lo < hi:
        mid = (lo + hi) // 2
        plan = pack_at(tasks, rooms, times[mid])
        if plan is None:
            lo = mid + 1
        else:
            hi, found = mid, plan
    return found


def expected_end(*, age: float, limit: float | None, floor: float) -> tuple[float, bool]:
    """When a pod that has run ``age`` seconds is expected to end, in seconds from now, and
    whether that is known: ``limit`` (its activeDeadlineSeconds or declared runtime) makes it
    known while not overrun; without one, a pod is expected to run as long again as it has
    (job lengths in cluster traces are heavy-tailed, so the youngest pods end first); never
    sooner than ``floor``."""
    if limit is not None:
        remaining = limit - age
        return max(remaining, floor), remaining > 0
    return max(age, floor), False


def backfills(end: float | None, start: float, margin: float) -> bool:
    """Whether a pod whose known end is ``end`` seconds from now (None: unknown) is gone
    ``margin`` seconds before a reservation's ``start``."""
    return end is not None and end + margin <= start


def admits(
    request: Resources,
    idle: Resources,
    held: Resources,
    *,
    end: float | None,
    start: float,
    margin: float,
) -> bool:
    """The backfill rule on a held node: ``request`` may take the node's ``idle`` room when
    it is gone before the reservation's ``start`` (``backfills``), else only the room beyond
    what is ``held``."""
    if backfills(end, start, margin):
        return fits(request, idle)
    return fits(request, idle.sub_clamped(held))


class Runtimes:
    """Runtimes learnt from finished pods, by (queue, request): an exponentially weighted
    mean (``weight`` for the newest), each pod counted once. Bounded: at most ``MAX_SHAPES``
    shapes and ``MAX_SEEN`` remembered pods (both forgotten whole past the bound: only
    estimates are lost)."""

    MAX_SHAPES = 1024
    MAX_SEEN = 65536

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight
        self.means: dict[tuple[str, Resources], float] = {}
        self.seen: set[str] = set()

    def learn(self, uid: str, queue: str, request: Resources, seconds: float) -> None:
        if uid in self.seen or seconds < 0:
            return
        if len(self.seen) >= self.MAX_SEEN:
            self.seen.clear()
        self.seen.add(uid)
        key = (queue, request)
        mean = self.means.get(key)
        if mean is None and len(self.means) >= self.MAX_SHAPES:
            self.means.clear()
        self.means[key] = seconds if mean is None else mean + self.weight * (seconds - mean)

    def estimate(self, queue: str, request: Resources) -> float | None:
        return self.means.get((queue, request))


def estimated_end(*, age: float, estimate: float, floor: float) -> float:
    """When a pod of no known runtime is expected to end, in seconds from now, by its shape's
    learnt ``estimate``; once past it, as long again as it has run (``expected_end``)."""
    if estimate > age:
        return max(estimate - age, floor)
    return max(age, floor)
