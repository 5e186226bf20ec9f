"""MIG cards in deviceshare (scheduler.api.mig_cards): Volcano's geometry choice and instance
positions, the instance naming written and read back, and, under any sequence of binds,
pipelines, evictions and deletions, no instance given twice, no geometry changed under a
holder, nothing over-committed."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from caldera.api.mig import DeviceConfig, Geometry, Instance, ModelGeometries
from caldera.api.vgpu import MIG, NO_PERCENTAGE, Card, ContainerRequest, NodeCards
from scheduler.api.cards import BINPACK, MODE_MISMATCH, NO_CARD_FITS, SPREAD, Fit, PodAsk, Refusal
from scheduler.api.mig_cards import BLOCKED, NO_MIG_INSTANCE, MigFit, MigLedger

A100_40: tuple[Geometry, ...] = (
    Geometry("group1", (Instance("1g.5gb", 5120, 7),)),
    Geometry("group2", (Instance("2g.10gb", 10240, 3), Instance("1g.5gb", 5120, 1))),
    Geometry("group3", (Instance("3g.20gb", 20480, 2),)),
    Geometry("group4", (Instance("7g.40gb", 40960, 1),)),
)
CONFIG = DeviceConfig((ModelGeometries(("A100-SXM4-40GB",), A100_40),))


def mig_ledger(cards: int = 2, *, config: DeviceConfig = CONFIG, split: int = 10) -> MigLedger:
    registered = NodeCards(
        tuple(
            Card(i, f"GPU-{i}", split, 40960, "NVIDIA-A100-SXM4-40GB", True, MIG)
            for i in range(cards)
        ),
        MIG,
    )
    return MigLedger.of_mig("n1", registered, config)


def vgpu(memory: int, number: int = 1, cores: int = 0, mode: str | None = None) -> PodAsk:
    return PodAsk(containers=(ContainerRequest(number, memory, NO_PERCENTAGE, cores),), mode=mode)


def names(ledger: MigLedger, uid: str) -> list[str]:
    return [d.uuid for container in ledger.devices_of(uid) for d in container]


def place(ledger: MigLedger, uid: str, ask: PodAsk, policy: str = "") -> MigFit:
    found = ledger.fit(ask, policy)
    assert isinstance(found, MigFit), found
    ledger.take_fit(uid, found)
    return found


def test_an_empty_card_takes_the_first_geometry_with_an_instance_big_enough() -> None:
    """Volcano's findMatch: groups in order, the smallest instance kind that holds the ask,
    its lowest position; the annotation names the instance and the memory asked."""
    cards = mig_ledger(1)
    place(cards, "a", vgpu(4000))
    assert names(cards, "a") == ["GPU-0[group1-0]"]
    assert cards.devices_of("a")[0][0].memory == 4000  # what was asked, as Volcano writes
    assert cards.use(0, future=False)[1] == 5120  # the instance's memory is counted
    place(cards, "b", vgpu(4000))
    assert names(cards, "b") == ["GPU-0[group1-1]"]


def test_a_card_in_use_keeps_its_geometry() -> None:
    """A card held in group1 refuses an ask only another geometry holds; an empty card of
    the same node takes it in that geometry."""
    cards = mig_ledger(2)
    place(cards, "a", vgpu(4000))  # card 1 (no policy: the last card first), group1
    found = cards.fit(vgpu(8000), "")
    assert isinstance(found, MigFit)
    assert [p for c in found.grants for p, _, _ in c] == [0]
    cards.take_fit("b", found)
    assert names(cards, "b") == ["GPU-0[group2-0]"]
    refused = cards.fit(vgpu(20000), "")
    assert isinstance(refused, Refusal)
    assert refused.reason == NO_MIG_INSTANCE
    assert "partitioned as group" in refused.detail


def test_a_card_in_use_gives_any_free_kind_of_its_geometry() -> None:
    """Positions count the kinds before: in group2 the 1g.5gb instance is position 3; a card
    in use gives it even though no pod held that kind yet (Volcano would refuse)."""
    cards = mig_ledger(1)
    place(cards, "a", vgpu(8000))
    assert names(cards, "a") == ["GPU-0[group2-0]"]
    place(cards, "b", vgpu(1000))
    assert names(cards, "b") == ["GPU-0[group2-3]"]
    place(cards, "c", vgpu(1000))  # the small kind is gone: the next 2g.10gb
    assert names(cards, "c") == ["GPU-0[group2-1]"]


def test_an_emptied_card_takes_a_new_geometry() -> None:
    """Dynamic MIG: once its last holder leaves, a card is partitioned again as asked."""
    cards = mig_ledger(1)
    place(cards, "a", vgpu(4000))
    assert isinstance(cards.fit(vgpu(40000), ""), Refusal)
    cards.release("a")
    place(cards, "b", vgpu(40000))
    assert names(cards, "b") == ["GPU-0[group4-0]"]


def test_one_pod_never_gets_the_same_instance_twice() -> None:
    """Two containers landing on one card get two instances."""
    cards = mig_ledger(1)
    ask = PodAsk(
        containers=(
            ContainerRequest(1, 30000, NO_PERCENTAGE, 0),
            ContainerRequest(1, 30000, NO_PERCENTAGE, 0),
        )
    )
    assert isinstance(cards.fit(ask, ""), Refusal)  # group3 has 2 x 20 GB, group4 1 x 40 GB
    two = PodAsk(containers=(ContainerRequest(1, 15000, NO_PERCENTAGE, 0),) * 2)
    place(cards, "a", two)
    assert names(cards, "a") == ["GPU-0[group3-0]", "GPU-0[group3-1]"]
    assert list(cards.overcommitted()) == []


def test_the_annotation_reads_back_into_the_same_instances() -> None:
    """A running pod's ids annotation (Volcano's MIG naming) holds its instances: the next
    pod gets the one left between them."""
    cards = mig_ledger(1)
    held = cards.held_fit("GPU-0[group1-0],NVIDIA,4000,0:;GPU-0[group1-2],NVIDIA,3000,0:")
    assert held is not None
    cards.take_fit("a", held)
    assert cards.use(0, future=False) == (2, 10240, 0)
    place(cards, "b", vgpu(5000))
    assert names(cards, "b") == ["GPU-0[group1-1]"]
    assert names(cards, "a") == ["GPU-0[group1-0]", "GPU-0[group1-2]"]


def test_an_instance_that_does_not_read_blocks_its_card() -> None:
    """A plain UUID, an unknown group or a position past the geometry: the card's layout is
    unknown, so nothing more goes on it; a whole-GPU pod blocks its card too."""
    for text in (
        "GPU-0,NVIDIA,4000,0:",
        "GPU-0[groupX-0],NVIDIA,4000,0:",
        "GPU-0[group1-7],NVIDIA,1,0:",
    ):
        cards = mig_ledger(1)
        held = cards.held_fit(text)
        assert held is not None
        assert held.placements[0][0].geometry == BLOCKED
        cards.take_fit("a", held)
        refused = cards.fit(vgpu(100), "")
        assert isinstance(refused, Refusal), text
    cards = mig_ledger(1)
    whole = cards.fit(PodAsk(whole=1), "")
    assert isinstance(whole, Fit)
    cards.take_fit("w", whole)
    assert isinstance(cards.fit(vgpu(100, cores=0), ""), Refusal)
    assert mig_ledger(1).held_fit("GPU-9[group1-0],NVIDIA,1,0:") is None  # another node's card


def test_a_card_type_without_geometry_is_not_shared() -> None:
    """No entry names the card's model: refused, naming why (with the ConfigMap's problem)."""
    cards = mig_ledger(1, config=DeviceConfig(problem="ConfigMap kube-system/x not found"))
    refused = cards.fit(vgpu(100), "")
    assert isinstance(refused, Refusal)
    assert refused.reason == NO_MIG_INSTANCE
    assert "no known MIG geometry" in refused.detail
    assert "not found" in refused.detail


def test_mode_and_card_checks_still_apply() -> None:
    """A pod asking hami-core mode is refused; the hami-core checks (split count) come first."""
    cards = mig_ledger(1, split=1)
    mismatch = cards.fit(vgpu(100, mode="hami-core"), "")
    assert isinstance(mismatch, Refusal)
    assert mismatch.reason == MODE_MISMATCH
    place(cards, "a", vgpu(100, mode=MIG))
    refused = cards.fit(vgpu(100), "")
    assert isinstance(refused, Refusal)
    assert refused.reason == NO_CARD_FITS
    assert "shared by 1 pods of 1" in refused.detail


def test_memory_factor_scales_the_ask_and_the_count() -> None:
    """gpuMemoryFactor: the ask times the factor is matched, the instance over it counted."""
    cards = mig_ledger(1, config=DeviceConfig(CONFIG.known, memory_factor=2))
    place(cards, "a", vgpu(3000))  # 6000 > 5120: the 2g.10gb of group2
    assert names(cards, "a") == ["GPU-0[group2-0]"]
    assert cards.use(0, future=False)[1] == 5120


def test_a_preemptor_may_take_the_instance_its_victim_leaves() -> None:
    """The future view frees a releasing holder's instance; the idle view keeps it."""
    cards = mig_ledger(1)
    place(cards, "v", vgpu(40000))
    cards.mark("v", "releasing")
    assert isinstance(cards.fit(vgpu(30000), ""), Refusal)
    found = cards.fit(vgpu(30000), "", future=True)
    assert isinstance(found, MigFit)
    cards.take_fit("p", found, state="pipelined")
    assert names(cards, "p") == ["GPU-0[group4-0]"]  # the victim's geometry is kept
    assert list(cards.overcommitted()) == [] == list(cards.overcommitted(future=True))


def test_a_copy_keeps_the_instances() -> None:
    """copy_with (preempt's node without victims) keeps each holder's instances."""
    cards = mig_ledger(1)
    place(cards, "a", vgpu(4000))
    place(cards, "b", vgpu(4000))
    copy = cards.copy_with(["b"])
    assert names(copy, "b") == ["GPU-0[group1-1]"]
    place(copy, "c", vgpu(4000))
    assert names(copy, "c") == ["GPU-0[group1-0]"]


asks = st.one_of(
    st.builds(
        vgpu,
        memory=st.sampled_from([1000, 5000, 5120, 9000, 15000, 30000, 40960, 50000]),
        number=st.integers(1, 2),
        cores=st.sampled_from([0, 0, 30, 100]),
    ),
    st.builds(PodAsk, whole=st.integers(1, 2)),
)


class MigCardLedger(RuleBasedStateMachine):
    """Binds, pipelines, evictions, undone evictions and deletions in any order: on the cards
    now, no instance is given twice and nothing is over-committed; a card's holders share one
    geometry, and a card in use is never partitioned again."""

    def __init__(self) -> None:
        super().__init__()
        self.cards = mig_ledger(2, split=6)
        self.next = 0

    def geometries(self) -> dict[int, set[int]]:
        found: dict[int, set[int]] = {}
        for uid, holder in self.cards.holders.items():
            places = self.cards.placements.get(uid)
            for c, container in enumerate(holder.grants):
                for k, (position, _, _) in enumerate(container):
                    geometry = BLOCKED if places is None else places[c][k].geometry
                    found.setdefault(position, set()).add(geometry)
        return found

    @rule(ask=asks, policy=st.sampled_from(["", BINPACK, SPREAD]), pipeline=st.booleans())
    def place(self, ask: PodAsk, policy: str, pipeline: bool) -> None:
        before = self.geometries()
        found = self.cards.fit(ask, policy, future=pipeline)
        if isinstance(found, Fit):
            self.next += 1
            state = "pipelined" if pipeline else "held"
            self.cards.take_fit(f"p{self.next}", found, state=state)
        for position, geometries in self.geometries().items():
            if position in before:
                assert geometries == before[position]

    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        held = [u for u, h in self.cards.holders.items() if h.state == "held"]
        if held:
            self.cards.mark(data.draw(st.sampled_from(sorted(held))), "releasing")

    @rule(data=st.data())
    def undo_eviction(self, data: st.DataObject) -> None:
        releasing = [u for u, h in self.cards.holders.items() if h.state == "releasing"]
        if releasing:
            self.cards.mark(data.draw(st.sampled_from(sorted(releasing))), "held")

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if self.cards.holders:
            uid = data.draw(st.sampled_from(sorted(self.cards.holders)))
            assert self.cards.release(uid) is not None

    @invariant()
    def nothing_given_twice_or_overcommitted(self) -> None:
        assert list(self.cards.overcommitted(future=False)) == []

    @invariant()
    def one_geometry_per_card(self) -> None:
        for geometries in self.geometries().values():
            assert len(geometries) == 1


MigCardLedger.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestMigCardLedger = MigCardLedger.TestCase
