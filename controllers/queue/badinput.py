"""What the queue controller says about objects stored without the webhook: a Queue whose spec
the webhook would refuse, and a PodGroup naming a queue that does not exist.

Each function returns the object's new conditions, or None when nothing is to be written: the
condition is the memory that makes the Warning Event once (a resync finds it already written,
and so does a restarted process).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from caldera.api.stored import not_found
from caldera.api.volcano import (
    PodGroup,
    PodGroupCondition,
    PodGroupConditionType,
    Queue,
    QueueCondition,
)

INVALID_SPEC: Final = "InvalidSpec"  # Queue condition type and reason, and the Event reason
QUEUE_NOT_FOUND: Final = "QueueNotFound"  # reason of a PodGroup's Unschedulable condition


def queue_conditions(
    queue: Queue, errors: Sequence[str], now: str
) -> tuple[QueueCondition, ...] | None:
    """The queue's conditions with ``InvalidSpec`` set to `errors` (removed when there are
    none); None when they already say so."""
    message = "; ".join(errors)
    others = tuple(c for c in queue.status.conditions if c.type != INVALID_SPEC)
    current = [c for c in queue.status.conditions if c.type == INVALID_SPEC]
    if not errors:
        return others if current else None
    if current and current[0].message == message and current[0].status == "True":
        return None
    mark = QueueCondition(
        type=INVALID_SPEC,
        status="True",
        reason=INVALID_SPEC,
        message=message,
        last_transition_time=now,
    )
    return (*others, mark)


def podgroup_conditions(
    group: PodGroup, *, queue_exists: bool, now: str
) -> tuple[PodGroupCondition, ...] | None:
    """The PodGroup's conditions with an ``Unschedulable``/``QueueNotFound`` condition naming
    spec.queue while that queue is missing (removed once it exists); None when unchanged. The
    scheduler ignores such a PodGroup (as Volcano's does) and so never writes one itself."""
    conditions = group.status.conditions
    others = tuple(c for c in conditions if c.reason != QUEUE_NOT_FOUND)
    if queue_exists:
        return others if len(others) != len(conditions) else None
    message = not_found("spec.queue", group.spec.queue)
    if any(c.reason == QUEUE_NOT_FOUND and c.message == message for c in conditions):
        return None
    mark = PodGroupCondition(
        type=PodGroupConditionType.UNSCHEDULABLE,
        status="True",
        reason=QUEUE_NOT_FOUND,
        message=message,
        transition_id=now,
        last_transition_time=now,
    )
    return (*others, mark)
