"""The discrete-event queue: actions due at virtual times, run in time order, and in the order
they were scheduled among equal times. An action may schedule more, at the same time or later;
one scheduled for the time being run runs in the same batch. Cancelling is the action's own
business (it checks whether what it was for still holds), so nothing is ever removed."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

Action = Callable[[], None]


class Timeline:
    """See the module docstring."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Action]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, when: float, action: Action) -> None:
        """Run ``action`` at virtual time ``when``."""
        heapq.heappush(self._heap, (when, next(self._order), action))

    def next_time(self) -> float | None:
        """When the next action is due, None when nothing is."""
        return self._heap[0][0] if self._heap else None

    def run_due(self, when: float) -> int:
        """Run every action due at or before ``when`` (including those they schedule for then);
        the number run."""
        ran = 0
        heap = self._heap
        while heap and heap[0][0] <= when:
            _, _, action = heapq.heappop(heap)
            action()
            ran += 1
        return ran
