"""The verdict memory's housekeeping: what it forgets between sessions, and when; and the
reason histogram a class keeps with its verdicts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.actions.placer import fit_error_histogram, fit_error_message
from scheduler.api.verdicts import MAX_CLASSES, Candidates, VerdictMemory

TIERS = [["gang"]]


def _class(memory: VerdictMemory, key: str) -> Candidates:
    cand = memory.classes[key] = Candidates()
    cand.session, cand.between = memory.session, memory.end
    return cand


def test_a_new_configuration_forgets_every_class() -> None:
    memory = VerdictMemory()
    memory.begin(TIERS, 10)
    _class(memory, "a")
    memory.begin(TIERS, 10)
    assert set(memory.classes) == {"a"}
    memory.begin([["gang"], ["binpack"]], 10)
    assert memory.classes == {}


def test_the_log_is_kept_from_the_class_furthest_behind() -> None:
    memory = VerdictMemory()
    memory.begin(TIERS, 100)
    behind = _class(memory, "behind")
    memory.log += ["n1", "n2"]
    _class(memory, "ahead")
    memory.log.append("n3")
    memory.begin(TIERS, 100)
    assert memory.changed_since(behind.between) == ["n1", "n2", "n3"]
    assert memory.changed_since(memory.classes["ahead"].between) == ["n3"]
    del memory.classes["behind"]
    memory.begin(TIERS, 100)
    assert memory.log == ["n3"]  # nobody needs n1 and n2 any more
    assert memory.changed_since(memory.classes["ahead"].between) == ["n3"]


def test_a_class_too_far_behind_is_forgotten() -> None:
    """Catching up would read more changes than looking at every node again."""
    memory = VerdictMemory()
    memory.begin(TIERS, 64)
    _class(memory, "old")
    memory.log += [f"n{i % 64}" for i in range(2 * 64)]
    memory.begin(TIERS, 64)
    assert "old" in memory.classes
    memory.log.append("n0")
    memory.begin(TIERS, 64)
    assert memory.classes == {}
    assert memory.log == []


def test_at_most_max_classes_the_least_recently_used_go() -> None:
    memory = VerdictMemory()
    for index in range(MAX_CLASSES + 5):
        memory.begin(TIERS, 10)
        _class(memory, f"c{index}")
    memory.begin(TIERS, 10)
    assert len(memory.classes) == MAX_CLASSES
    assert "c0" not in memory.classes
    assert "c4" not in memory.classes
    assert f"c{MAX_CLASSES + 4}" in memory.classes


def test_compact_drops_stale_heap_entries() -> None:
    cand = Candidates()
    cand.scores = {"a": 1.0, "b": 2.0}
    cand.seen = {"a": 7, "b": 9}
    cand.heap = [(-1.0, "a", g) for g in range(100)]
    cand.compact()
    assert cand.heap == [(-2.0, "b", 9), (-1.0, "a", 7)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("set", "drop", "forget")),
            st.sampled_from(("n0", "n1", "n2", "n3")),
            st.lists(st.sampled_from(("Insufficient cpu", "taint", "affinity")), max_size=3),
        ),
        max_size=30,
    )
)
def test_reason_counts_follow_the_reasons(steps: list[tuple[str, str, list[str]]]) -> None:
    """The histogram a pod that fits nowhere is told is kept with the verdicts: it equals
    one counted afresh from every node's reasons, whatever was set, dropped or forgotten."""
    cand = Candidates()
    for kind, node, reasons in steps:
        if kind == "set":
            cand.set_reasons(node, reasons)
        elif kind == "drop":
            cand.drop_reasons(node)
        else:
            cand.forget(node)
    assert fit_error_histogram(4, cand.reason_counts) == fit_error_message(4, cand.reasons.values())
    assert all(count > 0 for count in cand.reason_counts.values())
