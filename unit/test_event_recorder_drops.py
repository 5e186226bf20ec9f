"""The event recorder under a flood: events past its pending bound are dropped and counted,
and the drops are logged once per interval, not once per event (a flood of millions of
events must not become millions of log lines)."""

from __future__ import annotations

from typing import Any, cast

from prometheus_client import CollectorRegistry

from caldera.api.meta import ObjectReference
from caldera.kube.client import KubeClient
from caldera.kube.events import DROP_LOG_INTERVAL, EventRecorder


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
    pod = ObjectReference(api_version="v1", kind="Pod", namespace="ns", name="p")
    for i in range(5000):
        recorder.record(pod, "Normal", "Scheduled", f"assigned to n{i}")
    assert len(log.warnings) == 1
    clock[0] += DROP_LOG_INTERVAL
    recorder.record(pod, "Normal", "Scheduled", "one more")
    assert len(log.warnings) == 2
    assert log.warnings[1]["dropped"] == 5000  # the 4,999 after the first line, and this one
    dropped = registry.get_sample_value("caldera_events_recorded_total", {"result": "dropped"})
    assert dropped == 5001
    await recorder.close(timeout=1)
