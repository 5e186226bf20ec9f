"""Cron schedules: robfig/cron's standard grammar, next and previous times in IANA zones."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.cron import (
    ScheduleError,
    ZoneError,
    load_zone,
    parse_schedule,
    rfc3339,
)

UTC = dt.UTC
NY = load_zone("America/New_York")


def at(*args: int, tz: dt.tzinfo = UTC) -> dt.datetime:
    return dt.datetime(*args, tzinfo=tz)  # type: ignore[arg-type,misc]


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        ("* * * * *", at(2026, 1, 1, 10, 0), at(2026, 1, 1, 10, 1)),
        ("* * * * *", at(2026, 1, 1, 10, 0, 30), at(2026, 1, 1, 10, 1)),
        ("*/5 * * * *", at(2026, 1, 1, 10, 3), at(2026, 1, 1, 10, 5)),
        ("5/20 * * * *", at(2026, 1, 1, 10, 26), at(2026, 1, 1, 10, 45)),
        ("0 9-17/4 * * *", at(2026, 1, 1, 14, 0), at(2026, 1, 1, 17, 0)),
        ("0 0 1,15 * *", at(2026, 1, 2, 0, 0), at(2026, 1, 15, 0, 0)),
        ("0 3 * * mon-fri", at(2026, 1, 2, 4, 0), at(2026, 1, 5, 3, 0)),  # Friday -> Monday
        ("0 0 * jan,JUL *", at(2026, 2, 1, 0, 0), at(2026, 7, 1, 0, 0)),
        ("0 0 13 * fri", at(2026, 1, 1, 0, 0), at(2026, 1, 2, 0, 0)),  # either day field
        ("0 0 ? * 0", at(2026, 1, 1, 0, 0), at(2026, 1, 4, 0, 0)),  # "?" is "*"
        ("0 0 29 2 *", at(2026, 3, 1, 0, 0), at(2028, 2, 29, 0, 0)),
        ("@hourly", at(2026, 1, 1, 10, 0), at(2026, 1, 1, 11, 0)),
        ("@daily", at(2026, 1, 1, 10, 0), at(2026, 1, 2, 0, 0)),
        ("@midnight", at(2026, 1, 1, 10, 0), at(2026, 1, 2, 0, 0)),
        ("@weekly", at(2026, 1, 1, 10, 0), at(2026, 1, 4, 0, 0)),
        ("@monthly", at(2026, 1, 1, 10, 0), at(2026, 2, 1, 0, 0)),
        ("@yearly", at(2026, 1, 1, 10, 0), at(2027, 1, 1, 0, 0)),
        ("@annually", at(2026, 1, 1, 0, 0), at(2027, 1, 1, 0, 0)),
        ("@every 90s", at(2026, 1, 1, 10, 0, 0), at(2026, 1, 1, 10, 1, 30)),
        ("  0  12  *  *  *  ", at(2026, 1, 1, 10, 0), at(2026, 1, 1, 12, 0)),
    ],
)
def test_next_time(spec: str, after: dt.datetime, expected: dt.datetime) -> None:
    """Each form of the grammar gives the first time strictly after the given one."""
    assert parse_schedule(spec).next(after) == expected


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4"),
        ("0 0 * * * *", "expected exactly 5 fields, found 6"),
        ("60 * * * *", "minute: end of range (60) above 59"),
        ("* 24 * * *", "hour: end of range (24) above 23"),
        ("* * 0 * *", "day of month: beginning of range (0) below 1"),
        ("* * * 13 *", "month: end of range (13) above 12"),
        ("* * * * 7", "day of week: end of range (7) above 6"),
        ("5-1 * * * *", "beginning of range (5) beyond end (1)"),
        ("*/0 * * * *", "step of range should be a positive number"),
        ("1/2/3 * * * *", "too many slashes"),
        ("1-2-3 * * * *", "too many hyphens"),
        ("x * * * *", "minute: 'x' is not a number"),
        ("-1 * * * *", "is not a number"),
        ("* * * * funday", "'funday' is not a number"),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every soon", "failed to parse duration"),
        ("TZ=Mars/Olympus 0 * * * *", "provided bad location Mars/Olympus"),
    ],
)
def test_refusals_name_the_problem(spec: str, problem: str) -> None:
    """What ParseStandard refuses is refused, with the field and the reason."""
    with pytest.raises(ScheduleError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_schedule(spec)


def test_zone_prefix_is_honoured_and_wins() -> None:
    """A TZ= (or CRON_TZ=) prefix sets the zone, whatever zone the caller passes."""
    s = parse_schedule("CRON_TZ=Asia/Tokyo 0 9 * * *")
    assert s.next(at(2026, 1, 1, 0, 0), NY) == at(2026, 1, 2, 0, 0)  # 09:00 JST = 00:00 UTC


def test_time_zone_moves_the_wall_clock() -> None:
    """09:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer."""
    s = parse_schedule("0 9 * * *")
    assert s.next(at(2026, 1, 10, 0, 0), NY) == at(2026, 1, 10, 14, 0)
    assert s.next(at(2026, 7, 10, 0, 0), NY) == at(2026, 7, 10, 13, 0)


def test_daylight_saving_gap_and_repeat() -> None:
    """A wall time the clock skips does not fire that day; a repeated one fires once."""
    skipped = parse_schedule("30 2 * * *")
    assert skipped.next(at(2026, 3, 8, 0, 0, tz=NY), NY) == at(2026, 3, 9, 2, 30, tz=NY)
    repeated = parse_schedule("30 1 * * *")
    first = repeated.next(at(2026, 11, 1, 0, 0, tz=NY), NY)
    assert first == at(2026, 11, 1, 5, 30)  # 01:30 EDT
    assert first is not None
    assert repeated.next(first, NY) == at(2026, 11, 2, 6, 30)  # not 01:30 EST the same day
    # Seen from inside the repeated hour (01:10 EST), the last time was 01:30 EDT.
    assert repeated.previous(at(2026, 11, 1, 6, 10), NY) == at(2026, 11, 1, 5, 30)


def test_never_firing_schedules() -> None:
    """A day that no month has never fires; either-day schedules always can."""
    assert parse_schedule("0 0 30 2 *").never
    assert parse_schedule("0 0 31 4,6 *").never
    assert parse_schedule("0 0 30 2 *").next(at(2026, 1, 1, 0, 0)) is None
    assert not parse_schedule("0 0 30 2 mon").never
    assert not parse_schedule("0 0 29 2 *").never
    assert not parse_schedule("@every 1h").never


def test_latest_and_count() -> None:
    """latest() is the last time in (anchor, now]; count() stops at its cap."""
    s = parse_schedule("0 * * * *")
    anchor, now = at(2026, 1, 1, 0, 0), at(2026, 1, 1, 5, 30)
    assert s.latest(anchor, now) == at(2026, 1, 1, 5, 0)
    assert s.latest(now, now) is None
    assert s.count(anchor, anchor, now, cap=100) == 5
    assert s.count(anchor, at(2026, 1, 1, 3, 0), now, cap=100) == 2
    assert s.count(anchor, anchor - dt.timedelta(days=3650), now, cap=101) == 101
    every = parse_schedule("@every 10m")
    assert every.latest(anchor, now) == at(2026, 1, 1, 5, 30)
    assert every.latest(anchor, at(2026, 1, 1, 0, 9)) is None
    assert every.count(anchor, anchor, now, cap=1000) == 33
    assert every.count(anchor, at(2026, 1, 1, 5, 0), now, cap=1000) == 3
    assert every.count(anchor, anchor, now, cap=7) == 7


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "got empty string"),
        ("Local", "timeZone can't be Local"),
        ("Mars/Olympus", "invalid timeZone 'Mars/Olympus': not an IANA time zone"),
        ("../etc/passwd", "unknown timeZone"),
        ("Europe/-Paris", "unknown timeZone"),
        ("A_Very_Long_Part_Of_A_Zone/X", "unknown timeZone"),
    ],
)
def test_zone_refusals(name: str, problem: str) -> None:
    """Unknown or unsafe zone names are refused with the reason."""
    with pytest.raises(ZoneError, match=problem):
        load_zone(name)


def test_rfc3339_as_go_prints_it() -> None:
    """UTC ends in Z; other zones carry their offset; fractions of a second are dropped."""
    when = at(2026, 1, 1, 2, 3, 4)
    assert rfc3339(when) == "2026-01-01T02:03:04Z"
    assert rfc3339(when, NY) == "2025-12-31T21:03:04-05:00"
    assert rfc3339(when + dt.timedelta(microseconds=5)) == "2026-01-01T02:03:04Z"


# --- properties ---------------------------------------------------------------------------------


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    single = number.map(str)
    ranged = st.tuples(number, number).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*", str(low)]), st.integers(1, 7)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    part = st.one_of(st.just("*"), single, ranged, stepped)
    return st.lists(part, min_size=1, max_size=3).map(",".join)


specs = st.tuples(_field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 6)).map(
    " ".join
)
instants = st.datetimes(
    min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2090, 1, 1), timezones=st.just(UTC)
)
zones = st.sampled_from([UTC, NY, load_zone("Europe/Paris"), load_zone("Australia/Lord_Howe")])


def _matches(spec: str, when: dt.datetime, zone: dt.tzinfo) -> bool:
    s = parse_schedule(spec)
    local = when.astimezone(zone)
    return (
        local.second == 0
        and local.microsecond == 0
        and local.minute in s.minutes
        and local.hour in s.hours
        and s._day_matches(local.date())
    )


@settings(max_examples=200, deadline=None)
@given(spec=specs, now=instants, zone=zones)
def test_next_is_later_and_matches(spec: str, now: dt.datetime, zone: dt.tzinfo) -> None:
    """The next time is always after now and matches the expression in the zone; the previous
    time is at or before now and matches too."""
    s = parse_schedule(spec)
    nxt = s.next(now, zone)
    if nxt is not None:
        assert nxt > now
        assert _matches(spec, nxt, zone)
    prev = s.previous(now, zone)
    if prev is not None:
        assert prev <= now
        assert _matches(spec, prev, zone)
        after_prev = s.next(prev, zone)
        assert after_prev is not None
        assert nxt is None or after_prev <= nxt


@settings(max_examples=60, deadline=None)
@given(minutes=_field(0, 59), hours=_field(0, 23), now=instants, zone=zones)
def test_nothing_fires_between_now_and_next(
    minutes: str, hours: str, now: dt.datetime, zone: dt.tzinfo
) -> None:
    """Minute by minute, no time between now and the next one matches (daily schedules)."""
    spec = f"{minutes} {hours} * * *"
    s = parse_schedule(spec)
    nxt = s.next(now, zone)
    assert nxt is not None
    minute = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    while minute < nxt:
        local = minute.astimezone(zone)
        # a firing instant: the wall time matches, at its first occurrence
        assert not (local.minute in s.minutes and local.hour in s.hours and local.fold == 0)
        minute += dt.timedelta(minutes=1)


@settings(max_examples=100, deadline=None)
@given(spec=specs, now=instants)
def test_previous_then_next_round_trips(spec: str, now: dt.datetime) -> None:
    """In UTC, the time after the previous one is the next one, or now itself when now fires."""
    s = parse_schedule(spec)
    prev = s.previous(now)
    nxt = s.next(now)
    if prev is not None and nxt is not None:
        after_prev = s.next(prev)
        assert after_prev == nxt or (after_prev is not None and after_prev <= now)
