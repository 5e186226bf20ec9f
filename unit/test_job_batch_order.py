"""The order in which one reconcile handles its batch of requests (controllers/job/events.py,
``events_first``): found by the chaos run, where the controller lagged behind a burst and a sync
queued before a pod's PodFailed ended an ``exitCode: AbortJob`` job Failed instead of Aborted;
and then a sync whose batch was drained before such a pod failed (``waits_for_events``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from caldera.api.volcano import Action, Event
from controllers.job.events import Request, events_first
from controllers.job.policy import Decision, waits_for_events


def req(event: Event | None, pod: str = "", action: Action | None = None) -> Request:
    return Request("ns", "j", event=event, pod_name=pod, action=action)


def test_pod_events_run_before_the_syncs_queued_ahead_of_them() -> None:
    batch = [
        req(Event.POD_RUNNING, "a"),
        req(Event.OUT_OF_SYNC),
        req(Event.POD_FAILED, "a"),
        req(None),
        req(Event.POD_FAILED, "b"),
    ]
    assert events_first(batch) == [
        req(Event.POD_FAILED, "a"),
        req(Event.POD_FAILED, "b"),
        req(None),
    ]


def test_commands_and_pending_pods_keep_their_place_among_the_events() -> None:
    command = req(Event.COMMAND_ISSUED, action=Action.ABORT_JOB)
    pending = req(Event.POD_PENDING, "a")
    batch = [req(Event.OUT_OF_SYNC), pending, command, req(Event.TASK_COMPLETED, "b")]
    assert events_first(batch) == [
        pending,
        command,
        req(Event.TASK_COMPLETED, "b"),
        req(Event.OUT_OF_SYNC),
    ]


EVENTS = st.sampled_from([None, *Event])
ITEMS = st.lists(st.builds(req, EVENTS, st.sampled_from(["", "a", "b"])), max_size=12)


@given(ITEMS)
def test_nothing_but_redundant_syncs_is_dropped(batch: list[Request]) -> None:
    ordered = events_first(batch)
    plain = [r for r in batch if r.event in (None, Event.OUT_OF_SYNC, Event.POD_RUNNING)]
    others = [r for r in batch if r not in plain]
    assert ordered[: len(others)] == others
    assert ordered[len(others) :] == plain[-1:]


def test_a_sync_waits_for_a_pod_event_still_to_come() -> None:
    """The full chaos run's find: a pod failed before its PodFailed was handled (later in the
    batch, or posted while the batch wrote); the cache already shows it Failed, so a sync,
    even one a PodPending asked for, must not judge yet."""
    assert waits_for_events(Decision(Action.SYNC_JOB), [req(Event.POD_FAILED, "a")])
    assert waits_for_events(Decision(Action.SYNC_JOB), [req(None), req(Event.TASK_COMPLETED)])


def test_a_sync_runs_when_only_plain_syncs_wait_and_other_actions_never_wait() -> None:
    assert not waits_for_events(Decision(Action.SYNC_JOB), [])
    assert not waits_for_events(
        Decision(Action.SYNC_JOB), [req(None), req(Event.OUT_OF_SYNC), req(Event.POD_RUNNING)]
    )
    assert not waits_for_events(Decision(Action.ABORT_JOB), [req(Event.POD_FAILED, "a")])
    assert not waits_for_events(Decision(Action.RESTART_JOB), [req(Event.POD_FAILED, "a")])
