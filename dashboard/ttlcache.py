"""A small cache whose entries expire and whose size is bounded (pure: the clock is given).

The in-cluster dashboard keeps the API server's answers about tokens and access here for a few
seconds: enough that a page and its live stream do not ask again, short enough that a revoked
token or a removed RoleBinding stops showing within seconds. Every user is a possible attacker,
so the cache never grows past `max_entries`: the least recently used entry goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["TTLCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Entries live `ttl` seconds of `clock`; at most `max_entries` of them."""

    def __init__(self, *, ttl: float, max_entries: int, clock: Callable[[], float]) -> None:
        if ttl <= 0 or max_entries < 1:
            raise ValueError("ttl must be positive and max_entries at least 1")
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value if it is there and not expired (an expired one is dropped)."""
        found = self._entries.get(key)
        if found is None:
            return None
        expires, value = found
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V, ttl: float | None = None) -> None:
        """Keep `value` for `ttl` seconds (the cache's own unless given), evicting the least
        recently used entry when full."""
        self._entries[key] = (self._clock() + (self.ttl if ttl is None else ttl), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
