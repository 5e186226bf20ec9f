"""Where Volcano's example manifests are: ``shared/volcano-examples`` beside the repository (as
CI lays it out), else the workplace's copy."""

from __future__ import annotations

from pathlib import Path

_BESIDE = Path(__file__).resolve().parents[2] / "shared" / "volcano-examples"
EXAMPLES = _BESIDE if _BESIDE.is_dir() else Path("/work/shared/volcano-examples")
