"""Go durations as Kubernetes and Volcano write them (`metav1.Duration`, a policy's
``timeout``, a Job's ``runningDuration``): `parse_duration` is Go's `time.ParseDuration` and
`format_duration` Go's `Duration.String`, in seconds; the ``_ns`` forms are exact, in whole
nanoseconds (an int64, as Go's time.Duration). `human_duration` is kubectl's age column
(apimachinery's ``duration.HumanDuration``), which the CLI and the dashboard print.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

__all__ = [
    "DurationError",
    "format_duration",
    "format_duration_ns",
    "human_duration",
    "parse_duration",
    "parse_duration_ns",
]

_NS_PER_UNIT: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # U+00B5 micro sign
    "\u03bcs": 1_000,  # U+03BC Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS: Final = (1 << 63) - 1  # Go's time.Duration is an int64 of nanoseconds
_DIGITS: Final = "0123456789"


class DurationError(ValueError):
    """A string that Go's time.ParseDuration rejects."""


def _leading_digits(s: str) -> str:
    end = 0
    while end < len(s) and s[end] in _DIGITS:
        end += 1
    return s[:end]


def parse_duration(value: str) -> float:
    """Parse a Go duration string ("300ms", "-1.5h", "2h45m", "1µs") into seconds.

    Same grammar as Go's time.ParseDuration: an optional sign, then one or more decimal numbers
    each followed by a unit (ns, us, µs, ms, s, m, h); "0" alone needs no unit. Raises
    DurationError, naming the input and the problem, for anything Go rejects.
    """
    return parse_duration_ns(value) / 1e9


def parse_duration_ns(value: str) -> int:
    """Like `parse_duration`, but exact: whole nanoseconds, as Go's time.Duration holds them."""

    def fail(why: str) -> DurationError:
        return DurationError(f"invalid duration {value!r}: {why}")

    s = value
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise fail("empty")
    total = 0
    while s:
        if s[0] != "." and s[0] not in _DIGITS:
            raise fail(f"expected a number at {s!r}")
        whole = _leading_digits(s)
        s = s[len(whole) :]
        fraction = ""
        if s.startswith("."):
            fraction = _leading_digits(s[1:])
            s = s[1 + len(fraction) :]
        if not whole and not fraction:
            raise fail("a number needs at least one digit")
        end = 0
        while end < len(s) and s[end] != "." and s[end] not in _DIGITS:
            end += 1
        unit, s = s[:end], s[end:]
        if not unit:
            raise fail("missing unit (one of ns, us, ms, s, m, h)")
        scale = _NS_PER_UNIT.get(unit)
        if scale is None:
            raise fail(f"unknown unit {unit!r} (one of ns, us, ms, s, m, h)")
        total += int(whole or "0") * scale
        if fraction:
            total += int(fraction) * scale // 10 ** len(fraction)
        if total > _MAX_NS + (1 if negative else 0):
            raise fail("out of range (more than about 292 years)")
    return -total if negative else total


def _fraction(value: int, digits: int) -> tuple[str, int]:
    """Split `value` into its last `digits` digits as ".ddd" (trailing zeros cut) and the rest."""
    div = 10**digits
    frac = f"{value % div:0{digits}d}".rstrip("0")
    return ("." + frac if frac else ""), value // div


def format_duration(seconds: float) -> str:
    """Format seconds as Go's Duration.String does: "1h2m3.5s", "1.5ms", "0s"."""
    return format_duration_ns(round(seconds * 1e9))


def format_duration_ns(ns: int) -> str:
    """Like `format_duration`, but exact: from whole nanoseconds."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        frac, whole = _fraction(u, 3)
        return f"{sign}{whole}{frac}\u00b5s"
    if u < 1_000_000_000:
        frac, whole = _fraction(u, 6)
        return f"{sign}{whole}{frac}ms"
    frac, secs = _fraction(u, 9)
    out = f"{secs % 60}{frac}s"
    minutes = secs // 60
    if minutes:
        out = f"{minutes % 60}m{out}"
        hours = minutes // 60
        if hours:
            out = f"{hours}h{out}"
    return sign + out


def human_duration(delta: dt.timedelta) -> str:
    """kubectl's HumanDuration: two significant units for short spans, one for long ones."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // (24 * 365), (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // (24 * 365)}y"
