"""``scheduler.api.overlay.Overlay``: a kept map read through a session's own changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.api.overlay import Overlay

_KEYS = st.sampled_from(["a", "b", "c", "d", "e"])


@given(
    base=st.dictionaries(_KEYS, st.integers()),
    writes=st.lists(st.tuples(_KEYS, st.integers()), max_size=8),
)
def test_an_overlay_reads_as_the_base_updated_by_the_writes(
    base: dict[str, int], writes: list[tuple[str, int]]
) -> None:
    before = dict(base)
    overlay = Overlay(base)
    expected = dict(base)
    for key, value in writes:
        overlay[key] = value
        expected[key] = value
    assert base == before  # never written to
    assert overlay.merged() == expected
    assert dict(overlay) == expected
    assert list(overlay) == list(expected)  # the base's order, then keys only written here
    assert len(overlay) == len(expected)
    for key in ["a", "b", "c", "d", "e"]:
        assert (key in overlay) == (key in expected)
        assert overlay.get(key) == expected.get(key)
        assert overlay.get(key, -1) == expected.get(key, -1)
