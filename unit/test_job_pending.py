"""Tests of controllers.job.pending: when the Job gets Volcano's PodGroupPending Warning."""

from __future__ import annotations

import pytest

from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import BATCH_API_VERSION, PodGroup, PodGroupCondition, PodGroupStatus
from controllers.job.pending import pending_event, pending_message

JOB_OWNER = OwnerReference(
    api_version=BATCH_API_VERSION, kind="Job", name="train", uid="job-uid", controller=True
)
T0, T1 = "2026-01-01T10:00:00Z", "2026-01-01T10:05:00Z"
GANG = "3/4 tasks in gang unschedulable: pod group is not ready, 1 Pending, 4 minAvailable"


def cond(
    type_: str, message: str = GANG, *, at: str = T0, status: str = "True"
) -> PodGroupCondition:
    return PodGroupCondition(
        type=type_,
        status=status,
        message=message,
        reason="NotEnoughResources",
        last_transition_time=at,
    )


def pg(*conds: PodGroupCondition, owner: OwnerReference | None = JOB_OWNER) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(
            name="train-job-uid",
            namespace="team-a",
            owner_references=() if owner is None else (owner,),
        ),
        status=PodGroupStatus(phase="Inqueue", conditions=conds),
    )


@pytest.mark.parametrize(
    ("group", "message"),
    [
        pytest.param(pg(), None, id="no-conditions"),
        pytest.param(
            pg(cond("Unschedulable")),
            f"PodGroup team-a:train unschedulable, reason: {GANG}",
            id="unschedulable",
        ),
        pytest.param(pg(cond("Unschedulable", status="False")), None, id="condition-false"),
        pytest.param(pg(cond("Scheduled", "pod group is ready")), None, id="scheduled"),
        pytest.param(
            pg(cond("Unschedulable", at=T1), cond("Scheduled", "ready", at=T0)),
            f"PodGroup team-a:train unschedulable, reason: {GANG}",
            id="unschedulable-after-scheduled",
        ),
        pytest.param(
            pg(cond("Unschedulable", at=T0), cond("Scheduled", "ready", at=T1)),
            None,
            id="scheduled-after-unschedulable",
        ),
        pytest.param(
            pg(cond("Unschedulable", at="garbage"), cond("Scheduled", "ready", at=T0)),
            None,
            id="malformed-time-loses",
        ),
    ],
)
def test_pending_message(group: PodGroup, message: str | None) -> None:
    """Volcano's rule: the latest True condition, unless Scheduled, gives the message, which names
    the Job (not the PodGroup) and the condition type in lower case."""
    assert pending_message(group, "train") == message


@pytest.mark.parametrize(
    ("old", "new", "fires"),
    [
        pytest.param(pg(), pg(cond("Unschedulable")), True, id="becomes-unschedulable"),
        pytest.param(pg(cond("Unschedulable")), pg(cond("Unschedulable")), False, id="resync"),
        pytest.param(
            pg(cond("Unschedulable", at=T0)),
            pg(cond("Unschedulable", at=T1)),
            False,
            id="only-time-changed",
        ),
        pytest.param(
            pg(cond("Unschedulable")),
            pg(cond("Unschedulable", "1/4 tasks in gang unschedulable")),
            True,
            id="message-changed",
        ),
        pytest.param(
            pg(cond("Unschedulable")), pg(cond("Scheduled", "ready", at=T1)), False, id="placed"
        ),
        pytest.param(
            pg(cond("Scheduled", "ready", at=T0)),
            pg(cond("Scheduled", "ready", at=T0), cond("Unschedulable", at=T1)),
            True,
            id="unschedulable-again",
        ),
        pytest.param(pg(owner=None), pg(cond("Unschedulable"), owner=None), False, id="no-job"),
    ],
)
def test_pending_event_fires_on_change_only(old: PodGroup, new: PodGroup, fires: bool) -> None:
    """The Event is due when the message appears or changes, never on a repeat of the same."""
    got = pending_event(old, new)
    assert (got is not None) is fires
    if got is not None:
        job, message = got
        assert (job.kind, job.namespace, job.name, job.uid) == ("Job", "team-a", "train", "job-uid")
        assert message == pending_message(new, "train")
