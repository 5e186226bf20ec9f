"""A virtual cluster that the scheduler's pure core runs against, session after session.

It holds the objects the scheduler's cache would hold (Nodes, Queues, PodGroups, Pods), builds
each session's snapshot with the process's own ``scheduler.snapshot.build_cluster``, runs
``run_session`` and plays the session's decisions back the way the rest of the system would:

- a bind puts the pod on its node and it runs at once (kwok's behaviour in the e2e suite);
- an eviction marks the pod terminating for ``grace`` sessions; then it is gone and the job's
  controller creates it again, Pending, under the same name with a new uid (a Volcano Job's pod
  keeps its index; the default policy syncs the job);
- PodGroup status (phase, conditions) is written back as the process writes it.

Pipelined tasks are the session's own promise and are not kept, as in the real process. Every
step is deterministic, so a test can run it until nothing changes and reason about the sequence
of decisions (``settle``). Nothing here performs I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from caldera.api.core import (
    Container,
    Node,
    NodeStatus,
    Pod,
    PodSpec,
    PodStatus,
    PriorityClass,
    ResourceRequirements,
)
from caldera.api.meta import Condition, ObjectMeta, format_time
from caldera.api.resources import Resources
from caldera.api.volcano import (
    KUBE_GROUP_NAME_KEY,
    TASK_SPEC_KEY,
    Guarantee,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
    QueueStatus,
)
from scheduler.conf import SchedulerConf
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.snapshot import CachedRequests, build_cluster

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SCHEDULER_NAME = "volcano"


@dataclass(frozen=True)
class JobSpec:
    """A gang to submit: ``replicas`` pods of one shape in one PodGroup."""

    name: str
    queue: str
    replicas: int
    min_available: int
    requests: Mapping[str, str]
    priority_class: str = ""
    namespace: str = "ns"


@dataclass
class StepRecord:
    """What one session decided, by pod name."""

    binds: list[tuple[str, str]] = field(default_factory=list)  # (pod, node)
    evictions: list[tuple[str, str]] = field(default_factory=list)  # (pod, reason)
    # Per queue: resources held when the session opened, and what it deserved in it.
    allocated_before: dict[str, Resources] = field(default_factory=dict)
    deserved: dict[str, Resources] = field(default_factory=dict)
    evicted_from: dict[str, Resources] = field(default_factory=dict)  # by reclaim, per queue
    bound_to: dict[str, Resources] = field(default_factory=dict)  # binds, per queue

    @property
    def quiet(self) -> bool:
        return not self.binds and not self.evictions


@dataclass
class _Terminating:
    pod: Pod
    sessions_left: int


class VirtualCluster:
    """Objects of a cluster and the loop that plays a scheduler's decisions back; see the
    module docstring."""

    def __init__(
        self,
        *,
        conf: SchedulerConf,
        registry: Registry,
        grace: int = 1,
        priority_classes: Sequence[PriorityClass] = (),
    ) -> None:
        self.conf = conf
        self.registry = registry
        self.grace = grace
        self.priority_classes = list(priority_classes)
        self.nodes: dict[str, Node] = {}
        self.queues: dict[str, Queue] = {}
        self.podgroups: dict[str, PodGroup] = {}  # by "ns/name"
        self.pods: dict[str, Pod] = {}  # by "ns/name"
        self.jobs: dict[str, JobSpec] = {}  # by "ns/name"
        self.terminating: dict[str, _Terminating] = {}  # by "ns/name"
        self.sessions = 0
        self._uids = 0
        self._requests = CachedRequests()
        self.history: list[StepRecord] = []

    # ---- building ------------------------------------------------------------------------------

    def _uid(self) -> str:
        self._uids += 1
        return f"uid-{self._uids}"

    def _now(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.sessions)

    def add_node(self, name: str, allocatable: Mapping[str, str]) -> None:
        self.nodes[name] = Node(
            metadata=ObjectMeta(name=name, uid=self._uid()),
            status=NodeStatus(
                allocatable={"pods": "110", **allocatable},
                conditions=(Condition(type="Ready", status="True"),),
            ),
        )

    def add_queue(
        self,
        name: str,
        *,
        weight: int = 1,
        capability: Mapping[str, str] | None = None,
        guarantee: Mapping[str, str] | None = None,
        reclaimable: bool | None = None,
    ) -> None:
        self.queues[name] = Queue(
            metadata=ObjectMeta(name=name, uid=self._uid()),
            spec=QueueSpec(
                weight=weight,
                capability=dict(capability or {}),
                guarantee=Guarantee(resource=dict(guarantee or {})),
                reclaimable=reclaimable,
            ),
            status=QueueStatus(state="Open"),
        )

    def submit(self, job: JobSpec) -> None:
        """Create the job's PodGroup (minResources from minAvailable pods, as the job
        controller computes them) and its pods, all Pending."""
        key = f"{job.namespace}/{job.name}"
        self.jobs[key] = job
        min_resources: dict[str, str | int | float] = {
            name: _times(quantity, job.min_available) for name, quantity in job.requests.items()
        }
        self.podgroups[key] = PodGroup(
            metadata=ObjectMeta(
                name=job.name,
                namespace=job.namespace,
                uid=self._uid(),
                creation_timestamp=format_time(self._now()),
            ),
            spec=PodGroupSpec(
                min_member=job.min_available,
                queue=job.queue,
                priority_class_name=job.priority_class,
                min_resources=min_resources,
            ),
            status=PodGroupStatus(phase="Pending"),
        )
        for index in range(job.replicas):
            self._create_pod(job, index)

    def _priority(self, class_name: str) -> int | None:
        for pc in self.priority_classes:
            if pc.metadata.name == class_name:
                return pc.value
        return None

    def _create_pod(self, job: JobSpec, index: int) -> None:
        name = f"{job.name}-worker-{index}"
        self.pods[f"{job.namespace}/{name}"] = Pod(
            metadata=ObjectMeta(
                name=name,
                namespace=job.namespace,
                uid=self._uid(),
                resource_version="1",
                creation_timestamp=format_time(self._now()),
                annotations={KUBE_GROUP_NAME_KEY: job.name, TASK_SPEC_KEY: "worker"},
            ),
            spec=PodSpec(
                scheduler_name=SCHEDULER_NAME,
                priority_class_name=job.priority_class,
                priority=self._priority(job.priority_class),
                containers=(
                    Container(
                        name="main", resources=ResourceRequirements(requests=dict(job.requests))
                    ),
                ),
            ),
            status=PodStatus(phase="Pending"),
        )

    # ---- the loop ------------------------------------------------------------------------------

    def step(self) -> StepRecord:
        """One session over the current objects, its decisions played back, then time moves
        on by one session (terminating pods count down, finished ones are replaced)."""
        cluster, _ = build_cluster(
            pods=[*self.pods.values(), *(t.pod for t in self.terminating.values())],
            nodes=self.nodes.values(),
            podgroups=self.podgroups.values(),
            queues=self.queues.values(),
            priority_classes=self.priority_classes,
            scheduler_names=(SCHEDULER_NAME,),
            requests=self._requests,
            now=self._now(),
        )
        before = self.allocated_by_queue()
        result = run_session(Session(cluster, self.conf.tiers), self.conf, self.registry)
        record = self._apply(result)
        record.allocated_before = before
        record.deserved = dict(result.queue_deserved)
        for bind in result.binds:
            queue = cluster.jobs[bind.task.job].queue
            record.bound_to[queue] = record.bound_to.get(queue, Resources()) + bind.task.resreq
        for evict in result.evictions:
            if evict.reason == "reclaim":
                queue = cluster.jobs[evict.task.job].queue
                held = record.evicted_from.get(queue, Resources())
                record.evicted_from[queue] = held + evict.task.resreq
        self._advance()
        self.sessions += 1
        self.history.append(record)
        return record

    def _apply(self, result: SessionResult) -> StepRecord:
        record = StepRecord()
        for bind in result.binds:
            key = bind.task.key
            pod = self.pods.get(key)
            if pod is None or pod.spec.node_name:
                continue
            self.pods[key] = msgspec.structs.replace(
                pod,
                metadata=msgspec.structs.replace(pod.metadata, resource_version="2"),
                spec=msgspec.structs.replace(pod.spec, node_name=bind.node),
                status=msgspec.structs.replace(pod.status, phase="Running"),
            )
            record.binds.append((bind.task.name, bind.node))
        for evict in result.evictions:
            key = evict.task.key
            pod = self.pods.pop(key, None)
            if pod is None:
                continue
            gone = msgspec.structs.replace(
                pod,
                metadata=msgspec.structs.replace(
                    pod.metadata,
                    resource_version="3",
                    deletion_timestamp=format_time(self._now()),
                ),
            )
            self.terminating[key] = _Terminating(gone, self.grace)
            record.evictions.append((evict.task.name, evict.reason))
        for key, status in result.podgroup_status.items():
            pg = self.podgroups.get(key)
            if pg is not None:
                self.podgroups[key] = msgspec.structs.replace(pg, status=status)
        for key in result.podgroup_phase_inqueue:
            pg = self.podgroups.get(key)
            if pg is not None and pg.status.phase == "Pending":
                self.podgroups[key] = msgspec.structs.replace(
                    pg, status=msgspec.structs.replace(pg.status, phase="Inqueue")
                )
        return record

    def _advance(self) -> None:
        for key, entry in list(self.terminating.items()):
            entry.sessions_left -= 1
            if entry.sessions_left > 0:
                continue
            del self.terminating[key]
            group = entry.pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY, "")
            job = self.jobs.get(f"{entry.pod.metadata.namespace}/{group}")
            if job is not None:
                index = int(entry.pod.metadata.name.rsplit("-", 1)[1])
                self._create_pod(job, index)

    def settle(self, max_sessions: int, quiet_sessions: int = 3) -> int | None:
        """Run sessions until ``quiet_sessions`` in a row bind and evict nothing with no pod
        terminating; the number of sessions that took (counting up to the first quiet one),
        or None if it did not settle within ``max_sessions``."""
        quiet_run = 0
        for _ in range(max_sessions):
            record = self.step()
            if record.quiet and not self.terminating:
                quiet_run += 1
                if quiet_run >= quiet_sessions:
                    return self.sessions - quiet_sessions
            else:
                quiet_run = 0
        return None

    # ---- reading -------------------------------------------------------------------------------

    def queue_of(self, pod: Pod) -> str:
        group = pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY, "")
        pg = self.podgroups.get(f"{pod.metadata.namespace}/{group}")
        return pg.spec.queue if pg is not None else ""

    def allocated_by_queue(self) -> dict[str, Resources]:
        """Resources held by pods on nodes (not terminating), per queue."""
        held = {name: Resources() for name in self.queues}
        for pod in self.pods.values():
            queue = self.queue_of(pod)
            if pod.spec.node_name and queue in held:
                held[queue] = held[queue] + self._requests(pod)[0]
        return held

    def running_by_queue(self) -> dict[str, int]:
        """Pods running (or bound) per queue."""
        counts = dict.fromkeys(self.queues, 0)
        for pod in self.pods.values():
            queue = self.queue_of(pod)
            if pod.spec.node_name and queue:
                counts[queue] = counts.get(queue, 0) + 1
        return counts

    def running_of(self, job: str, namespace: str = "ns") -> int:
        return sum(
            1
            for pod in self.pods.values()
            if pod.spec.node_name
            and pod.metadata.namespace == namespace
            and pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY) == job
        )

    def evictions_since(self, session: int) -> Iterable[tuple[str, str]]:
        for record in self.history[session:]:
            yield from record.evictions


def _times(quantity: str, count: int) -> str:
    """``quantity`` times ``count`` as a quantity string (milli-units, exact)."""
    milli = Resources.from_list({"x": quantity}).get("x") * count
    return f"{milli}m"
