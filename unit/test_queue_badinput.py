"""Tests of controllers.queue.badinput: the conditions that tell a user about a Queue spec the
webhook would refuse and a PodGroup naming a missing queue, written once and cleared when fixed."""

from __future__ import annotations

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    PodGroup,
    PodGroupCondition,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueCondition,
    QueueStatus,
)
from controllers.queue.badinput import (
    INVALID_SPEC,
    QUEUE_NOT_FOUND,
    podgroup_conditions,
    queue_conditions,
)

NOW = "2026-11-25T10:00:00Z"
OTHER = QueueCondition(type="Other", status="True")
MARK = QueueCondition(type=INVALID_SPEC, status="True", reason=INVALID_SPEC, message="bad")


def _queue(*conditions: QueueCondition) -> Queue:
    return Queue(metadata=ObjectMeta(name="q"), status=QueueStatus(conditions=conditions))


@pytest.mark.parametrize(
    ("conditions", "errors", "want"),
    [
        ((), [], None),
        ((OTHER,), [], None),
        ((), ["bad"], ("bad",)),
        ((OTHER,), ["bad"], ("", "bad")),
        ((MARK,), ["bad"], None),
        ((MARK,), ["worse", "bad"], ("worse; bad",)),
        ((OTHER, MARK), [], ("",)),
    ],
    ids=["valid", "valid-other", "new", "beside-other", "already", "changed", "fixed"],
)
def test_queue_conditions(
    conditions: tuple[QueueCondition, ...], errors: list[str], want: tuple[str, ...] | None
) -> None:
    """InvalidSpec carries the errors; nothing to write when it already does; removed when the
    spec is fixed; other conditions are kept."""
    got = queue_conditions(_queue(*conditions), errors, NOW)
    assert (None if got is None else tuple(c.message for c in got)) == want


def _group(queue: str, *conditions: PodGroupCondition) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name="pg", namespace="ns"),
        spec=PodGroupSpec(queue=queue),
        status=PodGroupStatus(conditions=conditions),
    )


SCHEDULED = PodGroupCondition(type="Scheduled", status="True", reason="tasks in gang are ready")
MISSING = PodGroupCondition(
    type="Unschedulable",
    status="True",
    reason=QUEUE_NOT_FOUND,
    message='spec.queue: Not found: "x"',
)


@pytest.mark.parametrize(
    ("group", "exists", "want"),
    [
        (_group("x"), True, None),
        (_group("x"), False, ((QUEUE_NOT_FOUND, 'spec.queue: Not found: "x"'),)),
        (_group("x", MISSING), False, None),
        (_group("y", MISSING), False, ((QUEUE_NOT_FOUND, 'spec.queue: Not found: "y"'),)),
        (_group("x", SCHEDULED, MISSING), True, (("tasks in gang are ready", ""),)),
        (_group("x", SCHEDULED), True, None),
    ],
    ids=["exists", "missing", "already", "renamed", "queue-created", "untouched"],
)
def test_podgroup_conditions(
    group: PodGroup, exists: bool, want: tuple[tuple[str, str], ...] | None
) -> None:
    """A missing queue is named in an Unschedulable condition once; the condition goes when the
    queue exists; the scheduler's conditions are kept."""
    got = podgroup_conditions(group, queue_exists=exists, now=NOW)
    assert (None if got is None else tuple((c.reason, c.message) for c in got)) == want
