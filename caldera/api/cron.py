"""Cron schedules as a CronJob's ``spec.schedule`` and ``spec.timeZone`` mean them.

The grammar is robfig/cron's ``ParseStandard``, which Kubernetes' and Volcano's CronJob controllers
and webhooks use (volcano pkg/controllers/cronjob, pkg/webhooks/admission/cronjobs):

- five fields, ``minute hour day-of-month month day-of-week``, separated by whitespace; each a
  comma list of ``*`` or ``?``, a number, a range ``a-b``, each with an optional step ``/n``
  (``a/n`` means ``a-max/n``); months ``jan``-``dec`` and days ``sun``-``sat`` by name, in any case;
  day-of-week runs 0-6 (Sunday is 0);
- the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``),
  ``@hourly``, and ``@every <Go duration>`` (whole seconds, at least one);
- an optional ``TZ=<zone>`` or ``CRON_TZ=<zone>`` prefix, which the webhook refuses (the zone
  belongs in ``spec.timeZone``) but the controller honours on objects stored without it.

Day matching is cron's: when both day fields are restricted, a day matching either fires; when
one is ``*`` (or ``?``), both must match.

Times are wall-clock times in the schedule's zone (UTC unless ``timeZone`` says otherwise), with
minute resolution. Across daylight-saving changes a wall time the clock skips does not fire that
day, and a wall time the clock repeats fires once, at its first occurrence. A schedule that finds
no time within five years (robfig's limit, e.g. ``0 0 30 2 *``) never fires.

``@every`` schedules have no wall-clock anchor: their times are ``anchor + k * period`` from the
time the caller counts from (the CronJob's last schedule time or its creation).

Pure functions, no I/O.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from caldera.api.duration import DurationError, parse_duration_ns

__all__ = [
    "MACROS",
    "MAX_CRONJOB_NAME",
    "Schedule",
    "ScheduleError",
    "ZoneError",
    "job_name",
    "load_zone",
    "parse_schedule",
    "rfc3339",
]

MACROS: Final[Mapping[str, str]] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS: Final = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_DAYS: Final = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_SEARCH_YEARS: Final = 5
MAX_CRONJOB_NAME: Final = 52
"""The longest CronJob name whose Jobs' names (``<cronjob>-<minutes>``) stay within 63
characters, as Volcano's webhook reserves 11 for the suffix."""
_ZONE_PART: Final = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_MINUTE: Final = dt.timedelta(minutes=1)
_DAY: Final = dt.timedelta(days=1)
# The largest jump of a UTC offset at a DST change (Lord Howe moves 30 minutes, most zones an
# hour); a backward search starts this far past the wall time to see a repeated hour whole.
_MAX_SHIFT: Final = dt.timedelta(hours=3)


class ScheduleError(ValueError):
    """A schedule robfig/cron's ParseStandard would refuse; the message says what is wrong."""


class ZoneError(ValueError):
    """A time zone name that is not an IANA zone this machine knows."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: Mapping[str, int]


_FIELDS: Final = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day of month", 1, 31, {}),
    _Field("month", 1, 12, _MONTHS),
    _Field("day of week", 0, 6, _DAYS),
)


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone called ``name`` ("UTC", "Europe/Paris"); ZoneError says why not.

    As Volcano's webhook: no empty name, no ``Local`` (the controller's machine is not the
    user's), each ``/``-separated part 1-14 characters of ``[A-Za-z.-_0-9+]``, not ``.``/``..``
    and not starting with ``-``."""
    if not name:
        raise ZoneError("timeZone must be nil or non-empty string, got empty string")
    if name.lower() == "local":
        raise ZoneError(
            "timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
        )
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.match(part):
            raise ZoneError(f"unknown timeZone {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ZoneError(
            f"invalid timeZone {name!r}: not an IANA time zone "
            "(see https://www.iana.org/time-zones, e.g. Europe/Paris)"
        ) from None


def _number(text: str, field: _Field) -> int:
    value = field.names.get(text.lower())
    if value is not None:
        return value
    if not text.isdigit() or not text.isascii():
        raise ScheduleError(f"{field.name}: {text!r} is not a number")
    return int(text)


def _parse_field(text: str, field: _Field) -> tuple[frozenset[int], bool]:
    """The values a field allows, and whether it is unrestricted (``*``, ``?``, ``*/1``)."""
    values: set[int] = set()
    star = False
    for part in text.split(","):
        range_and_step = part.split("/")
        if len(range_and_step) > 2:
            raise ScheduleError(f"{field.name}: too many slashes in {part!r}")
        bounds = range_and_step[0].split("-")
        if len(bounds) > 2:
            raise ScheduleError(f"{field.name}: too many hyphens in {part!r}")
        part_star = bounds[0] in ("*", "?")
        if part_star:
            if len(bounds) == 2:
                raise ScheduleError(f"{field.name}: {part!r} is no range")
            low, high = field.low, field.high
        else:
            low = _number(bounds[0], field)
            high = _number(bounds[1], field) if len(bounds) == 2 else low
        step = 1
        if len(range_and_step) == 2:
            step = _number(range_and_step[1], _Field(field.name, 0, 0, {}))
            if len(bounds) == 1:
                high = field.high  # "a/n" means "a-max/n"
            if step > 1:
                part_star = False
        if low < field.low:
            raise ScheduleError(f"{field.name}: beginning of range ({low}) below {field.low}")
        if high > field.high:
            raise ScheduleError(f"{field.name}: end of range ({high}) above {field.high}")
        if low > high:
            raise ScheduleError(f"{field.name}: beginning of range ({low}) beyond end ({high})")
        if step == 0:
            raise ScheduleError(f"{field.name}: step of range should be a positive number")
        values.update(range(low, high + 1, step))
        star = star or part_star
    return frozenset(values), star


def _days_in_month(month: int) -> int:
    return 29 if month == 2 else calendar.monthrange(2001, month)[1]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule; ``next`` and ``latest`` give its times."""

    text: str
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    doms: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    dows: frozenset[int] = frozenset()  # 0 = Sunday
    dom_star: bool = False
    dow_star: bool = False
    every: int | None = None  # seconds, for "@every"
    zone: zoneinfo.ZoneInfo | None = None  # from a TZ= prefix; wins over spec.timeZone

    @property
    def never(self) -> bool:
        """True when no calendar day can match (``0 0 30 2 *``): the schedule never fires."""
        if self.every is not None:
            return False
        if not (self.dom_star or self.dow_star):
            return False  # either day field may match: the day-of-week one matches weekly
        if self.dom_star:
            return False
        return not any(d <= _days_in_month(m) for m in self.months for d in self.doms)

    def _day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.doms
        dow = (day.isoweekday() % 7) in self.dows
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def _zone(self, zone: dt.tzinfo) -> dt.tzinfo:
        return self.zone if self.zone is not None else zone

    @staticmethod
    def _absolute(wall: dt.datetime, zone: dt.tzinfo) -> dt.datetime | None:
        """The first instant showing ``wall`` in ``zone``, or None if the clock skips it."""
        aware = wall.replace(tzinfo=zone, fold=0)
        if aware.astimezone(dt.UTC).astimezone(zone).replace(tzinfo=None) != wall:
            return None
        return aware

    def next(self, after: dt.datetime, zone: dt.tzinfo = dt.UTC) -> dt.datetime | None:
        """The first time strictly after ``after`` (aware), in UTC, or None within five years."""
        if self.every is not None:
            return (after.replace(microsecond=0) + dt.timedelta(seconds=self.every)).astimezone(
                dt.UTC
            )
        zone = self._zone(zone)
        start = after.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0) + _MINUTE
        day = start.date()
        for _ in range(_SEARCH_YEARS * 366 + 1):
            if self._day_matches(day):
                first = day == start.date()
                for hour in sorted(self.hours):
                    if first and hour < start.hour:
                        continue
                    for minute in sorted(self.minutes):
                        wall = dt.datetime.combine(day, dt.time(hour, minute))
                        if wall < start:
                            continue
                        when = self._absolute(wall, zone)
                        if when is not None and when > after:
                            return when.astimezone(dt.UTC)
            day += _DAY
        return None

    def previous(self, at: dt.datetime, zone: dt.tzinfo = dt.UTC) -> dt.datetime | None:
        """The last time at or before ``at``, in UTC (not for ``@every``), or None."""
        if self.every is not None:
            raise ValueError("an @every schedule has no time of its own; use latest()")
        zone = self._zone(zone)
        top = at.astimezone(zone).replace(tzinfo=None, second=0, microsecond=0) + _MAX_SHIFT
        day = top.date()
        for _ in range(_SEARCH_YEARS * 366 + 1):
            if self._day_matches(day):
                for hour in sorted(self.hours, reverse=True):
                    for minute in sorted(self.minutes, reverse=True):
                        wall = dt.datetime.combine(day, dt.time(hour, minute))
                        if wall > top:
                            continue
                        when = self._absolute(wall, zone)
                        if when is not None and when <= at:
                            return when.astimezone(dt.UTC)
            day -= _DAY
        return None

    def latest(
        self, anchor: dt.datetime, now: dt.datetime, zone: dt.tzinfo = dt.UTC
    ) -> dt.datetime | None:
        """The last time in (``anchor``, ``now``], or None when there is none."""
        if self.every is not None:
            periods = int((now - anchor.replace(microsecond=0)).total_seconds()) // self.every
            if periods < 1:
                return None
            return anchor.replace(microsecond=0) + dt.timedelta(seconds=periods * self.every)
        when = self.previous(now, zone)
        return when if when is not None and when > anchor else None

    def count(
        self,
        anchor: dt.datetime,
        since: dt.datetime,
        now: dt.datetime,
        zone: dt.tzinfo = dt.UTC,
        *,
        cap: int,
    ) -> int:
        """How many times of the sequence from ``anchor`` fall in (``since``, ``now``], counting
        no further than ``cap`` (so a schedule missed for years costs ``cap`` steps)."""
        if self.every is not None:
            base = anchor.replace(microsecond=0)
            last = int((now - base).total_seconds()) // self.every
            first = max(int((since - base).total_seconds()) // self.every, 0) + 1
            return min(max(last - first + 1, 0), cap)
        n = 0
        when = self.next(since, zone)
        while when is not None and when <= now and n < cap:
            n += 1
            when = self.next(when, zone)
        return n


def _split_zone(spec: str) -> tuple[zoneinfo.ZoneInfo | None, str]:
    if not spec.startswith(("TZ=", "CRON_TZ=")):
        return None, spec
    head, _, rest = spec.partition(" ")
    name = head.partition("=")[2]
    try:
        return load_zone(name), rest.strip()
    except ZoneError as exc:
        raise ScheduleError(f"provided bad location {name}: {exc}") from None


def parse_schedule(spec: str) -> Schedule:
    """Parse ``spec`` as robfig/cron's ParseStandard does; ScheduleError names the problem."""
    if not spec.strip():
        raise ScheduleError("empty spec string")
    zone, body = _split_zone(spec.strip())
    if body.startswith("@"):
        if body.startswith("@every "):
            duration = body[len("@every ") :].strip()
            try:
                ns = parse_duration_ns(duration)
            except DurationError as exc:
                raise ScheduleError(f"failed to parse duration {body}: {exc}") from None
            return Schedule(spec, every=max(ns // 1_000_000_000, 1), zone=zone)
        expanded = MACROS.get(body)
        if expanded is None:
            raise ScheduleError(f"unrecognized descriptor: {body}")
        body = expanded
    fields = body.split()
    if len(fields) != len(_FIELDS):
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: {body!r}")
    parsed = [_parse_field(text, field) for text, field in zip(fields, _FIELDS, strict=True)]
    (minutes, _), (hours, _), (doms, dom_star), (months, _), (dows, dow_star) = parsed
    return Schedule(
        spec,
        minutes=minutes,
        hours=hours,
        doms=doms,
        months=months,
        dows=dows,
        dom_star=dom_star,
        dow_star=dow_star,
        zone=zone,
    )


def rfc3339(when: dt.datetime, zone: dt.tzinfo = dt.UTC) -> str:
    """``when`` in ``zone`` as Go's RFC3339 layout prints it: whole seconds, "Z" for UTC+0."""
    local = when.astimezone(zone)
    text = local.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if local.utcoffset() == dt.timedelta(0) else text


def job_name(cronjob: str, scheduled: dt.datetime) -> str:
    """The name of the Job a CronJob starts for ``scheduled``: ``<cronjob>-<Unix minutes>``, as
    Kubernetes' and Volcano's controllers name it, so one time never gets two Jobs."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"
