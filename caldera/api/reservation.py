"""A gang's reservation, as the scheduler keeps it on the PodGroup (a Caldera addition; Volcano
has none): the annotation names and the record's model.

The scheduler's reservation plugin (``scheduler.plugins.reservation``, docs/reservations.md)
writes ``RESERVATION_ANNOTATION`` when it reserves nodes for a waiting gang, when it chooses
other nodes, and when the reservation expires; it removes it when the gang starts. A restarted
scheduler reads it back, so a reservation keeps its nodes, age and expiry. The record is
bounded: at most ``MAX_NODES`` node names.

Users and administrators write the other annotations:

- ``RESERVE_AFTER_ANNOTATION`` (a Go duration), on a PodGroup (the job controller copies a
  Job's annotations onto its PodGroup) or on a Queue: how long a gang waits before it may
  reserve;
- ``EXPECTED_RUNTIME_ANNOTATION`` (a Go duration), on a PodGroup: how long each of the job's
  pods runs at most, a declared runtime (like Slurm's ``--time``).
"""

from __future__ import annotations

from typing import Final

import msgspec

RESERVATION_ANNOTATION: Final = "scheduling.caldera.dev/reservation"
RESERVE_AFTER_ANNOTATION: Final = "scheduling.caldera.dev/reserve-after"
EXPECTED_RUNTIME_ANNOTATION: Final = "scheduling.caldera.dev/expected-runtime"
MAX_NODES: Final = 512


class ReservationRecord(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """What a restarted scheduler needs of a reservation. Times are RFC 3339."""

    nodes: tuple[str, ...] = ()  # empty: expired, cooling down until ``retry``
    since: str = ""  # when the gang first reserved
    expires: str = ""  # when the reservation lets go
    retry: str = ""  # after an expiry: when the gang may reserve again


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ReservationRecord)


def encode_reservation(record: ReservationRecord) -> str:
    return _ENCODER.encode(record).decode()


def decode_reservation(text: str | None) -> ReservationRecord | None:
    """The record in an annotation value, or None when absent, not a record, or over the
    bound (a hand edit must not break the scheduler)."""
    if not text:
        return None
    try:
        record = _DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if len(record.nodes) > MAX_NODES:
        return None
    return record
