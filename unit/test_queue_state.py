"""The queue state machine (controllers.queue.state) and the PodGroup phase counts."""

from __future__ import annotations

import pytest

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    CLOSED_BY_PARENT_KEY,
    PodGroup,
    PodGroupPhase,
    PodGroupStatus,
    Queue,
    QueueSpec,
    QueueState,
    QueueStatus,
)
from controllers.queue.metrics import count_phases
from controllers.queue.state import (
    Action,
    Decision,
    current_state,
    decide,
    is_closed_by_parent,
    needs_root_parent,
    parent_name,
)

OPEN, CLOSED, CLOSING, UNKNOWN = (
    QueueState.OPEN,
    QueueState.CLOSED,
    QueueState.CLOSING,
    QueueState.UNKNOWN,
)

# (current, action, podgroups, parent state, closed by parent) -> (state, closed by parent)
TRANSITIONS = [
    # Open
    (OPEN, Action.OPEN, 0, None, False, OPEN, False),
    (OPEN, Action.CLOSE, 0, None, False, CLOSED, False),
    (OPEN, Action.CLOSE, 2, None, False, CLOSING, False),
    (OPEN, Action.SYNC, 3, None, False, OPEN, False),
    # Closed
    (CLOSED, Action.OPEN, 0, None, False, OPEN, False),
    (CLOSED, Action.OPEN, 4, OPEN, False, OPEN, False),
    (CLOSED, Action.CLOSE, 0, None, False, CLOSED, False),
    (CLOSED, Action.CLOSE, 1, None, False, CLOSING, False),
    (CLOSED, Action.SYNC, 0, None, False, CLOSED, False),
    # Closing: waits for its PodGroups
    (CLOSING, Action.OPEN, 1, None, False, OPEN, False),
    (CLOSING, Action.CLOSE, 1, None, False, CLOSING, False),
    (CLOSING, Action.CLOSE, 0, None, False, CLOSED, False),
    (CLOSING, Action.SYNC, 1, None, False, CLOSING, False),
    (CLOSING, Action.SYNC, 0, None, False, CLOSED, False),
    # Unknown
    (UNKNOWN, Action.OPEN, 0, None, False, OPEN, False),
    (UNKNOWN, Action.CLOSE, 0, None, False, CLOSED, False),
    (UNKNOWN, Action.CLOSE, 5, None, False, CLOSING, False),
    (UNKNOWN, Action.SYNC, 0, None, False, UNKNOWN, False),
    # A closing or closed parent closes its open children and marks them...
    (OPEN, Action.SYNC, 0, CLOSED, False, CLOSED, True),
    (OPEN, Action.SYNC, 2, CLOSING, False, CLOSING, True),
    (UNKNOWN, Action.SYNC, 0, CLOSED, False, CLOSED, True),
    (CLOSING, Action.SYNC, 0, CLOSED, True, CLOSED, True),
    (CLOSED, Action.SYNC, 0, CLOSED, True, CLOSED, True),
    # ...but leaves a child the user closed unmarked...
    (CLOSED, Action.SYNC, 0, CLOSED, False, CLOSED, False),
    # ...and reopens exactly the marked ones once it is open again.
    (CLOSED, Action.SYNC, 0, OPEN, True, OPEN, False),
    (CLOSING, Action.SYNC, 3, OPEN, True, OPEN, False),
    (CLOSED, Action.SYNC, 0, OPEN, False, CLOSED, False),
    (CLOSED, Action.SYNC, 0, UNKNOWN, True, OPEN, False),
    # An explicit command on a child clears its mark.
    (CLOSED, Action.CLOSE, 0, CLOSED, True, CLOSED, False),
]


@pytest.mark.parametrize(
    ("current", "action", "podgroups", "parent", "marked", "state", "mark"), TRANSITIONS
)
def test_transitions(
    current: QueueState,
    action: Action,
    podgroups: int,
    parent: QueueState | None,
    marked: bool,
    state: QueueState,
    mark: bool,
) -> None:
    """Each (state, action, PodGroups, parent) goes where Volcano's queue controller sends it."""
    decision = decide(
        name="q",
        current=current,
        action=action,
        podgroups=podgroups,
        parent_state=parent,
        closed_by_parent=marked,
    )
    assert decision == Decision(state, mark)


@pytest.mark.parametrize("parent", [CLOSED, CLOSING])
@pytest.mark.parametrize("current", [CLOSED, CLOSING])
def test_child_cannot_open_under_closed_parent(current: QueueState, parent: QueueState) -> None:
    """OpenQueue on a child of a Closing or Closed parent is refused with a reason; nothing
    changes, not even the closed-by-parent mark."""
    decision = decide(
        name="child",
        current=current,
        action=Action.OPEN,
        podgroups=0,
        parent_state=parent,
        closed_by_parent=True,
    )
    assert decision.state is current
    assert decision.closed_by_parent is True
    assert decision.refusal is not None
    assert "child" in decision.refusal
    assert str(parent) in decision.refusal


def test_root_cannot_be_closed() -> None:
    """CloseQueue on root is refused and root stays Open."""
    decision = decide(
        name="root",
        current=OPEN,
        action=Action.CLOSE,
        podgroups=0,
        parent_state=None,
        closed_by_parent=False,
    )
    assert decision.state is OPEN
    assert decision.refusal == "the root queue cannot be closed"


def _queue(
    name: str, *, state: str = "", parent: str = "", annotations: dict[str, str] | None = None
) -> Queue:
    return Queue(
        metadata=ObjectMeta(name=name, annotations=annotations or {}),
        spec=QueueSpec(parent=parent),
        status=QueueStatus(state=state),
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("", OPEN), ("Open", OPEN), ("Closed", CLOSED), ("Closing", CLOSING), ("Weird", UNKNOWN)],
)
def test_current_state(raw: str, expected: QueueState) -> None:
    """An empty state reads as Open and an unrecognised one as Unknown."""
    assert current_state(_queue("q", state=raw)) is expected


@pytest.mark.parametrize(
    ("name", "parent", "expected_parent", "needs_root"),
    [
        ("root", "", None, False),
        ("default", "", "root", True),
        ("a", "b", "b", False),
        ("a", "root", "root", False),
    ],
)
def test_parents(name: str, parent: str, expected_parent: str | None, needs_root: bool) -> None:
    """Every queue but root has a parent, root when spec.parent is empty (and then gets it)."""
    queue = _queue(name, parent=parent)
    assert parent_name(queue) == expected_parent
    assert needs_root_parent(queue) is needs_root


@pytest.mark.parametrize(("value", "marked"), [("true", True), ("false", False), (None, False)])
def test_closed_by_parent_mark(value: str | None, marked: bool) -> None:
    """Only volcano.sh/closed-by-parent=true marks a queue."""
    annotations = {CLOSED_BY_PARENT_KEY: value} if value is not None else {}
    assert is_closed_by_parent(_queue("q", annotations=annotations)) is marked


def test_count_phases() -> None:
    """Counts per phase, every phase present; no phase counts as pending, unknown phases not."""
    phases = ["Running", "Running", "Inqueue", "", "Pending", "Completed", "Bogus"]
    groups = [PodGroup(status=PodGroupStatus(phase=p)) for p in phases]
    assert count_phases(groups) == {
        PodGroupPhase.PENDING: 2,
        PodGroupPhase.RUNNING: 2,
        PodGroupPhase.UNKNOWN: 0,
        PodGroupPhase.INQUEUE: 1,
        PodGroupPhase.COMPLETED: 1,
    }
