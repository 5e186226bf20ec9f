"""``Note``: an Event a pure plan asks its controller to record, as data (the cronjob and
jobflow plans return them; the controller hands each to the EventRecorder).

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Note"]


@dataclass(frozen=True, slots=True)
class Note:
    """An Event to record on the object a plan is about."""

    type: str  # Normal | Warning
    reason: str
    message: str
