"""GPU cards of one node and what holds them: the arithmetic of the deviceshare plugin
(Volcano's checkNodeGPUSharingPredicateAndScore, pkg/scheduler/api/devices/nvidia/vgpu).

A ``Ledger`` holds a node's cards (``caldera.api.vgpu.NodeCards``) and, by pod uid, the
grants each holder has: per asking container, (card, memory, cores). Two views of use:

- *idle*: every holder but the pipelined ones (what is on the cards now, releasing pods
  included): a pod bound now must fit it;
- *future*: every holder but the releasing ones (what will be once evictions complete): a
  pipelined pod must fit it, so a preemptor counts its victims' cards as free.

``fit`` is a purely computational function of the ledger: it never changes it. ``take`` and
``release`` change it; under any sequence of them, with ``take`` given only what ``fit``
returned for the same view, no card's use in that view exceeds its memory, 100 cores or its
split count (unit/test_cards.py checks it with hypothesis).

The checks per card, in Volcano's order: the card accepts the pod's UUID and type filters;
it has a share left; with ``volcano.sh/vgpu-podgroup-policy: spread``, no pod of the same
group uses it; its free memory covers the request (a percentage of the card's memory, rounded
down, when one is given); its cores plus the request stay within 100; a request of 100 cores
takes only an unshared card; a request of 0 cores takes no card whose cores are all used.
Cards are tried by policy: binpack the most used memory first, spread the fewest holders
first, none the last registered card first; each in index order among equals.

A pod asking plain ``nvidia.com/gpu`` (no vGPU resource) on a node with registered cards takes
that many whole cards with nothing on them (the NVIDIA device plugin gives it whole cards; the
scheduler cannot know which, so it counts the first free ones), so vGPU pods and whole-GPU pods
on one node are counted against each other (volcano#4712).

Differences from Volcano, on purpose: an unhealthy card is never chosen (Volcano does not
check); spread scores 100 for each card the pod is the first on (Volcano adds the pod before
scoring, so its spread score is always 0 and spread does not steer nodes). A node in MIG
mode gets a ``scheduler.api.mig_cards.MigLedger``, which places pods on MIG instances behind
this interface; this ledger refuses MIG (``MIG_REFUSAL``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from caldera.api.vgpu import (
    HAMI_CORE,
    MIG,
    NO_PERCENTAGE,
    NVIDIA,
    Card,
    CardFilter,
    ContainerDevice,
    ContainerRequest,
    NodeCards,
    PodDevices,
)
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus

BINPACK: Final = "binpack"
SPREAD: Final = "spread"
POLICIES: Final = ("", BINPACK, SPREAD)
FULL_CORES: Final = 100

# The short reasons a node gives (counted in the fit error's histogram across nodes).
FEWER_CARDS: Final = "not enough GPU cards"
MODE_MISMATCH: Final = "vGPU mode differs"
MIG_REFUSAL: Final = "MIG vGPU is not supported"
NO_UUID_MATCH: Final = "no GPU matches the pod's UUID constraints"
NO_CARD_FITS: Final = "no GPU card fits the vGPU request"
NO_WHOLE_CARD: Final = "no whole GPU card free"

_ANY_CARD: Final = CardFilter()
Grant = tuple[int, int, int]  # (card position in the ledger, memory MiB, cores)
Grants = tuple[tuple[Grant, ...], ...]  # per asking container


def holder_state(task: TaskInfo) -> str:
    """The view a task's cards count in: a leaving victim's as releasing, a pipelined
    preemptor's as pipelined, any other's as held (both deviceshare modes' ledgers)."""
    if task.status == TaskStatus.RELEASING:
        return "releasing"
    if task.status == TaskStatus.PIPELINED:
        return "pipelined"
    return "held"


def beyond_idle(task: TaskInfo, node: NodeInfo) -> bool:
    """Whether the pod's requests pass the node's idle resources, so it would be pipelined
    there and its cards are counted in the future view (both deviceshare modes)."""
    alloc, used = node.allocatable, node.used
    return any(n > alloc.get(r) - used.get(r) for r, n in task.init_resreq.items())


@dataclass(frozen=True, slots=True)
class PodAsk:
    """What one pod asks of a node's cards (``ask_of`` in the plugin builds it)."""

    containers: tuple[ContainerRequest, ...] = ()
    whole: int = 0  # plain nvidia.com/gpu cards, when no container asks vGPU
    mode: str | None = None  # the pod's volcano.sh/vgpu-mode
    filter: CardFilter = _ANY_CARD
    group: str = ""  # the pod's group, with the podgroup spread policy only

    @property
    def asks(self) -> bool:
        return bool(self.containers) or self.whole > 0


@dataclass(frozen=True, slots=True)
class Fit:
    """Where a pod's request fits: its grants and the node's score for it."""

    grants: Grants
    score: float


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a pod does not fit: a short reason and, for a user, the card that came closest."""

    reason: str
    detail: str


@dataclass(slots=True)
class _Use:
    number: int = 0
    memory: int = 0
    cores: int = 0

    def add(self, memory: int, cores: int, sign: int) -> None:
        self.number += sign
        self.memory += sign * memory
        self.cores += sign * cores


@dataclass(slots=True)
class _Holder:
    grants: Grants
    group: str
    state: str  # "held", "pipelined" or "releasing"


@dataclass(slots=True)
class Ledger:
    """A node's cards and their holders (see the module docstring)."""

    node: str
    cards: tuple[Card, ...]
    mode: str = HAMI_CORE
    holders: dict[str, _Holder] = field(default_factory=dict)
    version: int = 0  # counts the changes: equal versions, equal fits
    # Use per card: by every holder, by the pipelined ones, by the releasing ones.
    _all: list[_Use] = field(init=False)
    _pipelined: list[_Use] = field(init=False)
    _releasing: list[_Use] = field(init=False)

    def __post_init__(self) -> None:
        self._all = [_Use() for _ in self.cards]
        self._pipelined = [_Use() for _ in self.cards]
        self._releasing = [_Use() for _ in self.cards]

    @classmethod
    def of(cls, node: str, registered: NodeCards) -> Ledger:
        return cls(node, registered.cards, registered.mode)

    # --- changes ------------------------------------------------------------------------------

    def _apply(self, holder: _Holder, sign: int) -> None:
        self.version += 1
        extra = {"pipelined": self._pipelined, "releasing": self._releasing}.get(holder.state)
        for container in holder.grants:
            for position, memory, cores in container:
                self._all[position].add(memory, cores, sign)
                if extra is not None:
                    extra[position].add(memory, cores, sign)

    def take(self, uid: str, grants: Grants, group: str = "", state: str = "held") -> None:
        """Count ``grants`` for the pod ``uid`` (replacing what it held)."""
        self.release(uid)
        holder = _Holder(grants, group, state)
        self.holders[uid] = holder
        self._apply(holder, 1)

    def release(self, uid: str) -> Grants | None:
        """Stop counting the pod's grants; what it held, or None."""
        holder = self.holders.pop(uid, None)
        if holder is None:
            return None
        self._apply(holder, -1)
        return holder.grants

    def mark(self, uid: str, state: str) -> None:
        """Move a holder between held, pipelined and releasing."""
        holder = self.holders.get(uid)
        if holder is not None and holder.state != state:
            self._apply(holder, -1)
            holder.state = state
            self._apply(holder, 1)

    def take_fit(self, uid: str, fit: Fit, group: str = "", state: str = "held") -> None:
        """Count what ``fit`` (from this ledger's ``fit``) gives the pod ``uid``."""
        self.take(uid, fit.grants, group, state)

    def copy_with(self, uids: Iterable[str]) -> Ledger:
        """A ledger of the same cards holding only these holders (preempt's "without these
        victims")."""
        copy = Ledger(self.node, self.cards, self.mode)
        for uid in uids:
            holder = self.holders.get(uid)
            if holder is not None:
                copy.take(uid, holder.grants, holder.group, holder.state)
        return copy

    # --- reading ------------------------------------------------------------------------------

    def devices_of(self, uid: str) -> PodDevices:
        """What the pod ``uid`` holds, as the annotation's container devices."""
        return self.devices(self.holders[uid].grants)

    def use(self, position: int, *, future: bool) -> tuple[int, int, int]:
        """(holders, memory, cores) on a card in a view."""
        total = self._all[position]
        less = (self._releasing if future else self._pipelined)[position]
        return total.number - less.number, total.memory - less.memory, total.cores - less.cores

    def _groups_on(self, position: int, future: bool) -> set[str]:
        skip = "releasing" if future else "pipelined"
        return {
            h.group
            for h in self.holders.values()
            if h.group and h.state != skip and _uses(h.grants, position)
        }

    def devices(self, grants: Grants) -> PodDevices:
        """The grants as the annotation's container devices."""
        return tuple(
            tuple(
                ContainerDevice(self.cards[pos].uuid, NVIDIA, memory, cores)
                for pos, memory, cores in container
            )
            for container in grants
        )

    def fit(self, ask: PodAsk, policy: str, *, future: bool = False) -> Fit | Refusal:
        """Where the pod's request goes on this node's cards, in a view; nothing changes."""
        if ask.whole and not ask.containers:
            return self._fit_whole(ask.whole, future)
        if ask.mode is not None and ask.mode != self.mode:
            return Refusal(
                MODE_MISMATCH,
                f"pod requires vGPU mode {ask.mode}, node {self.node} is in {self.mode}",
            )
        if self.mode == MIG:
            return Refusal(MIG_REFUSAL, f"node {self.node} shares its cards by MIG")
        less = self._releasing if future else self._pipelined
        use = [
            [a.number - b.number, a.memory - b.memory, a.cores - b.cores]
            for a, b in zip(self._all, less, strict=True)
        ]
        groups: dict[int, set[str]] = {}
        grants: list[tuple[Grant, ...]] = []
        score = 0.0
        for request in ask.containers:
            if request.number > len(self.cards):
                return Refusal(
                    FEWER_CARDS,
                    f"node {self.node} has {len(self.cards)} GPU cards, pod asks {request.number}",
                )
            chosen: list[Grant] = []
            left = request.number
            matched = False
            closest: tuple[int, str] | None = None  # (free memory, why) of the best refusal
            for i in _order(use, policy):
                card = self.cards[i]
                if not ask.filter.uuid_allows(card.uuid):
                    continue
                matched = True
                why = self._refuse(card, use[i], request, ask, groups, i, future)
                if why is not None:
                    free = card.memory - use[i][1]
                    if closest is None or free > closest[0]:
                        closest = (free, why)
                    continue
                memory = _memory(card, request)
                before = use[i][0]
                use[i][0] += 1
                use[i][1] += memory
                use[i][2] += request.cores
                if left > 0:
                    left -= 1
                    chosen.append((i, memory, request.cores))
                    score += _score(policy, card, use[i][1], before)
                if left == 0:
                    break
            if left > 0:
                if ask.filter.by_uuid and not matched:
                    return Refusal(
                        NO_UUID_MATCH, f"node {self.node}: no card matches the pod's UUID lists"
                    )
                detail = closest[1] if closest is not None else "no card accepts the pod"
                return Refusal(NO_CARD_FITS, f"node {self.node}: {detail}")
            grants.append(tuple(chosen))
        return Fit(tuple(grants), score)

    def _refuse(
        self,
        card: Card,
        used: list[int],
        request: ContainerRequest,
        ask: PodAsk,
        groups: dict[int, set[str]],
        position: int,
        future: bool,
    ) -> str | None:
        """Why this card does not take one share of the request, or None."""
        number, memory_used, cores_used = used
        name = f"card {card.uuid}"
        if not card.healthy:
            return f"{name} is unhealthy"
        if number >= card.split:
            return f"{name} is shared by {number} pods of {card.split}"
        if ask.group:
            if position not in groups:
                groups[position] = self._groups_on(position, future)
            if ask.group in groups[position]:
                return f"{name} already holds a pod of group {ask.group}"
        memory = _memory(card, request)
        if card.memory - memory_used < memory:
            return f"{name} has {card.memory - memory_used} MiB free, pod asks {memory}"
        if cores_used + request.cores > FULL_CORES:
            return f"{name} has {FULL_CORES - cores_used} cores free, pod asks {request.cores}"
        if request.cores == FULL_CORES and number > 0:
            return f"{name} is shared by {number} pods, pod asks it whole"
        if cores_used == FULL_CORES and request.cores == 0:
            return f"{name} has all its cores taken"
        if not ask.filter.type_allows(card.type):
            return f"{name} of type {card.type} is not a type the pod accepts"
        return None

    def _fit_whole(self, count: int, future: bool) -> Fit | Refusal:
        chosen: list[Grant] = []
        for i, card in enumerate(self.cards):
            if card.healthy and self.use(i, future=future)[0] == 0:
                chosen.append((i, card.memory, FULL_CORES))
                if len(chosen) == count:
                    return Fit((tuple(chosen),), 0.0)
        return Refusal(
            NO_WHOLE_CARD,
            f"node {self.node} has {len(chosen)} GPU cards free as a whole, pod asks {count}",
        )

    def overcommitted(self, *, future: bool = False) -> Iterator[str]:
        """Every card whose use in a view exceeds it (none, when the ledger is kept right)."""
        for i, card in enumerate(self.cards):
            number, memory, cores = self.use(i, future=future)
            if number > card.split or memory > card.memory or cores > FULL_CORES:
                yield f"{card.uuid}: {number}/{card.split} pods, {memory}/{card.memory} MiB"
            if number < 0 or memory < 0 or cores < 0:
                yield f"{card.uuid}: negative use"

    def free_memory(self, *, future: bool = False) -> list[int]:
        return [c.memory - self.use(i, future=future)[1] for i, c in enumerate(self.cards)]


def _uses(grants: Grants, position: int) -> bool:
    return any(p == position and (m > 0 or c > 0) for container in grants for p, m, c in container)


def _memory(card: Card, request: ContainerRequest) -> int:
    """The memory the request takes on this card: the percentage of the card when given."""
    if request.percentage != NO_PERCENTAGE:
        return card.memory * request.percentage // 100
    return request.memory


def _order(use: Sequence[list[int]], policy: str) -> list[int]:
    """The cards in the order the policy tries them (Volcano's sortedDeviceIndicesByPolicy)."""
    positions = range(len(use))
    if policy == BINPACK:
        return sorted(positions, key=lambda i: (-use[i][1], i))
    if policy == SPREAD:
        return sorted(positions, key=lambda i: (use[i][0], i))
    return list(reversed(positions))


def _score(policy: str, card: Card, memory_after: int, holders_before: int) -> float:
    if policy == BINPACK:
        return 100.0 * memory_after / card.memory if card.memory else 0.0
    if policy == SPREAD:
        return 100.0 if holders_before == 0 else 0.0
    return 0.0
