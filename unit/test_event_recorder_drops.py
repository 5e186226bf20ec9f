"""The event recorder under a flood: each object has a budget of events (client-go's spam
filter: 25, then one per 5 minutes), events past the pending bound are dropped and counted,
and the drops are logged once per interval, not once per event (a flood of millions of
events must not become millions of log lines)."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import CollectorRegistry

from caldera.api.meta import ObjectReference
from caldera.kube.client import KubeClient
from caldera.kube.events import (
    DROP_LOG_INTERVAL,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    EventRecorder,
)


class Log:
    def __init__(self) -> None:
        self.warnings: list[dict[str, Any]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append({"event": event, **fields})

    def exception(self, event: str, **fields: Any) -> None:
        raise AssertionError(event)

    error = exception


async def test_a_flood_of_dropped_events_logs_one_line_per_interval() -> None:
    clock = [100.0]
    log, registry = Log(), CollectorRegistry()
    recorder = EventRecorder(
        cast(KubeClient, object()),
        "caldera-scheduler",
        max_pending=0,  # every event is over the bound
        registry=registry,
        logger=log,
        clock=lambda: clock[0],
    )
    for i in range(5000):
        pod = ObjectReference(api_version="v1", kind="Pod", namespace="ns", name=f"p{i}")
        recorder.record(pod, "Normal", "Scheduled", "assigned")
    assert len(log.warnings) == 1
    clock[0] += DROP_LOG_INTERVAL
    pod = ObjectReference(api_version="v1", kind="Pod", namespace="ns", name="p")
    recorder.record(pod, "Normal", "Scheduled", "one more")
    assert len(log.warnings) == 2
    assert log.warnings[1]["dropped"] == 5000  # the 4,999 after the first line, and this one
    dropped = registry.get_sample_value("caldera_events_recorded_total", {"result": "dropped"})
    assert dropped == 5001
    await recorder.close(timeout=1)


async def test_each_object_has_a_budget_of_events_refilled_over_time() -> None:
    clock = [0.0]
    registry = CollectorRegistry()
    recorder = EventRecorder(
        cast(KubeClient, object()),
        "caldera-scheduler",
        max_pending=0,  # nothing is sent: only the budget decides what is kept
        registry=registry,
        logger=Log(),
        clock=lambda: clock[0],
    )
    waiting = ObjectReference(kind="PodGroup", namespace="ns", name="pg", uid="u1")
    other = ObjectReference(kind="PodGroup", namespace="ns", name="other", uid="u2")

    def filtered() -> float | None:
        return registry.get_sample_value("caldera_events_recorded_total", {"result": "filtered"})

    for _ in range(SPAM_BURST + 10):  # a session a second re-records the reason
        recorder.record(waiting, "Warning", "Unschedulable", "0/3 tasks in gang unschedulable")
        clock[0] += 1
    assert filtered() == 10
    recorder.record(other, "Warning", "Unschedulable", "another object has its own budget")
    assert filtered() == 10
    clock[0] += SPAM_REFILL_SECONDS  # one more event's worth
    recorder.record(waiting, "Warning", "Unschedulable", "0/3 tasks in gang unschedulable")
    recorder.record(waiting, "Warning", "Unschedulable", "0/3 tasks in gang unschedulable")
    assert filtered() == 11
    await recorder.close(timeout=1)
