"""The processes e2e tests start import this checkout (e2e/conftest.py puts it on PYTHONPATH),
not the one the virtualenv's editable install points at: a worktree tests its own code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from e2e.conftest import REPO_ROOT


def test_a_started_process_imports_this_checkout() -> None:
    found = subprocess.run(
        [sys.executable, "-c", "import scheduler; print(scheduler.__file__)"],
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(found).resolve().is_relative_to(REPO_ROOT)
