"""Tests of the pure decisions of caldera.kube.leader: whether another replica holds the Lease
(judged on the local monotonic clock from when we saw the record change) and the LeaseSpec a
candidate writes to take or renew it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from caldera.api.core import LeaseSpec
from caldera.kube.leader import claimed_spec, lease_held_by_other

ME = "caldera-0_abc"
OTHER = "caldera-1_def"
DEFAULT_DURATION = 15.0
WALL = dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)
STAMP = "2024-05-01T10:00:00.123456Z"
EARLIER = "2024-05-01T09:00:00.000000Z"


@dataclass(frozen=True)
class HeldCase:
    name: str
    spec: LeaseSpec
    observed_at: float
    now: float
    held: bool


HELD_CASES = [
    HeldCase("no holder (never taken)", LeaseSpec(), 100.0, 100.0, False),
    HeldCase(
        "empty holder (released)",
        LeaseSpec(holder_identity="", lease_duration_seconds=1),
        100.0,
        100.0,
        False,
    ),
    HeldCase(
        "released: holder null",
        LeaseSpec(holder_identity=None, lease_duration_seconds=60),
        100.0,
        100.0,
        False,
    ),
    HeldCase(
        "own lease, fresh",
        LeaseSpec(holder_identity=ME, lease_duration_seconds=15),
        100.0,
        101.0,
        False,
    ),
    HeldCase(
        "own lease, long expired",
        LeaseSpec(holder_identity=ME, lease_duration_seconds=15),
        100.0,
        1000.0,
        False,
    ),
    HeldCase(
        "other's lease, just observed",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=15),
        100.0,
        100.0,
        True,
    ),
    HeldCase(
        "other's lease, 1 s before expiry",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=15),
        100.0,
        114.0,
        True,
    ),
    HeldCase(
        "other's lease, exactly at expiry",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=15),
        100.0,
        115.0,
        False,
    ),
    HeldCase(
        "other's lease, expired",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=15),
        100.0,
        130.0,
        False,
    ),
    HeldCase(
        "record's duration (60 s) wins over the default (15 s)",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=60),
        100.0,
        150.0,
        True,
    ),
    HeldCase(
        "record's short duration (5 s) wins over the default (15 s)",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=5),
        100.0,
        106.0,
        False,
    ),
    HeldCase(
        "no duration in the record: the default applies (still held)",
        LeaseSpec(holder_identity=OTHER),
        100.0,
        114.9,
        True,
    ),
    HeldCase(
        "no duration in the record: the default applies (expired)",
        LeaseSpec(holder_identity=OTHER),
        100.0,
        115.1,
        False,
    ),
    HeldCase(
        "renewTime in the far past does not matter, only when we saw it change",
        LeaseSpec(holder_identity=OTHER, lease_duration_seconds=15, renew_time=EARLIER),
        100.0,
        101.0,
        True,
    ),
]


@pytest.mark.parametrize("case", HELD_CASES, ids=[c.name for c in HELD_CASES])
def test_lease_held_by_other(case: HeldCase) -> None:
    """Another replica holds the Lease iff it names a holder other than us and less than the
    lease duration (the record's, else the default) has passed since we saw it change."""
    assert (
        lease_held_by_other(case.spec, ME, case.observed_at, case.now, DEFAULT_DURATION)
        is case.held
    )


# --- claimed_spec -------------------------------------------------------------------------------


def test_first_claim_of_a_new_lease() -> None:
    """Creating the Lease: we hold it, acquire and renew are now, no transition yet."""
    spec = claimed_spec(None, ME, 15.0, WALL)
    assert spec == LeaseSpec(
        holder_identity=ME,
        lease_duration_seconds=15,
        acquire_time=STAMP,
        renew_time=STAMP,
        lease_transitions=0,
    )


@dataclass(frozen=True)
class ClaimCase:
    name: str
    previous: LeaseSpec
    transitions: int


CLAIM_CASES = [
    ClaimCase(
        "take over from another holder",
        LeaseSpec(
            holder_identity=OTHER,
            lease_duration_seconds=15,
            acquire_time=EARLIER,
            renew_time=EARLIER,
            lease_transitions=4,
        ),
        5,
    ),
    ClaimCase(
        "take a released lease (empty holder)",
        LeaseSpec(holder_identity="", lease_duration_seconds=1, lease_transitions=2),
        3,
    ),
    ClaimCase(
        "take a released lease (null holder)",
        LeaseSpec(holder_identity=None, lease_duration_seconds=1, lease_transitions=0),
        1,
    ),
    ClaimCase("take a lease that never counted transitions", LeaseSpec(holder_identity=OTHER), 1),
]


@pytest.mark.parametrize("case", CLAIM_CASES, ids=[c.name for c in CLAIM_CASES])
def test_taking_the_lease_counts_a_transition(case: ClaimCase) -> None:
    """Taking a Lease someone else (or no one) held: we become the holder, acquireTime and
    renewTime are now, our duration is written, and leaseTransitions goes up by one."""
    spec = claimed_spec(case.previous, ME, 20.0, WALL)
    assert spec.holder_identity == ME
    assert spec.acquire_time == STAMP
    assert spec.renew_time == STAMP
    assert spec.lease_duration_seconds == 20
    assert spec.lease_transitions == case.transitions


def test_renewing_keeps_acquire_time_and_transitions() -> None:
    """Renewing our own Lease moves renewTime only: acquireTime and leaseTransitions stay, so
    the Lease keeps saying since when we lead and how often leadership changed."""
    previous = LeaseSpec(
        holder_identity=ME,
        lease_duration_seconds=10,
        acquire_time=EARLIER,
        renew_time=EARLIER,
        lease_transitions=7,
        strategy="OldestEmulationVersion",
        preferred_holder="someone",
    )
    spec = claimed_spec(previous, ME, 15.0, WALL)
    assert spec == LeaseSpec(
        holder_identity=ME,
        lease_duration_seconds=15,
        acquire_time=EARLIER,
        renew_time=STAMP,
        lease_transitions=7,
        strategy="OldestEmulationVersion",
        preferred_holder="someone",
    )


def test_claim_does_not_mutate_the_previous_spec() -> None:
    """The previous spec (from the cache) is left as it was; a new value is returned."""
    previous = LeaseSpec(holder_identity=ME, renew_time=EARLIER, lease_transitions=1)
    claimed_spec(previous, ME, 15.0, WALL)
    assert previous == LeaseSpec(holder_identity=ME, renew_time=EARLIER, lease_transitions=1)


@pytest.mark.parametrize(
    "wall",
    [
        WALL,
        WALL.astimezone(dt.timezone(dt.timedelta(hours=2))),
        WALL.astimezone(dt.timezone(dt.timedelta(hours=-7, minutes=-30))),
    ],
    ids=["utc", "utc+2", "utc-7:30"],
)
def test_times_are_written_as_utc_micro_time(wall: dt.datetime) -> None:
    """acquireTime and renewTime are MicroTime in UTC ("...Z"), whatever zone the clock used."""
    spec = claimed_spec(None, ME, 15.0, wall)
    assert spec.acquire_time == STAMP
    assert spec.renew_time == STAMP


def test_fractional_duration_is_truncated_to_whole_seconds() -> None:
    """leaseDurationSeconds is an integer field: 15.9 s is written as 15."""
    assert claimed_spec(None, ME, 15.9, WALL).lease_duration_seconds == 15


def test_a_claim_is_not_held_by_other_for_us_but_is_for_others() -> None:
    """The spec we write reads as free to us and as held to another candidate that just saw it."""
    spec = claimed_spec(None, ME, 15.0, WALL)
    assert not lease_held_by_other(spec, ME, 0.0, 1.0, DEFAULT_DURATION)
    assert lease_held_by_other(spec, OTHER, 0.0, 1.0, DEFAULT_DURATION)
    assert not lease_held_by_other(spec, OTHER, 0.0, 16.0, DEFAULT_DURATION)
