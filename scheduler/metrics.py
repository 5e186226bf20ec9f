"""The scheduler's Prometheus metrics: Volcano's names under the ``caldera_`` prefix
(docs/operations.md lists them; ``caldera.obs.volcano`` also exports them as ``volcano_*``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from caldera.api.resources import Resources
from scheduler.framework.session import SessionResult

LATENCY_BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
# From a second to ten minutes: jobs wait for room far longer than a session takes.
JOB_LATENCY_BUCKETS_MS = (
    100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000, 600000
)  # fmt: skip
# Per-queue figures, Volcano's names (queue_<figure>_milli_cpu, ...), and what each holds.
QUEUE_FIGURES: Final = {
    "allocated": "held by a queue's pods",
    "deserved": "a queue deserves (proportion or capacity)",
    "request": "a queue's jobs hold and ask for (proportion)",
    "inqueue": "reserved by a queue's admitted jobs not yet running (proportion)",
    "capacity": "of a queue's capability (proportion or capacity; unlimited: no series)",
    "real_capacity": "a queue may ever hold: capability within what guarantees leave",
}
# Not scalar resources: cpu and memory have their own series; the rest Volcano does not track.
NOT_SCALAR: Final = frozenset({"cpu", "memory", "pods", "ephemeral-storage", "storage"})


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
        self.status_writes = Counter(
            "caldera_status_writes",
            "Status writes sent apart from the sessions, by kind (PodGroup, Queue, Pod: the "
            "PodScheduled condition) and result (written; refused: gone, replaced or invalid; "
            "failed: transient, tried again up to 5 times)",
            ["kind", "result"],
            registry=registry,
        )
        self.status_queue = Gauge(
            "caldera_status_write_queue_length",
            "Status writes decided and not yet sent (one per object at most)",
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
        # Per queue, Volcano's families: <figure>_milli_cpu, <figure>_memory_bytes and
        # <figure>_scalar_resources{resource} (every other resource, GPUs included, in
        # milli-units as Volcano counts them).
        self.queue_resources = {
            figure: _QueueResourceGauges(registry, figure, help_text)
            for figure, help_text in QUEUE_FIGURES.items()
        }
        self.queue_share = Gauge(
            "caldera_queue_share",
            "Largest allocated/deserved ratio of a queue",
            queue,
            registry=registry,
        )
        self.queue_weight = Gauge(
            "caldera_queue_weight", "Weight of a queue (proportion)", queue, registry=registry
        )
        self.queue_overused = Gauge(
            "caldera_queue_overused",
            "1 when a queue holds at least its deserved share of every resource (proportion)",
            queue,
            registry=registry,
        )
        # GPU cards shared by deviceshare, per node and card: Caldera's names, and Volcano's
        # (vgpu/metrics.go: labels devID and NodeName, memory in MiB) for --volcano-metrics.
        card = ["node", "uuid"]
        self.card_memory = Gauge(
            "caldera_gpu_card_memory_bytes", "Memory of a GPU card", card, registry=registry
        )
        self.card_memory_used = Gauge(
            "caldera_gpu_card_memory_used_bytes",
            "GPU card memory given to pods (deviceshare)",
            card,
            registry=registry,
        )
        self.card_cores_used = Gauge(
            "caldera_gpu_card_cores_used_percent",
            "Percent of a GPU card's compute given to pods (deviceshare)",
            card,
            registry=registry,
        )
        self.card_pods = Gauge(
            "caldera_gpu_card_pods",
            "Pods sharing a GPU card (deviceshare)",
            card,
            registry=registry,
        )
        device = ["devID", "NodeName"]
        self.vgpu_shared = Gauge(
            "caldera_vgpu_device_shared_number",
            "The number of vgpu tasks sharing this card",
            device,
            registry=registry,
        )
        self.vgpu_memory = Gauge(
            "caldera_vgpu_device_allocated_memory",
            "The number of vgpu memory allocated in this card",
            device,
            registry=registry,
        )
        self.vgpu_cores = Gauge(
            "caldera_vgpu_device_allocated_cores",
            "The percentage of gpu compute cores allocated in this card",
            device,
            registry=registry,
        )
        self.vgpu_limit = Gauge(
            "caldera_vgpu_device_memory_limit",
            "The number of total device memory in this card",
            device,
            registry=registry,
        )
        self.job_share = Gauge(
            "caldera_job_share",
            "Dominant resource share of a job (drf)",
            ["job_ns", "job_id"],
            registry=registry,
        )
        self.namespace_share = Gauge(
            "caldera_namespace_share",
            "Dominant resource share of a namespace's jobs (drf)",
            ["namespace_name"],
            registry=registry,
        )
        self.job_retries = Counter(
            "caldera_job_retry_counts",
            "Sessions that ended with a job's gang not ready (Volcano's job_retry_counts)",
            ["job_ns", "job_id"],
            registry=registry,
        )
        # One series a job and a namespace: kept in step, not rebuilt each session.
        self._job_shares = SeriesInStep(self.job_share, _job_key_labels)
        self._namespace_shares = SeriesInStep(self.namespace_share, _own_label)
        job = ["job_name", "queue", "job_namespace"]
        self.job_latency = Histogram(
            "caldera_e2e_job_scheduling_latency_milliseconds",
            "Time from a job's PodGroup creation to the session that bound its tasks, once per "
            "session that bound some",
            buckets=JOB_LATENCY_BUCKETS_MS,
            registry=registry,
        )
        self.job_duration = Gauge(
            "caldera_e2e_job_scheduling_duration",
            "Milliseconds from a job's PodGroup creation to the last session that bound its tasks",
            job,
            registry=registry,
        )
        self.job_start_time = Gauge(
            "caldera_e2e_job_scheduling_start_time",
            "Creation of a job's PodGroup (Unix seconds)",
            job,
            registry=registry,
        )
        self.job_last_time = Gauge(
            "caldera_e2e_job_scheduling_last_time",
            "Last session that bound tasks of a job (Unix seconds)",
            job,
            registry=registry,
        )
        self._job_labels: dict[str, tuple[str, str, str]] = {}  # job key -> its labels
        # The reservation plugin's (a Caldera addition: no volcano_ copy).
        self.reservations = Gauge(
            "caldera_reservations",
            "Reservations held for waiting gangs after the last session, by queue",
            ["queue_name"],
            registry=registry,
        )
        self.reservation_held = Gauge(
            "caldera_reservation_held_resources",
            "Resources idle on reserved nodes and kept for the gangs that reserved them "
            "(cpu in cores, memory in bytes, the rest in units: one GPU is 1)",
            ["resource"],
            registry=registry,
        )
        self.reservation_age = Gauge(
            "caldera_reservation_age_seconds",
            "Age of the oldest reservation of a queue",
            ["queue_name"],
            registry=registry,
        )
        self.reservation_start = Gauge(
            "caldera_reservation_expected_start_seconds",
            "Seconds until the expected start of a queue's oldest reservation's gang",
            ["queue_name"],
            registry=registry,
        )
        self.reservations_ended = Counter(
            "caldera_reservations_ended",
            "Reservations let go, by how (started: the gang was placed; expired: hold-limit)",
            ["how"],
            registry=registry,
        )

    def _observe_cards(self, result: SessionResult) -> None:
        """The per-card gauges, rebuilt each session (cards and nodes that went lose theirs)."""
        gauges = (
            self.card_memory,
            self.card_memory_used,
            self.card_cores_used,
            self.card_pods,
            self.vgpu_shared,
            self.vgpu_memory,
            self.vgpu_cores,
            self.vgpu_limit,
        )
        for gauge in gauges:
            gauge.clear()
        mib = 1 << 20
        for (node, uuid), (memory, used, cores, pods) in result.gpu_cards.items():
            self.card_memory.labels(node=node, uuid=uuid).set(memory * mib)
            self.card_memory_used.labels(node=node, uuid=uuid).set(used * mib)
            self.card_cores_used.labels(node=node, uuid=uuid).set(cores)
            self.card_pods.labels(node=node, uuid=uuid).set(pods)
            self.vgpu_shared.labels(devID=uuid, NodeName=node).set(pods)
            self.vgpu_memory.labels(devID=uuid, NodeName=node).set(used)
            self.vgpu_cores.labels(devID=uuid, NodeName=node).set(cores)
            self.vgpu_limit.labels(devID=uuid, NodeName=node).set(memory)

    def observe(self, result: SessionResult, *, now: float | None = None) -> None:
        """Export a session's timings, queue figures, shares and per-job scheduling figures
        (``now``: the Unix time the session's binds count from). The share and queue gauges
        follow each session, so queues and jobs that are gone lose their series."""
        for action, seconds in result.action_seconds.items():
            self.action_latency.labels(action=action).observe(seconds * 1000)
        for (plugin, phase), seconds in result.plugin_seconds.items():
            self.plugin_latency.labels(plugin=plugin, OnSession=phase).observe(seconds * 1000)
        self.unschedulable_jobs.set(len(result.unready_jobs))
        for gauge in (self.queue_share, self.queue_weight, self.queue_overused):
            gauge.clear()
        for gauges in self.queue_resources.values():
            gauges.clear()
        self._observe_cards(result)
        for name, allocated in result.queue_allocated.items():
            self.queue_resources["allocated"].set(name, allocated)
        for name, deserved in result.queue_deserved.items():
            self.queue_resources["deserved"].set(name, deserved)
        for name, figures in result.queue_figures.items():
            self.queue_resources["request"].set(name, figures.request)
            self.queue_resources["inqueue"].set(name, figures.inqueue)
            self.queue_resources["real_capacity"].set(name, figures.real_capability)
            if figures.capability is not None:
                self.queue_resources["capacity"].set(name, figures.capability)
            self.queue_weight.labels(queue_name=name).set(figures.weight)
            self.queue_overused.labels(queue_name=name).set(1 if figures.overused else 0)
        # The capacity plugin's limits list only the limited resources: no series for the rest.
        for name, capability in result.queue_capability.items():
            self.queue_resources["capacity"].set(name, capability, listed_only=True)
        for name, real in result.queue_real_capability.items():
            self.queue_resources["real_capacity"].set(name, real, listed_only=True)
        for name, share in result.queue_share.items():
            self.queue_share.labels(queue_name=name).set(share)
        if result.job_figures:  # else the last session's that reported them stand
            self._job_shares.update(result.job_share)
        self._namespace_shares.update(result.namespace_share)
        for key in result.unready_jobs:
            namespace, _, name = key.partition("/")
            self.job_retries.labels(job_ns=namespace, job_id=name).inc()
        self._observe_reservations(result)
        placed_at = time.time() if now is None else now
        for key, job in result.placed_jobs.items():
            labels = (job.name, job.queue, job.namespace)
            self._forget_labels(key, keep=labels)
            self._job_labels[key] = labels
            created = job.created.timestamp()
            milliseconds = max(placed_at - created, 0.0) * 1000
            self.job_latency.observe(milliseconds)
            self.job_duration.labels(*labels).set(milliseconds)
            self.job_start_time.labels(*labels).set(created)
            self.job_last_time.labels(*labels).set(placed_at)

    def _observe_reservations(self, result: SessionResult) -> None:
        for gauge in (
            self.reservations,
            self.reservation_held,
            self.reservation_age,
            self.reservation_start,
        ):
            gauge.clear()
        held: dict[str, int] = {}
        oldest: dict[str, tuple[float, float]] = {}  # queue -> (age, expected start)
        for figure in result.reservations:
            self.reservations.labels(queue_name=figure.queue).inc()
            for name, amount in figure.held.items():
                held[name] = held.get(name, 0) + amount
            if figure.age_seconds >= oldest.get(figure.queue, (-1.0, 0.0))[0]:
                oldest[figure.queue] = (figure.age_seconds, figure.start_seconds)
        for name, amount in held.items():
            self.reservation_held.labels(resource=name).set(amount / 1000)
        for queue, (age, start) in oldest.items():
            self.reservation_age.labels(queue_name=queue).set(age)
            self.reservation_start.labels(queue_name=queue).set(start)
        if result.reservations_started:
            self.reservations_ended.labels(how="started").inc(result.reservations_started)
        if result.reservations_expired:
            self.reservations_ended.labels(how="expired").inc(result.reservations_expired)

    def job_seen(self, key: str, *, queue: str, created: dt.datetime) -> None:
        """A PodGroup entered the cache: its scheduling start time (Volcano sets it then)."""
        namespace, _, name = key.partition("/")
        labels = (name, queue, namespace)
        self._forget_labels(key, keep=labels)
        self._job_labels[key] = labels
        self.job_start_time.labels(*labels).set(created.timestamp())

    def forget_job(self, key: str) -> None:
        """A PodGroup is gone: drop its per-job series."""
        self._forget_labels(key)
        self._job_labels.pop(key, None)
        namespace, _, name = key.partition("/")
        with contextlib.suppress(KeyError):
            self.job_retries.remove(namespace, name)

    def _forget_labels(self, key: str, keep: tuple[str, str, str] | None = None) -> None:
        """Remove the series of a job's old labels (its queue may have changed)."""
        old = self._job_labels.get(key)
        if old is None or old == keep:
            return
        for gauge in (self.job_duration, self.job_start_time, self.job_last_time):
            with contextlib.suppress(KeyError):
                gauge.remove(*old)


def _job_key_labels(key: str) -> tuple[str, ...]:
    namespace, _, name = key.partition("/")
    return (namespace, name)


def _own_label(key: str) -> tuple[str, ...]:
    return (key,)


class SeriesInStep:
    """One labelled gauge's series kept equal to a mapping from one session to the next,
    touching only the series whose value changed or whose key came or went: clearing and
    adding every job's series again each session took 0.3 CPU s a cycle on an idle cluster of
    15,000 PodGroups (bench/startup_memory.py)."""

    def __init__(self, gauge: Gauge, labels_of: Callable[[str], tuple[str, ...]]) -> None:
        self._gauge = gauge
        self._labels_of = labels_of
        self._values: dict[str, float] = {}

    def update(self, values: Mapping[str, float]) -> None:
        for key in self._values.keys() - values.keys():
            with contextlib.suppress(KeyError):
                self._gauge.remove(*self._labels_of(key))
        for key, value in values.items():
            if self._values.get(key) != value:
                self._gauge.labels(*self._labels_of(key)).set(value)
        self._values = dict(values)


class _QueueResourceGauges:
    """One Volcano figure of every queue: milli-cpu, memory bytes and the other resources."""

    def __init__(self, registry: CollectorRegistry, figure: str, help_text: str) -> None:
        self.cpu = Gauge(
            f"caldera_queue_{figure}_milli_cpu",
            f"CPU {help_text} (milli-cores)",
            ["queue_name"],
            registry=registry,
        )
        self.memory = Gauge(
            f"caldera_queue_{figure}_memory_bytes",
            f"Memory {help_text} (bytes)",
            ["queue_name"],
            registry=registry,
        )
        self.scalar = Gauge(
            f"caldera_queue_{figure}_scalar_resources",
            f"Other resources {help_text} (GPUs and the rest, in milli-units)",
            ["queue_name", "resource"],
            registry=registry,
        )

    def clear(self) -> None:
        for gauge in (self.cpu, self.memory, self.scalar):
            gauge.clear()

    def set(self, queue: str, amounts: Resources, *, listed_only: bool = False) -> None:
        """The queue's series; cpu and memory even when not listed (as 0) unless
        ``listed_only``."""
        if not listed_only or "cpu" in amounts:
            self.cpu.labels(queue_name=queue).set(amounts.get("cpu"))
        if not listed_only or "memory" in amounts:
            # Resources hold milli-units: memory in milli-bytes.
            self.memory.labels(queue_name=queue).set(amounts.get("memory") // 1000)
        for resource, amount in amounts.items():
            if resource not in NOT_SCALAR:
                self.scalar.labels(queue_name=queue, resource=resource).set(amount)
