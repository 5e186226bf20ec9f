"""The chart's README is generated from values.yaml (scripts/chart_readme.py): it is up to date,
every value has a description, and the comment parser reads keys, continuations and block
scalars right."""

from __future__ import annotations

import pytest

from scripts.chart_readme import README, ReadmeError, comments, generate, main, render, values


def test_readme_is_up_to_date() -> None:
    """charts/caldera/README.md is what the generator makes of values.yaml now."""
    assert README.read_text() == generate(), "run: python -m scripts.chart_readme"
    assert main(["--check"]) == 0


def test_every_value_is_documented() -> None:
    """No row of the README lacks a description; every process setting is a row."""
    text = generate()
    assert "|  |\n" not in text
    for process in ("controllers", "scheduler", "webhook"):
        assert f"### `{process}.settings`" in text
    assert "| `kube_qps` | `2000` |" in text


VALUES = """\
# A file header, not a description.

# -- The image.
image:
  # -- Its name,
  # over two lines.
  repository: caldera
  tag: ""
conf: |
  actions: "enqueue"
  # -- not a comment of a key: inside a block scalar
  tiers: []
# -- After the block.
after: 1
plain:
  nested: {a: 1}
"""


def test_comments_belong_to_the_key_below() -> None:
    """A '# --' comment and its continuations describe the next key, by dotted path; comment
    lines inside a block scalar are its text."""
    assert comments(VALUES) == {
        "image": "The image.",
        "image.repository": "Its name, over two lines.",
        "after": "After the block.",
    }


def test_undescribed_values_are_an_error_naming_them() -> None:
    """A value without a comment (and not a process setting) stops the generator."""
    with pytest.raises(ReadmeError) as info:
        render(VALUES, {"name": "c", "description": "d", "version": "1", "appVersion": "1"})
    assert "image.tag" in str(info.value)
    assert "plain.nested.a" in str(info.value)
    paths = [v.path for v in values(VALUES)]
    assert paths == ["image", "image.repository", "image.tag", "conf", "after", "plain.nested.a"]
