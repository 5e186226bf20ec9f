"""Queue quota by DeviceClass at enqueue and in the Queue's status.allocated: the pure core
(``scheduler.api.dra.quota``) and whole sessions with proportion and capacity."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from caldera.api.dra import CapacityRequirements, ResourceClaim
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from caldera.api.volcano import Queue, QueueStatus
from scheduler.api.dra.quota import (
    claim_devices,
    device_class_of,
    devices_of,
    min_claims,
    queue_devices,
)
from scheduler.api.dra.view import DraView
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import DEFAULT_CONF
from scheduler.framework.session import Session, SessionResult
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.dra_quota import over_limit
from scheduler.process import SchedulerLoop
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task
from unit.test_sched_dra import CLASS, claim, claim_spec, gpu_slice, with_claim
from unit.test_sched_nodegroup import run

CAPACITY_CONF = DEFAULT_CONF.replace("name: proportion", "name: capacity")
PLUGINS = {"proportion": DEFAULT_CONF, "capacity": CAPACITY_CONF}


def job_with(
    name: str,
    gpus: list[int],
    *,
    min_available: int | None = None,
    phase: str = "Pending",
    queue: str = "default",
    roles: list[str] | None = None,
    min_task_member: dict[str, int] | None = None,
) -> tuple[JobInfo, list[ResourceClaim]]:
    """A job whose i-th pod has its own claim (made from a template) for ``gpus[i]`` GPUs."""
    tasks: list[TaskInfo] = []
    claims: list[ResourceClaim] = []
    for i, count in enumerate(gpus):
        role = roles[i] if roles else "worker"
        task = with_claim(make_task(name, i, role=role), f"{name}-{i}-gpus", template=True)
        tasks.append(task)
        claims.append(claim(f"{name}-{i}-gpus", claim_spec(count), owner=task))
    job = make_job(
        name,
        tasks,
        min_available=len(tasks) if min_available is None else min_available,
        phase=phase,
        queue=queue,
        min_task_member=min_task_member,
    )
    return job, claims


def cluster_of(
    jobs: list[tuple[JobInfo, list[ResourceClaim]]],
    limit: int,
    nodes: tuple[str, ...] = ("a", "b"),
) -> ClusterInfo:
    queue = QueueInfo("default", capability=Resources.from_list({"deviceclass/gpu": str(limit)}))
    cluster = make_cluster(
        [make_node(n, cpu="16", memory="64Gi") for n in nodes], [j for j, _ in jobs], [queue]
    )
    cluster.dra = DraView(
        claims={f"ns/{c.metadata.name}": c for _, cs in jobs for c in cs},
        classes={"gpu": CLASS},
        slices=tuple(gpu_slice(n) for n in nodes),
        slices_version=1,
    )
    return cluster


def admitted(ssn: Session) -> set[str]:
    return {key.partition("/")[2] for key in ssn.result.podgroup_phase_inqueue}


def notes_of(ssn: Session, job: str) -> str:
    return " ".join(text for _, text in ssn.wait_notes.get(f"ns/{job}", []))


# ---- the pure core -------------------------------------------------------------------------


def test_min_claims_takes_the_first_min_available_tasks_with_claims() -> None:
    job, claims = job_with("j", [1, 2, 4], min_available=2)
    view = {f"ns/{c.metadata.name}": c for c in claims}
    assert min_claims(job, view) == ["ns/j-0-gpus", "ns/j-1-gpus"]
    assert devices_of(min_claims(job, view), view) == {"deviceclass/gpu": 3000}


def test_min_claims_follows_min_task_member_by_role() -> None:
    job, claims = job_with(
        "j",
        [1, 2, 4, 8],
        roles=["ps", "ps", "worker", "worker"],
        min_task_member={"ps": 1, "worker": 2},
    )
    view = {f"ns/{c.metadata.name}": c for c in claims}
    assert devices_of(min_claims(job, view), view) == {"deviceclass/gpu": (1 + 4 + 8) * 1000}


def test_a_claim_shared_by_the_tasks_counts_once_and_an_unmade_one_not_at_all() -> None:
    shared = claim("shared", claim_spec(4))
    tasks = [with_claim(make_task("j", i), "shared", template=False) for i in range(3)]
    job = make_job("j", tasks, phase="Pending")
    view = {"ns/shared": shared}
    assert devices_of(min_claims(job, view), view) == {"deviceclass/gpu": 4000}
    assert min_claims(job, {}) == []  # the claim is not in the cache yet


def test_queue_devices_counts_held_claims_once_per_queue_and_up_the_chain() -> None:
    shared = claim("shared", claim_spec(4))
    own = claim("own", claim_spec(2))
    running = [
        with_claim(make_task("j", i, status=TaskStatus.RUNNING, node="a"), "shared", template=False)
        for i in range(2)
    ]
    pending = with_claim(make_task("j", 2), "own", template=False)
    job = make_job("j", [*running, pending], queue="leaf")
    view = {"ns/shared": shared, "ns/own": own}
    found = queue_devices([job], view, lambda q: [q, "root"])
    assert found == {
        "leaf": Resources.from_list({"deviceclass/gpu": "4"}),
        "root": Resources.from_list({"deviceclass/gpu": "4"}),
    }


def test_capacity_requests_count_under_their_dimension_keys_times_count() -> None:
    spec = claim_spec(2, capacity=CapacityRequirements(requests={"memory": "20Gi"}))
    memory = 2 * 20 * 2**30 * 1000
    assert claim_devices(claim("c", spec)) == {
        "deviceclass/gpu": 2000,
        "memory.deviceclass/gpu": memory,
    }
    assert claim_devices(claim("c", spec), capacity=False) == {"deviceclass/gpu": 2000}


def test_over_limit_follows_volcanos_check() -> None:
    """A listed key holds; a class limited only by dimensions has no count limit; a dimension
    a limited class does not list is refused; an unlimited class is not looked at."""
    limits = {"memory.deviceclass/gpu": 40}
    assert over_limit(limits, {}, {"deviceclass/gpu": 9000, "memory.deviceclass/gpu": 40}) is None
    assert over_limit(limits, {"memory.deviceclass/gpu": 1}, {"memory.deviceclass/gpu": 40}) == (
        "memory.deviceclass/gpu",
        40,
    )
    assert over_limit(limits, {}, {"cores.deviceclass/gpu": 1}) == ("cores.deviceclass/gpu", None)
    assert over_limit(limits, {}, {"cores.deviceclass/nic": 1, "deviceclass/nic": 5}) is None
    assert device_class_of("memory.deviceclass/gpu") == "gpu"
    assert device_class_of("deviceclass/gpu") == "gpu"
    assert device_class_of("memory") is None
    assert device_class_of(".deviceclass/gpu") is None


# ---- sessions ------------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_a_job_over_its_queues_device_class_capability_stays_pending(plugin: str) -> None:
    """Capped at 8 GPUs: a job of two 4-GPU pods is admitted, then one needing 8 more is not
    (the first's minimal claims are reserved), and the wait record names class and queue."""
    first = job_with("first", [4, 4])
    second = job_with("second", [4, 4])
    ssn = run(cluster_of([first, second], limit=8), PLUGINS[plugin])
    assert admitted(ssn) == {"first"}
    assert "queue default: deviceclass/gpu 0 held and 8 reserved of 8" in notes_of(ssn, "second")
    assert "need 8 more" in notes_of(ssn, "second")
    messages = [e.message for e in ssn.result.events if e.name == "second"]
    assert messages
    assert messages[0].startswith("queue resource quota insufficient")


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_an_admitted_job_keeps_its_reservation_in_later_sessions(plugin: str) -> None:
    """An Inqueue job whose pods are not placed yet still reserves its minimal claims."""
    inqueue = job_with("first", [4, 4], phase="Inqueue")
    pending = job_with("second", [2])
    ssn = run(cluster_of([inqueue, pending], limit=9), PLUGINS[plugin].replace("allocate, ", ""))
    assert admitted(ssn) == set()
    assert "8 reserved of 9" in notes_of(ssn, "second")


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_held_devices_count_and_a_job_within_the_limit_is_admitted(plugin: str) -> None:
    running_task = with_claim(
        make_task("r", 0, status=TaskStatus.RUNNING, node="a"), "r-0-gpus", template=True
    )
    running = make_job("r", [running_task], phase="Running")
    held = claim("r-0-gpus", claim_spec(6), owner=running_task)
    small, large = job_with("small", [2]), job_with("large", [3])
    ssn = run(cluster_of([(running, [held]), small, large], limit=8), PLUGINS[plugin])
    assert admitted(ssn) == {"small"}
    assert "6 held and 0 reserved of 8, the job's minimal claims need 3 more" in notes_of(
        ssn, "large"
    )


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_a_queue_holds_jobs_to_its_consumable_capacity_limit(plugin: str) -> None:
    """Capped at 40Gi of GPU memory: two jobs claiming 20Gi are admitted, a third is not;
    with DRAConsumableCapacityEnable false the dimension is not counted."""
    spec = claim_spec(1, capacity=CapacityRequirements(requests={"memory": "20Gi"}))
    jobs: list[tuple[JobInfo, list[ResourceClaim]]] = []
    for name in ("a", "b", "c"):
        task = with_claim(make_task(name, 0), f"{name}-0-gpus", template=True)
        job = make_job(name, [task], phase="Pending", created=ord(name))
        jobs.append((job, [claim(f"{name}-0-gpus", spec, owner=task)]))
    cluster = cluster_of(jobs, limit=8)
    cluster.queues["default"].capability = Resources.from_list({"memory.deviceclass/gpu": "40Gi"})
    conf = PLUGINS[plugin].replace("allocate, ", "")
    ssn = run(cluster, conf)
    assert admitted(ssn) == {"a", "b"}
    gib40 = str(40 * 2**30)
    assert f"memory.deviceclass/gpu 0 held and {gib40} reserved of {gib40}" in notes_of(ssn, "c")
    off = conf.replace(
        f"name: {plugin}",
        f"name: {plugin}\n    arguments:\n      {plugin}.DRAConsumableCapacityEnable: false",
    )
    for job, _ in jobs:
        job.set_phase("Pending")
    assert admitted(run(cluster, off)) == {"a", "b", "c"}


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_a_job_waits_for_its_claims_to_be_made_before_it_is_admitted(plugin: str) -> None:
    made = job_with("made", [1])
    unmade, _claims = job_with("unmade", [1])
    cluster = cluster_of([made, (unmade, [])], limit=8)
    ssn = run(cluster, PLUGINS[plugin])
    assert admitted(ssn) == {"made"}
    assert "pod unmade-0: waiting for ResourceClaim ns/unmade-0-gpus" in notes_of(ssn, "unmade")
    cluster = cluster_of([(unmade, [])], limit=8)
    cluster.queues["default"].capability = Resources.from_list({"cpu": "100"})
    assert admitted(run(cluster, PLUGINS[plugin])) == {"unmade"}  # no deviceclass/ limit


def test_without_deviceclass_limits_or_with_the_switch_off_nothing_is_refused() -> None:
    big = job_with("big", [8, 8])
    cluster = cluster_of([big], limit=1)
    off = DEFAULT_CONF.replace(
        "name: proportion",
        "name: proportion\n    arguments:\n      proportion.DynamicResourceAllocationEnable: false",
    )
    assert "DynamicResourceAllocationEnable: false" in off
    assert admitted(run(cluster, off)) == {"big"}
    cluster = cluster_of([job_with("big", [8, 8])], limit=1)
    cluster.queues["default"].capability = None
    assert admitted(run(cluster, DEFAULT_CONF)) == {"big"}


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
def test_the_queue_allocated_status_counts_the_devices_of_placed_pods(plugin: str) -> None:
    """Two pods placed sharing one 4-GPU claim count 4, the shared claim once; a pod that
    stays pending (its claim wants more GPUs than the node has) adds nothing."""
    shared = claim("shared", claim_spec(4))
    tasks = [with_claim(make_task("j", i), "shared", template=False) for i in range(2)]
    job, own = job_with("k", [9])  # more than node a has: it stays pending
    cluster = cluster_of([], limit=16, nodes=("a",))
    pair = make_job("j", tasks, phase="Inqueue")
    cluster.jobs[pair.key] = pair
    cluster.jobs[job.key] = job
    assert cluster.dra is not None
    cluster.dra.claims.update({"ns/shared": shared, "ns/k-0-gpus": own[0]})
    ssn = run(cluster, PLUGINS[plugin].replace("enqueue, ", ""))
    assert {b.task.name for b in ssn.result.binds} == {"j-0", "j-1"}  # k is Pending
    assert ssn.result.queue_allocated["default"].get("deviceclass/gpu") == 4000


# ---- invariants ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    demands=st.lists(st.lists(st.integers(1, 4), min_size=1, max_size=3), max_size=5),
    limit=st.integers(0, 12),
    plugin=st.sampled_from(sorted(PLUGINS)),
)
def test_admitted_jobs_minimal_claims_stay_within_the_limit(
    demands: list[list[int]], limit: int, plugin: str
) -> None:
    """Whatever the jobs, the ones enqueue admits need at most the limit together, and each
    refused one would have taken the queue past it."""
    jobs = [job_with(f"j{i}", gpus) for i, gpus in enumerate(demands)]
    ssn = run(cluster_of(jobs, limit=limit), PLUGINS[plugin].replace("allocate, ", ""))
    need = {job.name: sum(gpus) for (job, _), gpus in zip(jobs, demands, strict=True)}
    taken = sum(need[name] for name in admitted(ssn))
    assert taken <= limit
    for name in need.keys() - admitted(ssn):
        assert "deviceclass/gpu" in notes_of(ssn, name)
        assert need[name] + taken > limit  # what was admitted before it is part of ``taken``


# ---- the Queue's status write --------------------------------------------------------------


class _QueueClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, object]] = []

    async def patch_status(self, kind: object, name: str, patch: object) -> None:
        self.patches.append((name, patch))


def test_a_device_class_count_no_longer_held_is_removed_from_the_queue_status() -> None:
    """The status is written with a merge patch, which keeps the keys it does not name: a
    ``deviceclass/`` count whose claims were all released is named, as null."""
    queue = Queue(
        metadata=ObjectMeta(name="q"),
        status=QueueStatus(allocated={"cpu": "2", "deviceclass/gpu": "4"}),
    )
    loop = SchedulerLoop.__new__(SchedulerLoop)
    client = _QueueClient()
    loop.client = client  # type: ignore[assignment]
    loop.queues = SimpleNamespace(store={"q": queue})  # type: ignore[assignment]
    loop.podgroups = SimpleNamespace(store={})  # type: ignore[assignment]
    loop.metrics = SchedulerMetrics(CollectorRegistry())

    async def written(result: SessionResult) -> int:
        """Queue the session's Queue writes to a fresh status writer and send them."""
        loop._wake = asyncio.Event()
        loop._init_status_writes()
        queued = loop._write_queues(result)
        loop.status_writer.start()
        await loop.status_writer.drain(grace=5)
        return queued

    result = SessionResult()
    result.queue_allocated = {"q": Resources.from_list({"cpu": "1"})}
    assert asyncio.run(written(result)) == 1
    assert client.patches == [
        ("q", {"status": {"allocated": {"cpu": "1", "deviceclass/gpu": None}}})
    ]
    result.queue_allocated = {"q": Resources()}
    asyncio.run(written(result))
    assert client.patches[-1] == ("q", {"status": {"allocated": None}})


def test_with_hierarchy_an_ancestors_device_class_limit_holds_at_enqueue() -> None:
    """org caps deviceclass/gpu at 8 for its two leaves: a leaf's 8-GPU job is admitted, the
    other leaf's is not, and the wait record names the ancestor."""
    a = job_with("a", [4, 4], queue="team-a")
    b = job_with("b", [4, 4], queue="team-b")
    cluster = cluster_of([a, b], limit=8)
    org_limit = Resources.from_list({"deviceclass/gpu": "8"})
    cluster.queues = {
        "root": QueueInfo("root"),
        "org": QueueInfo("org", parent="root", capability=org_limit),
        "team-a": QueueInfo("team-a", parent="org"),
        "team-b": QueueInfo("team-b", parent="org"),
    }
    conf = CAPACITY_CONF.replace("allocate, ", "").replace(
        "name: capacity", "name: capacity\n    enableHierarchy: true"
    )
    assert "enableHierarchy: true" in conf
    ssn = run(cluster, conf)
    assert len(admitted(ssn)) == 1
    waiting = ({"a", "b"} - admitted(ssn)).pop()
    assert "queue org: deviceclass/gpu 0 held and 8 reserved of 8" in notes_of(ssn, waiting)
