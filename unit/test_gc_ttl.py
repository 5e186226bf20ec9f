"""Tests of controllers.gc.ttl.seconds_until_expiry: which Jobs the TTL applies to (Completed,
Failed, Terminated as in Volcano, and Aborted, which Volcano forgets) and how long they have
left."""

from __future__ import annotations

import datetime as dt

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Job, JobPhase, JobSpec, JobState, JobStatus
from controllers.gc.ttl import TTL_PHASES, seconds_until_expiry

FINISHED_AT = "2024-05-01T10:00:00Z"
FINISHED = dt.datetime(2024, 5, 1, 10, 0, 0, tzinfo=dt.UTC)


def job(
    phase: str = JobPhase.COMPLETED,
    *,
    ttl: int | None = 100,
    finished_at: str | None = FINISHED_AT,
    deleting: bool = False,
) -> Job:
    return Job(
        metadata=ObjectMeta(
            name="j",
            namespace="ns",
            deletion_timestamp="2024-05-01T10:00:30Z" if deleting else None,
        ),
        spec=JobSpec(ttl_seconds_after_finished=ttl),
        status=JobStatus(state=JobState(phase=phase, last_transition_time=finished_at)),
    )


EXPIRING = {JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED, JobPhase.ABORTED}


@pytest.mark.parametrize("phase", list(JobPhase), ids=[p.value for p in JobPhase])
def test_ttl_applies_to_finished_and_aborted_jobs(phase: JobPhase) -> None:
    """Each JobPhase: a finished or aborted Job counts down from its lastTransitionTime; every
    other phase never expires."""
    remaining = seconds_until_expiry(job(phase), FINISHED + dt.timedelta(seconds=30))
    if phase in EXPIRING:
        assert remaining == 70.0
    else:
        assert remaining is None


def test_ttl_phases_are_volcanos_plus_aborted() -> None:
    """Volcano's three phases plus Aborted (Volcano's issue #4736)."""
    assert TTL_PHASES == EXPIRING


@pytest.mark.parametrize("phase", ["", "Unknown-To-Caldera"])
def test_empty_or_unknown_phase_never_expires(phase: str) -> None:
    """A Job with no phase yet, or a phase a newer Volcano added, is not collected."""
    assert seconds_until_expiry(job(phase), FINISHED + dt.timedelta(days=1)) is None


def test_no_ttl_never_expires() -> None:
    """Without ttlSecondsAfterFinished a finished Job is kept forever."""
    assert seconds_until_expiry(job(ttl=None), FINISHED + dt.timedelta(days=365)) is None


@pytest.mark.parametrize(
    ("after", "expected"),
    [(0.0, 0.0), (0.5, -0.5), (3600.0, -3600.0)],
)
def test_ttl_zero_expires_at_once(after: float, expected: float) -> None:
    """TTL 0 means "delete as soon as it finishes": the time left is 0 or already negative."""
    now = FINISHED + dt.timedelta(seconds=after)
    assert seconds_until_expiry(job(ttl=0), now) == expected


@pytest.mark.parametrize(
    ("after", "expected"),
    [(-10.0, 110.0), (0.0, 100.0), (99.75, 0.25), (100.0, 0.0), (250.0, -150.0)],
)
def test_time_left_counts_down_from_the_finish(after: float, expected: float) -> None:
    """The time left is finish + TTL - now, in seconds, with sub-second precision; it goes
    negative once overdue (and is more than the TTL if the local clock lags the finish)."""
    now = FINISHED + dt.timedelta(seconds=after)
    assert seconds_until_expiry(job(ttl=100), now) == pytest.approx(expected)


def test_deletion_in_progress_is_left_alone() -> None:
    """A Job that already has a deletionTimestamp is not collected again."""
    now = FINISHED + dt.timedelta(seconds=1000)
    assert seconds_until_expiry(job(deleting=True), now) is None
    assert seconds_until_expiry(job(deleting=False), now) == -900.0


def test_missing_last_transition_time_never_expires() -> None:
    """Without a recorded finish time there is nothing to count from: no expiry."""
    now = FINISHED + dt.timedelta(days=1)
    assert seconds_until_expiry(job(finished_at=None), now) is None
    assert seconds_until_expiry(job(finished_at=""), now) is None


@pytest.mark.parametrize(
    "finished_at",
    [
        "2024-05-01T10:00:00Z",
        "2024-05-01T10:00:00+00:00",
        "2024-05-01T12:00:00+02:00",
        "2024-05-01T04:30:00-05:30",
        "2024-05-01T10:00:00.000000Z",
    ],
)
def test_finish_time_in_any_zone(finished_at: str) -> None:
    """lastTransitionTime with any UTC offset (or fractional seconds) names the same instant."""
    now = FINISHED + dt.timedelta(seconds=40)
    assert seconds_until_expiry(job(ttl=100, finished_at=finished_at), now) == 60.0


@pytest.mark.parametrize(
    "zone",
    [dt.UTC, dt.timezone(dt.timedelta(hours=9)), dt.timezone(dt.timedelta(hours=-3))],
    ids=["utc", "utc+9", "utc-3"],
)
def test_now_in_any_zone(zone: dt.tzinfo) -> None:
    """The caller's clock may be in any zone: only the instant matters."""
    now = (FINISHED + dt.timedelta(seconds=40)).astimezone(zone)
    assert seconds_until_expiry(job(ttl=100), now) == 60.0


def test_fractional_finish_time() -> None:
    """Sub-second finish times are honoured."""
    now = FINISHED + dt.timedelta(seconds=10)
    remaining = seconds_until_expiry(job(ttl=10, finished_at="2024-05-01T10:00:00.250Z"), now)
    assert remaining == pytest.approx(0.25)
