"""The structured allocator: devices for a pod's claims on one node, or why there are none.

A purely computational function with no side effects, after kube-scheduler's (the
dynamic-resource-allocation ``structured`` package). ``allocate`` walks the claims' requests in
order and picks devices depth first, backtracking when a later request or a constraint cannot
be met:

- ``exactly`` with ``allocationMode: ExactCount``: ``count`` free devices that match the
  request's DeviceClass selectors and its own (tried as combinations in the order the slices
  list them); ``allocationMode: All``: every matching device the node reaches, all of them free,
  at least one, from complete pools only (a pool whose slices are not all published yet could
  hide devices);
- ``firstAvailable``: the first of the subrequests that leads to a whole allocation;
- ``constraints[].matchAttribute``: every device chosen for the named requests (all of the
  claim's when none are named; ``<request>`` names all its subrequests,
  ``<request>/<subrequest>`` one) has the attribute, with one value;
- partitionable devices: a device's ``consumesCounters`` are taken from its pool's counter
  sets, and a device whose counters are spent is not free.

A device is never given twice: ``taken`` holds what is allocated already, and the devices chosen
for one claim are taken for the next. The search is bounded (``MAX_STEPS`` device choices per
call); past that bound the node is refused, saying so, instead of searching on.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from caldera.api.dra import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    DeviceClaim,
    DeviceSelector,
)

MAX_STEPS: Final = 20_000  # device choices one search may try before it gives up

DeviceId = tuple[str, str, str]  # (driver, pool, device)
CounterKey = tuple[str, str, str, str]  # (driver, pool, counter set, counter)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the node reaches, with what the search reads of it."""

    id: DeviceId
    # The value of each fully qualified attribute a constraint may read (filled lazily by
    # ``attribute``); counters it consumes; whether its pool is complete.
    attribute: Callable[[str], object]
    consumes: tuple[tuple[CounterKey, Fraction], ...] = ()
    pool_complete: bool = True


@dataclass(frozen=True, slots=True)
class Alternative:
    """One way to meet a request: a class, selectors, a mode and a count; ``name`` is what an
    allocation result names (``<request>`` or ``<request>/<subrequest>``)."""

    name: str
    request: str
    device_class: str
    selectors: tuple[DeviceSelector, ...]
    mode: str
    count: int


@dataclass(frozen=True, slots=True)
class Chosen:
    """One device allocated for a request."""

    request: str  # <request> or <request>/<subrequest>
    device: DeviceId


@dataclass(frozen=True, slots=True)
class Failure:
    """Why the claims cannot be allocated on the node: claim and request, in words."""

    claim: str
    request: str
    reason: str

    def message(self) -> str:
        where = f"request {self.request!r} of " if self.request else ""
        return f"{where}claim {self.claim!r}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
    """A claim the search allocates: its key (what messages name) and its spec."""

    key: str
    spec: DeviceClaim


Matcher = Callable[[Alternative, Candidate], bool]


def alternatives(claim: DeviceClaim) -> list[list[Alternative]]:
    """Each request's ways to be met, in the order they are tried."""
    found: list[list[Alternative]] = []
    for request in claim.requests:
        if request.exactly is not None:
            e = request.exactly
            found.append(
                [
                    Alternative(
                        request.name,
                        request.name,
                        e.device_class_name,
                        e.selectors,
                        e.allocation_mode or ALLOCATION_MODE_EXACT_COUNT,
                        e.count,
                    )
                ]
            )
        else:
            found.append(
                [
                    Alternative(
                        f"{request.name}/{sub.name}",
                        request.name,
                        sub.device_class_name,
                        sub.selectors,
                        sub.allocation_mode or ALLOCATION_MODE_EXACT_COUNT,
                        sub.count,
                    )
                    for sub in request.first_available
                ]
            )
    return found


@dataclass(slots=True)
class _Search:
    claims: Sequence[ClaimToAllocate]
    options: list[list[list[Alternative]]]  # claim -> request -> alternatives
    candidates: Sequence[Candidate]
    matches: Matcher
    taken: set[DeviceId]
    counters: dict[CounterKey, Fraction]
    steps: int = 0
    chosen: list[list[Chosen]] = field(default_factory=list)
    # the constraint values fixed so far: claim -> constraint index -> value
    fixed: list[dict[int, object]] = field(default_factory=list)
    failure: Failure | None = None
    depth: int = -1  # how far (claims, requests) the deepest failure got

    def fail(self, position: int, claim: int, request: str, reason: str) -> None:
        if position > self.depth:
            self.depth = position
            self.failure = Failure(self.claims[claim].key, request, reason)


def _applies(names: tuple[str, ...], alternative: Alternative) -> bool:
    return not names or alternative.request in names or alternative.name in names


def allocate(
    claims: Sequence[ClaimToAllocate],
    candidates: Sequence[Candidate],
    *,
    matches: Matcher,
    taken: frozenset[DeviceId] | set[DeviceId],
    counters: Mapping[CounterKey, Fraction],
) -> list[list[Chosen]] | Failure:
    """The devices for every claim (one list per claim, in request order), or the failure of
    the request the search got furthest with."""
    search = _Search(
        claims=claims,
        options=[alternatives(c.spec) for c in claims],
        candidates=candidates,
        matches=matches,
        taken=set(taken),
        counters=dict(counters),
    )
    search.chosen = [[] for _ in claims]
    search.fixed = [{} for _ in claims]
    if _walk(search, 0, 0, 0):
        return search.chosen
    if search.steps >= MAX_STEPS:
        return Failure(
            claims[0].key if claims else "",
            "",
            f"no allocation found within {MAX_STEPS} steps of search",
        )
    return search.failure or Failure("", "", "no allocation found")


def _walk(s: _Search, claim: int, request: int, position: int) -> bool:
    """Allocate request ``request`` of claim ``claim`` and everything after it."""
    if claim == len(s.claims):
        return True
    if request == len(s.options[claim]):
        return _walk(s, claim + 1, 0, position + 1)
    for alternative in s.options[claim][request]:
        if _meet(s, claim, request, alternative, position):
            return True
        if s.steps >= MAX_STEPS:
            return False
    return False


def _usable(s: _Search, candidate: Candidate) -> bool:
    if candidate.id in s.taken:
        return False
    return all(s.counters.get(key, Fraction(0)) >= need for key, need in candidate.consumes)


def _meet(s: _Search, claim: int, request: int, alternative: Alternative, position: int) -> bool:
    matching = [c for c in s.candidates if s.matches(alternative, c)]
    if alternative.mode == ALLOCATION_MODE_ALL:
        if not matching:
            s.fail(position, claim, alternative.name, "no device matches (allocationMode All)")
            return False
        if not all(c.pool_complete for c in matching):
            s.fail(position, claim, alternative.name, "a pool is incomplete (allocationMode All)")
            return False
        if not all(_usable(s, c) for c in matching):
            s.fail(
                position,
                claim,
                alternative.name,
                "a matching device is already allocated (allocationMode All)",
            )
            return False
        return _pick(s, claim, request, alternative, matching, 0, len(matching), position)
    if alternative.mode != ALLOCATION_MODE_EXACT_COUNT:
        s.fail(position, claim, alternative.name, f"unknown allocationMode {alternative.mode!r}")
        return False
    free = [c for c in matching if _usable(s, c)]
    if len(free) < alternative.count:
        s.fail(
            position,
            claim,
            alternative.name,
            f"{len(free)} free of {len(matching)} matching devices, {alternative.count} wanted",
        )
        return False
    return _pick(s, claim, request, alternative, free, 0, alternative.count, position)


def _pick(
    s: _Search,
    claim: int,
    request: int,
    alternative: Alternative,
    pool: list[Candidate],
    start: int,
    left: int,
    position: int,
) -> bool:
    """Choose ``left`` more devices of ``pool`` from ``start`` on (combinations, in order)."""
    if left == 0:
        return _walk(s, claim, request + 1, position + 1)
    constraints = s.claims[claim].spec.constraints
    for index in range(start, len(pool) - left + 1):
        if s.steps >= MAX_STEPS:
            return False
        s.steps += 1
        candidate = pool[index]
        if not _usable(s, candidate):
            continue
        # constraints: the device must carry each applying attribute with the fixed value
        fixed = s.fixed[claim]
        newly: list[int] = []
        fits = True
        for number, constraint in enumerate(constraints):
            if not constraint.match_attribute or not _applies(constraint.requests, alternative):
                continue
            value = candidate.attribute(constraint.match_attribute)
            if value is None:
                fits = False
                break
            if number not in fixed:
                fixed[number] = value
                newly.append(number)
            elif fixed[number] != value:
                fits = False
                break
        if not fits:
            for number in newly:
                del fixed[number]
            s.fail(
                position,
                claim,
                alternative.name,
                "no devices satisfy the claim's matchAttribute constraints",
            )
            continue
        s.taken.add(candidate.id)
        for key, need in candidate.consumes:
            s.counters[key] -= need
        s.chosen[claim].append(Chosen(alternative.name, candidate.id))
        if _pick(s, claim, request, alternative, pool, index + 1, left - 1, position):
            return True
        s.chosen[claim].pop()
        for key, need in candidate.consumes:
            s.counters[key] += need
        s.taken.discard(candidate.id)
        for number in newly:
            del fixed[number]
        if alternative.mode == ALLOCATION_MODE_ALL:
            return False  # All takes every device: there is no other combination
    return False
