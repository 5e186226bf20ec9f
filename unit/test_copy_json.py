"""``copy_json``: a deep copy of decoded JSON (pod templates are copied once per pod)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from caldera.api.codec import copy_json

_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _containers(value: Any) -> list[Any]:
    """Every dict and list in ``value``, outermost first."""
    found: list[Any] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(_containers(item))
    elif isinstance(value, list):
        found.append(value)
        for item in value:
            found.extend(_containers(item))
    return found


@given(JSON)
def test_copy_equals_deepcopy_and_shares_no_container(value: Any) -> None:
    copied = copy_json(value)
    assert copied == copy.deepcopy(value)
    originals = {id(c) for c in _containers(value)}
    assert not originals & {id(c) for c in _containers(copied)}


def test_changing_the_copy_leaves_the_template() -> None:
    template = {"spec": {"containers": [{"name": "main", "env": [{"name": "A"}]}]}}
    pod = copy_json(template)
    pod["spec"]["containers"][0]["env"].append({"name": "B"})
    pod["spec"]["containers"][0]["name"] = "changed"
    assert template == {"spec": {"containers": [{"name": "main", "env": [{"name": "A"}]}]}}
