"""The dashboard's one informer cache, and the Events it reads on demand.

`ClusterCache` holds the stores of the kinds the pages show, with the indexes they look things
up by (a queue's jobs, a job's PodGroup, a job's pods), so a page costs what it shows, not what
the cluster holds. `from_informers` builds it from a `SharedInformerFactory` (one list/watch per
kind) and feeds the hub from the informers' handlers; `static` builds it from plain objects,
for tests and benchmarks.

Kinds the user may not list (queues, nodes, PriorityClasses, HyperNodes are cluster-scoped; a
namespace's user often may not read them) are left out: their store stays empty and `hidden`
names them, so the pages can say what they cannot show.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import msgspec

from caldera.api.core import Event, Node, Pod, PriorityClass
from caldera.api.kinds import (
    HYPERNODE,
    JOB,
    NODE,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    QUEUE,
    KindInfo,
)
from caldera.api.meta import controller_of
from caldera.api.topology import HyperNode
from caldera.api.visibility import PENDING_JOB_LIST_DECODER, PendingJobList, queue_path
from caldera.api.volcano import JOB_NAME_KEY, Job, PodGroup, Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Forbidden, NotFound
from caldera.kube.events import events_about
from dashboard import topics
from dashboard.live import Hub
from dashboard.overview import queue_of
from dashboard.ttlcache import TTLCache
from informers.factory import SharedInformerFactory
from informers.store import HandlerFuncs, KubeObject, Store

__all__ = ["ClusterCache", "EventReader", "PositionReader"]

T = TypeVar("T", bound=KubeObject)

BY_QUEUE: Final = "queue"
BY_JOB: Final = "job"


def _job_queue(job: Job) -> list[str]:
    return [queue_of(job)]


def _podgroup_job(pg: PodGroup) -> list[str]:
    ref = controller_of(pg.metadata)
    return [ref.uid] if ref is not None and ref.kind == "Job" else []


def _pod_job(pod: Pod) -> list[str]:
    job = pod.metadata.annotations.get(JOB_NAME_KEY) or pod.metadata.labels.get(JOB_NAME_KEY)
    return [f"{pod.metadata.namespace}/{job}"] if job else []


class ClusterCache:
    """The stores the pages read (see the module docstring)."""

    def __init__(
        self,
        *,
        queues: Store[Queue],
        jobs: Store[Job],
        podgroups: Store[PodGroup],
        pods: Store[Pod],
        nodes: Store[Node],
        priorities: Store[PriorityClass],
        hypernodes: Store[HyperNode] | None = None,
        namespace: str | None = None,
        hidden: Sequence[str] = (),
    ) -> None:
        self.queues = queues
        self.jobs = jobs
        self.podgroups = podgroups
        self.pods = pods
        self.nodes = nodes
        self.priority_classes = priorities
        self.hypernodes: Store[HyperNode] = hypernodes if hypernodes is not None else Store()
        self.namespace = namespace
        """The one namespace watched, or None for all."""
        self.hidden = tuple(hidden)
        """The kinds (plural) the user may not list, so not shown."""

    @staticmethod
    def add_indexers(
        jobs: Callable[[str, Callable[[Job], Iterable[str]]], None],
        podgroups: Callable[[str, Callable[[PodGroup], Iterable[str]]], None],
        pods: Callable[[str, Callable[[Pod], Iterable[str]]], None],
    ) -> None:
        jobs(BY_QUEUE, _job_queue)
        podgroups(BY_JOB, _podgroup_job)
        pods(BY_JOB, _pod_job)

    @classmethod
    def static(
        cls,
        *,
        queues: Iterable[Queue] = (),
        jobs: Iterable[Job] = (),
        podgroups: Iterable[PodGroup] = (),
        pods: Iterable[Pod] = (),
        nodes: Iterable[Node] = (),
        priorities: Iterable[PriorityClass] = (),
        hypernodes: Iterable[HyperNode] = (),
        namespace: str | None = None,
        hidden: Sequence[str] = (),
    ) -> ClusterCache:
        """A cache of fixed objects (tests, benchmarks): no API server."""

        def store(objs: Iterable[T]) -> Store[T]:
            s: Store[T] = Store()
            s.replace(objs, "1")
            return s

        job_store, pg_store, pod_store = store(jobs), store(podgroups), store(pods)
        cls.add_indexers(job_store.add_indexer, pg_store.add_indexer, pod_store.add_indexer)
        return cls(
            queues=store(queues),
            jobs=job_store,
            podgroups=pg_store,
            pods=pod_store,
            nodes=store(nodes),
            priorities=store(priorities),
            hypernodes=store(hypernodes),
            namespace=namespace,
            hidden=hidden,
        )

    @classmethod
    def from_informers(
        cls,
        factory: SharedInformerFactory,
        hub: Hub,
        *,
        hidden: Sequence[str] = (),
    ) -> ClusterCache:
        """The cache of `factory`'s informers (started by the caller), publishing each change's
        topics to `hub`. Kinds in `hidden` get no informer (an empty store)."""

        def informed(
            kind: KindInfo[T], topics_of: Callable[[T | None, T | None], set[str]]
        ) -> Store[T]:
            if kind.plural in hidden:
                return Store()
            informer = factory.informer(kind)
            informer.add_handler(
                HandlerFuncs(
                    add=lambda new: hub.publish(topics_of(None, new)),
                    update=lambda old, new: hub.publish(topics_of(old, new)),
                    delete=lambda old: hub.publish(topics_of(old, None)),
                )
            )
            return informer.store

        def both(one: Callable[[Any], set[str]]) -> Callable[[Any, Any], set[str]]:
            return lambda old, new: (
                (one(old) if old is not None else set()) | (one(new) if new is not None else set())
            )

        jobs = factory.informer(JOB)
        podgroups = factory.informer(PODGROUP)
        pods = factory.informer(POD)
        cls.add_indexers(jobs.add_indexer, podgroups.add_indexer, pods.add_indexer)
        return cls(
            queues=informed(QUEUE, both(topics.queue_topics)),
            jobs=informed(JOB, both(topics.job_topics)),
            podgroups=informed(PODGROUP, both(topics.podgroup_topics)),
            pods=informed(POD, both(topics.pod_topics)),
            nodes=informed(NODE, topics.node_topics),
            priorities=informed(PRIORITY_CLASS, lambda _old, _new: set()),
            hypernodes=informed(HYPERNODE, lambda _old, _new: {topics.TOPOLOGY}),
            namespace=factory.namespace,
            hidden=hidden,
        )

    # --- reads ---------------------------------------------------------------------------

    def job(self, namespace: str, name: str) -> Job | None:
        return self.jobs.get(f"{namespace}/{name}")

    def jobs_in_queue(self, queue: str) -> list[Job]:
        return self.jobs.by_index(BY_QUEUE, queue)

    def job_namespaces(self) -> set[str]:
        """The namespaces the cached jobs are in."""
        return {job.metadata.namespace for job in self.jobs.list()}

    def podgroup_of(self, job: Job) -> PodGroup | None:
        found = self.podgroups.by_index(BY_JOB, job.metadata.uid)
        return found[0] if found else None

    def podgroups_of(self, jobs: Iterable[Job]) -> dict[str, PodGroup]:
        """PodGroups by their job's uid, for those of `jobs` that have one."""
        out: dict[str, PodGroup] = {}
        for job in jobs:
            pg = self.podgroup_of(job)
            if pg is not None:
                out[job.metadata.uid] = pg
        return out

    def pods_of(self, job: Job) -> list[Pod]:
        """The job's pods: those naming it, controlled by it (or by nothing: kwok-made)."""
        return [
            p
            for p in self.pods.by_index(BY_JOB, f"{job.metadata.namespace}/{job.metadata.name}")
            if (ref := controller_of(p.metadata)) is None or ref.uid == job.metadata.uid
        ]

    def priorities(self) -> dict[str, int]:
        return {pc.metadata.name: pc.value for pc in self.priority_classes.list()}


# At most this many Event LISTs at once and per page (the job, its PodGroup, some pods).
EVENT_READS: Final = 4
MAX_EVENT_OBJECTS: Final = 12
EVENT_TIMEOUT: Final = 5.0


class EventReader:
    """Reads the Events of a job's objects when its page is rendered (Events are many and
    short-lived: they are not cached)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._limit = asyncio.Semaphore(EVENT_READS)

    async def read(self, namespace: str, uids: Sequence[str]) -> list[Event] | None:
        """The Events whose involvedObject is one of the first `MAX_EVENT_OBJECTS` of `uids`;
        None when the user may not list Events there, or the API server did not answer in
        time (the page then says so and shows the rest)."""
        wanted = [u for u in dict.fromkeys(uids) if u][:MAX_EVENT_OBJECTS]
        try:
            async with asyncio.timeout(EVENT_TIMEOUT):
                return await events_about(self._client, namespace, wanted, limit=self._limit)
        except (Forbidden, ApiError, ApiConnectionError, TimeoutError):
            return None


POSITION_TIMEOUT: Final = 3.0
POSITIONS_FRESH: Final = 2.0  # seconds a queue's order is reused (the scheduler's period is 1 s)
NOT_SERVED_FOR: Final = 60.0  # seconds the dashboard believes the API is not served


class PositionReader:
    """Reads a queue's waiting jobs in the scheduler's order from the visibility API
    (``caldera.api.visibility``) when its page is rendered; None when the API is not served,
    refuses, or does not answer in time (the page then keeps its own order). Answers are kept a
    few seconds, so a page and its live updates do not ask again and again."""

    def __init__(self, client: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._kept: TTLCache[str, PendingJobList | None] = TTLCache(
            ttl=POSITIONS_FRESH, max_entries=256, clock=clock
        )
        self._not_served = TTLCache[str, bool](ttl=NOT_SERVED_FOR, max_entries=1, clock=clock)

    async def read(self, queue: str) -> PendingJobList | None:
        if self._not_served.get("api"):
            return None
        kept = self._kept.get(queue)
        if kept is not None:
            return kept
        try:
            async with asyncio.timeout(POSITION_TIMEOUT):
                data = await self._client.request("GET", queue_path(queue))
            listed = PENDING_JOB_LIST_DECODER.decode(data)
        except NotFound:
            self._not_served.put("api", True)  # no APIService: do not ask on every page
            return None
        except (ApiError, ApiConnectionError, TimeoutError, msgspec.DecodeError):
            return None
        self._kept.put(queue, listed)
        return listed
