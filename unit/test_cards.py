"""The card arithmetic of deviceshare (scheduler.api.cards): Volcano's per-card checks and
policies, and, under any sequence of binds, pipelines, evictions and deletions, no card over
its memory, cores or split count."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from caldera.api.vgpu import HAMI_CORE, MIG, NO_PERCENTAGE, Card, CardFilter, ContainerRequest
from scheduler.api.cards import (
    BINPACK,
    FEWER_CARDS,
    MIG_REFUSAL,
    MODE_MISMATCH,
    NO_CARD_FITS,
    NO_UUID_MATCH,
    NO_WHOLE_CARD,
    SPREAD,
    Fit,
    Ledger,
    PodAsk,
    Refusal,
)


def ledger(*memories: int, split: int = 10, mode: str = HAMI_CORE) -> Ledger:
    cards = tuple(
        Card(i, f"GPU-{i}", split, memory, "NVIDIA-A100", True, mode)
        for i, memory in enumerate(memories)
    )
    return Ledger("n1", cards, mode)


def vgpu(number: int = 1, memory: int = 0, cores: int = 0, percentage: int | None = None) -> PodAsk:
    if percentage is None:
        percentage = NO_PERCENTAGE if memory else 100
    return PodAsk(containers=(ContainerRequest(number, memory, percentage, cores),))


def cards_of(found: Fit | Refusal) -> list[int]:
    assert isinstance(found, Fit), found
    return [position for container in found.grants for position, _, _ in container]


def test_policies_choose_cards_as_volcano() -> None:
    """binpack: most used memory first; spread: fewest holders first; none: last card first."""
    cards = ledger(1000, 1000, 1000)
    cards.take("a", (((1, 500, 0),),))
    assert cards_of(cards.fit(vgpu(memory=100), BINPACK)) == [1]
    assert cards_of(cards.fit(vgpu(memory=100), SPREAD)) == [0]
    assert cards_of(cards.fit(vgpu(memory=100), "")) == [2]


def test_scores() -> None:
    """binpack scores the chosen card's used memory after the pod in percent; spread 100 for
    each card the pod is the first on."""
    cards = ledger(1000, 1000)
    cards.take("a", (((0, 500, 0),),))
    binpack = cards.fit(vgpu(memory=250), BINPACK)
    assert isinstance(binpack, Fit)
    assert binpack.score == 75.0
    spread = cards.fit(vgpu(number=2, memory=100), SPREAD)
    assert isinstance(spread, Fit)
    assert spread.score == 100.0


def test_memory_short_names_the_card() -> None:
    """The refusal names the card that came closest, with its free memory and the request."""
    cards = ledger(8000)
    cards.take("a", (((0, 6000, 0),),))
    found = cards.fit(vgpu(memory=8000), BINPACK)
    assert isinstance(found, Refusal)
    assert found.reason == NO_CARD_FITS
    assert found.detail == "node n1: card GPU-0 has 2000 MiB free, pod asks 8000"


def test_whole_card_request_is_never_shared() -> None:
    """100 cores takes only a card nobody holds; a card so taken takes nobody else."""
    cards = ledger(1000, 1000)
    cards.take("a", (((0, 10, 10),),))
    whole = cards.fit(vgpu(memory=10, cores=100), "")
    assert cards_of(whole) == [1]
    cards.take("b", whole.grants)  # type: ignore[union-attr]
    refused = cards.fit(vgpu(number=2, memory=10), "")
    assert isinstance(refused, Refusal)
    assert "cores" in refused.detail or "all its cores" in refused.detail


def test_split_count_and_percentage() -> None:
    """A card takes at most its split count of pods; a percentage is of the card's memory."""
    cards = ledger(1000, split=2)
    cards.take("a", (((0, 0, 0),),))
    cards.take("b", (((0, 0, 0),),))
    refused = cards.fit(vgpu(memory=1), "")
    assert isinstance(refused, Refusal)
    assert "shared by 2 pods of 2" in refused.detail
    fresh = ledger(1000)
    found = fresh.fit(vgpu(percentage=30), "")
    assert isinstance(found, Fit)
    assert found.grants == (((0, 300, 0),),)


def test_refusal_reasons() -> None:
    """More cards than the node has, a mode mismatch, MIG nodes, UUID lists and whole GPUs."""
    assert (ledger(10).fit(vgpu(number=2), "")).reason == FEWER_CARDS  # type: ignore[union-attr]
    mode = PodAsk(containers=vgpu().containers, mode=MIG)
    assert ledger(10).fit(mode, "").reason == MODE_MISMATCH  # type: ignore[union-attr]
    assert ledger(10, mode=MIG).fit(vgpu(), "").reason == MIG_REFUSAL  # type: ignore[union-attr]
    only = PodAsk(containers=vgpu().containers, filter=CardFilter(use_uuids=("GPU-9",)))
    assert ledger(10).fit(only, "").reason == NO_UUID_MATCH  # type: ignore[union-attr]
    busy = ledger(10, 10)
    busy.take("a", (((0, 1, 0),),))
    assert busy.fit(PodAsk(whole=2), "").reason == NO_WHOLE_CARD  # type: ignore[union-attr]


def test_whole_gpu_pods_and_vgpu_pods_count_against_each_other() -> None:
    """A plain nvidia.com/gpu pod takes a card whole: vGPU pods fit only the others, and a
    whole-GPU pod does not take a card a vGPU pod shares (volcano#4712)."""
    cards = ledger(1000, 1000)
    whole = cards.fit(PodAsk(whole=1), "")
    assert cards_of(whole) == [0]
    cards.take("gpu", whole.grants)  # type: ignore[union-attr]
    assert cards_of(cards.fit(vgpu(memory=10), BINPACK)) == [1]
    cards.take("v", (((1, 10, 0),),))
    assert isinstance(cards.fit(PodAsk(whole=1), ""), Refusal)


def test_podgroup_spread_keeps_a_group_off_shared_cards() -> None:
    """With the podgroup spread policy, a card holding a pod of the group takes no other."""
    cards = ledger(1000, 1000)
    cards.take("a", (((0, 10, 0),),), group="ns/pg")
    ask = PodAsk(containers=vgpu(memory=10).containers, group="ns/pg")
    assert cards_of(cards.fit(ask, BINPACK)) == [1]


def test_views_count_releasing_and_pipelined_holders() -> None:
    """A releasing holder's card is full now and free in the future; a pipelined one the
    other way round."""
    cards = ledger(1000)
    cards.take("victim", (((0, 1000, 0),),))
    cards.mark("victim", "releasing")
    assert isinstance(cards.fit(vgpu(memory=500), ""), Refusal)
    assert isinstance(cards.fit(vgpu(memory=500), "", future=True), Fit)
    cards.take("preemptor", (((0, 1000, 0),),), state="pipelined")
    assert isinstance(cards.fit(vgpu(memory=500), "", future=True), Refusal)
    cards.mark("victim", "held")
    cards.release("preemptor")
    assert cards.use(0, future=False) == (1, 1000, 0)


asks = st.one_of(
    st.builds(
        vgpu,
        number=st.integers(0, 3),
        memory=st.integers(0, 5000),
        cores=st.sampled_from([0, 10, 30, 50, 100]),
    ),
    st.builds(vgpu, percentage=st.integers(0, 100), cores=st.integers(0, 100)),
    st.builds(PodAsk, whole=st.integers(1, 2)),
)


class CardLedger(RuleBasedStateMachine):
    """Binds (fit, then take, in the idle view), pipelines (in the future view), evictions,
    undone evictions and deletions, in any order: the idle view never exceeds a card."""

    def __init__(self) -> None:
        super().__init__()
        self.cards = ledger(4000, 8000, 1000, split=3)
        self.next = 0

    @rule(ask=asks, policy=st.sampled_from(["", BINPACK, SPREAD]), pipeline=st.booleans())
    def place(self, ask: PodAsk, policy: str, pipeline: bool) -> None:
        found = self.cards.fit(ask, policy, future=pipeline)
        if isinstance(found, Fit):
            self.next += 1
            state = "pipelined" if pipeline else "held"
            self.cards.take(f"p{self.next}", found.grants, state=state)

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
    def nothing_overcommitted(self) -> None:
        assert list(self.cards.overcommitted(future=False)) == []

    @invariant()
    def whole_cards_unshared(self) -> None:
        for position in range(len(self.cards.cards)):
            holders = [
                h
                for h in self.cards.holders.values()
                if h.state != "pipelined"
                and any(p == position and c == 100 for g in h.grants for p, _, c in g)
            ]
            if holders:
                assert self.cards.use(position, future=False)[0] == 1


CardLedger.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestCardLedger = CardLedger.TestCase
