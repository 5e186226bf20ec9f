"""GPU cards of one node in Volcano's older sharing mode and what holds them: the arithmetic of
the deviceshare plugin with ``deviceshare.GPUSharingEnable`` or ``GPUNumberEnable`` (Volcano's
predicateGPUbyMemory and predicateGPUbyNumber, pkg/scheduler/api/devices/nvidia/gpushare).

A ``ShareLedger`` holds a node's cards (``caldera.api.gpushare.ShareCards``) and, by pod uid,
the cards each holder has and the memory it counts on each. The two views are those of
``scheduler.api.cards``: *idle* (every holder but the pipelined ones: a pod bound now must fit
it) and *future* (every holder but the releasing ones: a pipelined pod must fit it, so a
preemptor counts its victims' cards as free).

- Memory (``SHARING``): the pod takes one card, the lowest id whose free memory (its memory less
  what its holders ask, never below 0) covers the pod's request.
- Number (``NUMBER``): the pod takes that many idle cards (no holder at all), lowest ids first.

``fit`` never changes the ledger; ``take``, ``release`` and ``mark`` do. Under any sequence of
them, with ``take`` given only what ``fit`` returned in the same view, no card's memory is
over-committed and a card given whole has no other holder (unit/test_gpushare_cards.py checks
it with hypothesis).

Difference from Volcano, on purpose: whole cards are taken in id order (Volcano takes them in
Go's map order, which varies from run to run).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from caldera.api.gpushare import ShareAsk, ShareCards
from scheduler.api.cards import Refusal

SHARING: Final = "sharing"
NUMBER: Final = "number"

# The short reasons a node gives (counted in the fit error's histogram across nodes).
NO_MEMORY_FITS: Final = "no GPU card has the memory"
NO_IDLE_CARDS: Final = "not enough idle GPU cards"


@dataclass(frozen=True, slots=True)
class ShareFit:
    """The cards (positions in the ledger) a pod's request takes."""

    positions: tuple[int, ...]


@dataclass(slots=True)
class _Holder:
    positions: tuple[int, ...]
    memory: int  # counted on each of its cards
    whole: bool  # given its cards whole (number mode)
    state: str  # "held", "pipelined" or "releasing"


@dataclass(slots=True)
class ShareLedger:
    """A node's cards and their holders in one mode (see the module docstring)."""

    node: str
    cards: ShareCards
    mode: str
    holders: dict[str, _Holder] = field(default_factory=dict)
    version: int = 0  # counts the changes: equal versions, equal fits
    # (holders, memory) per card: by every holder, by the pipelined ones, by the releasing ones.
    _all: list[list[int]] = field(init=False)
    _pipelined: list[list[int]] = field(init=False)
    _releasing: list[list[int]] = field(init=False)

    def __post_init__(self) -> None:
        size = len(self.cards.ids)
        self._all = [[0, 0] for _ in range(size)]
        self._pipelined = [[0, 0] for _ in range(size)]
        self._releasing = [[0, 0] for _ in range(size)]

    # --- changes ------------------------------------------------------------------------------

    def _apply(self, holder: _Holder, sign: int) -> None:
        self.version += 1
        extra = {"pipelined": self._pipelined, "releasing": self._releasing}.get(holder.state)
        for position in holder.positions:
            for use in (self._all, extra) if extra is not None else (self._all,):
                use[position][0] += sign
                use[position][1] += sign * holder.memory

    def take(self, uid: str, positions: tuple[int, ...], memory: int, state: str = "held") -> None:
        """Count the cards for the pod ``uid`` (replacing what it held)."""
        self.release(uid)
        holder = _Holder(positions, memory, self.mode == NUMBER, state)
        self.holders[uid] = holder
        self._apply(holder, 1)

    def release(self, uid: str) -> tuple[int, ...] | None:
        """Stop counting the pod's cards; which it held, or None."""
        holder = self.holders.pop(uid, None)
        if holder is None:
            return None
        self._apply(holder, -1)
        return holder.positions

    def mark(self, uid: str, state: str) -> None:
        """Move a holder between held, pipelined and releasing."""
        holder = self.holders.get(uid)
        if holder is not None and holder.state != state:
            self._apply(holder, -1)
            holder.state = state
            self._apply(holder, 1)

    # --- reading ------------------------------------------------------------------------------

    def positions_of(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """The positions of the card ids this node has (others are dropped, as Volcano)."""
        where = {card: i for i, card in enumerate(self.cards.ids)}
        return tuple(where[i] for i in dict.fromkeys(ids) if i in where)

    def use(self, position: int, *, future: bool) -> tuple[int, int]:
        """(holders, memory) on a card in a view."""
        total = self._all[position]
        less = (self._releasing if future else self._pipelined)[position]
        return total[0] - less[0], total[1] - less[1]

    def free(self, position: int, *, future: bool) -> int:
        return max(self.cards.memory - self.use(position, future=future)[1], 0)

    def fit(self, ask: ShareAsk, *, future: bool = False) -> ShareFit | Refusal:
        """The cards the pod's request takes on this node, in a view; nothing changes."""
        if self.mode == NUMBER:
            return self._fit_number(ask.number, future)
        return self._fit_memory(ask.memory, future)

    def _fit_memory(self, memory: int, future: bool) -> ShareFit | Refusal:
        closest: tuple[int, int] | None = None  # (free memory, position) of the roomiest card
        for position in range(len(self.cards.ids)):
            free = self.free(position, future=future)
            if free >= memory:
                return ShareFit((position,))
            if closest is None or free > closest[0]:
                closest = (free, position)
        if closest is None:
            return Refusal(NO_MEMORY_FITS, f"node {self.node} has no healthy GPU card")
        card = self.cards.ids[closest[1]]
        return Refusal(
            NO_MEMORY_FITS,
            f"node {self.node}: card {card} has {closest[0]} gpu-memory free, pod asks {memory}",
        )

    def _fit_number(self, number: int, future: bool) -> ShareFit | Refusal:
        idle = [p for p in range(len(self.cards.ids)) if self.use(p, future=future)[0] == 0]
        if len(idle) < number:
            return Refusal(
                NO_IDLE_CARDS,
                f"node {self.node} has {len(idle)} GPU cards idle, pod asks {number}",
            )
        return ShareFit(tuple(idle[:number]))

    def overcommitted(self, *, future: bool = False) -> Iterator[str]:
        """Every card whose use in a view breaks the mode's rule (none, when the ledger is kept
        right): memory above the card's (in the memory mode), or a card given whole shared."""
        skip = "releasing" if future else "pipelined"
        for position, card in enumerate(self.cards.ids):
            holders, memory = self.use(position, future=future)
            if self.mode == SHARING and memory > self.cards.memory:
                yield f"card {card}: {memory}/{self.cards.memory} gpu-memory"
            whole = any(
                h.whole and h.state != skip and position in h.positions
                for h in self.holders.values()
            )
            if whole and holders > 1:
                yield f"card {card}: given whole, held by {holders} pods"
            if holders < 0 or memory < 0:
                yield f"card {card}: negative use"
