"""Prometheus metrics of the informers and work queues.

Names and meanings follow client-go's and controller-runtime's `workqueue_*` metrics, with the
`caldera_` prefix, so existing dashboards and alerts carry over by changing the prefix. Nothing is
registered at import time: each class registers its metric families in the `CollectorRegistry` it
is given (one registry per process; tests build their own), and a second instance on the same
registry fails loudly with prometheus_client's duplicate-name error instead of mixing series.

The two "in flight" gauges (unfinished work, longest running processor) are computed at scrape time
with `set_function` from the queue's start times, instead of client-go's periodic updater
goroutine: no background task to own, and the value is never stale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "InFlight",
    "InformerMetrics",
    "NoQueueMetrics",
    "QueueMetrics",
    "QueueMetricsRecorder",
    "WorkQueueMetrics",
]

# controller-runtime's workqueue buckets: ExponentialBuckets(10e-9, 10, 12), i.e. 10 ns .. 1000 s.
LATENCY_BUCKETS = tuple(10.0**exponent for exponent in range(-8, 4))

InFlight = Callable[[], tuple[float, float]]
"""Returns (sum of the running times of in-flight items, longest running time), in seconds."""


class QueueMetricsRecorder(Protocol):
    """What a work queue reports. Called synchronously on the loop; must not block."""

    def added(self) -> None:
        """A key was accepted (not a duplicate of one already waiting)."""

    def set_depth(self, depth: int) -> None:
        """The number of keys waiting to be processed changed."""

    def started(self, waited: float) -> None:
        """A key was handed to a worker after waiting `waited` seconds since it was added."""

    def finished(self, worked: float) -> None:
        """A worker called done after `worked` seconds of processing."""

    def retried(self) -> None:
        """A key was scheduled for a later add (rate-limited or delayed)."""


class NoQueueMetrics:
    """A recorder that records nothing, for queues built without metrics."""

    def added(self) -> None:
        pass

    def set_depth(self, depth: int) -> None:
        pass

    def started(self, waited: float) -> None:
        pass

    def finished(self, worked: float) -> None:
        pass

    def retried(self) -> None:
        pass


class WorkQueueMetrics:
    """The `caldera_workqueue_*` metric families, labelled by queue `name`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["name"]
        self.depth = Gauge(
            "caldera_workqueue_depth",
            "Current depth of the work queue.",
            labels,
            registry=registry,
        )
        # prometheus_client appends `_total` to counters on exposition.
        self.adds = Counter(
            "caldera_workqueue_adds",
            "Total number of adds handled by the work queue.",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "caldera_workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the work queue before being requested.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.work_duration = Histogram(
            "caldera_workqueue_work_duration_seconds",
            "How long in seconds processing an item from the work queue takes.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.retries = Counter(
            "caldera_workqueue_retries",
            "Total number of retries handled by the work queue.",
            labels,
            registry=registry,
        )
        self.unfinished_work = Gauge(
            "caldera_workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and has not been observed"
            " by work_duration. Large values indicate stuck workers.",
            labels,
            registry=registry,
        )
        self.longest_running_processor = Gauge(
            "caldera_workqueue_longest_running_processor_seconds",
            "How many seconds the longest running processor of the work queue has been running.",
            labels,
            registry=registry,
        )

    def for_queue(self, name: str, *, in_flight: InFlight) -> QueueMetrics:
        """A recorder bound to the series of queue `name`. Queue names must be unique."""
        return QueueMetrics(self, name, in_flight=in_flight)


class QueueMetrics:
    """The series of one queue; implements `QueueMetricsRecorder`."""

    def __init__(self, families: WorkQueueMetrics, name: str, *, in_flight: InFlight) -> None:
        self._depth = families.depth.labels(name=name)
        self._adds = families.adds.labels(name=name)
        self._queue_duration = families.queue_duration.labels(name=name)
        self._work_duration = families.work_duration.labels(name=name)
        self._retries = families.retries.labels(name=name)
        # A scrape may run on another thread (prometheus_client's own HTTP server); `in_flight`
        # must therefore only take snapshots of the queue's state, never iterate it live.
        families.unfinished_work.labels(name=name).set_function(lambda: in_flight()[0])
        families.longest_running_processor.labels(name=name).set_function(lambda: in_flight()[1])

    def added(self) -> None:
        self._adds.inc()

    def set_depth(self, depth: int) -> None:
        self._depth.set(depth)

    def started(self, waited: float) -> None:
        self._queue_duration.observe(waited)

    def finished(self, worked: float) -> None:
        self._work_duration.observe(worked)

    def retried(self) -> None:
        self._retries.inc()


class InformerMetrics:
    """The `caldera_informer_*` metric families, for the reflector.

    - `events{resource,type}`: watch events received (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR);
    - `watch_restarts{resource}`: watches re-opened from the last resource version;
    - `relists{resource}`: full LISTs after the first (410 Gone, or errors);
    - `objects{resource}`: objects in the cache.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            "caldera_informer_events",
            "Watch events received by the informer, by resource and event type.",
            ["resource", "type"],
            registry=registry,
        )
        self.watch_restarts = Counter(
            "caldera_informer_watch_restarts",
            "Watches re-opened from the last seen resource version.",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "caldera_informer_relists",
            "Full LISTs done after the initial one (watch expired or failed).",
            ["resource"],
            registry=registry,
        )
        self.objects = Gauge(
            "caldera_informer_objects",
            "Objects held in the informer cache.",
            ["resource"],
            registry=registry,
        )
