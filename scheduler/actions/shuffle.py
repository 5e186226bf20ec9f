"""The shuffle action: evict the running pods the plugins' victim-tasks functions choose
(Volcano's pkg/scheduler/actions/shuffle; the rescheduling plugin proposes them, pdb screens
them: ``Session.victim_tasks``). The pods' owners recreate them and later sessions place them
again.

Argument (Caldera's; Volcano's action has none): ``maxEvictions`` (20), the most pods one
session evicts, the first proposed first, so that no configuration evicts a whole cluster at
once. Without a plugin proposing victims the action costs nothing: it does not even list the
running pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from scheduler.api.types import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

DEFAULT_MAX_EVICTIONS: Final = 20
MAX_EVICTIONS_LIMIT: Final = 10_000
REASON: Final = "shuffle"


def max_evictions(args: Mapping[str, Any]) -> int:
    """The ``maxEvictions`` argument, checked (1 to 10000)."""
    value = args.get("maxEvictions", DEFAULT_MAX_EVICTIONS)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"maxEvictions must be a whole number, got {value!r}")
    if not 1 <= value <= MAX_EVICTIONS_LIMIT:
        raise ValueError(f"maxEvictions must be from 1 to {MAX_EVICTIONS_LIMIT}, got {value}")
    return value


class ShuffleAction:
    """Evicts what the victim-tasks functions choose, at most ``maxEvictions`` a session."""

    name = "shuffle"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.limit = max_evictions(args)

    def execute(self, ssn: Session) -> None:
        if not ssn.proposes_victim_tasks():
            return
        running: list[TaskInfo] = []
        for key in sorted(ssn.jobs):
            bucket = ssn.jobs[key].by_status.get(TaskStatus.RUNNING)
            if bucket:
                running.extend(sorted(bucket.values(), key=lambda t: t.key))
        victims = ssn.victim_tasks(running)[: self.limit]
        if not victims:
            return
        stmt = ssn.statement()
        for task in victims:
            stmt.evict(task, REASON)
        stmt.commit()
