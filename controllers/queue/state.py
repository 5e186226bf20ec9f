"""The Queue state machine and hierarchy rules, as pure functions.

States are Volcano's (pkg/controllers/queue/state/): Open, Closing, Closed, Unknown; an empty
``status.state`` counts as Open. What moves a queue:

- an action: ``OPEN`` or ``CLOSE`` from a Command, or ``SYNC`` for every other reason to look;
- how many PodGroups name the queue: a closed queue with PodGroups is Closing until they are gone;
- its parent's state: a child cannot be open under a Closing or Closed parent. When a parent
  closes, each open child is closed too and marked ``volcano.sh/closed-by-parent=true``; when the
  parent is open again, exactly the marked children reopen. An explicit command on a child clears
  its mark, so a child a user closed stays closed when its parent reopens.

``decide`` is the whole machine.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from caldera.api.volcano import CLOSED_BY_PARENT_KEY, ROOT_QUEUE, Queue, QueueState


class Action(enum.StrEnum):
    """Why the queue is looked at: a Command's action, or a plain sync."""

    OPEN = "OpenQueue"
    CLOSE = "CloseQueue"
    SYNC = "SyncQueue"


KNOWN_STATES = frozenset(QueueState)
CLOSED_STATES = frozenset({QueueState.CLOSED, QueueState.CLOSING})


@dataclass(frozen=True, slots=True)
class Decision:
    """Where the queue should be: its state, whether it carries the closed-by-parent mark, and,
    when a command was refused, the reason to tell the user."""

    state: QueueState
    closed_by_parent: bool
    refusal: str | None = None


def current_state(queue: Queue) -> QueueState:
    """The queue's state as the machine reads it: "" is Open, an unrecognised value Unknown."""
    raw = queue.status.state
    if not raw:
        return QueueState.OPEN
    return QueueState(raw) if raw in KNOWN_STATES else QueueState.UNKNOWN


def is_closed_by_parent(queue: Queue) -> bool:
    """Whether the queue carries ``volcano.sh/closed-by-parent=true``."""
    return queue.metadata.annotations.get(CLOSED_BY_PARENT_KEY) == "true"


def parent_name(queue: Queue) -> str | None:
    """The queue's parent: ``spec.parent``, root when unset, None for root itself."""
    if queue.metadata.name == ROOT_QUEUE:
        return None
    return queue.spec.parent or ROOT_QUEUE


def needs_root_parent(queue: Queue) -> bool:
    """True for a queue other than root that has no ``spec.parent`` (it gets parent=root)."""
    return queue.metadata.name != ROOT_QUEUE and not queue.spec.parent


def _closed_or_closing(podgroups: int) -> QueueState:
    return QueueState.CLOSING if podgroups > 0 else QueueState.CLOSED


def decide(
    *,
    name: str,
    current: QueueState,
    action: Action,
    podgroups: int,
    parent_state: QueueState | None,
    closed_by_parent: bool,
) -> Decision:
    """The state a queue should have after ``action``.

    ``podgroups`` counts the PodGroups that name the queue; ``parent_state`` is the parent's
    state, or None when the queue has no parent or the parent does not exist (then nothing is
    inherited).
    """
    parent_closed = parent_state in CLOSED_STATES
    if action is Action.OPEN:
        if parent_closed:
            return Decision(
                current,
                closed_by_parent,
                refusal=f"queue {name} cannot be opened while its parent is {parent_state}",
            )
        return Decision(QueueState.OPEN, closed_by_parent=False)
    if action is Action.CLOSE:
        if name == ROOT_QUEUE:
            return Decision(current, closed_by_parent, refusal="the root queue cannot be closed")
        return Decision(_closed_or_closing(podgroups), closed_by_parent=False)
    # SYNC: the parent wins first, then the queue's own transitions.
    if parent_closed and current in (QueueState.OPEN, QueueState.UNKNOWN):
        return Decision(_closed_or_closing(podgroups), closed_by_parent=True)
    if not parent_closed and closed_by_parent and current in CLOSED_STATES:
        return Decision(QueueState.OPEN, closed_by_parent=False)
    if current is QueueState.CLOSING:
        return Decision(_closed_or_closing(podgroups), closed_by_parent)
    return Decision(current, closed_by_parent)
