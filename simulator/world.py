"""The cluster's objects as the API server would hold them, in virtual time.

``World`` is the simulator's API server and informer cache in one: it stores Nodes, Queues,
PriorityClasses, Jobs, PodGroups and Pods (frozen models, replaced on every change, never
mutated), stamps what the API server stamps (uid, resourceVersion, creation and deletion
timestamps), notes every pod, PodGroup, node and queue change for the scheduler's
``LiveSnapshot`` exactly as the scheduler process's informer handlers do, and then tells the
``Watcher``\\ s (the job controller, the kubelet, the recorder) of the change, old and new, as
informer handlers are told.

Deleting a Job deletes what it owns (its pods and PodGroup), as the garbage collector does. A
deleted pod is removed at once unless ``termination_grace`` is set: then it keeps its node,
terminating, for that long (kwok, like the e2e cluster, removes it at once).

Nothing here decides anything; the modules around it do. Pure, in-memory.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import msgspec

from caldera.api.core import Node, Pod, PodCondition, PodPhase, PodSpec, PriorityClass
from caldera.api.meta import format_time
from caldera.api.volcano import CONTROLLER_OUT_OF_SYNC_KEY, Job, JobStatus, PodGroup, Queue
from controllers.job.status import pod_task
from scheduler.live_snapshot import CachedObjects, KeyedObjects, LiveSnapshot
from scheduler.snapshot import CachedRequests

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # virtual time 0
SCHEDULER_NAMES = ("volcano",)
FINISHED_POD_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


class Watcher(Protocol):
    """What an informer handler hears: every change, after the store holds it."""

    def job_added(self, job: Job) -> None: ...

    def job_updated(self, old: Job, new: Job) -> None: ...

    def job_deleted(self, job: Job) -> None: ...

    def pod_added(self, pod: Pod) -> None: ...

    def pod_updated(self, old: Pod, new: Pod) -> None: ...

    def pod_deleted(self, pod: Pod) -> None: ...

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None: ...

    def podgroup_deleted(self, podgroup: PodGroup) -> None: ...


def key_of(obj: Pod | PodGroup | Job) -> str:
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def holds_node(pod: Pod) -> bool:
    """Whether the pod takes room on its node: bound and not finished (terminating included)."""
    return bool(pod.spec.node_name) and pod.status.phase not in FINISHED_POD_PHASES


def waiting(pod: Pod) -> bool:
    """Whether the pod waits for the scheduler: not bound, not finished, not being deleted."""
    return (
        not pod.spec.node_name
        and pod.metadata.deletion_timestamp is None
        and pod.status.phase not in FINISHED_POD_PHASES
    )


class World:
    """See the module docstring."""

    def __init__(
        self,
        *,
        nodes: Iterable[Node],
        queues: Iterable[Queue],
        priority_classes: Iterable[PriorityClass] = (),
        termination_grace: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.termination_grace = termination_grace
        self.nodes: KeyedObjects[Node] = KeyedObjects()
        self.queues: KeyedObjects[Queue] = KeyedObjects()
        self.classes: KeyedObjects[PriorityClass] = KeyedObjects()
        self.podgroups: KeyedObjects[PodGroup] = KeyedObjects()
        self.pods: KeyedObjects[Pod] = KeyedObjects()
        self.jobs: dict[str, Job] = {}
        self.requests = CachedRequests()
        self.live = LiveSnapshot(scheduler_names=SCHEDULER_NAMES, requests=self.requests)
        self.cached = CachedObjects(
            pods=self.pods,
            nodes=self.nodes,
            podgroups=self.podgroups,
            queues=self.queues,
            priority_classes=self.classes,
        )
        self.watchers: list[Watcher] = []
        self.job_pods: dict[str, dict[str, None]] = {}  # job key -> its pods' keys, in order
        # job key -> task -> its pods' keys, in order (a pod event reads its task's pods)
        self.task_pods: dict[str, dict[str, dict[str, None]]] = {}
        self.pod_job: dict[str, str] = {}
        self.attempts: dict[str, int] = {}  # pod key -> pods created under that name
        self.created: dict[str, tuple[float, int, int]] = {}  # pod uid -> creation order
        self.waiting_pods: set[str] = set()
        self.pending_groups: set[str] = set()  # PodGroups in phase "" or Pending
        # PodGroup keys by the uid of an owner (a Job deleted takes its PodGroups with it).
        self._owned_groups: dict[str, dict[str, None]] = {}
        self._serial = 0
        self._stamp_at, self._stamp = -1.0, ""  # ``timestamp``'s last instant and its text
        self._job_serial: dict[str, int] = {}
        for node in nodes:
            self.nodes.items[node.metadata.name] = node
            self.live.node_changed(node)
        for queue in queues:
            self.queues.items[queue.metadata.name] = queue
            self.live.queue_changed(queue)
        for pc in priority_classes:
            self.classes.items[pc.metadata.name] = pc
            self.live.priority_class_changed(pc)
        self._priorities = {pc.metadata.name: pc.value for pc in self.classes.items.values()}

    # ---- stamps ---------------------------------------------------------------------------------

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    def timestamp(self) -> str:
        """The current virtual time as the API server writes it (whole seconds); formatted
        once per instant (an instant's events stamp many objects)."""
        if self._stamp_at != self.now:
            self._stamp_at, self._stamp = self.now, format_time(self.datetime())
        return self._stamp

    def datetime(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.now)

    def _meta(self, meta: Any, **changes: Any) -> Any:
        return msgspec.structs.replace(meta, resource_version=str(self._next()), **changes)

    def has_waiting_work(self) -> bool:
        """Whether a pod or a PodGroup waits for the scheduler (else no action can act)."""
        return bool(self.waiting_pods or self.pending_groups)

    def priorities(self) -> Mapping[str, int]:
        """The PriorityClasses' values by name: the cluster file's, which never change (one
        mapping for the run, read on every sync)."""
        return self._priorities

    # ---- jobs -----------------------------------------------------------------------------------

    def create_job(self, job: Job) -> Job:
        serial = self._next()
        meta = self._meta(job.metadata, uid=f"job-{serial}", creation_timestamp=self.timestamp())
        stored = msgspec.structs.replace(job, metadata=meta)
        key = key_of(stored)
        self.jobs[key] = stored
        self._job_serial[key] = serial
        self.job_pods.setdefault(key, {})
        for watcher in self.watchers:
            watcher.job_added(stored)
        return stored

    def write_job_status(self, key: str, status: JobStatus) -> Job:
        old = self.jobs[key]
        new = msgspec.structs.replace(old, metadata=self._meta(old.metadata), status=status)
        self.jobs[key] = new
        for watcher in self.watchers:
            watcher.job_updated(old, new)
        return new

    def delete_job(self, key: str) -> None:
        """Delete the Job and, as the garbage collector does, everything it owns."""
        job = self.jobs.pop(key, None)
        if job is None:
            return
        for pod_key in list(self.job_pods.get(key, {})):
            self.delete_pod(pod_key, grace=0.0)
        owned = self._owned_groups.get(job.metadata.uid, {})
        for pg_key in [k for k in owned if _owned_by(self.podgroups.items[k], job)]:
            self.delete_podgroup(pg_key)
        self.job_pods.pop(key, None)
        self.task_pods.pop(key, None)
        for watcher in self.watchers:
            watcher.job_deleted(job)

    # ---- pods -----------------------------------------------------------------------------------

    def create_pod(self, manifest: Mapping[str, Any], job_key: str, position: int) -> Pod:
        """Store a pod built by the job controller; ``position`` is its place in the batch the
        controller created at this instant (the order a pod-by-pod scheduler's queue sees)."""
        pod = msgspec.convert(manifest, Pod)
        serial = self._next()
        pod = msgspec.structs.replace(
            pod,
            metadata=self._meta(
                pod.metadata, uid=f"pod-{serial}", creation_timestamp=self.timestamp()
            ),
            spec=self._with_priority(pod),
            status=msgspec.structs.replace(pod.status, phase=PodPhase.PENDING),
        )
        key = key_of(pod)
        self.created[pod.metadata.uid] = (self.now, position, self._job_serial.get(job_key, 0))
        self.attempts[key] = self.attempts.get(key, 0) + 1
        self.job_pods.setdefault(job_key, {})[key] = None
        self.task_pods.setdefault(job_key, {}).setdefault(pod_task(pod), {})[key] = None
        self.pod_job[key] = job_key
        self._store_pod(key, pod)
        for watcher in self.watchers:
            watcher.pod_added(pod)
        return pod

    def _with_priority(self, pod: Pod) -> PodSpec:
        """The API server's Priority admission: the pod's priority and preemption policy from
        its PriorityClass (or the global default class; priority 0 without one). A class
        that does not exist was refused when the trace was read."""
        classes = self.classes.items
        name = pod.spec.priority_class_name
        found = classes.get(name) if name else None
        if found is None and not name:
            found = next((pc for pc in classes.values() if pc.global_default), None)
        if found is None:
            return msgspec.structs.replace(pod.spec, priority=0)
        return msgspec.structs.replace(
            pod.spec,
            priority=found.value,
            priority_class_name=found.metadata.name,
            preemption_policy=pod.spec.preemption_policy or found.preemption_policy,
        )

    def replace_pod(self, new: Pod) -> Pod:
        """Store a changed pod (it must exist) and tell the watchers."""
        key = key_of(new)
        old = self.pods.items[key]
        new = msgspec.structs.replace(new, metadata=self._meta(new.metadata))
        self._store_pod(key, new)
        for watcher in self.watchers:
            watcher.pod_updated(old, new)
        return new

    def _store_pod(self, key: str, pod: Pod) -> None:
        self.pods.items[key] = pod
        self.live.pod_changed(pod)
        if waiting(pod):
            self.waiting_pods.add(key)
        else:
            self.waiting_pods.discard(key)

    def bind(
        self, key: str, uid: str, node: str, annotations: Mapping[str, str] | None = None
    ) -> Pod | None:
        """The binding subresource: the pod gets its node and ``PodScheduled=True``, and the
        Binding's ``annotations`` (deviceshare's cards); None when the pod is gone, replaced
        or bound already."""
        pod = self.pods.items.get(key)
        if pod is None or pod.metadata.uid != uid or pod.spec.node_name:
            return None
        scheduled = _condition(pod, "PodScheduled", self.timestamp())
        metadata = pod.metadata
        if annotations:
            metadata = msgspec.structs.replace(
                metadata, annotations={**metadata.annotations, **annotations}
            )
        return self.replace_pod(
            msgspec.structs.replace(
                pod,
                metadata=metadata,
                spec=msgspec.structs.replace(pod.spec, node_name=node),
                status=msgspec.structs.replace(pod.status, conditions=scheduled),
            )
        )

    def delete_pod(
        self, key: str, *, out_of_sync: bool = False, grace: float | None = None
    ) -> bool:
        """Delete a pod (marked ``controller-out-of-sync`` first when the job controller kills
        it). It goes at once, or after the termination grace when it holds a node. False when
        it was not there or is already being deleted."""
        pod = self.pods.items.get(key)
        if pod is None or pod.metadata.deletion_timestamp is not None:
            return False
        if out_of_sync:
            annotations = {**pod.metadata.annotations, CONTROLLER_OUT_OF_SYNC_KEY: "true"}
            pod = self.replace_pod(
                msgspec.structs.replace(
                    pod, metadata=msgspec.structs.replace(pod.metadata, annotations=annotations)
                )
            )
        wait = self.termination_grace if grace is None else grace
        if wait > 0 and holds_node(pod):
            self.replace_pod(
                msgspec.structs.replace(
                    pod,
                    metadata=msgspec.structs.replace(
                        pod.metadata, deletion_timestamp=self.timestamp()
                    ),
                )
            )
            return True
        self.remove_pod(key)
        return True

    def remove_pod(self, key: str) -> None:
        """The pod is gone from the API server."""
        pod = self.pods.items.pop(key, None)
        if pod is None:
            return
        self.live.pod_changed(pod)
        self.requests.discard(pod.metadata.uid)
        self.waiting_pods.discard(key)
        self.created.pop(pod.metadata.uid, None)
        job_key = self.pod_job.pop(key, None)
        if job_key is not None:
            self.job_pods.get(job_key, {}).pop(key, None)
            self.task_pods.get(job_key, {}).get(pod_task(pod), {}).pop(key, None)
        for watcher in self.watchers:
            watcher.pod_deleted(pod)

    def pods_of(self, job_key: str) -> list[Pod]:
        """The Job's pods, in creation order."""
        items = self.pods.items
        return [items[k] for k in self.job_pods.get(job_key, {}) if k in items]

    def pods_of_task(self, job_key: str, task: str) -> list[Pod]:
        """The pods of the Job's task ``task``, in creation order."""
        items = self.pods.items
        return [items[k] for k in self.task_pods.get(job_key, {}).get(task, {}) if k in items]

    # ---- PodGroups ------------------------------------------------------------------------------

    def create_podgroup(self, pg: PodGroup) -> PodGroup:
        meta = self._meta(
            pg.metadata, uid=f"podgroup-{self._next()}", creation_timestamp=self.timestamp()
        )
        stored = msgspec.structs.replace(pg, metadata=meta)
        self._store_podgroup(key_of(stored), stored)
        return stored

    def replace_podgroup(self, new: PodGroup, *, news: bool = True) -> PodGroup:
        """``news``: whether the scheduler's snapshot should take the change as a reason for a
        session (``LiveSnapshot.podgroup_changed``)."""
        key = key_of(new)
        old = self.podgroups.items[key]
        new = msgspec.structs.replace(new, metadata=self._meta(new.metadata))
        self._store_podgroup(key, new, news=news)
        for watcher in self.watchers:
            watcher.podgroup_updated(old, new)
        return new

    def _store_podgroup(self, key: str, pg: PodGroup, *, news: bool = True) -> None:
        self._unindex_owners(key)
        self.podgroups.items[key] = pg
        for ref in pg.metadata.owner_references:
            self._owned_groups.setdefault(ref.uid, {})[key] = None
        self.live.podgroup_changed(pg, news=news)
        if pg.status.phase in ("", "Pending"):
            self.pending_groups.add(key)
        else:
            self.pending_groups.discard(key)

    def _unindex_owners(self, key: str) -> None:
        old = self.podgroups.items.get(key)
        if old is None:
            return
        for ref in old.metadata.owner_references:
            owned = self._owned_groups.get(ref.uid)
            if owned is not None:
                owned.pop(key, None)
                if not owned:
                    del self._owned_groups[ref.uid]

    def delete_podgroup(self, key: str) -> None:
        self._unindex_owners(key)
        pg = self.podgroups.items.pop(key, None)
        if pg is not None:
            self.live.podgroup_changed(pg)
            self.pending_groups.discard(key)
            for watcher in self.watchers:
                watcher.podgroup_deleted(pg)


def _owned_by(pg: PodGroup, job: Job) -> bool:
    return pg.metadata.namespace == job.metadata.namespace and any(
        ref.uid == job.metadata.uid for ref in pg.metadata.owner_references
    )


def _condition(pod: Pod, kind: str, when: str) -> tuple[PodCondition, ...]:
    """The pod's conditions with ``kind`` set True at ``when``."""
    kept = tuple(c for c in pod.status.conditions if c.type != kind)
    return (*kept, PodCondition(type=kind, status="True", last_transition_time=when))
