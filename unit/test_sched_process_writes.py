"""The scheduler process writes a session's PodGroup statuses and pod conditions concurrently
(bounded) and apart from the session loop (scheduler.status_writer), and binds apart from the
cycle, so that a session enqueueing hundreds of jobs or leaving thousands of pods
unschedulable does not hold the next session back; a write that finds its object gone is
dropped, and the others still land."""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from caldera.api.core import Pod, PodSchedulingGate, PodSpec
from caldera.api.gates import REMOVE_GATE_PATCH
from caldera.api.meta import ObjectMeta, ObjectReference
from caldera.api.resources import Resources
from caldera.api.volcano import QUEUE_ALLOCATION_GATE, PodGroup, PodGroupStatus
from caldera.kube.errors import AlreadyExists, NotFound, ServerError
from caldera.kube.requests import PatchType
from caldera.settings import SchedulerSettings
from scheduler.api.dra.view import ClaimPlan
from scheduler.api.types import TaskInfo, TaskStatus
from scheduler.framework.session import SessionResult
from scheduler.metrics import SchedulerMetrics
from scheduler.process import STATUS_WRITES_IN_FLIGHT, SchedulerLoop


class _Store:
    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects

    def get(self, key: str) -> Any:
        return self.objects.get(key)


class _Informer:
    def __init__(self, store: _Store) -> None:
        self.store = store


class _Client:
    """Records the PodGroup merge patches and how many were in flight at most; PodGroups named
    in ``gone`` answer 404 (deleted meanwhile)."""

    def __init__(self, gone: set[str]) -> None:
        self.gone = gone
        self.written: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.most = 0
        self.release = asyncio.Event()
        self.release.set()

    async def patch(self, kind: Any, name: str, patch: Any, **_: Any) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
            await asyncio.sleep(0.01)
            if name in self.gone:
                raise NotFound(404, "NotFound", f"podgroups {name} not found")
            self.written.append((name, patch))
        finally:
            self.in_flight -= 1


class _Live:
    """The snapshot's side: the PodGroups it was told to derive again."""

    def __init__(self) -> None:
        self.changed: list[tuple[str, bool]] = []

    def podgroup_changed(self, pg: PodGroup, *, news: bool = True) -> None:
        self.changed.append((pg.metadata.name, news))


def _loop(groups: dict[str, PodGroup], client: _Client) -> SchedulerLoop:
    """A SchedulerLoop with only what the PodGroup writes touch (no informers, no server)."""
    loop = SchedulerLoop.__new__(SchedulerLoop)
    loop.podgroups = _Informer(_Store(groups))  # type: ignore[assignment]
    loop.client = client  # type: ignore[assignment]
    loop.metrics = SchedulerMetrics(CollectorRegistry())
    loop.live = _Live()  # type: ignore[assignment]
    loop._wake = asyncio.Event()
    loop._init_status_writes()
    return loop


def _group(name: str) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}"),
        status=PodGroupStatus(phase="Pending"),
    )


async def test_podgroup_status_writes_run_concurrently_and_bounded() -> None:
    """100 changed statuses: each queued, then written as a merge patch of the phase (with the
    uid as a guard), several at once but never more than the bound; one deleted meanwhile is
    refused without stopping the others."""
    groups = {f"ns/pg-{i}": _group(f"pg-{i}") for i in range(100)}
    client = _Client(gone={"pg-7"})
    result = SessionResult()
    for key in groups:
        result.podgroup_status[key] = PodGroupStatus(phase="Inqueue")
    result.podgroup_status["ns/gone"] = PodGroupStatus(phase="Running")  # not in the cache

    loop = _loop(groups, client)
    assert loop._write_podgroups(result) == 100
    started = asyncio.get_running_loop().time()
    loop.status_writer.start()
    await loop.status_writer.drain(grace=5)
    elapsed = asyncio.get_running_loop().time() - started

    assert sorted(name for name, _ in client.written) == sorted(
        f"pg-{i}" for i in range(100) if i != 7
    )
    assert client.written[0][1] == {
        "metadata": {"uid": f"uid-{client.written[0][0]}"},
        "status": {"phase": "Inqueue"},
    }
    assert 1 < client.most <= STATUS_WRITES_IN_FLIGHT
    assert elapsed < 100 * 0.01 / 2, "not one write at a time"
    # The refused one is read from the cache again, and counted.
    assert loop.assumed_podgroups.get("ns/pg-7") == groups["ns/pg-7"]
    changed = loop.live.changed  # type: ignore[attr-defined]
    assert changed.count(("pg-7", False)) == 2  # decided, then read from the cache again
    assert changed.count(("pg-8", False)) == 1
    refused = loop.metrics.status_writes.labels(kind="PodGroup", result="refused")
    assert refused._value.get() == 1


async def test_a_podgroup_decided_twice_before_its_write_is_written_once() -> None:
    """Inqueue in one session, Running in the next while the first write waits: one write, of
    Running; the sessions read Running meanwhile, and the same decision again queues nothing."""
    groups = {"ns/pg": _group("pg")}
    client = _Client(gone=set())
    loop = _loop(groups, client)
    first, second = SessionResult(), SessionResult()
    first.podgroup_status["ns/pg"] = PodGroupStatus(phase="Inqueue")
    second.podgroup_status["ns/pg"] = PodGroupStatus(phase="Running", running=1)
    assert loop._write_podgroups(first) == 1
    assert loop.assumed_podgroups.get("ns/pg").status.phase == "Inqueue"  # type: ignore[union-attr]
    assert loop._write_podgroups(second) == 1
    assert loop._write_podgroups(second) == 0
    gauge = next(iter(loop.metrics.status_queue.collect())).samples[0]
    assert gauge.value == 1  # the queue length: one write waits
    loop.status_writer.start()
    await loop.status_writer.drain(grace=5)
    assert client.written == [
        ("pg", {"metadata": {"uid": "uid-pg"}, "status": {"phase": "Running", "running": 1}})
    ]
    # Until the cache shows it, the sessions read it as written.
    assert loop.assumed_podgroups.get("ns/pg").status.phase == "Running"  # type: ignore[union-attr]


async def test_status_writes_do_not_hold_the_session_loop() -> None:
    """apply returns while the API server has not answered any status write."""
    groups = {f"ns/pg-{i}": _group(f"pg-{i}") for i in range(50)}
    client = _Client(gone=set())
    client.release.clear()
    loop = _loop(groups, client)
    loop.queues = _Informer(_Store({}))  # type: ignore[assignment]
    loop.pods = _Informer(_Store({}))  # type: ignore[assignment]
    loop.assumed = {}
    loop._binding = set()
    loop._ungating = {}
    loop.recorder = _Recorder()  # type: ignore[assignment]
    loop.status_writer.start()
    result = SessionResult()
    for key in groups:
        result.podgroup_status[key] = PodGroupStatus(phase="Inqueue")
    assert await asyncio.wait_for(loop.apply(result), 1) == 50
    await asyncio.sleep(0.01)
    assert client.written == []
    assert client.in_flight == STATUS_WRITES_IN_FLIGHT
    client.release.set()
    await loop.status_writer.drain(grace=5)
    assert len(client.written) == 50


class _PodClient:
    """Records pod condition patches and binds, with how many were in flight at most."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, str]] = []  # (pod, message)
        self.bound: list[str] = []
        self.ungated: list[tuple[str, Any, PatchType]] = []
        self.in_flight = 0
        self.most = 0
        self.release = asyncio.Event()

    async def patch_status(self, kind: Any, name: str, patch: Any, **_: Any) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            message = patch["status"]["conditions"][0]["message"]
            self.patched.append((name, message))
        finally:
            self.in_flight -= 1

    async def bind(self, namespace: str, name: str, node: str, *, uid: str) -> None:
        await self.release.wait()
        self.bound.append(name)

    async def patch(self, kind: Any, name: str, patch: Any, **options: Any) -> None:
        await self.release.wait()
        self.ungated.append((name, patch, options["patch_type"]))


class _Recorder:
    """Events recorded, as (pod name, type, reason, message)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def record(self, involved: ObjectReference, type: str, reason: str, message: str) -> None:
        self.events.append((involved.name, type, reason, message))


def _pod_loop(pods: dict[str, Pod], client: _PodClient) -> SchedulerLoop:
    """A SchedulerLoop with only what the pod writes touch (no informers, no server)."""
    loop = SchedulerLoop.__new__(SchedulerLoop)
    loop.pods = _Informer(_Store(pods))  # type: ignore[assignment]
    loop.podgroups = _Informer(_Store({}))  # type: ignore[assignment]
    loop.client = client  # type: ignore[assignment]
    loop.metrics = SchedulerMetrics(CollectorRegistry())
    loop.recorder = _Recorder()  # type: ignore[assignment]
    loop._wake = asyncio.Event()
    loop._init_status_writes()
    loop.assumed = {}
    loop._bind_gate = asyncio.Semaphore(32)
    loop._binding = set()
    loop._ungate_slots = asyncio.Semaphore(2)
    loop._ungating = {}
    return loop


def _pending(name: str) -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}"))


async def _written(loop: SchedulerLoop, client: _PodClient, count: int) -> None:
    """Wait until ``count`` pod conditions are written (at most 5 s)."""
    for _ in range(500):
        if len(client.patched) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(client.patched)} of {count} conditions written")


async def test_pod_conditions_written_concurrently_once_per_message() -> None:
    """200 unschedulable pods: each condition written, several at once within the bound; the
    next session, before the cache shows those writes, writes none again, and a new message
    is written."""
    pods = {f"ns/p-{i}": _pending(f"p-{i}") for i in range(200)}
    client = _PodClient()
    loop = _pod_loop(pods, client)
    messages = dict.fromkeys(pods, "0/3 nodes are available: 3 Insufficient cpu.")
    loop.status_writer.start()
    assert loop._mark_unschedulable(messages) == 200
    assert loop._mark_unschedulable(messages) == 0  # queued already
    await _written(loop, client, 200)
    assert 1 < client.most <= STATUS_WRITES_IN_FLIGHT
    assert loop._mark_unschedulable(messages) == 0  # the cache still shows no condition
    assert loop._mark_unschedulable({"ns/p-0": "0/4 nodes are available: 4 Insufficient cpu."}) == 1
    await loop.status_writer.drain(grace=5)
    assert len(client.patched) == 201
    assert client.patched[-1] == ("p-0", "0/4 nodes are available: 4 Insufficient cpu.")
    events = loop.recorder.events  # type: ignore[attr-defined]
    assert len(events) == 201  # one FailedScheduling per condition written, as Volcano's
    assert events[-1] == (
        "p-0",
        "Warning",
        "FailedScheduling",
        "0/4 nodes are available: 4 Insufficient cpu.",
    )


async def test_binds_run_apart_from_the_cycle() -> None:
    """apply returns while the binds are still in flight (the pods stay assumed); draining
    waits for them."""
    pods = {"ns/a": _pending("a")}
    client = _PodClient()
    loop = _pod_loop(pods, client)
    loop.podgroups = _Informer(_Store({}))  # type: ignore[assignment]
    loop.queues = _Informer(_Store({}))  # type: ignore[assignment]
    task = TaskInfo(
        uid="uid-a",
        namespace="ns",
        name="a",
        job="ns/pg",
        role="",
        resreq=Resources(),
        init_resreq=Resources(),
        priority=0,
        status=TaskStatus.BINDING,
    )
    result = SessionResult()
    result.bind(task, "n1")
    await asyncio.wait_for(loop.apply(result), 1)
    assert client.bound == []
    assert loop.assumed == {"uid-a": "n1"}
    client.release.set()
    await loop.drain_binds(grace=1)
    assert client.bound == ["a"]
    assert loop.recorder.events == [  # type: ignore[attr-defined]
        ("a", "Normal", "Scheduled", "Successfully assigned ns/a to n1")
    ]


class _QueueClient:
    """Refuses queue creates as the API server does while the queue webhook is down, then
    accepts them (or answers that they exist)."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.created: list[str] = []

    async def create(self, kind: Any, body: Any) -> Any:
        if self.refusals:
            self.refusals -= 1
            raise ServerError(500, "InternalError", 'failed calling webhook "mutatequeue"')
        if body.metadata.name in self.created:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        self.created.append(body.metadata.name)
        return body


async def test_default_queues_wait_for_a_refusing_api_server() -> None:
    """A queue create refused at start (the webhook not up yet) is not a crash: the scheduler
    says so and tries again at its next cycle, until root and default exist."""
    client = _QueueClient(refusals=2)
    loop = SchedulerLoop.__new__(SchedulerLoop)
    loop.client = client  # type: ignore[assignment]
    loop.settings = SchedulerSettings()
    assert await loop.ensure_default_queues() is False
    assert await loop.ensure_default_queues() is False
    assert await loop.ensure_default_queues() is True
    assert client.created == ["root", "default"]
    assert await loop.ensure_default_queues() is True  # both exist: nothing to do


def _task(name: str, status: TaskStatus = TaskStatus.PENDING) -> TaskInfo:
    return TaskInfo(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        job="ns/pg",
        role="",
        resreq=Resources(),
        init_resreq=Resources(),
        priority=0,
        status=status,
    )


async def test_queue_admission_gates_are_removed_once_each_apart_from_the_cycle() -> None:
    """A session's ungate decisions become strategic merge patches deleting the queue
    admission gate, sent apart from the cycle; a pod asked for again while its patch is in
    flight is patched once; draining waits for them."""
    client = _PodClient()
    loop = _pod_loop({}, client)
    loop.podgroups = _Informer(_Store({}))  # type: ignore[assignment]
    loop.queues = _Informer(_Store({}))  # type: ignore[assignment]
    result = SessionResult()
    result.ungate.extend([_task("a"), _task("b")])
    await asyncio.wait_for(loop.apply(result), 1)
    await asyncio.wait_for(loop.apply(result), 1)  # the next session, before the cache knows
    assert client.ungated == []
    client.release.set()
    await loop.drain_binds(grace=1)
    assert sorted(name for name, _, _ in client.ungated) == ["a", "b"]
    assert {(str(p), t) for _, p, t in client.ungated} == {
        (str(REMOVE_GATE_PATCH), PatchType.STRATEGIC)
    }
    assert loop._ungating == {}


async def test_a_gated_pod_gets_no_unschedulable_condition() -> None:
    """The API server gives a gated pod PodScheduled=False SchedulingGated: the scheduler does
    not overwrite it with Unschedulable (Volcano's RecordJobStatusEvent skips gated pods)."""
    gated = Pod(
        metadata=ObjectMeta(name="g", namespace="ns", uid="uid-g"),
        spec=PodSpec(scheduling_gates=(PodSchedulingGate(name=QUEUE_ALLOCATION_GATE),)),
    )
    client = _PodClient()
    loop = _pod_loop({"ns/g": gated, "ns/p": _pending("p")}, client)
    message = "0/3 nodes are available: 3 Insufficient cpu."
    assert loop._mark_unschedulable({"ns/g": message, "ns/p": message}) == 1
    loop.status_writer.start()
    await loop.status_writer.drain(grace=5)
    assert client.patched == [("p", message)]


class _ClaimWriter:
    """Holds every pod's claim writes until released; counts those in flight at most."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.in_flight = 0
        self.most = 0
        self.reserved: list[str] = []

    async def reserve(self, namespace: str, pod: str, *_: Any) -> str | None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
            self.reserved.append(pod)
            return None
        finally:
            self.in_flight -= 1


async def test_claim_writes_hold_slots_of_their_own_not_bind_slots() -> None:
    """One bind slot: pods whose claim writes are slow do not keep a pod without claims from
    being bound; the claim writes in flight are bounded by their own slots, and a pod with
    claims is bound only after its claims are reserved."""
    pods = {f"ns/{n}": _pending(n) for n in ("a", "b", "c", "d")}
    client = _PodClient()
    client.release.set()
    loop = _pod_loop(pods, client)
    loop._bind_gate = asyncio.Semaphore(1)
    loop._claim_slots = asyncio.Semaphore(2)
    writer = _ClaimWriter()
    loop.claim_writer = writer  # type: ignore[assignment]
    plans = (ClaimPlan("ns/claim", None),)
    with_claims = [
        asyncio.create_task(loop._bind("ns", n, f"uid-{n}", "n1", None, plans, {}))
        for n in ("a", "b", "c")
    ]
    await asyncio.wait_for(loop._bind("ns", "d", "uid-d", "n1"), 1)
    assert client.bound == ["d"]
    assert writer.most == 2
    writer.release.set()
    await asyncio.wait_for(asyncio.gather(*with_claims), 1)
    assert sorted(client.bound) == ["a", "b", "c", "d"]
    assert sorted(writer.reserved) == ["a", "b", "c"]
