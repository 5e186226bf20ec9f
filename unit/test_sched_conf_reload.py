"""The scheduler's configuration file: Volcano's default without a file, a bad file refused at
start with its line, a good edit picked up on the next session, a bad edit logged while the last
good configuration stays."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler.conf import ConfError
from scheduler.process import ConfSource
from scheduler.registry import REGISTRY

GOOD = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
BINPACK = 'actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: binpack\n'


def _source(path: str) -> ConfSource:
    return ConfSource(path, actions=REGISTRY.actions, plugins=REGISTRY.plugins)


def _touch_later(path: Path, text: str) -> None:
    stat = path.stat()
    path.write_text(text)
    os.utime(path, (stat.st_atime + 5, stat.st_mtime + 5))  # a distinct mtime, however fast


def test_no_file_means_volcanos_default() -> None:
    """Without a file the scheduler runs Volcano's default configuration."""
    conf = _source("").current
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert [p.name for p in conf.tiers[1]] == [
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
    ]


def test_bad_file_is_refused_at_start(tmp_path: Path) -> None:
    """An unknown plugin stops the start with the file, the line and the name."""
    path = tmp_path / "conf.yaml"
    path.write_text(GOOD + "  - name: gnag\n")
    with pytest.raises(ConfError, match=r"conf\.yaml: line 5: unknown plugin gnag"):
        _source(str(path))
    with pytest.raises(ConfError, match="cannot read"):
        _source(str(tmp_path / "missing.yaml"))


def test_edits_are_reloaded_and_bad_edits_keep_the_last_good(tmp_path: Path) -> None:
    """A good edit is used from the next refresh; a bad one is ignored (logged) and the last good
    configuration stays until the file is fixed."""
    path = tmp_path / "conf.yaml"
    path.write_text(GOOD)
    source = _source(str(path))
    assert source.refresh().actions == ("enqueue", "allocate")
    _touch_later(path, BINPACK)
    assert [p.name for p in source.refresh().tiers[0]] == ["gang", "binpack"]
    _touch_later(path, 'actions: "allocate, nonesuch"\n')  # an unknown action
    kept = source.refresh()
    assert kept.actions == ("allocate", "backfill"), "the bad edit is not used"
    _touch_later(path, GOOD)
    assert source.refresh().actions == ("enqueue", "allocate")
