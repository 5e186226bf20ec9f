"""docs/architecture.md names files: its "Where to find" table and its sections must name files
that exist, so the map does not drift from the tree when a module moves or is renamed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
# A code span that looks like a path in the tree: a file with an extension we keep, or a folder.
PATH = re.compile(r"`([\w./-]+/[\w.-]*(?:\.py|\.md|\.toml|\.yaml|/))`")
PACKAGES = ("caldera", "cli", "informers", "controllers", "webhooks", "scheduler", "simulator")


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _exists(name: str) -> bool:
    """A path from the repository's root, or, inside a package's own section, from the package
    (the scheduler's section says `actions/placer.py`)."""
    if (REPO / name).exists():
        return True
    return any((REPO / package / name).exists() for package in PACKAGES)


def where_to_find_rows() -> list[tuple[str, list[str]]]:
    rows = []
    for line in _section(DOC.read_text(), "Where to find").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("what", "---"):
            rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return rows


def test_where_to_find_names_at_most_two_existing_files_for_twenty_questions() -> None:
    rows = where_to_find_rows()
    assert len(rows) >= 20, [what for what, _ in rows]
    for what, files in rows:
        assert 1 <= len(files) <= 2, (what, files)
        for name in files:
            assert (REPO / name).exists(), f"{what}: {name} does not exist"


def test_every_path_the_page_names_exists() -> None:
    names = set(PATH.findall(DOC.read_text()))
    assert len(names) > 50  # the pattern still finds the page's paths
    missing = sorted(name for name in names if not _exists(name))
    assert not missing, missing
