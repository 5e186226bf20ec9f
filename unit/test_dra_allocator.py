"""The structured allocator (scheduler.api.dra.allocator): counts, All, firstAvailable,
matchAttribute constraints and counters, with hypothesis checking against a brute-force
search over small cases: no device is given twice, constraints always hold, and an
allocation is found whenever one exists."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.dra import (
    DeviceClaim,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    ExactDeviceRequest,
)
from scheduler.api.dra.allocator import (
    Alternative,
    Candidate,
    Chosen,
    ClaimToAllocate,
    CounterKey,
    DeviceId,
    Failure,
    allocate,
    alternatives,
)

ATTR = "gpu.example.com/numa"


def device(index: int, model: str, numa: int | None, consumes: int = 0) -> Candidate:
    attrs = {ATTR: numa} if numa is not None else {}
    counters = ((("gpu", "p", "set", "mem"), Fraction(consumes)),) if consumes else ()
    return Candidate(("gpu", "p", f"g{index}"), attrs.get, counters)


MODELS: dict[DeviceId, str] = {}


def matcher(alternative: Alternative, candidate: Candidate) -> bool:
    """Class "any" matches every device, any other class the devices of that model."""
    return alternative.device_class in ("any", MODELS[candidate.id])


def exact(name: str, cls: str, count: int = 1, mode: str = "ExactCount") -> DeviceRequest:
    return DeviceRequest(
        name=name,
        exactly=ExactDeviceRequest(device_class_name=cls, allocation_mode=mode, count=count),
    )


def devices(models: Sequence[str], numas: Sequence[int | None]) -> list[Candidate]:
    found = []
    for i, (model, numa) in enumerate(zip(models, numas, strict=True)):
        d = device(i, model, numa)
        MODELS[d.id] = model
        found.append(d)
    return found


def run(
    claims: Sequence[DeviceClaim],
    candidates: Sequence[Candidate],
    taken: frozenset[DeviceId] = frozenset(),
    counters: dict[CounterKey, Fraction] | None = None,
) -> list[list[Chosen]] | Failure:
    return allocate(
        [ClaimToAllocate(f"c{i}", c) for i, c in enumerate(claims)],
        candidates,
        matches=matcher,
        taken=taken,
        counters=counters or {},
    )


def test_exact_count_takes_free_matching_devices_in_order() -> None:
    """Two A devices for a count of two; the B device and the taken A device are left."""
    cands = devices(["a", "b", "a", "a"], [0, 0, 0, 0])
    claim = DeviceClaim(requests=(exact("gpu", "a", 2),))
    found = run([claim], cands, taken=frozenset({cands[0].id}))
    assert found == [[Chosen("gpu", cands[2].id), Chosen("gpu", cands[3].id)]]


def test_a_request_that_cannot_be_met_says_which_and_why() -> None:
    """The failure names the claim, the request and the counts."""
    cands = devices(["a", "b"], [0, 0])
    found = run([DeviceClaim(requests=(exact("gpu", "a", 2),))], cands)
    assert isinstance(found, Failure)
    assert found.message() == "request 'gpu' of claim 'c0': 1 free of 1 matching devices, 2 wanted"


def test_all_mode_takes_every_matching_device_and_fails_if_one_is_taken() -> None:
    """allocationMode All: all three A devices; none when one of them is allocated already."""
    cands = devices(["a", "b", "a", "a"], [0, 0, 0, 0])
    claim = DeviceClaim(requests=(exact("gpu", "a", mode="All"),))
    found = run([claim], cands)
    assert isinstance(found, list)
    assert [c.device for c in found[0]] == [cands[0].id, cands[2].id, cands[3].id]
    assert isinstance(run([claim], cands, taken=frozenset({cands[2].id})), Failure)


def test_match_attribute_backtracks_to_devices_with_one_value() -> None:
    """Four devices on NUMA nodes 0, 1, 1, 0 and a constraint: the first pick (0) cannot
    have a partner until the search backtracks, then two of node 0 or 1 are chosen."""
    cands = devices(["a", "a", "a", "b"], [0, 1, 1, 0])
    claim = DeviceClaim(
        requests=(exact("gpu", "a", 2),),
        constraints=(DeviceConstraint(match_attribute=ATTR),),
    )
    found = run([claim], cands)
    assert isinstance(found, list)
    assert {c.device for c in found[0]} == {cands[1].id, cands[2].id}


def test_first_available_falls_back_to_the_next_subrequest() -> None:
    """No two B devices: the second subrequest (one A) is allocated, named request/sub."""
    cands = devices(["a", "b"], [0, 0])
    request = DeviceRequest(
        name="gpu",
        first_available=(
            DeviceSubRequest(name="big", device_class_name="b", count=2),
            DeviceSubRequest(name="small", device_class_name="a", count=1),
        ),
    )
    found = run([DeviceClaim(requests=(request,))], cands)
    assert found == [[Chosen("gpu/small", cands[0].id)]]


def test_counters_limit_partitions_of_one_device() -> None:
    """Three partitions consume 4 of a counter of 8: only two fit."""
    cands = [device(i, "a", 0, consumes=4) for i in range(3)]
    for c in cands:
        MODELS[c.id] = "a"
    counters = {("gpu", "p", "set", "mem"): Fraction(8)}
    assert isinstance(
        run([DeviceClaim(requests=(exact("g", "a", 2),))], cands, counters=counters), list
    )
    assert isinstance(
        run([DeviceClaim(requests=(exact("g", "a", 3),))], cands, counters=counters), Failure
    )


# ---- properties against a brute-force search ----------------------------------------------


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[DeviceClaim], list[Candidate], frozenset[DeviceId]]:
    size = draw(st.integers(1, 6))
    models = draw(st.lists(st.sampled_from("ab"), min_size=size, max_size=size))
    numas = draw(st.lists(st.sampled_from([0, 1, None]), min_size=size, max_size=size))
    cands = devices(models, numas)
    taken = frozenset(draw(st.sets(st.sampled_from([c.id for c in cands]), max_size=2)))
    claims = []
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            cls = draw(st.sampled_from(["a", "b", "any"]))
            if draw(st.booleans()):
                subs = tuple(
                    DeviceSubRequest(
                        name=f"s{k}",
                        device_class_name=draw(st.sampled_from(["a", "b", "any"])),
                        count=draw(st.integers(1, 2)),
                    )
                    for k in range(draw(st.integers(1, 2)))
                )
                requests.append(DeviceRequest(name=f"r{r}", first_available=subs))
            else:
                mode = draw(st.sampled_from(["ExactCount", "ExactCount", "All"]))
                requests.append(exact(f"r{r}", cls, draw(st.integers(1, 3)), mode))
        constraints: tuple[DeviceConstraint, ...] = ()
        if draw(st.booleans()):
            names = draw(st.sampled_from([(), ("r0",)]))
            constraints = (DeviceConstraint(requests=names, match_attribute=ATTR),)
        claims.append(DeviceClaim(requests=tuple(requests), constraints=constraints))
        del c
    return claims, cands, taken


def _options(
    alternative: Alternative, free: list[Candidate], every: list[Candidate]
) -> Iterator[tuple[Candidate, ...]]:
    matching = [c for c in every if matcher(alternative, c)]
    if alternative.mode == "All":
        if matching and all(c in free for c in matching):
            yield tuple(matching)
        return
    usable = [c for c in matching if c in free]
    yield from itertools.combinations(usable, alternative.count)


def _holds(claim: DeviceClaim, chosen: list[tuple[Alternative, Candidate]]) -> bool:
    for constraint in claim.constraints:
        values = [
            c.attribute(ATTR)
            for a, c in chosen
            if not constraint.requests or a.request in constraint.requests
        ]
        if any(v is None for v in values) or len(set(values)) > 1:
            return False
    return True


def brute_force(
    claims: list[DeviceClaim], cands: list[Candidate], taken: frozenset[DeviceId]
) -> bool:
    """Whether some allocation exists, by trying every choice."""
    free0 = [c for c in cands if c.id not in taken]

    def claim_ways(claim: DeviceClaim, free: list[Candidate]) -> Iterator[list[Candidate]]:
        def rec(
            i: int, free: list[Candidate], got: list[tuple[Alternative, Candidate]]
        ) -> Iterator[list[tuple[Alternative, Candidate]]]:
            options = alternatives(claim)
            if i == len(options):
                if _holds(claim, got):
                    yield got
                return
            for alternative in options[i]:
                for pick in _options(alternative, free, cands):
                    rest = [c for c in free if c not in pick]
                    yield from rec(i + 1, rest, got + [(alternative, c) for c in pick])

        for got in rec(0, free, []):
            yield [c for _, c in got]

    def all_claims(i: int, free: list[Candidate]) -> bool:
        if i == len(claims):
            return True
        return any(
            all_claims(i + 1, [c for c in free if c not in used])
            for used in claim_ways(claims[i], free)
        )

    return all_claims(0, free0)


@settings(max_examples=400, deadline=None)
@given(cases())
def test_allocation_exists_exactly_when_brute_force_finds_one(
    case: tuple[list[DeviceClaim], list[Candidate], frozenset[DeviceId]],
) -> None:
    """Found iff brute force finds one; what is found gives no device twice, takes none
    already taken, meets every count and every constraint."""
    claims, cands, taken = case
    found = run(claims, cands, taken)
    assert isinstance(found, list) == brute_force(claims, cands, taken)
    if not isinstance(found, list):
        return
    ids = [c.device for chosen in found for c in chosen]
    assert len(ids) == len(set(ids))
    assert not set(ids) & taken
    by_id = {c.id: c for c in cands}
    for claim, chosen in zip(claims, found, strict=True):
        named = {a.name: a for options in alternatives(claim) for a in options}
        pairs = [(named[c.request], by_id[c.device]) for c in chosen]
        assert _holds(claim, pairs)
        for options in alternatives(claim):
            used = [a for a, _ in pairs if a.request == options[0].request]
            assert used, "every request gets devices"
            alternative = used[0]
            assert all(a == alternative for a in used)
            if alternative.mode == "ExactCount":
                assert len(used) == alternative.count
            assert all(matcher(a, c) for a, c in pairs)
