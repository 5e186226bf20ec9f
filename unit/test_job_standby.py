"""A standby job controller keeps its cache and queues keys, but records no Event: only the
leader, whose workers run, acts (a standby recording too would double every PodGroupPending)."""

from __future__ import annotations

from caldera.api.meta import ObjectMeta, ObjectReference, OwnerReference
from caldera.api.volcano import BATCH_API_VERSION, PodGroup, PodGroupCondition, PodGroupStatus
from controllers.job.controller import JobController
from unit.offline_controllers import offline_context


class Recorded:
    """The recorder's interface, keeping what it was asked to record."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, involved: ObjectReference, type: str, reason: str, message: str) -> None:
        self.events.append((involved.name, type, reason))


def podgroup(*conditions: PodGroupCondition) -> PodGroup:
    owner = OwnerReference(
        api_version=BATCH_API_VERSION, kind="Job", name="train", uid="u1", controller=True
    )
    return PodGroup(
        metadata=ObjectMeta(name="train-u1", namespace="team-a", owner_references=(owner,)),
        status=PodGroupStatus(phase="Inqueue", conditions=conditions),
    )


UNSCHEDULABLE = PodGroupCondition(
    type="Unschedulable",
    status="True",
    reason="NotEnoughResources",
    message="1/2 tasks in gang unschedulable",
    last_transition_time="2026-01-01T10:00:00Z",
)


async def test_only_the_leader_records_the_pending_event() -> None:
    """The same PodGroup change reaches a standby and the leader; only the leader records."""
    recorder = Recorded()
    ctx = offline_context(recorder=recorder)
    controller = JobController(ctx)
    controller.setup()
    before, after = podgroup(), podgroup(UNSCHEDULABLE)

    working = [controller.working]
    controller._podgroup_updated(before, after)
    assert recorder.events == []

    controller.start(1)
    try:
        working.append(controller.working)
        controller._podgroup_updated(before, after)
        assert recorder.events == [("train", "Warning", "PodGroupPending")]
    finally:
        await controller.shutdown(0.2)
    working.append(controller.working)
    assert working == [False, True, False]
