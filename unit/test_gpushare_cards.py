"""deviceshare's older GPU memory / number mode: the wire formats (caldera.api.gpushare) and the
card arithmetic (scheduler.api.gpushare_cards): Volcano's card choice, and, under any sequence
of binds, pipelines, evictions and deletions, no card over its memory nor a whole card shared."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from caldera.api.core import Container, Pod, PodSpec, ResourceRequirements
from caldera.api.gpushare import (
    GPU_INDEX,
    PREDICATE_TIME,
    ShareAsk,
    ShareCards,
    bind_annotations,
    node_cards,
    parse_gpu_index,
    pod_memory,
    pod_number,
)
from scheduler.api.cards import Refusal
from scheduler.api.gpushare_cards import (
    NO_IDLE_CARDS,
    NO_MEMORY_FITS,
    NUMBER,
    SHARING,
    ShareFit,
    ShareLedger,
)


def pod(*limits: dict[str, str], init: tuple[dict[str, str], ...] = ()) -> Pod:
    def container(i: int, limit: dict[str, str]) -> Container:
        return Container(name=f"c{i}", resources=ResourceRequirements(limits=dict(limit)))

    return Pod(
        spec=PodSpec(
            containers=tuple(container(i, lim) for i, lim in enumerate(limits)),
            init_containers=tuple(container(i, lim) for i, lim in enumerate(init)),
        )
    )


def ledger(cards: int = 3, memory: int = 8000, mode: str = SHARING) -> ShareLedger:
    return ShareLedger("n1", ShareCards(tuple(range(cards)), memory), mode)


def test_node_cards_from_capacity_with_unhealthy_ones_dropped() -> None:
    """Memory per card is the total over the count, rounded down; unhealthy ids go, bad entries
    in that annotation are skipped (as Volcano); no count, no cards."""
    capacity = {"volcano.sh/gpu-memory": "32001", "volcano.sh/gpu-number": "4"}
    found = node_cards(capacity, {"volcano.sh/gpu-unhealthy-ids": "1,x,3"})
    assert found == ShareCards((0, 2), 8000)
    assert node_cards({"volcano.sh/gpu-memory": "100"}, {}) is None
    assert node_cards({"volcano.sh/gpu-memory": "100", "volcano.sh/gpu-number": "0"}, {}) is None
    assert node_cards({"volcano.sh/gpu-memory": "1", "volcano.sh/gpu-number": "5000"}, {}) is None


def test_pod_requests_sum_containers_or_take_the_largest_init() -> None:
    assert (
        pod_memory(pod({"volcano.sh/gpu-memory": "1000"}, {"volcano.sh/gpu-memory": "500"})) == 1500
    )
    assert pod_memory(pod({"cpu": "1"}, init=({"volcano.sh/gpu-memory": "3000"},))) == 3000
    assert (
        pod_number(pod({"volcano.sh/gpu-number": "2"}, init=({"volcano.sh/gpu-number": "1"},))) == 2
    )
    assert pod_memory(pod({"volcano.sh/gpu-memory": "-5"})) == 0
    assert pod_number(pod({"cpu": "1"})) == 0


def test_gpu_index_reads_as_volcano() -> None:
    assert parse_gpu_index("0") == (0,)
    assert parse_gpu_index("0,2") == (0, 2)
    assert parse_gpu_index("0,x") is None
    assert parse_gpu_index("") is None
    assert parse_gpu_index("1 ") is None


def test_bind_annotations_in_volcanos_format() -> None:
    written = bind_annotations([0, 1], 1_700_000_000_123_456_000)
    assert written == {GPU_INDEX: "0,1", PREDICATE_TIME: "1700000000123456000"}
    assert parse_gpu_index(written[GPU_INDEX]) == (0, 1)


def test_memory_mode_takes_the_lowest_card_with_room() -> None:
    """Volcano's predicateGPUbyMemory: the first of the fitting cards by id."""
    cards = ledger()
    cards.take("a", (0,), 6000)
    assert cards.fit(ShareAsk(memory=3000)) == ShareFit((1,))
    assert cards.fit(ShareAsk(memory=2000)) == ShareFit((0,))
    found = cards.fit(ShareAsk(memory=9000))
    assert isinstance(found, Refusal)
    assert found.reason == NO_MEMORY_FITS
    assert found.detail == "node n1: card 1 has 8000 gpu-memory free, pod asks 9000"


def test_memory_over_the_card_reads_as_full() -> None:
    """A pod that named its card itself may hold more than the card has: free reads 0."""
    cards = ledger(cards=1)
    cards.take("a", (0,), 9000)
    assert cards.free(0, future=False) == 0
    assert isinstance(cards.fit(ShareAsk(memory=1)), Refusal)


def test_number_mode_takes_idle_cards_whole() -> None:
    cards = ledger(mode=NUMBER)
    cards.take("a", (1,), 0)
    assert cards.fit(ShareAsk(number=2)) == ShareFit((0, 2))
    found = cards.fit(ShareAsk(number=3))
    assert isinstance(found, Refusal)
    assert found.reason == NO_IDLE_CARDS
    assert found.detail == "node n1 has 2 GPU cards idle, pod asks 3"


def test_views_free_a_victims_card_for_the_future_only() -> None:
    cards = ledger(cards=1, mode=NUMBER)
    cards.take("v", (0,), 0)
    cards.mark("v", "releasing")
    assert isinstance(cards.fit(ShareAsk(number=1)), Refusal)
    assert cards.fit(ShareAsk(number=1), future=True) == ShareFit((0,))


def test_positions_of_drops_cards_the_node_lacks() -> None:
    cards = ShareLedger("n1", ShareCards((0, 2, 3), 100), SHARING)
    assert cards.positions_of((2, 1, 3, 2)) == (1, 2)


@given(st.text(max_size=30))
def test_gpu_index_never_raises(text: str) -> None:
    found = parse_gpu_index(text)
    assert found is None or (found and all(isinstance(i, int) for i in found))


class ShareCardLedger(RuleBasedStateMachine):
    """Binds (fit, then take, in the idle view), pipelines (in the future view), evictions,
    undone evictions and deletions, in any order, in either mode: the chosen card always has
    the room, and the idle view never over-commits a card."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: ShareLedger | None = None
        self.next = 0

    @rule(mode=st.sampled_from([SHARING, NUMBER]), count=st.integers(1, 4))
    def start(self, mode: str, count: int) -> None:
        if self.cards is None:
            self.cards = ledger(cards=count, memory=8000, mode=mode)

    @rule(memory=st.integers(1, 9000), number=st.integers(1, 3), pipeline=st.booleans())
    def place(self, memory: int, number: int, pipeline: bool) -> None:
        cards = self.cards
        if cards is None:
            return
        ask = ShareAsk(memory=memory, number=number)
        found = cards.fit(ask, future=pipeline)
        if isinstance(found, ShareFit):
            for position in found.positions:
                if cards.mode == SHARING:
                    assert cards.free(position, future=pipeline) >= memory
                else:
                    assert cards.use(position, future=pipeline)[0] == 0
            self.next += 1
            state = "pipelined" if pipeline else "held"
            cards.take(f"p{self.next}", found.positions, memory, state)

    def _pick(self, data: st.DataObject, state: str | None) -> str | None:
        if self.cards is None:
            return None
        uids = sorted(u for u, h in self.cards.holders.items() if state in (None, h.state))
        return data.draw(st.sampled_from(uids)) if uids else None

    @rule(data=st.data())
    def evict(self, data: st.DataObject) -> None:
        uid = self._pick(data, "held")
        if uid is not None and self.cards is not None:
            self.cards.mark(uid, "releasing")

    @rule(data=st.data())
    def undo_eviction(self, data: st.DataObject) -> None:
        uid = self._pick(data, "releasing")
        if uid is not None and self.cards is not None:
            self.cards.mark(uid, "held")

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        uid = self._pick(data, None)
        if uid is not None and self.cards is not None:
            assert self.cards.release(uid) is not None

    @invariant()
    def nothing_overcommitted(self) -> None:
        if self.cards is not None:
            assert list(self.cards.overcommitted(future=False)) == []


ShareCardLedger.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestShareCardLedger = ShareCardLedger.TestCase


@pytest.mark.parametrize("mode", [SHARING, NUMBER])
def test_overcommitted_sees_a_broken_ledger(mode: str) -> None:
    """The invariant's check can fail: takes the fit did not give are reported."""
    cards = ledger(cards=1, memory=100, mode=mode)
    cards.take("a", (0,), 80)
    cards.take("b", (0,), 80)
    assert list(cards.overcommitted(future=False))
