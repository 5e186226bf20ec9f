"""Ages and amounts as a person reads them on a page: pure functions, no I/O."""

from __future__ import annotations

import datetime as dt
from typing import Final

from caldera.api.duration import human_duration
from caldera.api.meta import parse_time

__all__ = ["age", "amount", "parse_timestamp"]

_GIB: Final = 1024**3
_BYTE_RESOURCES: Final = frozenset({"memory", "ephemeral-storage", "storage"})


def parse_timestamp(value: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or malformed (a page
    shows what it can rather than failing on one bad field)."""
    if not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def age(value: str | None, now: dt.datetime) -> str:
    """How long ago `value` was, as kubectl prints ages (``45s``, ``3m20s``, ``2d4h``); "" when
    unknown, and ``0s`` for a time ahead of this clock (another node's skew)."""
    when = parse_timestamp(value)
    if when is None:
        return ""
    return human_duration(max(now - when, dt.timedelta(0)))


def amount(milli: int, resource: str) -> str:
    """An amount in thousandths as a short readable number: memory in GiB, CPU in cores, the
    rest as counts (``1.5``, ``64Gi``, ``4``)."""
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        gib = milli / 1000 / _GIB
        return f"{gib:.0f}Gi" if gib == int(gib) or gib >= 100 else f"{gib:.1f}Gi"
    units = milli / 1000
    if units == int(units):
        return str(int(units))
    return f"{units:.2f}".rstrip("0").rstrip(".")
