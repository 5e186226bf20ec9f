"""``caldera scheduler``: the session loop around the pure scheduling core, and its I/O.

Every ``--schedule-period`` (or early, when pods, PodGroups, nodes, queues, ResourceQuotas,
PodDisruptionBudgets or namespaces' labels change): bring the snapshot up to date with what
changed in the informer cache (``scheduler.live_snapshot``), run one session (actions and
plugins, in a worker thread so the event loop keeps serving watches and probes), then carry out
its decisions:

- binds through the pods/binding subresource, ``--bind-workers`` at a time, in the background: a
  pod is *assumed* on its node from the moment the session decides until the cache sees it
  bound, so the next session may start while binds are in flight and never gives the same room
  twice; a failed bind drops the assumption and the pod is tried again; on shutdown the binds in
  flight get a few seconds to finish;
- evictions through the pods/eviction subresource;
- PodGroup status (phase, conditions, counts), only when it changed, with a merge patch of
  the fields that changed (the PodGroup CRD has no status subresource, as in Volcano, so the
  same write carries the record of why the job waits, ``scheduler.why``, and the other
  annotations a session sets; ``scheduler.status_patch``); Queue ``status.allocated`` likewise;
- a ``PodScheduled=False`` condition on pods that could not be placed, with the reason, and
  with it a Warning ``FailedScheduling`` event on the pod (only when the message changes, as
  Volcano's cache does); a Normal ``Scheduled`` "Successfully assigned ns/pod to node" event
  on each bound pod; none on a pod held by a scheduling gate, whose ``SchedulingGated``
  condition is the API server's;
- these three kinds of status writes go through the status writer (``scheduler.status_writer``)
  apart from the session loop: the next session starts without waiting for them; a newer
  decision for an object replaces one still waiting, ``STATUS_WRITES_IN_FLIGHT`` at a time,
  PodGroups and Queues before pods' conditions, binds and evictions never behind them; the
  sessions read each PodGroup as decided (``status_patch.AssumedPodGroups``) until the cache
  shows the write; a write fenced off (the Lease may have passed) stops the writer and the loop;
  on shutdown what waits gets the binds' grace to go;
- with ``--feature-gates=SchedulingGatesQueueAdmission=true``, the queue admission gate removed
  from each pod whose queue took it (a strategic merge patch, ``--gate-removal-worker-num`` at a
  time, in the background like binds; ``caldera.api.gates``);
- Events on PodGroups and pods;
- for pods with DRA claims, each claim's allocation and reservation before the pod's bind,
  and the reservation released when the pod goes (``scheduler.claim_writer``); the claim
  writes have slots of their own (twice ``bind_workers``: a finalizer and a status each), so a
  pod writing its claims does not hold a bind slot through three round trips; the
  ResourceClaim, ResourceSlice and DeviceClass kinds are watched from the first pod with
  ``resourceClaims`` (or a configuration setting ``predicate.DynamicResourceAllocationEnable``
  explicitly), as no cluster without DRA needs the watches;
- the waiting jobs in the order the session serves them, published for the visibility API
  (``scheduler.visibility``).

A session that would only repeat the last one, which changed nothing, is skipped
(``scheduler.quiet``): a backlog that cannot fit costs nothing until the cluster changes.

The configuration file is re-read when it changes; a bad edit is logged and the last good
configuration stays. At start the ``root`` and ``default`` queues are created if missing (again
at each cycle while the API server refuses, as it does until the queue webhook answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import structlog

from caldera.api.core import Namespace, Node, Pod
from caldera.api.dra import DeviceClass, ResourceClaim, ResourceSlice
from caldera.api.gates import REMOVE_GATE_PATCH
from caldera.api.gpushare import GPU_INDEX
from caldera.api.gpushare import NODE_LOCK as GPUSHARE_LOCK
from caldera.api.kinds import (
    DEVICE_CLASS,
    HYPERNODE,
    NAMESPACE,
    NODE,
    NODESHARD,
    NUMATOPOLOGY,
    POD,
    POD_DISRUPTION_BUDGET,
    PODGROUP,
    PRIORITY_CLASS,
    QUEUE,
    RESOURCE_CLAIM,
    RESOURCE_QUOTA,
    RESOURCE_SLICE,
)
from caldera.api.meta import (
    ObjectMeta,
    ObjectReference,
    find_condition,
    format_time,
    object_key,
    parse_time,
)
from caldera.api.numatopology import Numatopology
from caldera.api.resources import Resources
from caldera.api.vgpu import IDS, NODE_LOCK, node_lock_patch
from caldera.api.volcano import (
    SCHEDULING_API_VERSION,
    PodGroup,
    Queue,
    QueueSpec,
)
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiConnectionError, ApiError, Conflict, NotFound
from caldera.kube.events import EventRecorder
from caldera.kube.fence import FencedError
from caldera.kube.requests import PatchType
from caldera.settings import SchedulerSettings
from informers.factory import SharedInformer, SharedInformerFactory
from informers.store import HandlerFuncs, KubeObject
from scheduler.api.dra.view import ClaimPlan, DraView, pod_claims
from scheduler.api.feasible_nodes import FeasibleNodes
from scheduler.api.namespace_labels import LabelsByNamespace
from scheduler.claim_writer import ClaimWriter
from scheduler.conf import DEFAULT_CONF, ConfError, SchedulerConf, parse_conf
from scheduler.device_config import DeviceConfigReader, config_source
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.framework.status import with_findings
from scheduler.live_snapshot import CachedObjects, LiveSnapshot, Objects
from scheduler.metrics import SchedulerMetrics
from scheduler.node_load import MetricsSource, metrics_source
from scheduler.node_load_poller import NodeLoadPoller
from scheduler.quiet import QuietSessions
from scheduler.sharding import HardShard
from scheduler.snapshot import CachedRequests, node_moved
from scheduler.status_patch import AssumedPodGroups, Patch, podgroup_patch
from scheduler.status_queue import Outcome
from scheduler.status_writer import StatusWriter
from scheduler.visibility.order import Positions, publish
from scheduler.why import unschedulable_reasons

log = structlog.get_logger("scheduler")
K = TypeVar("K", bound=KubeObject)
STATUS_WRITES_IN_FLIGHT = 32  # status writes (PodGroups, Queues, pod conditions) at once
# What the status writer writes, by (kind, key): a PodGroup's or a Queue's merge patch, or a
# pod's PodScheduled=False condition as (pod uid, message).
StatusKey = tuple[str, str]
PodCondition = tuple[str, str]
StatusValue = Patch | PodCondition
PODGROUP_STATUS, QUEUE_STATUS, POD_CONDITION = "PodGroup", "Queue", "Pod"
CONDITION_LANE = 1  # pods' conditions after PodGroups and Queues (lane 0)
DRA_SYNC_WAIT = 10.0  # seconds a session waits for the DRA kinds' first list
CLAIM_WRITES_PER_BIND = 2  # a pod's claim writes before its bind: the finalizer, the status
# Seconds between sessions that report every job's figures (drf's job shares) to the metrics:
# at 50,000 jobs, reporting them from each of the sessions that run back to back under a
# flood of pods took a tenth of the process's time (bench/scheduler_perf.py basic-50k); a
# Prometheus scrape comes every 15 s or more.
JOB_FIGURES_PERIOD = 5.0


class ConfSource:
    """The configuration, re-read when its file changes; the last good one stays on errors."""

    def __init__(self, path: str, *, actions: Iterable[str], plugins: Iterable[str]) -> None:
        self.path = Path(path) if path else None
        self.actions, self.plugins = frozenset(actions), frozenset(plugins)
        self._mtime: float | None = None
        self.current = self._load()  # raises ConfError at start: refuse a bad file

    def _parse(self, text: str) -> SchedulerConf:
        return parse_conf(text, actions=self.actions, plugins=self.plugins)

    def _load(self) -> SchedulerConf:
        if self.path is None:
            return self._parse(DEFAULT_CONF)
        try:
            self._mtime = self.path.stat().st_mtime
            text = self.path.read_text()
        except OSError as exc:
            raise ConfError(f"cannot read the scheduler configuration {self.path}: {exc}") from None
        try:
            return self._parse(text)
        except ConfError as exc:
            raise ConfError(f"{self.path}: {exc}") from None

    def refresh(self) -> SchedulerConf:
        if self.path is None:
            return self.current
        try:
            mtime = self.path.stat().st_mtime
        except OSError:
            return self.current
        if mtime == self._mtime:
            return self.current
        try:
            self.current = self._load()
            log.info("scheduler configuration reloaded", path=str(self.path))
        except ConfError as exc:
            self._mtime = mtime  # do not re-log the same bad edit every second
            log.error("bad scheduler configuration; keeping the last good one", error=str(exc))
        return self.current


def _namespace_labels_only(namespace: Namespace) -> Namespace:
    """What the scheduler keeps of a Namespace: its name and labels (client-go's transform)."""
    meta = namespace.metadata
    return Namespace(
        metadata=ObjectMeta(
            name=meta.name, uid=meta.uid, resource_version=meta.resource_version, labels=meta.labels
        )
    )


def _note(
    informer: SharedInformer[K],
    changed: Callable[[K], None],
    gone: Callable[[K], None] | None = None,
    *,
    moved: Callable[[K, K], bool] | None = None,
) -> None:
    """Tell ``changed`` of every add, update (the new object) and delete of ``informer``'s
    objects (``gone`` for deletes, when given); of the updates only those ``moved(old, new)``
    holds for, when given."""

    def update(old: K, new: K) -> None:
        if moved is None or moved(old, new):
            changed(new)

    informer.add_handler(HandlerFuncs(add=changed, update=update, delete=gone or changed))


class SchedulerLoop:
    """The cache, the session loop and the I/O of decisions."""

    def __init__(
        self,
        *,
        settings: SchedulerSettings,
        client: KubeClient,
        factory: SharedInformerFactory,
        recorder: EventRecorder,
        registry: Registry,
        conf: ConfSource,
        metrics: SchedulerMetrics,
        run_in_thread: Callable[..., Awaitable[SessionResult]] | None = None,
    ) -> None:
        self.settings, self.client, self.recorder = settings, client, recorder
        self.registry, self.conf, self.metrics = registry, conf, metrics
        self.pods = factory.informer(POD)
        self.nodes = factory.informer(NODE)
        self.podgroups = factory.informer(PODGROUP)
        self.queues = factory.informer(QUEUE)
        self.priority_classes = factory.informer(PRIORITY_CLASS)
        # Few and small objects, watched whatever the configuration (a reloaded configuration
        # may name resourcequota or pdb at any time).
        self.resource_quotas = factory.informer(RESOURCE_QUOTA)
        self.disruption_budgets = factory.informer(POD_DISRUPTION_BUDGET)
        self.hypernodes = factory.informer(HYPERNODE)
        self.factory = factory
        self._wake = asyncio.Event()

        def wake(_obj: KubeObject) -> None:
            self._wake.set()

        _note(self.pods, wake)
        # A node's heartbeat alone (``node_moved``) wakes nothing: no session decides on it.
        _note(self.nodes, wake, moved=node_moved)
        _note(self.podgroups, wake)
        _note(self.queues, wake)
        _note(self.resource_quotas, wake)
        _note(self.disruption_budgets, wake)
        _note(self.hypernodes, wake)
        self.assumed: dict[str, str] = {}  # pod uid -> node, until the cache sees the bind
        # The vGPU cards given to assumed pods (their volcano.sh/vgpu-ids-new), for the
        # deviceshare plugin until the cache shows the pods bound with the annotation.
        self.device_grants: dict[str, str] = {}
        # The node annotation deviceshare.NodeLockEnable has a bind take ("" for none).
        self._node_lock = ""
        self._requests = CachedRequests()
        # The snapshot, kept up to date: the handlers only note what changed.
        self.live = LiveSnapshot(scheduler_names=settings.scheduler_names, requests=self._requests)
        live = self.live

        def pod_gone(pod: Pod) -> None:
            live.pod_changed(pod)
            self._requests.discard(pod.metadata.uid)
            self._unschedulable_seen.pop(pod.metadata.uid, None)

        _note(self.pods, live.pod_changed, gone=pod_gone)
        self.nodes.add_handler(
            HandlerFuncs(add=live.node_changed, update=live.node_updated, delete=live.node_changed)
        )
        _note(self.podgroups, live.podgroup_changed)
        self._init_status_writes()
        self._init_namespaces(factory)
        _note(self.podgroups, self._podgroup_cached, gone=self._podgroup_uncached)
        _note(self.queues, lambda q: self.status_writer.forget((QUEUE_STATUS, q.metadata.name)))
        _note(self.pods, lambda pod: self.status_writer.forget((POD_CONDITION, object_key(pod))))
        self.podgroups.add_handler(
            HandlerFuncs(
                add=self._podgroup_seen,
                update=self._podgroup_moved,
                delete=lambda pg: metrics.forget_job(object_key(pg)),
            )
        )
        _note(self.queues, live.queue_changed)
        _note(self.priority_classes, live.priority_class_changed)
        _note(self.resource_quotas, live.resource_quota_changed)
        _note(self.disruption_budgets, live.disruption_budget_changed)
        _note(self.hypernodes, live.hypernode_changed)
        # Hard sharding: the snapshot sees only the shard's usable nodes (scheduler.sharding).
        # Off, nothing of it exists: no NodeShard informer, the snapshot reads the store.
        self.shard: HardShard | None = None
        nodes: Objects[Node] = self.nodes.store
        if settings.scheduler_sharding_mode == "hard":
            shards = factory.informer(NODESHARD)
            _note(shards, wake)
            self.shard = HardShard(settings.scheduler_sharding_name, self.nodes.store, shards.store)
            nodes = self.shard.view
        self.cached = CachedObjects(
            pods=self.pods.store,
            nodes=nodes,
            podgroups=self.assumed_podgroups,
            queues=self.queues.store,
            priority_classes=self.priority_classes.store,
            resource_quotas=self.resource_quotas.store,
            disruption_budgets=self.disruption_budgets.store,
            hypernodes=self.hypernodes.store,
        )
        self._bind_gate = asyncio.Semaphore(settings.bind_workers)
        # Pods writing their claims before the bind, apart from the bind slots: holding a bind
        # slot through the claim writes tripled its time and cut DRA binds/s (bench/dra.py).
        self._claim_slots = asyncio.Semaphore(settings.bind_workers * CLAIM_WRITES_PER_BIND)
        self._binding: set[asyncio.Task[None]] = set()  # binds in flight
        self._run = run_in_thread or asyncio.to_thread
        self.quiet = QuietSessions()
        self._job_figures_at: float | None = None  # when a session last reported job figures
        self.queue_admission_gates = settings.queue_admission_gates
        # Volcano's feasible-node sampling for the pods judged node by node (the three flags).
        self.feasible_nodes = FeasibleNodes(
            settings.minimum_feasible_nodes,
            settings.minimum_percentage_nodes_to_find,
            settings.percentage_nodes_to_find,
        )
        # Queue admission gates being removed, by pod uid, at most gate_removal_worker_num
        # patches at once (Volcano's --gate-removal-worker-num); a pod asked again while its
        # patch is in flight is not patched twice.
        self._ungate_slots = asyncio.Semaphore(settings.gate_removal_worker_num)
        self._ungating: dict[str, asyncio.Task[None]] = {}
        # The waiting jobs in the order the last session serves them (the visibility API).
        self.positions = Positions()
        self.node_load = NodeLoadPoller(client)
        # Numatopology objects are watched from the first configuration naming numa-aware
        # (a node agent writes one per node: not worth a watch for clusters that never read
        # them); a change to one is news to the quiet sessions.
        self.numa_topologies: SharedInformer[Numatopology] | None = None
        self._numa_news = False
        # deviceshare's MIG geometries, from the ConfigMap its configuration names.
        self.device_config = DeviceConfigReader(client)
        self._device_config_news = False
        # Dynamic Resource Allocation: the kinds are watched from the first pod with claims
        # (or a configuration asking for it); claim writes and releases go through the writer.
        self.dra: (
            tuple[
                SharedInformer[ResourceClaim],
                SharedInformer[ResourceSlice],
                SharedInformer[DeviceClass],
            ]
            | None
        ) = None
        self._dra_wanted = False
        self._dra_news = False
        self._slices_version = 0
        self.claim_writer = ClaimWriter(client)
        self._releasing: set[asyncio.Task[None]] = set()
        self.pods.add_handler(
            HandlerFuncs(
                add=self._pod_claims_seen,
                update=self._pod_claims_moved,
                delete=self._pod_gone_claims,
            )
        )

    def _init_status_writes(self) -> None:
        """The status writer, and the PodGroups as decided, which the sessions read until the
        cache shows each write (see the module docstring)."""
        self._unschedulable_seen: dict[str, str] = {}  # pod uid -> last message written
        self.assumed_podgroups = AssumedPodGroups(self.podgroups.store)
        self.status_writer: StatusWriter[StatusKey, StatusValue] = StatusWriter(
            self._send_status,
            slots=STATUS_WRITES_IN_FLIGHT,
            on_outcome=self._status_written,
            on_fenced=self._wake.set,  # the loop raises the FencedError at once
        )
        self.metrics.status_queue.set_function(lambda: self.status_writer.pending.waiting)

    def _init_namespaces(self, factory: SharedInformerFactory) -> None:
        """The Namespaces, watched for their labels alone (inter-pod affinity terms'
        namespaceSelector, ``scheduler.api.namespace_labels``): a label change is news to the
        quiet sessions, and the next session resolves the selectors against the new labels."""
        factory.transforms.setdefault(NAMESPACE, lambda: _namespace_labels_only)
        self.namespaces = factory.informer(NAMESPACE)
        self.namespace_labels = LabelsByNamespace()
        self._namespace_news = False

        def seen(namespace: Namespace) -> None:
            if self.namespace_labels.seen(namespace.metadata.name, namespace.metadata.labels):
                self._namespace_news = True
                self._wake.set()

        def gone(namespace: Namespace) -> None:
            if self.namespace_labels.gone(namespace.metadata.name):
                self._namespace_news = True
                self._wake.set()

        _note(self.namespaces, seen, gone=gone)

    def _watch_numa(self, conf: SchedulerConf) -> bool:
        """Whether ``conf`` names numa-aware; the Numatopology kind is watched from the first
        configuration that does (and stays watched: a reload may name it again)."""
        if not _names_plugin(conf, "numa-aware"):
            return False
        if self.numa_topologies is None:
            self.numa_topologies = self.factory.informer(NUMATOPOLOGY)
            _note(self.numa_topologies, self._numa_changed)
        return True

    def _numa_objects(self) -> dict[str, Numatopology]:
        """The cached Numatopology objects by name (a node's is named after it)."""
        if self.numa_topologies is None:
            return {}
        return {topology.metadata.name: topology for topology in self.numa_topologies.store.list()}

    def _numa_changed(self, _topology: Numatopology) -> None:
        self._numa_news = True
        self._wake.set()

    # ---- Dynamic Resource Allocation ----------------------------------------------------------

    def _pod_claims_seen(self, pod: Pod) -> None:
        if pod.spec.resource_claims:
            self._dra_wanted = True

    def _pod_claims_moved(self, _old: Pod, new: Pod) -> None:
        if not new.spec.resource_claims:
            return
        self._dra_wanted = True
        if new.status.phase in ("Succeeded", "Failed"):
            self._release_claims(new)

    def _pod_gone_claims(self, pod: Pod) -> None:
        if pod.spec.resource_claims:
            self._release_claims(pod)

    def _release_claims(self, pod: Pod) -> None:
        """Remove the pod's reservations from its claims (in the background)."""
        if self.dra is None:
            return
        keys, _why = pod_claims(pod)
        # the cache with this scheduler's own writes in flight or not seen yet: a pod deleted
        # right after its claims were reserved is released too
        cached = self.claim_writer.claims(self.dra[0].store.list())
        reserved = [
            key
            for key in keys
            if (claim := cached.get(key)) is not None
            and any(r.uid == pod.metadata.uid for r in claim.status.reserved_for)
        ]
        if not reserved:
            return
        task = asyncio.create_task(
            self.claim_writer.release(pod.metadata.uid, reserved, cached),
            name=f"release claims of {pod.metadata.namespace}/{pod.metadata.name}",
        )
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    def _watch_dra(self, conf: SchedulerConf) -> bool:
        """Whether the DRA kinds are watched and synced; they are from the first pod with
        claims or configuration that sets ``predicate.DynamicResourceAllocationEnable``."""
        if self.dra is None:
            if not (self._dra_wanted or _dra_configured(conf)):
                return False
            claims = self.factory.informer(RESOURCE_CLAIM)
            slices = self.factory.informer(RESOURCE_SLICE)
            classes = self.factory.informer(DEVICE_CLASS)
            _note(claims, self._dra_changed)
            _note(slices, self._slices_changed)
            _note(classes, self._slices_changed)
            self.dra = (claims, slices, classes)
        return all(informer.has_synced for informer in self.dra)

    def _dra_changed(self, _obj: KubeObject) -> None:
        self._dra_news = True
        self._wake.set()

    def _slices_changed(self, _obj: KubeObject) -> None:
        self._slices_version += 1  # the inventory is derived again (and the classes' matches)
        self._dra_changed(_obj)

    def _dra_view(self) -> DraView | None:
        if self.dra is None:
            return None
        claims, slices, classes = self.dra
        return DraView(
            claims=self.claim_writer.claims(claims.store.list()),
            classes={c.metadata.name: c for c in classes.store.list()},
            slices=tuple(slices.store.list()),
            slices_version=self._slices_version,
        )

    def _podgroup_seen(self, pg: PodGroup) -> None:
        """Volcano's per-job scheduling start time, set when a PodGroup enters the cache."""
        stamp = pg.metadata.creation_timestamp
        with contextlib.suppress(ValueError):  # a timestamp the API server never writes
            created = parse_time(stamp) if stamp else None
            if created is not None:
                queue = pg.spec.queue or self.settings.default_queue
                self.metrics.job_seen(object_key(pg), queue=queue, created=created)

    def _podgroup_moved(self, old: PodGroup, new: PodGroup) -> None:
        if old.spec.queue != new.spec.queue:
            self._podgroup_seen(new)

    async def ensure_default_queues(self) -> bool:
        """Volcano's scheduler creates ``root`` and ``default`` when they are missing. True once
        both exist; a create the API server refuses for now (the queue webhook not answering
        yet, as when the chart's pods start together) is logged and tried again next cycle,
        never a crash."""
        for name, reclaimable in (("root", False), (self.settings.default_queue, True)):
            queue = Queue(
                metadata=ObjectMeta(name=name), spec=QueueSpec(weight=1, reclaimable=reclaimable)
            )
            try:
                await self.client.create(QUEUE, queue)
            except AlreadyExists:
                pass
            except (ApiError, ApiConnectionError, TimeoutError) as exc:
                log.warning("cannot create a default queue yet", queue=name, error=str(exc))
                return False
        return True

    async def run(self, stopping: asyncio.Event) -> None:
        queues_made = await self.ensure_default_queues()
        await self.factory.wait_for_sync()
        log.info("caches synced; scheduling", period=self.settings.schedule_period)
        self.status_writer.start()
        stopped = False
        try:
            while not stopping.is_set():
                self._wake.clear()
                if not queues_made:
                    queues_made = await self.ensure_default_queues()
                try:
                    self.status_writer.raise_if_fenced()
                    await self.cycle()
                    if self.shard is not None:
                        await self._publish_shard(self.shard)
                except FencedError:
                    raise  # the Lease may have passed: stop scheduling (a LeadershipLostError)
                except (ApiError, ApiConnectionError, TimeoutError) as exc:
                    log.warning("session failed", error=str(exc))
                except Exception:
                    log.exception("session failed unexpectedly")
                waits = [
                    asyncio.create_task(self._wake.wait()),
                    asyncio.create_task(stopping.wait()),
                ]
                await asyncio.wait(waits, timeout=self.settings.schedule_period)
                for task in waits:
                    task.cancel()
                if self._wake.is_set():
                    await asyncio.sleep(0.05)  # let a burst of events land in one session
            stopped = True
        finally:
            await self.node_load.close()  # the load poller stops with the loop, failed or not
            if not stopped:  # failed, fenced or cancelled (leadership lost): write nothing more
                self.status_writer.stop()
        await asyncio.gather(self.drain_binds(grace=10), self.status_writer.drain(grace=10))

    def _forget_seen_assumptions(self) -> None:
        """Drop assumed binds the cache now shows (bound, or the pod gone or replaced)."""
        for uid in list(self.assumed):
            pod = self.pods.store.get(self.live.pod_key(uid) or "")
            if pod is None or pod.metadata.uid != uid or pod.spec.node_name:
                del self.assumed[uid]
                self.device_grants.pop(uid, None)

    async def cycle(self) -> SessionResult:
        """One session and its writes; or none, when it would repeat the last one, which
        changed nothing (``scheduler.quiet``): then the last result is returned."""
        started = time.monotonic()
        self._forget_seen_assumptions()
        if self.shard is not None:
            for name in self.shard.refresh():  # nodes that came into the shard or left it
                node = self.nodes.store.get(name)
                if node is not None:
                    self.live.node_changed(node)
        conf = self.conf.refresh()
        self.node_load.configure(_load_source(conf))
        numa_aware = self._watch_numa(conf)
        if await self.device_config.refresh(config_source(conf), started):
            self._device_config_news = True
        dra = self._watch_dra(conf)
        if not dra and self.dra is not None:
            # The kinds were just asked for: a session without them would only tell every
            # pod with claims to wait (a condition write each); their first list is short.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.factory.wait_for_sync(), timeout=DRA_SYNC_WAIT)
            dra = self._watch_dra(conf)
        news = self.live.has_news(self.assumed) or self._numa_news or self._dra_news
        news = news or self._device_config_news or self._namespace_news
        last = self.quiet.repeat(conf, news=news, now=started)
        if last is not None:
            self.metrics.skipped.inc()
            return last
        cluster, report = self.live.update(self.cached, assumed=self.assumed)
        if self.shard is not None:
            outside = self.shard.outside_totals(self.nodes.store.list(), self.live.tasks_on)
            cluster.outside_allocatable, cluster.outside_used = outside
        for key, queue in report.missing_queue.items():
            log.debug("queue of job does not exist, ignoring it", job=key, queue=queue)
        cluster.node_usage = self.node_load.latest
        cluster.load_measured = self.node_load.source is not None
        self._numa_news = False
        cluster.numa_topologies = self._numa_objects() if numa_aware else {}
        cluster.device_grants = {
            uid: ids for uid, ids in self.device_grants.items() if uid in self.assumed
        }
        self._node_lock = _node_lock_key(conf)
        cluster.device_config = self.device_config.config
        self._device_config_news = False
        self._dra_news = False
        cluster.dra = self._dra_view() if dra else None
        cluster.namespace_labels = self.namespace_labels.snapshot()
        self._namespace_news = False
        session = Session(cluster, conf.tiers)
        session.queue_admission_gates = self.queue_admission_gates
        session.feasible_nodes = self.feasible_nodes
        core_started = time.monotonic()
        figures_at = self._job_figures_at
        session.job_figures = figures_at is None or core_started - figures_at >= JOB_FIGURES_PERIOD
        if session.job_figures:
            self._job_figures_at = core_started
        try:
            result = await self._run(run_session, session, conf, self.registry)
        finally:
            # What the session planned in the snapshot is derived again from the cache.
            self.live.after_session(session)
        self.metrics.session_latency.observe((time.monotonic() - core_started) * 1000)
        # Indexing thousands of waiting jobs takes tens of milliseconds: off the event loop.
        self.positions = await asyncio.to_thread(
            publish, result.pending, session.now, self.positions
        )
        self.metrics.observe(result)
        writes = await self.apply(result)
        self.quiet.record(conf, result, writes, now=started)
        self.metrics.e2e_latency.observe((time.monotonic() - started) * 1000)
        return result

    async def _publish_shard(self, shard: HardShard) -> None:
        """Write the NodeShard's status when the nodes in use changed (not while a node being
        given up still has binds in flight: the other scheduler would take it too early)."""
        now = format_time(dt.datetime.now(dt.UTC))
        updated = shard.status_update(self.assumed.values(), now)
        if updated is None:
            return
        with contextlib.suppress(NotFound, Conflict):  # gone, or a newer one: next cycle
            await self.client.update_status(NODESHARD, updated)
        log.info("nodeshard status written", shard=shard.name, nodes_in_use=len(shard.allowed))

    # ---- decisions -> API calls ---------------------------------------------------------------

    async def apply(self, result: SessionResult) -> int:
        """Carry out a session's decisions; the number of status writes queued (PodGroups,
        Queues, pod conditions) is returned. Binds are started, not awaited (Volcano's binder
        works apart from its sessions too): the pods stay assumed on their nodes until the
        cache sees them bound, so the next session may run while thousands of binds are in
        flight, instead of waiting for them and stretching the period. Status writes are
        queued to the status writer, not awaited either (see the module docstring)."""
        claims = (
            self.claim_writer.claims(self.dra[0].store.list())
            if result.claim_plans and self.dra is not None
            else {}
        )
        for bind in result.binds:
            self.assumed[bind.task.uid] = bind.node
            annotations = result.bind_annotations.get(bind.task.uid)
            if annotations is not None and IDS in annotations:
                self.device_grants[bind.task.uid] = annotations[IDS]
            elif annotations is not None and GPU_INDEX in annotations:
                self.device_grants[bind.task.uid] = annotations[GPU_INDEX]
            plans = result.claim_plans.get(bind.task.uid, ())
            if plans:
                self.claim_writer.plan(claims, (bind.task.name, bind.task.uid), plans)
            task = asyncio.create_task(
                self._bind(
                    bind.task.namespace,
                    bind.task.name,
                    bind.task.uid,
                    bind.node,
                    annotations,
                    plans,
                    claims,
                ),
                name=f"bind {bind.task.key}",
            )
            self._binding.add(task)
            task.add_done_callback(self._bind_done)
        await asyncio.gather(
            *(self._evict(e.task.namespace, e.task.name, e.reason) for e in result.evictions)
        )
        for gated in result.ungate:
            if gated.uid not in self._ungating:
                ungate = asyncio.create_task(
                    self._remove_gate(gated.namespace, gated.name, gated.uid),
                    name=f"ungate {gated.key}",
                )
                self._ungating[gated.uid] = ungate
        self.metrics.attempts.labels(result="unschedulable").inc(len(result.unschedulable))
        self.metrics.unschedulable_tasks.set(len(result.unschedulable))
        self.metrics.unschedulable_reasons.clear()
        for reason, count in unschedulable_reasons(result.unschedulable.values()).items():
            self.metrics.unschedulable_reasons.labels(reason=reason).set(count)
        writes = self._write_podgroups(result)
        writes += self._write_queues(result)
        writes += self._mark_unschedulable(result.unschedulable)
        for event in result.events:
            api_version = SCHEDULING_API_VERSION if event.kind == "PodGroup" else "v1"
            ref = ObjectReference(
                api_version=api_version, kind=event.kind, namespace=event.namespace, name=event.name
            )
            self.recorder.record(ref, event.type, event.reason, event.message)
        return writes

    def _bind_done(self, task: asyncio.Task[None]) -> None:
        self._binding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("bind task failed", task=task.get_name(), error=repr(task.exception()))

    async def drain_binds(self, grace: float) -> None:
        """Wait (up to ``grace`` seconds) for the binds and gate removals in flight, then
        cancel the rest."""
        flying = [*self._binding, *self._ungating.values()]
        if not flying:
            return
        _done, left = await asyncio.wait(flying, timeout=grace)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)

    async def _bind(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        annotations: dict[str, str] | None = None,
        plans: tuple[ClaimPlan, ...] = (),
        claims: dict[str, ResourceClaim] | None = None,
    ) -> None:
        pod = pod_ref(namespace, name, uid)
        if plans:
            # the claims are allocated and reserved first: a pod bound without its devices
            # would never start
            try:
                async with self._claim_slots:
                    why = await self.claim_writer.reserve(namespace, name, uid, plans, claims or {})
            except (ApiError, ApiConnectionError, TimeoutError) as exc:
                self._bind_failed(namespace, name, uid, node, exc)
                return
            if why is not None:
                self._unplace(namespace, name, uid)
                log.info("claims not reserved; pod not bound", pod=f"{namespace}/{name}", why=why)
                self.recorder.record(pod, "Warning", "FailedScheduling", why)
                return
        async with self._bind_gate:
            locked = False
            try:
                if annotations and self._node_lock:
                    await self._lock_node(node, self._node_lock)
                    locked = True
                if annotations:
                    await self.client.bind(namespace, name, node, uid=uid, annotations=annotations)
                else:
                    await self.client.bind(namespace, name, node, uid=uid)
                self.metrics.attempts.labels(result="scheduled").inc()
                message = f"Successfully assigned {namespace}/{name} to {node}"
                self.recorder.record(pod, "Normal", "Scheduled", message)
            except (ApiError, ApiConnectionError, TimeoutError) as exc:
                self._bind_failed(namespace, name, uid, node, exc)
                if locked:  # no device plugin will release it for this pod
                    with contextlib.suppress(ApiError, ApiConnectionError, TimeoutError):
                        await self.client.patch(NODE, node, _unlock_patch(self._node_lock))

    def _bind_failed(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        exc: ApiError | ApiConnectionError | TimeoutError,
    ) -> None:
        """A claim write or the bind failed: the pod is not bound (a pod gone or changed is not
        reported)."""
        self.metrics.attempts.labels(result="error").inc()
        self._unplace(namespace, name, uid)
        if not isinstance(exc, NotFound | Conflict):
            log.warning("bind failed", pod=f"{namespace}/{name}", node=node, error=str(exc))
            message = f"failed to bind to node {node}: {exc}"
            self.recorder.record(
                pod_ref(namespace, name, uid), "Warning", "FailedScheduling", message
            )

    def _unplace(self, namespace: str, name: str, uid: str) -> None:
        """A pod the session placed is not bound: its room is free again, and the snapshot,
        which kept the pod as the session placed it, derives it again (a bind that fails before
        the next update would otherwise go unseen there)."""
        self.assumed.pop(uid, None)
        self.device_grants.pop(uid, None)
        cached = self.pods.store.get(f"{namespace}/{name}")
        if cached is not None and cached.metadata.uid == uid:
            self.live.pod_changed(cached)
            self._wake.set()

    async def _lock_node(self, name: str, lock: str) -> None:
        """Take the node's device lock before a vGPU bind (deviceshare.NodeLockEnable; the
        device plugin releases it once it has handed the cards over). A lock another holds
        raises Conflict, which fails the bind: the pod is placed again by a later session."""
        node = self.nodes.store.get(name)
        if node is None:
            raise NotFound(404, "NotFound", f"node {name} is not in the cache")
        patch = node_lock_patch(
            node.metadata.annotations,
            node.metadata.resource_version,
            dt.datetime.now(dt.UTC),
            lock=lock,
        )
        if patch is None:
            raise Conflict(409, "Conflict", f"node {name} is locked by another device allocation")
        await self.client.patch(NODE, name, patch)

    async def _remove_gate(self, namespace: str, name: str, uid: str) -> None:
        """Remove the pod's queue admission gate (Volcano's RemoveVolcanoSchGate); its next
        session places it, once the cache shows it ungated. A failure is logged: the pod stays
        gated, and a later session asks again."""
        try:
            async with self._ungate_slots:
                await self.client.patch(
                    POD,
                    name,
                    REMOVE_GATE_PATCH,
                    namespace=namespace,
                    patch_type=PatchType.STRATEGIC,
                )
            log.debug("queue admission gate removed", pod=f"{namespace}/{name}")
        except NotFound:
            pass
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            log.warning(
                "queue admission gate removal failed", pod=f"{namespace}/{name}", error=str(exc)
            )
        finally:
            self._ungating.pop(uid, None)

    async def _evict(self, namespace: str, name: str, reason: str) -> None:
        try:
            await self.client.evict(namespace, name)
            self.metrics.evictions.inc()
            ref = pod_ref(namespace, name)
            self.recorder.record(ref, "Normal", "Evict", f"Pod is evicted, because of {reason}")
        except NotFound:
            pass
        except (ApiError, ApiConnectionError) as exc:
            log.warning("eviction failed", pod=f"{namespace}/{name}", error=str(exc))

    # ---- status writes (scheduler.status_writer) ----------------------------------------------

    def _write_podgroups(self, result: SessionResult) -> int:
        """Queue the changed PodGroup statuses (and wait records, annotations) as merge patches
        against the cache, each naming what the last patch not yet in the cache named (so it
        may replace it); the number queued."""
        writes = 0
        keys = result.podgroup_status.keys() | result.podgroup_why.keys()
        keys |= result.podgroup_annotations.keys()
        assumed = self.assumed_podgroups
        for key in keys | result.podgroup_hypernode.keys():
            cached: PodGroup | None = self.podgroups.store.get(key)
            current = assumed.get(key)
            if cached is None or current is None:
                continue
            desired = with_findings(
                current,
                result.podgroup_status.get(key),
                result.podgroup_why.get(key),
                hypernode=result.podgroup_hypernode.get(key),
                annotations=result.podgroup_annotations.get(key),
            )
            patch = podgroup_patch(cached, desired, assumed.patches.get(key))
            if patch is None:
                continue
            assumed.assume(key, patch)
            # The next session reads it as decided (not as the cache still has it).
            self.live.podgroup_changed(desired, news=False)
            writes += self.status_writer.submit((PODGROUP_STATUS, key), patch)
        return writes

    def _write_queues(self, result: SessionResult) -> int:
        """Queue the Queues' ``status.allocated`` that changed; the number queued."""
        writes = 0
        for name, allocated in result.queue_allocated.items():
            queue: Queue | None = self.queues.store.get(name)
            if queue is None:
                continue
            key = (QUEUE_STATUS, name)
            earlier = self.status_writer.pending.latest(key)  # queued or not yet in the cache
            if earlier is None and Resources.from_list(queue.status.allocated) == allocated:
                continue
            current = allocated.to_list()
            # A merge patch keeps the keys it does not name: one no longer held (a
            # deviceclass/ count whose claims were released) is removed by name, also one
            # only an earlier write not yet in the cache named.
            named = set(queue.status.allocated) | set(_allocated_keys(earlier))
            gone = {n: None for n in sorted(named) if n not in current}
            patch = {"status": {"allocated": {**current, **gone} if current else None}}
            writes += self.status_writer.submit(key, patch)
        return writes

    def _mark_unschedulable(self, messages: dict[str, str]) -> int:
        """Queue PodScheduled=False with the reason, once per distinct message (also while
        the cache has not seen the last write yet), after the PodGroups' writes; the number
        queued."""
        writes = 0
        for key, message in messages.items():
            pod: Pod | None = self.pods.store.get(key)
            if pod is None or pod.spec.node_name or pod.spec.scheduling_gates:
                # A gated pod's condition is the API server's (SchedulingGated): left as it is,
                # as Volcano does; autoscalers ignore such pods.
                continue
            uid = pod.metadata.uid
            cond = find_condition(pod.status.conditions, "PodScheduled")
            if cond is not None and cond.status == "False" and cond.message == message:
                self._unschedulable_seen.pop(uid, None)  # the cache has it now
                continue
            if self._unschedulable_seen.get(uid) == message:
                continue  # written; the cache will show it
            condition: PodCondition = (uid, message)
            writes += self.status_writer.submit(
                (POD_CONDITION, key), condition, lane=CONDITION_LANE
            )
        return writes

    async def _send_status(self, key: StatusKey, value: StatusValue) -> None:
        """One status write (the status writer's ``send``); raises what the client raises."""
        kind, name = key
        if kind == QUEUE_STATUS:
            await self.client.patch_status(QUEUE, name, value)
            return
        namespace, _, name = name.partition("/")
        if kind == PODGROUP_STATUS:
            await self.client.patch(PODGROUP, name, value, namespace=namespace)
            return
        assert isinstance(value, tuple)
        uid, message = value
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": message,
                    }
                ]
            }
        }
        await self.client.patch_status(
            POD, name, patch, namespace=namespace, patch_type=PatchType.STRATEGIC
        )
        self._unschedulable_seen[uid] = message
        # Volcano's taskUnschedulable: the event goes with the condition.
        self.recorder.record(pod_ref(namespace, name, uid), "Warning", "FailedScheduling", message)

    def _status_written(self, key: StatusKey, value: StatusValue, outcome: Outcome) -> None:
        """Count a status write; a PodGroup's that will not land is no longer assumed (the
        sessions read the cache's again), unless a newer decision for it waits."""
        kind, name = key
        self.metrics.status_writes.labels(kind=kind, result=outcome.value).inc()
        if kind != PODGROUP_STATUS or outcome is Outcome.WRITTEN:
            return
        if self.status_writer.pending.holds(key):
            return  # tried again, or a newer decision goes next
        self.assumed_podgroups.drop(name)
        cached: PodGroup | None = self.podgroups.store.get(name)
        if cached is not None:
            # Decided again from the cache by the next session, which the period brings (not
            # at once: a write refused for good would be tried in a loop).
            self.live.podgroup_changed(cached, news=False)

    def _podgroup_cached(self, pg: PodGroup) -> None:
        """A PodGroup event: its decided patch ends once the cache shows it; its last written
        patch is no longer the measure of a new decision."""
        self.assumed_podgroups.seen(pg)
        self.status_writer.forget((PODGROUP_STATUS, object_key(pg)))

    def _podgroup_uncached(self, pg: PodGroup) -> None:
        key = object_key(pg)
        self.assumed_podgroups.drop(key)
        self.status_writer.forget((PODGROUP_STATUS, key))


def _allocated_keys(patch: StatusValue | None) -> Iterable[str]:
    """The resource names a Queue status patch names under ``status.allocated``."""
    if not isinstance(patch, dict):
        return ()
    allocated = patch.get("status", {}).get("allocated")
    return allocated.keys() if isinstance(allocated, dict) else ()


def _unlock_patch(lock: str) -> dict[str, object]:
    return {"metadata": {"annotations": {lock: None}}}


def _node_lock_key(conf: SchedulerConf) -> str:
    """The node lock a device bind takes: HAMi's for vGPU, "gpu" for the GPU memory mode,
    none for the GPU number mode (Volcano locks only those two) or without the argument."""
    if not _node_lock_enabled(conf):
        return ""
    if _argument_true(conf, "deviceshare.GPUSharingEnable", plugin="deviceshare"):
        return GPUSHARE_LOCK
    if _argument_true(conf, "deviceshare.GPUNumberEnable", plugin="deviceshare"):
        return ""
    return NODE_LOCK


def _node_lock_enabled(conf: SchedulerConf) -> bool:
    """Whether the deviceshare plugin is configured with deviceshare.NodeLockEnable."""
    return _argument_true(conf, "deviceshare.NodeLockEnable", plugin="deviceshare")


def _dra_configured(conf: SchedulerConf) -> bool:
    """Whether a configured plugin sets ``predicate.DynamicResourceAllocationEnable`` true."""
    return _argument_true(conf, "predicate.DynamicResourceAllocationEnable")


def _argument_true(conf: SchedulerConf, key: str, *, plugin: str | None = None) -> bool:
    """Whether a configured plugin (``plugin``, or any) sets argument ``key`` to true (a YAML
    boolean or the text "true", in any case)."""
    return any(
        (plugin is None or option.name == plugin)
        and str(option.arguments.get(key, "false")).lower() == "true"
        for tier in conf.tiers
        for option in tier
    )


def _names_plugin(conf: SchedulerConf, name: str) -> bool:
    return any(option.name == name for tier in conf.tiers for option in tier)


def _load_source(conf: SchedulerConf) -> MetricsSource | None:
    """The metrics source to poll: only when a configured plugin reads the nodes' load."""
    readers = ("usage", "rescheduling")
    if not any(option.name in readers for tier in conf.tiers for option in tier):
        return None
    try:
        return metrics_source(conf.metrics)
    except ValueError:  # refused when the configuration was loaded; not reached
        return None


def pod_ref(namespace: str, name: str, uid: str = "") -> ObjectReference:
    """The reference an Event about a pod names."""
    return ObjectReference(api_version="v1", kind="Pod", namespace=namespace, name=name, uid=uid)


def scheduler_conf_path(settings: SchedulerSettings) -> str:
    return os.path.expanduser(settings.scheduler_conf) if settings.scheduler_conf else ""
