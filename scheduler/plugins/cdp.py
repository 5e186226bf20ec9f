"""cdp: cooldown protection, Volcano's plugin (v1.9+; volcano#2075): a pod that has just started
is not preempted or reclaimed within its cooldown time.

Elastic jobs' pods may be preempted, come back and be preempted again moments later; a pod
labelled or annotated ``volcano.sh/cooldown-time`` (a Go duration: ``10m``, ``1h30m``; the
label is read first, as in Volcano) is kept out of the victims of preempt and reclaim while

    the pod is Running and its PodScheduled condition turned True less than the cooldown ago

(``TaskInfo.scheduled_at``; Volcano reads the same condition). A pod without the key, not
Running, or without that condition is a victim as any other.

Beyond Volcano:
- the session's clock (``ssn.now``), not the wall clock, so the simulator and the tests see the
  same decisions;
- a protected candidate asks for a session when its cooldown ends (``SessionResult.revisit``),
  so a preemptor waiting for it is served then, not at the next unrelated change;
- a value that is not a duration gives a Warning Event ``InvalidCooldownTime`` on the pod (once
  per session) instead of a log line only; the pod has no protection, as in Volcano;
- the argument ``cdp.max-cooldown-time`` bounds what a pod may claim: the label is the tenant's,
  and without a bound a queue's pods could escape reclaim by other queues indefinitely.

Like every victim filter, configure it in the tier whose plugins decide victims (the session
takes the first tier that has any; docs/compatibility.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from caldera.api.core import Pod
from caldera.api.duration import DurationError, parse_duration
from scheduler.api.types import TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

COOLDOWN_TIME = "volcano.sh/cooldown-time"
# Caldera's argument: the longest cooldown a pod may claim (a Go duration; unset: no bound, as in
# Volcano). The key is the tenant's: a bound keeps one queue's pods from escaping reclaim by
# other queues for as long as they like.
MAX_COOLDOWN = "cdp.max-cooldown-time"
EVENT_REASON = "InvalidCooldownTime"


def cooldown(pod: Pod) -> dt.timedelta | None:
    """The pod's cooldown, from its label or else its annotation; None without one. Raises
    DurationError naming the key when the value is not a Go duration."""
    text = pod.metadata.labels.get(COOLDOWN_TIME)
    if text is None:
        text = pod.metadata.annotations.get(COOLDOWN_TIME)
    if text is None:
        return None
    try:
        return dt.timedelta(seconds=parse_duration(text))
    except DurationError as err:
        raise DurationError(f"{COOLDOWN_TIME}: {err}") from None


def protected_until(task: TaskInfo, cooling: dt.timedelta) -> dt.datetime | None:
    """When the pod's protection ends: its PodScheduled time plus the cooldown, for a Running
    pod; None when it is not protected at all."""
    pod = task.pod
    if pod is None or pod.status.phase != "Running" or task.scheduled_at is None:
        return None
    return task.scheduled_at + cooling


class CooldownProtectionPlugin:
    """Victims of preempt and reclaim, less the pods still cooling down."""

    name = "cdp"

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments
        self.max_cooldown: dt.timedelta | None = None
        text = arguments.string(MAX_COOLDOWN, "")
        if text:
            try:
                self.max_cooldown = dt.timedelta(seconds=parse_duration(text))
            except DurationError as err:
                raise ValueError(f"plugin cdp: argument {MAX_COOLDOWN}: {err}") from None
        self._reported: set[str] = set()

    def on_session_open(self, ssn: Session) -> None:
        self._reported = set()

        def victims(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            return self.victims(ssn, candidates)

        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)

    def on_session_close(self, ssn: Session) -> None:
        """Nothing to write."""

    def victims(self, ssn: Session, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        chosen: list[TaskInfo] = []
        for task in candidates:
            until = self._protected_until(ssn, task)
            if until is not None and until > ssn.now:
                ssn.result.revisit((until - ssn.now).total_seconds())
            else:
                chosen.append(task)
        return chosen

    def _protected_until(self, ssn: Session, task: TaskInfo) -> dt.datetime | None:
        if task.pod is None:
            return None
        try:
            cooling = cooldown(task.pod)
        except DurationError as err:
            self._report(ssn, task, str(err))
            return None
        if cooling is None:
            return None
        if self.max_cooldown is not None:
            cooling = min(cooling, self.max_cooldown)
        return protected_until(task, cooling)

    def _report(self, ssn: Session, task: TaskInfo, message: str) -> None:
        if task.key in self._reported:
            return
        self._reported.add(task.key)
        ssn.record_event(
            "Pod",
            task.namespace,
            task.name,
            "Warning",
            EVENT_REASON,
            f"{message}; the pod has no cooldown protection",
        )
