"""PodGroup status writes as merge patches (scheduler.status_patch): only what changed, zero
values removed as Volcano's omitempty fields read, the uid as a guard, and the PodGroups as
decided until the cache shows each write."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import PodGroup, PodGroupCondition, PodGroupStatus
from scheduler.live_snapshot import KeyedObjects
from scheduler.status_patch import AssumedPodGroups, merge, patched, podgroup_patch

SCHEDULED = PodGroupCondition(
    type="Scheduled",
    status="True",
    transition_id="t-1",
    last_transition_time="2026-11-29T13:00:00Z",
    reason="tasks in gang are ready to be scheduled",
    message="",
)


def _pg(status: PodGroupStatus, **annotations: str) -> PodGroup:
    meta = ObjectMeta(name="pg", namespace="ns", uid="uid-1", resource_version="7")
    meta = msgspec.structs.replace(meta, annotations=annotations)
    return PodGroup(metadata=meta, status=status)


def test_pending_to_running_names_only_what_changed() -> None:
    """A plain pod's PodGroup, Pending to Running in one session: phase, running and the
    condition, nothing else; no resourceVersion (no Conflict when the cache lags)."""
    cached = _pg(PodGroupStatus(phase="Pending"))
    desired = _pg(PodGroupStatus(phase="Running", running=1, conditions=(SCHEDULED,)))
    patch = podgroup_patch(cached, desired)
    assert msgspec.json.decode(msgspec.json.encode(patch)) == {  # as sent
        "metadata": {"uid": "uid-1"},
        "status": {
            "phase": "Running",
            "running": 1,
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "transitionID": "t-1",
                    "lastTransitionTime": "2026-11-29T13:00:00Z",
                    "reason": "tasks in gang are ready to be scheduled",
                }
            ],
        },
    }


def test_a_count_back_to_zero_is_removed_and_no_change_is_no_patch() -> None:
    """Volcano's counts are omitempty: back to 0 the field goes (null), as a PUT of Volcano's
    object leaves it; the same status is no write."""
    cached = _pg(PodGroupStatus(phase="Running", running=2, succeeded=1))
    desired = _pg(PodGroupStatus(phase="Running", succeeded=3))
    assert podgroup_patch(cached, desired) == {
        "metadata": {"uid": "uid-1"},
        "status": {"running": None, "succeeded": 3},
    }
    assert podgroup_patch(cached, cached) is None


def test_annotations_changed_and_removed_go_in_the_same_patch() -> None:
    cached = _pg(PodGroupStatus(phase="Pending"), why="old", keep="k", gone="x")
    desired = _pg(PodGroupStatus(phase="Pending"), why="new", keep="k")
    assert podgroup_patch(cached, desired) == {
        "metadata": {"uid": "uid-1", "annotations": {"why": "new", "gone": None}}
    }


def test_a_later_patch_names_what_the_earlier_one_named() -> None:
    """Decided Inqueue (not yet in the cache), then back to Pending: the later patch, which
    replaces the earlier one whether it was sent or not, names phase again."""
    cached = _pg(PodGroupStatus(phase="Pending"))
    earlier = podgroup_patch(cached, _pg(PodGroupStatus(phase="Inqueue")))
    assert earlier is not None
    later = podgroup_patch(cached, cached, earlier)
    assert later == {"metadata": {"uid": "uid-1"}, "status": {"phase": "Pending"}}


def test_merge_follows_rfc_7386() -> None:
    assert merge({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}, "f": [1]}) == {
        "a": 1,
        "b": {"d": 3, "e": 4},
        "f": [1],
    }
    assert merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}  # lists are replaced whole


_status = st.builds(
    PodGroupStatus,
    phase=st.sampled_from(["", "Pending", "Inqueue", "Running", "Completed"]),
    conditions=st.sampled_from([(), (SCHEDULED,)]),
    running=st.integers(0, 3),
    succeeded=st.integers(0, 3),
    failed=st.integers(0, 3),
)
_annotations = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]))


@given(before=_status, after=_status, had=_annotations, has=_annotations)
def test_the_patch_applied_to_the_cached_podgroup_is_the_desired_one(
    before: PodGroupStatus,
    after: PodGroupStatus,
    had: dict[str, str],
    has: dict[str, str],
) -> None:
    """Whatever the two states: the cache's PodGroup with the patch applied (as the API server
    applies it) reads exactly as the desired one, and the wire JSON too."""
    cached, desired = _pg(before, **had), _pg(after, **has)
    patch = podgroup_patch(cached, desired)
    if patch is None:
        assert cached == desired
        return
    assert patched(cached, patch) == desired
    # On the wire: an emptied map reads as absent (omitempty), as the API server answers it.
    assert msgspec.convert(merge(msgspec.to_builtins(cached), patch), PodGroup) == desired


def test_assumed_podgroups_read_as_decided_until_the_cache_shows_the_write() -> None:
    """The sessions read the decided status while the write waits or flies (a job enqueued is
    not Pending again); another writer's change meanwhile keeps the patch on top; the cache
    showing the write ends the assumption, and so does a PodGroup of that name made again."""
    store: KeyedObjects[PodGroup] = KeyedObjects()
    cached = _pg(PodGroupStatus(phase="Pending"))
    store.items["ns/pg"] = cached
    view = AssumedPodGroups(store)
    patch = podgroup_patch(cached, _pg(PodGroupStatus(phase="Inqueue")))
    assert patch is not None
    view.assume("ns/pg", patch)
    assert view.get("ns/pg").status.phase == "Inqueue"  # type: ignore[union-attr]
    assert [pg.status.phase for pg in view.list()] == ["Inqueue"]

    other = _pg(PodGroupStatus(phase="Pending"), note="queue controller")
    store.items["ns/pg"] = other
    assert not view.seen(other)  # not our write yet
    assert view.get("ns/pg") == _pg(PodGroupStatus(phase="Inqueue"), note="queue controller")

    landed = _pg(PodGroupStatus(phase="Inqueue"), note="queue controller")
    store.items["ns/pg"] = landed
    assert view.seen(landed)
    assert view.patches == {}

    view.assume("ns/pg", patch)
    again = PodGroup(metadata=ObjectMeta(name="pg", namespace="ns", uid="uid-2"))
    store.items["ns/pg"] = again
    assert view.get("ns/pg") is again  # a patch for uid-1 does not apply to uid-2
    assert view.seen(again)
