"""EASY backfilling (Lifka's, as Slurm's backfill scheduler does it), the reference the
large-gangs experiment compares reservations with: the pure plan of one scheduling pass.

Jobs wait in one first-come-first-served queue and every run time is known. A pass:

1. starts jobs from the head of the queue while each fits now (all its pods at once);
2. the first job that does not fit is the *head*: its reservation is the earliest time at
   which, as the running pods end at their known times, all its pods fit (its *shadow* time),
   on the nodes that placement uses;
3. every later job that fits now starts if it ends by the shadow time, or if the head still
   fits at the shadow time with this job's pods still there (it fits beside the reservation).

So no job started by a pass makes the head start later than its shadow time: with exact run
times and no job arriving ahead of it, the head starts by the time its first reservation
named (unit/test_sim_easy.py checks this over random clusters and queues). A head that could
not fit even on an empty cluster gets no reservation and holds nothing back.

Pods are placed one at a time, each on the node it fits best (the least left of what it asks
for, then the node's name), by resources alone: no predicates. Amounts are integers (milli
units), by resource name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Amounts = Mapping[str, int]
Free = dict[str, dict[str, int]]  # what a pass has left, by node


@dataclass(frozen=True)
class Release:
    """A running pod's request, given back on ``node`` at ``at`` (its expected end)."""

    node: str
    at: float
    amount: Amounts


@dataclass(frozen=True)
class Waiting:
    """A waiting job: the requests of the pods it starts with, and how long it runs."""

    key: str
    pods: tuple[Amounts, ...]
    run_time: float


@dataclass(frozen=True)
class Reservation:
    """The head job's earliest start and the nodes it would start on."""

    job: str
    start: float
    nodes: frozenset[str]


@dataclass
class Plan:
    """What a pass starts (job -> the node of each of its pods, in order) and the head's
    reservation, None when nothing waits after the pass or the head can never fit."""

    starts: dict[str, list[str]] = field(default_factory=dict)
    reservation: Reservation | None = None


def _fits(request: Amounts, free: Amounts) -> bool:
    for name, amount in request.items():  # noqa: SIM110 - a loop: asked millions of times
        if amount > free.get(name, 0):
            return False
    return True


def _enough(pods: Sequence[Amounts], free: Mapping[str, Amounts]) -> bool:
    """Whether the nodes have, together, what the pods ask for (needed to place them; cheap)."""
    asked: dict[str, int] = {}
    for request in pods:
        _take(asked, request, +1)
    for name, amount in asked.items():
        if amount > sum(amounts.get(name, 0) for amounts in free.values()):
            return False
    return True


def _take(free: dict[str, int], request: Amounts, sign: int = -1) -> None:
    for name, amount in request.items():
        free[name] = free.get(name, 0) + sign * amount


def place(pods: Sequence[Amounts], free: Mapping[str, Amounts]) -> list[str] | None:
    """A node for each pod, all at once (best fit, see the module docstring), or None."""
    if not _enough(pods, free):
        return None
    left = _copy(free)
    chosen: list[str] = []
    for request in pods:
        best: tuple[tuple[int, ...], str] | None = None
        for node in sorted(left):
            amounts = left[node]
            if not _fits(request, amounts):
                continue
            key = (tuple(amounts.get(n, 0) - request[n] for n in sorted(request)), node)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        node = best[1]
        _take(left[node], request)
        chosen.append(node)
    return chosen


def _copy(free: Mapping[str, Amounts]) -> Free:
    return {node: dict(amounts) for node, amounts in free.items()}


def _held(free: Free, pods: Sequence[Amounts], nodes: Sequence[str]) -> None:
    """Take the pods' requests from ``free`` on their nodes."""
    for request, node in zip(pods, nodes, strict=True):
        _take(free[node], request)


def shadow(
    head: Waiting, free: Mapping[str, Amounts], releases: Iterable[Release], now: float
) -> Reservation | None:
    """The head's reservation: the first time from ``now`` on at which it fits, as the
    releases give their amounts back in time order; None if it never does."""
    avail = _copy(free)
    nodes = place(head.pods, avail)
    if nodes is not None:
        return Reservation(head.key, now, frozenset(nodes))
    asked: dict[str, int] = {}
    for request in head.pods:
        _take(asked, request, +1)
    total: dict[str, int] = {}
    for amounts in avail.values():
        _take(total, amounts, +1)
    ordered = sorted(releases, key=lambda r: (r.at, r.node))
    i = 0
    while i < len(ordered):
        at = ordered[i].at
        while i < len(ordered) and ordered[i].at == at:
            release = ordered[i]
            _take(avail.setdefault(release.node, {}), release.amount, +1)
            _take(total, release.amount, +1)
            i += 1
        if not _fits(asked, total):
            continue  # not enough on all the nodes together yet
        nodes = place(head.pods, avail)
        if nodes is not None:
            return Reservation(head.key, max(at, now), frozenset(nodes))
    return None


def plan(
    now: float,
    free: Mapping[str, Amounts],
    releases: Sequence[Release],
    queue: Sequence[Waiting],
) -> Plan:
    """One EASY pass (see the module docstring) over the nodes' free amounts, the running
    pods' expected ends and the waiting jobs in queue order."""
    result = Plan()
    left = _copy(free)
    ends = list(releases)
    position = 0
    for position, job in enumerate(queue):  # noqa: B007 - the head's position is kept
        nodes = place(job.pods, left)
        if nodes is None:
            break
        _start(result, job, nodes, left, ends, now)
    else:
        return result
    head = queue[position]
    reservation = shadow(head, left, ends, now)
    result.reservation = reservation
    if reservation is None:  # it never fits: it holds nothing back
        for job in queue[position + 1 :]:
            nodes = place(job.pods, left)
            if nodes is not None:
                _start(result, job, nodes, left, ends, now)
        return result
    # Placements found to delay the head, until a start changes what is left: a queue of many
    # alike jobs asks once.
    delaying: set[tuple[tuple[str, tuple[tuple[str, int], ...]], ...]] = set()
    unplaced: set[tuple[tuple[tuple[str, int], ...], ...]] = set()  # likewise, shapes
    for job in queue[position + 1 :]:
        pods = tuple(tuple(sorted(request.items())) for request in job.pods)
        if pods in unplaced:
            continue
        nodes = place(job.pods, left)
        if nodes is None:
            unplaced.add(pods)
            continue
        if now + job.run_time > reservation.start:
            # Ends after the shadow time: it may start only if the head still fits then.
            shape = tuple(
                (node, tuple(sorted(request.items())))
                for node, request in zip(nodes, job.pods, strict=True)
            )
            if shape in delaying:
                continue
            held = _copy(left)
            _held(held, job.pods, nodes)
            found = shadow(head, held, ends, now)
            if found is None or found.start > reservation.start:
                delaying.add(shape)
                continue
        _start(result, job, nodes, left, ends, now)
        delaying.clear()
    return result


def _releases(job: Waiting, nodes: Sequence[str], at: float) -> list[Release]:
    return [Release(node, at, request) for request, node in zip(job.pods, nodes, strict=True)]


def _start(
    result: Plan,
    job: Waiting,
    nodes: list[str],
    left: Free,
    ends: list[Release],
    now: float,
) -> None:
    result.starts[job.key] = nodes
    _held(left, job.pods, nodes)
    ends.extend(_releases(job, nodes, now + job.run_time))
