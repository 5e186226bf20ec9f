"""GPU cards shared by MIG: the arithmetic of Volcano's deviceshare in ``mig`` mode (Volcano's
pkg/scheduler/api/devices/nvidia/vgpu/mig.go), behind the card ledger's interface
(``scheduler.api.cards.Ledger``).

A node whose register annotation ends with a card in ``mig`` mode gets a ``MigLedger``. Each
card has the geometries the device configuration knows for its type
(``caldera.api.mig.DeviceConfig``); each holder has, beside its grants (card, memory, cores),
a ``Placement`` per grant: the geometry and the position of the MIG instance it holds, and the
memory its annotation names.

- A card takes a pod's share when the hami-core checks pass (health, type and UUID lists,
  split count, memory counted as the instances given, cores) and it has a free instance of at
  least the asked memory (times ``gpuMemoryFactor``): the smallest such kind first, the lowest
  free position of that kind. The card counts the instance's memory (divided by the factor),
  as Volcano does.
- The geometry: a card that nobody holds (in any state: a leaving pod still has its instance)
  takes the first geometry, in the configuration's order, that has such an instance; a card
  held by anyone keeps the geometry its holders use (Volcano's dynamic MIG repartitions only an
  empty card). A holder whose instance does not read (a plain UUID, a group the configuration
  no longer names, a whole-GPU pod) blocks the card: its layout is unknown.
- A plain ``nvidia.com/gpu`` pod takes only cards nobody holds, in any state.
- Positions are counted per view (``Ledger``'s idle and future views): a preemptor may be
  given the instance its victim is leaving.

Invariants (unit/test_mig_cards.py checks them with hypothesis): within a view no instance is
given twice; the holders of a card all use one geometry; nothing is over-committed.

Differences from Volcano, on purpose: a card in use takes any free instance of its geometry
(Volcano only kinds already in use on it); the instances one pod is given are all distinct
(Volcano's trial does not record them, so two containers could be named the same instance);
a mig card whose type no geometry names is not shared (Volcano shares the node by hami-core);
a card emptied takes a new geometry at once (Volcano keeps the last one until it reads the
node again).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from caldera.api.mig import DeviceConfig, Geometry, decode_mig_id, encode_mig_id
from caldera.api.vgpu import MIG, NVIDIA, ContainerDevice, NodeCards, PodDevices, decode_pod_devices
from scheduler.api.cards import (
    FEWER_CARDS,
    FULL_CORES,
    MODE_MISMATCH,
    NO_CARD_FITS,
    NO_UUID_MATCH,
    NO_WHOLE_CARD,
    Fit,
    Grant,
    Ledger,
    PodAsk,
    Refusal,
    _memory,
    _order,
    _score,
)

NO_MIG_INSTANCE: Final = "no MIG instance fits the vGPU request"
BLOCKED: Final = -1  # a placement whose instance is unknown: the card's layout is unknown


@dataclass(frozen=True, slots=True)
class Placement:
    """The MIG instance one grant holds: the geometry (its index in the card's geometries,
    ``BLOCKED`` when unknown), the instance's position in it, and the MiB the annotation names."""

    geometry: int
    position: int
    asked: int


Placements = tuple[tuple[Placement, ...], ...]  # parallel to the grants


@dataclass(frozen=True, slots=True)
class MigFit(Fit):
    """A fit on MIG cards: the grants and their instances."""

    placements: Placements


@dataclass(slots=True)
class _CardState:
    """One card in one view, while a fit is worked out."""

    geometry: int | None  # the geometry its holders use; None: nobody holds it
    taken: set[int]  # positions held in the view


@dataclass(slots=True)
class MigLedger(Ledger):
    """A MIG node's cards, their geometries and holders (see the module docstring)."""

    geometries: tuple[tuple[Geometry, ...], ...] = ()  # per card
    memory_factor: int = 1
    problem: str = ""  # why no geometry is known, for a user
    placements: dict[str, Placements] = field(default_factory=dict)

    @classmethod
    def of_mig(cls, node: str, registered: NodeCards, config: DeviceConfig) -> MigLedger:
        geometries = tuple(config.geometries_for(card.type) for card in registered.cards)
        return cls(
            node,
            registered.cards,
            MIG,
            geometries=geometries,
            memory_factor=max(config.memory_factor, 1),
            problem=config.problem,
        )

    # --- changes ------------------------------------------------------------------------------

    def take(
        self, uid: str, grants: tuple[tuple[Grant, ...], ...], group: str = "", state: str = "held"
    ) -> None:
        """Count grants without instances (a whole-GPU pod): they block their cards."""
        Ledger.take(self, uid, grants, group, state)
        self.placements.pop(uid, None)

    def take_fit(self, uid: str, fit: Fit, group: str = "", state: str = "held") -> None:
        Ledger.take(self, uid, fit.grants, group, state)
        if isinstance(fit, MigFit):
            self.placements[uid] = fit.placements
        else:
            self.placements.pop(uid, None)

    def release(self, uid: str) -> tuple[tuple[Grant, ...], ...] | None:
        self.placements.pop(uid, None)
        return Ledger.release(self, uid)

    def copy_with(self, uids: Iterable[str]) -> MigLedger:
        copy = MigLedger(
            self.node,
            self.cards,
            self.mode,
            geometries=self.geometries,
            memory_factor=self.memory_factor,
            problem=self.problem,
        )
        for uid in uids:
            holder = self.holders.get(uid)
            if holder is None:
                continue
            Ledger.take(copy, uid, holder.grants, holder.group, holder.state)
            if uid in self.placements:
                copy.placements[uid] = self.placements[uid]
        return copy

    # --- reading ------------------------------------------------------------------------------

    def devices_of(self, uid: str) -> PodDevices:
        """What the pod holds, each instance named ``uuid[group-position]``."""
        grants = self.holders[uid].grants
        placed = self.placements.get(uid)
        if placed is None:
            return self.devices(grants)
        return tuple(
            tuple(
                ContainerDevice(self._instance_name(pos, p), NVIDIA, p.asked, cores)
                for (pos, _memory_counted, cores), p in zip(container, places, strict=True)
            )
            for container, places in zip(grants, placed, strict=True)
        )

    def _instance_name(self, position: int, placement: Placement) -> str:
        card = self.cards[position]
        if placement.geometry == BLOCKED:
            return card.uuid
        geometry = self.geometries[position][placement.geometry]
        return encode_mig_id(card.uuid, geometry.group, placement.position)

    def held_fit(self, text: str) -> MigFit | None:
        """What an ids annotation names on this node's cards (Volcano's AddPod in MIG mode);
        None when it names none. An instance that does not read blocks its card."""
        positions = {card.uuid: i for i, card in enumerate(self.cards)}
        grants: list[tuple[Grant, ...]] = []
        placements: list[tuple[Placement, ...]] = []
        for container in decode_pod_devices(text):
            found: list[Grant] = []
            places: list[Placement] = []
            for device in container:
                named = decode_mig_id(device.uuid)
                uuid = device.uuid if named is None else named[0]
                position = positions.get(uuid)
                if position is None:
                    continue
                placement = self._read_placement(position, named, device.memory)
                memory = device.memory
                if placement.geometry != BLOCKED:
                    geometry = self.geometries[position][placement.geometry]
                    kind = geometry.instances[geometry.kind_at(placement.position)]
                    memory = kind.memory // self.memory_factor
                found.append((position, memory, device.cores))
                places.append(placement)
            grants.append(tuple(found))
            placements.append(tuple(places))
        if not any(grants):
            return None
        return MigFit(tuple(grants), 0.0, tuple(placements))

    def _read_placement(
        self, position: int, named: tuple[str, str, int] | None, asked: int
    ) -> Placement:
        if named is None:
            return Placement(BLOCKED, 0, asked)
        _, group, at = named
        for index, geometry in enumerate(self.geometries[position]):
            if geometry.group == group and 0 <= at < geometry.size:
                return Placement(index, at, asked)
        return Placement(BLOCKED, 0, asked)

    def _cards_in_view(self, future: bool) -> list[_CardState]:
        """Each card's geometry (from every holder) and its positions held in the view."""
        states = [_CardState(None, set()) for _ in self.cards]
        skip = "releasing" if future else "pipelined"
        for uid, holder in self.holders.items():
            placed = self.placements.get(uid)
            for c, container in enumerate(holder.grants):
                for k, (position, _counted, _cores) in enumerate(container):
                    state = states[position]
                    placement = placed[c][k] if placed is not None else None
                    if placement is None or placement.geometry == BLOCKED:
                        state.geometry = BLOCKED
                        continue
                    if state.geometry is None:
                        state.geometry = placement.geometry
                    elif state.geometry != placement.geometry:
                        state.geometry = BLOCKED  # not reached while the ledger is kept right
                    if holder.state != skip:
                        state.taken.add(placement.position)
        return states

    def _pick(self, position: int, state: _CardState, asked: int) -> tuple[int, int, int] | None:
        """(geometry, instance position, instance MiB) for ``asked`` MiB on a card: the first
        geometry allowed that has a free instance big enough, its smallest such kind, the
        lowest free position of it (Volcano's findMatch and pickFromGroup)."""
        if state.geometry == BLOCKED:
            return None
        need = asked * self.memory_factor
        allowed = self.geometries[position]
        choices = range(len(allowed)) if state.geometry is None else (state.geometry,)
        for g in choices:
            geometry = allowed[g]
            kinds = sorted(
                range(len(geometry.instances)), key=lambda k: (geometry.instances[k].memory, k)
            )
            for kind in kinds:
                instance = geometry.instances[kind]
                if instance.memory < need:
                    continue
                first = geometry.first_position(kind)
                for at in range(first, first + instance.count):
                    if at not in state.taken:
                        return g, at, instance.memory
        return None

    def _no_instance(self, position: int, state: _CardState, asked: int) -> str:
        card = self.cards[position]
        name = f"card {card.uuid}"
        if not self.geometries[position]:
            why = f"{name} of type {card.type} has no known MIG geometry"
            return f"{why} ({self.problem})" if self.problem else why
        if state.geometry == BLOCKED:
            return f"{name} is held by a pod whose MIG instance does not read"
        if state.geometry is None:
            return f"{name} has no MIG instance of {asked * self.memory_factor} MiB or more"
        group = self.geometries[position][state.geometry].group
        return (
            f"{name} is partitioned as {group}: no free MIG instance of "
            f"{asked * self.memory_factor} MiB or more"
        )

    def fit(self, ask: PodAsk, policy: str, *, future: bool = False) -> Fit | Refusal:
        """Where the pod's request goes on this node's MIG instances, in a view."""
        if ask.whole and not ask.containers:
            return self._fit_whole(ask.whole, future)
        if ask.mode is not None and ask.mode != self.mode:
            return Refusal(
                MODE_MISMATCH,
                f"pod requires vGPU mode {ask.mode}, node {self.node} is in {self.mode}",
            )
        less = self._releasing if future else self._pipelined
        use = [
            [a.number - b.number, a.memory - b.memory, a.cores - b.cores]
            for a, b in zip(self._all, less, strict=True)
        ]
        cards = self._cards_in_view(future)
        groups: dict[int, set[str]] = {}
        grants: list[tuple[Grant, ...]] = []
        placements: list[tuple[Placement, ...]] = []
        score = 0.0
        for request in ask.containers:
            if request.number > len(self.cards):
                return Refusal(
                    FEWER_CARDS,
                    f"node {self.node} has {len(self.cards)} GPU cards, pod asks {request.number}",
                )
            chosen: list[Grant] = []
            places: list[Placement] = []
            left = request.number
            matched = False
            closest: tuple[int, str, str] | None = None  # (free memory, reason, why)
            for i in _order(use, policy):
                card = self.cards[i]
                if not ask.filter.uuid_allows(card.uuid):
                    continue
                matched = True
                free = card.memory - use[i][1]
                why = self._refuse(card, use[i], request, ask, groups, i, future)
                asked = _memory(card, request)
                picked = None if why is not None else self._pick(i, cards[i], asked)
                if picked is None:
                    reason = NO_CARD_FITS
                    if why is None:
                        why, reason = self._no_instance(i, cards[i], asked), NO_MIG_INSTANCE
                    if closest is None or free > closest[0]:
                        closest = (free, reason, why)
                    continue
                geometry, at, instance_memory = picked
                counted = instance_memory // self.memory_factor
                before = use[i][0]
                use[i][0] += 1
                use[i][1] += counted
                use[i][2] += request.cores
                cards[i].geometry = geometry
                cards[i].taken.add(at)
                if left > 0:
                    left -= 1
                    chosen.append((i, counted, request.cores))
                    places.append(Placement(geometry, at, asked))
                    score += _score(policy, card, use[i][1], before)
                if left == 0:
                    break
            if left > 0:
                if ask.filter.by_uuid and not matched:
                    return Refusal(
                        NO_UUID_MATCH, f"node {self.node}: no card matches the pod's UUID lists"
                    )
                if closest is None:
                    return Refusal(NO_CARD_FITS, f"node {self.node}: no card accepts the pod")
                return Refusal(closest[1], f"node {self.node}: {closest[2]}")
            grants.append(tuple(chosen))
            placements.append(tuple(places))
        return MigFit(tuple(grants), score, tuple(placements))

    def _fit_whole(self, count: int, future: bool) -> Fit | Refusal:
        """Whole cards for a plain ``nvidia.com/gpu`` pod: only cards nobody holds, in any
        state (a card whose holders are leaving keeps its geometry until they have gone)."""
        busy = {position for h in self.holders.values() for c in h.grants for position, _, _ in c}
        chosen: list[Grant] = []
        for i, card in enumerate(self.cards):
            if card.healthy and i not in busy:
                chosen.append((i, card.memory, FULL_CORES))
                if len(chosen) == count:
                    return Fit((tuple(chosen),), 0.0)
        return Refusal(
            NO_WHOLE_CARD,
            f"node {self.node} has {len(chosen)} GPU cards nobody holds, pod asks {count}",
        )

    def overcommitted(self, *, future: bool = False) -> Iterator[str]:
        """Every card over-committed in a view, given an instance twice in it, or holding two
        geometries (none, when the ledger is kept right)."""
        yield from Ledger.overcommitted(self, future=future)
        skip = "releasing" if future else "pipelined"
        seen: dict[int, set[tuple[int, int]]] = {}
        geometries: dict[int, set[int]] = {}
        for uid, holder in self.holders.items():
            placed = self.placements.get(uid)
            if placed is None:
                continue
            for container, places in zip(holder.grants, placed, strict=True):
                for (position, _counted, _cores), placement in zip(container, places, strict=True):
                    if placement.geometry == BLOCKED:
                        continue
                    geometries.setdefault(position, set()).add(placement.geometry)
                    if holder.state == skip:
                        continue
                    slot = (placement.geometry, placement.position)
                    if slot in seen.setdefault(position, set()):
                        yield f"{self.cards[position].uuid}: MIG instance {slot} given twice"
                    seen[position].add(slot)
        for position, used in geometries.items():
            if len(used) > 1:
                yield f"{self.cards[position].uuid}: holders in geometries {sorted(used)}"
