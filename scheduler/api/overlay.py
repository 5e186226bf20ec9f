"""A map kept with the snapshot, read through a session's own changes.

A plugin that opens a session on per-job values kept across sessions
(``Incremental.job_map``) changes a few of them as the session allocates; copying every job's
value on the first change would cost what the cluster holds, not what changed. An ``Overlay``
writes the session's values over the kept map instead and never changes the map underneath.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar, overload

V = TypeVar("V")
D = TypeVar("D")
_MISSING = object()


class Overlay(Mapping[str, V]):
    """``base`` (read only) with the values written here on top of it."""

    __slots__ = ("base", "top")

    def __init__(self, base: Mapping[str, V]) -> None:
        self.base = base
        self.top: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        top = self.top
        return top[key] if key in top else self.base[key]

    @overload
    def get(self, key: str) -> V | None: ...

    @overload
    def get(self, key: str, default: V | D) -> V | D: ...

    def get(self, key: str, default: object = None) -> object:
        value = self.top.get(key, _MISSING)
        return self.base.get(key, default) if value is _MISSING else value

    def __setitem__(self, key: str, value: V) -> None:
        self.top[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self.top or key in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from (key for key in self.top if key not in self.base)

    def __len__(self) -> int:
        return len(self.base) + sum(1 for key in self.top if key not in self.base)

    def merged(self) -> dict[str, V]:
        """The values as one plain map."""
        values = dict(self.base)
        values.update(self.top)
        return values
