"""The scheduler's Prometheus metrics: Volcano's names under the ``caldera_`` prefix
(docs/operations.md lists them)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from caldera.api.resources import Resources
from scheduler.framework.session import SessionResult

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class SchedulerMetrics:
    """Volcano's scheduler metrics under the ``caldera_`` prefix."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.e2e_latency = Histogram(
            "caldera_e2e_scheduling_latency_milliseconds",
            "Time of one scheduling session, snapshot to decisions sent (binds started)",
            buckets=LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.session_latency = Histogram(
            "caldera_session_latency_milliseconds",
            "Time of the pure session (actions and plugins)",
            buckets=LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.attempts = Counter(
            "caldera_schedule_attempts",
            "Pods tried, by result (scheduled, unschedulable, error)",
            ["result"],
            registry=registry,
        )
        self.evictions = Counter(
            "caldera_pod_preemption_victims",
            "Pods evicted by preempt or reclaim",
            registry=registry,
        )
        self.unschedulable_jobs = Gauge(
            "caldera_unschedule_job_count",
            "Jobs not ready after the last session",
            registry=registry,
        )
        self.unschedulable_tasks = Gauge(
            "caldera_unschedule_task_count",
            "Pods not placed in the last session",
            registry=registry,
        )
        self.unschedulable_reasons = Gauge(
            "caldera_unschedule_task_reason_count",
            "Pods not placed in the last session, by reason (a pod counts under every reason "
            "a node gave)",
            ["reason"],
            registry=registry,
        )
        self.action_latency = Histogram(
            "caldera_action_scheduling_latency_milliseconds",
            "Time of one action in a session",
            ["action"],
            buckets=LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.skipped = Counter(
            "caldera_sessions_skipped",
            "Sessions skipped: nothing changed since one that changed nothing",
            registry=registry,
        )
        self.plugin_latency = Histogram(
            "caldera_plugin_scheduling_latency_milliseconds",
            "Time of a plugin's session open or close",
            ["plugin", "OnSession"],
            buckets=LATENCY_BUCKETS_MS,
            registry=registry,
        )
        queue = ["queue_name"]
        self.queue_allocated_cpu = Gauge(
            "caldera_queue_allocated_milli_cpu",
            "CPU held by a queue's pods",
            queue,
            registry=registry,
        )
        self.queue_allocated_memory = Gauge(
            "caldera_queue_allocated_memory_bytes",
            "Memory held by a queue's pods",
            queue,
            registry=registry,
        )
        self.queue_deserved_cpu = Gauge(
            "caldera_queue_deserved_milli_cpu",
            "CPU a queue deserves (proportion, capacity)",
            queue,
            registry=registry,
        )
        self.queue_deserved_memory = Gauge(
            "caldera_queue_deserved_memory_bytes",
            "Memory a queue deserves (proportion, capacity)",
            queue,
            registry=registry,
        )
        self.queue_deserved_scalar = Gauge(
            "caldera_queue_deserved_scalar_resources",
            "Other resources a queue deserves, in thousandths (proportion, capacity)",
            [*queue, "resource"],
            registry=registry,
        )
        # capacity: the queue's effective capability and real capability (what it may hold
        # once the other queues' guarantees are set aside); unlimited resources have no series.
        self.queue_capacity = _ResourceGauges(
            registry, "capacity", "A queue's capability (capacity plugin)"
        )
        self.queue_real_capacity = _ResourceGauges(
            registry,
            "real_capacity",
            "The most a queue may hold, other queues' guarantees set aside (capacity plugin)",
        )
        self.queue_share = Gauge(
            "caldera_queue_share",
            "Largest allocated/deserved ratio of a queue",
            queue,
            registry=registry,
        )
        self.job_share = Gauge(
            "caldera_job_share",
            "Dominant resource share of a job (drf)",
            ["job_ns", "job_id"],
            registry=registry,
        )

    def observe(self, result: SessionResult) -> None:
        """Export a session's timings and its queue and job shares; the share gauges are rebuilt
        each session, so queues and jobs that are gone lose their series."""
        for action, seconds in result.action_seconds.items():
            self.action_latency.labels(action=action).observe(seconds * 1000)
        for (plugin, phase), seconds in result.plugin_seconds.items():
            self.plugin_latency.labels(plugin=plugin, OnSession=phase).observe(seconds * 1000)
        for gauge in (
            self.queue_allocated_cpu,
            self.queue_allocated_memory,
            self.queue_deserved_cpu,
            self.queue_deserved_memory,
            self.queue_deserved_scalar,
            self.queue_share,
            self.job_share,
        ):
            gauge.clear()
        self.queue_capacity.replace(result.queue_capability)
        self.queue_real_capacity.replace(result.queue_real_capability)
        for name, allocated in result.queue_allocated.items():
            self.queue_allocated_cpu.labels(queue_name=name).set(allocated.get("cpu"))
            self.queue_allocated_memory.labels(queue_name=name).set(allocated.get("memory") // 1000)
        for name, deserved in result.queue_deserved.items():
            self.queue_deserved_cpu.labels(queue_name=name).set(deserved.get("cpu"))
            self.queue_deserved_memory.labels(queue_name=name).set(deserved.get("memory") // 1000)
            for resource, amount in deserved.items():
                if resource not in ("cpu", "memory"):
                    self.queue_deserved_scalar.labels(queue_name=name, resource=resource).set(
                        amount
                    )
        for name, share in result.queue_share.items():
            self.queue_share.labels(queue_name=name).set(share)
        for key, share in result.job_share.items():
            namespace, _, name = key.partition("/")
            self.job_share.labels(job_ns=namespace, job_id=name).set(share)


class _ResourceGauges:
    """Volcano's three series of one queue figure: ``caldera_queue_<what>_milli_cpu``,
    ``_memory_bytes`` and ``_scalar_resources{resource}`` (other resources, in thousandths),
    per ``queue_name``; a resource a queue does not list gets no series."""

    def __init__(self, registry: CollectorRegistry, what: str, help_text: str) -> None:
        queue = ["queue_name"]
        self.cpu = Gauge(
            f"caldera_queue_{what}_milli_cpu", f"{help_text}: cpu", queue, registry=registry
        )
        self.memory = Gauge(
            f"caldera_queue_{what}_memory_bytes", f"{help_text}: memory", queue, registry=registry
        )
        self.scalar = Gauge(
            f"caldera_queue_{what}_scalar_resources",
            f"{help_text}: other resources, in thousandths",
            [*queue, "resource"],
            registry=registry,
        )

    def replace(self, amounts: Mapping[str, Resources]) -> None:
        """Drop every series and set those of ``amounts`` (queue -> resources)."""
        for gauge in (self.cpu, self.memory, self.scalar):
            gauge.clear()
        for name, listed in amounts.items():
            for resource, amount in listed.items():
                if resource == "cpu":
                    self.cpu.labels(queue_name=name).set(amount)
                elif resource == "memory":
                    self.memory.labels(queue_name=name).set(amount // 1000)
                else:
                    self.scalar.labels(queue_name=name, resource=resource).set(amount)
