"""Why a PodGroup waits, as the scheduler found it: the record it keeps on the PodGroup.

Volcano's PodGroup status has room for one condition message per type; what a user needs to
know about a waiting job is more (which gate holds it, the numbers that decide it, each task's
rejections, whether preemption was considered). The scheduler writes this record as JSON in
the PodGroup annotation ``WHY_ANNOTATION``, beside Volcano's fields, so the API stays
Volcano's; ``caldera job why`` reads it.

Bounded: a summary of at most ``MAX_LINE`` characters and at most ``MAX_DETAILS`` detail
lines of ``MAX_LINE`` characters each, so a PodGroup never grows without bound. The scheduler
rewrites the record when its stage or summary changes, and otherwise at most once every
``REFRESH_SECONDS`` (its numbers move with every pod that comes or goes).
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

WHY_ANNOTATION: Final = "scheduling.caldera.dev/why"
MAX_DETAILS: Final = 8
MAX_LINE: Final = 400
REFRESH_SECONDS: Final = 30.0


class WaitStage(enum.StrEnum):
    """Where a PodGroup waits."""

    ENQUEUE = "enqueue"  # Pending: the enqueue gate (queue quota, cluster overcommit) holds it
    QUEUE = "queue"  # Pending: its queue is not open
    ALLOCATE = "allocate"  # Inqueue: its pods cannot all be placed at once
    NONE = "none"  # not waiting: the gang is placed


class WaitRecord(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """The scheduler's answer to "why does this PodGroup wait?" after its last session."""

    stage: str  # a WaitStage
    summary: str  # one sentence in plain words
    details: tuple[str, ...] = ()  # task by task, then preemption; at most MAX_DETAILS
    time: str = ""  # RFC 3339: when the scheduler found this

    def same_finding(self, other: WaitRecord | None) -> bool:
        """Whether ``other`` says the same (its time aside)."""
        return (
            other is not None
            and other.stage == self.stage
            and other.summary == self.summary
            and other.details == self.details
        )


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


def bounded(stage: str, summary: str, details: list[str], time: str) -> WaitRecord:
    """A record cut to its bounds; the last detail line says how many lines were cut."""
    lines = [_clip(d) for d in details]
    if len(lines) > MAX_DETAILS:
        cut = len(lines) - (MAX_DETAILS - 1)
        lines = [*lines[: MAX_DETAILS - 1], f"... and {cut} more"]
    return WaitRecord(stage=stage, summary=_clip(summary), details=tuple(lines), time=time)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(WaitRecord)


def encode_record(record: WaitRecord) -> str:
    return _ENCODER.encode(record).decode()


def decode_record(text: str | None) -> WaitRecord | None:
    """The record in an annotation value, or None when absent or not a record (a hand edit
    must not break ``caldera job why``)."""
    if not text:
        return None
    try:
        return _DECODER.decode(text)
    except msgspec.DecodeError:
        return None
