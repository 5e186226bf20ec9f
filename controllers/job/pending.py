"""The ``PodGroupPending`` Warning Event on a Job whose PodGroup the scheduler cannot place.

Volcano's job controller (v1.11+, ``recordPodGroupEvent`` in
``pkg/controllers/job/job_controller_actions.go``) takes the PodGroup condition with status True
and the latest lastTransitionTime; when that condition is not ``Scheduled`` it records Warning
``PodGroupPending`` on the Job, "PodGroup <namespace>:<job> <type in lower case>, reason:
<condition message>" (releases before v1.11 wrote "unschedule,reason: <message>").

Volcano records it on every sync of the Job and relies on the event recorder's aggregation.
Caldera records it when the PodGroup changes so that the text changes: the PodGroup becomes
Unschedulable, or its unschedulable message changes (for example "3/4 tasks in gang
unschedulable" becomes "1/4 ..."). A resync, a status write that leaves the condition alone, or a
reconcile of the Job never records it again: no event storm.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

from caldera.api.meta import ObjectReference, controller_of, parse_time
from caldera.api.volcano import (
    BATCH_API_VERSION,
    PodGroup,
    PodGroupCondition,
    PodGroupConditionType,
)
from controllers.job.events import job_owner

__all__ = ["PendingEvent", "pending_event", "pending_message"]


def _latest_true(pg: PodGroup) -> PodGroupCondition | None:
    """The True condition with the latest lastTransitionTime; the first of equals wins."""
    latest: PodGroupCondition | None = None
    for cond in pg.status.conditions:
        if cond.status != "True":
            continue
        if latest is None or _time(cond) > _time(latest):
            latest = cond
    return latest


def _time(cond: PodGroupCondition) -> float:
    if not cond.last_transition_time:
        return float("-inf")
    try:
        return parse_time(cond.last_transition_time).timestamp()
    except ValueError:
        return float("-inf")  # a malformed time never wins over a real one


def pending_message(pg: PodGroup, job_name: str) -> str | None:
    """Volcano's PodGroupPending message for `pg`, or None when its latest True condition is
    Scheduled (or it has none)."""
    cond = _latest_true(pg)
    if cond is None or cond.type == PodGroupConditionType.SCHEDULED:
        return None
    return (
        f"PodGroup {pg.metadata.namespace}:{job_name} {cond.type.lower()}, reason: {cond.message}"
    )


PendingEvent = tuple[ObjectReference, str]


def pending_event(old: PodGroup, new: PodGroup) -> PendingEvent | None:
    """The (Job, message) of a PodGroupPending Event the update `old` -> `new` calls for.

    None unless `new` is controlled by a Volcano Job and its pending message is set and differs
    from `old`'s.
    """
    owner = job_owner(controller_of(new.metadata))
    if owner is None:
        return None
    message = pending_message(new, owner.name)
    if message is None or message == pending_message(old, owner.name):
        return None
    job = ObjectReference(
        api_version=BATCH_API_VERSION,
        kind="Job",
        namespace=new.metadata.namespace,
        name=owner.name,
        uid=owner.uid,
    )
    return job, message
