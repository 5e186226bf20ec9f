"""Dynamic Resource Allocation in whole sessions (the predicates plugin with
scheduler.plugins.dynamic_resources): gangs get devices whole or not at all, shared claims,
selectors, constraints, refusals, victims' devices, and the claim writes a session plans."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import NodeSelector, PodResourceClaim, PodResourceClaimStatus
from caldera.api.dra import (
    AllocationResult,
    CelDeviceSelector,
    Device,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClaim,
    DeviceClass,
    DeviceClassSpec,
    DeviceConstraint,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimSpec,
    ResourceClaimStatus,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.resources import Resources
from scheduler.api.dra.view import DraView
from scheduler.api.types import ClusterInfo, TaskInfo, TaskStatus
from scheduler.conf import DEFAULT_CONF
from scheduler.framework.session import Session
from scheduler.plugins.predicates import DRA_DISABLED
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task
from unit.test_sched_nodegroup import placed, run

DRIVER = "gpu.example.com"
CLASS = DeviceClass(
    metadata=ObjectMeta(name="gpu"),
    spec=DeviceClassSpec(
        selectors=(
            DeviceSelector(cel=CelDeviceSelector(expression=f'device.driver == "{DRIVER}"')),
        )
    ),
)


def gpu_slice(node: str, count: int = 8) -> ResourceSlice:
    """``count`` GPUs on ``node``: model A100 for the first half, H100 after; NUMA by half."""
    devices = tuple(
        Device(
            name=f"gpu-{i}",
            attributes={
                "model": DeviceAttribute(string="A100" if i < count // 2 else "H100"),
                "index": DeviceAttribute(int_value=i),
                "numa": DeviceAttribute(int_value=i * 2 // count),
            },
        )
        for i in range(count)
    )
    return ResourceSlice(
        metadata=ObjectMeta(name=f"{node}-gpus"),
        spec=ResourceSliceSpec(
            driver=DRIVER,
            pool=ResourcePool(name=node, generation=1, resource_slice_count=1),
            node_name=node,
            devices=devices,
        ),
    )


def claim_spec(
    count: int = 1, selector: str = "", constraint: str = "", **extra: Any
) -> DeviceClaim:
    selectors = (DeviceSelector(cel=CelDeviceSelector(expression=selector)),) if selector else ()
    request = DeviceRequest(
        name="gpu",
        exactly=ExactDeviceRequest(
            device_class_name="gpu", count=count, selectors=selectors, **extra
        ),
    )
    constraints = (DeviceConstraint(match_attribute=constraint),) if constraint else ()
    return DeviceClaim(requests=(request,), constraints=constraints)


def with_claim(task: TaskInfo, claim: str, *, template: bool) -> TaskInfo:
    """The task's pod uses ``claim``: made for it from a template, or by name."""
    assert task.pod is not None
    entry = (
        PodResourceClaim(name="gpus", resource_claim_template_name="t")
        if template
        else PodResourceClaim(name="gpus", resource_claim_name=claim)
    )
    statuses = (PodResourceClaimStatus(name="gpus", resource_claim_name=claim),) if template else ()
    pod = task.pod
    task.pod = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, uid=task.uid),
        spec=msgspec.structs.replace(pod.spec, resource_claims=(entry,)),
        status=msgspec.structs.replace(pod.status, resource_claim_statuses=statuses),
    )
    return task


def claim(
    name: str, spec: DeviceClaim, owner: TaskInfo | None = None, **status: Any
) -> ResourceClaim:
    owners = (
        (OwnerReference(kind="Pod", name=owner.name, uid=owner.uid, controller=True),)
        if owner
        else ()
    )
    return ResourceClaim(
        metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", owner_references=owners),
        spec=ResourceClaimSpec(devices=spec),
        status=ResourceClaimStatus(**status),
    )


def gang(
    size: int, spec: DeviceClaim, *, min_available: int | None = None
) -> tuple[list[TaskInfo], list[ResourceClaim]]:
    tasks, claims = [], []
    for i in range(size):
        task = with_claim(make_task("j", i), f"j-{i}-gpus", template=True)
        tasks.append(task)
        claims.append(claim(f"j-{i}-gpus", spec, owner=task))
    return tasks, claims


def cluster_with(
    tasks: list[TaskInfo],
    claims: list[ResourceClaim],
    nodes: tuple[str, ...] = ("a", "b"),
    min_available: int | None = None,
) -> ClusterInfo:
    job = make_job("j", tasks, min_available=len(tasks) if min_available is None else min_available)
    cluster = make_cluster([make_node(n, cpu="16", memory="64Gi") for n in nodes], [job])
    cluster.dra = DraView(
        claims={f"ns/{c.metadata.name}": c for c in claims},
        classes={"gpu": CLASS},
        slices=tuple(gpu_slice(n) for n in nodes),
        slices_version=1,
    )
    return cluster


def devices_of(ssn: Session) -> dict[str, list[str]]:
    """The devices each bound pod's claims were allocated, as "<pool>/<device>"."""
    found: dict[str, list[str]] = {}
    for bind in ssn.result.binds:
        for plan in ssn.result.claim_plans.get(bind.task.uid, ()):
            assert plan.allocation is not None
            found.setdefault(bind.task.name, []).extend(
                f"{r.pool}/{r.device}" for r in plan.allocation.devices.results
            )
    return found


@pytest.mark.parametrize("speedups", [True, False])
def test_a_gang_gets_distinct_devices_on_the_nodes_that_have_them(speedups: bool) -> None:
    """Four pods of 4 GPUs on two 8-GPU nodes: all placed, two per node, no device twice,
    each allocation tied to its pod's node."""
    tasks, claims = gang(4, claim_spec(4))
    ssn = run(cluster_with(tasks, claims), DEFAULT_CONF, speedups=speedups)
    where = placed(ssn)
    assert len(where) == 4
    assert sorted(where.values()) == ["a", "a", "b", "b"]
    got = devices_of(ssn)
    every = [d for ds in got.values() for d in ds]
    assert len(every) == 16
    assert len(set(every)) == 16
    for pod, ds in got.items():
        assert all(d.startswith(f"{where[pod]}/") for d in ds)
    for bind in ssn.result.binds:
        (plan,) = ssn.result.claim_plans[bind.task.uid]
        assert plan.allocation is not None
        assert plan.allocation.node_selector is not None
        term = plan.allocation.node_selector.node_selector_terms[0]
        assert term.match_fields[0].values == (bind.node,)


def test_a_gang_that_does_not_fit_plans_nothing() -> None:
    """Five pods of 4 GPUs, 16 GPUs: the gang waits whole, no claim write is planned, and the
    fit error names the request and claim."""
    tasks, claims = gang(5, claim_spec(4))
    ssn = run(cluster_with(tasks, claims), DEFAULT_CONF)
    assert placed(ssn) == {}
    assert ssn.result.claim_plans == {}
    message = " ".join(ssn.result.unschedulable.values())
    assert "request 'gpu' of claim 'j-" in message


def test_selectors_and_constraints_choose_the_devices() -> None:
    """A pod wanting 2 H100 on one NUMA node gets two of gpu-4..7, all with numa 1."""
    spec = claim_spec(
        2,
        selector='device.attributes["gpu.example.com"].model == "H100"',
        constraint="gpu.example.com/numa",
    )
    tasks, claims = gang(1, spec)
    ssn = run(cluster_with(tasks, claims, nodes=("a",)), DEFAULT_CONF)
    assert devices_of(ssn) == {"j-0": ["a/gpu-4", "a/gpu-5"]}


def test_a_shared_claim_puts_its_pods_where_its_devices_are() -> None:
    """Two pods name one claim: it is allocated once, both pods go to its node and both
    plans carry the same allocation."""
    tasks = [with_claim(make_task("j", i), "shared", template=False) for i in range(2)]
    ssn = run(cluster_with(tasks, [claim("shared", claim_spec(2))]), DEFAULT_CONF)
    where = placed(ssn)
    assert len(where) == 2
    assert len(set(where.values())) == 1
    plans = [ssn.result.claim_plans[b.task.uid] for b in ssn.result.binds]
    assert plans[0] == plans[1]


def test_an_allocated_claim_keeps_its_pod_on_its_node_and_its_devices_taken() -> None:
    """A claim allocated on b (gpu-0..7 of b): its pod goes to b; a new pod wanting 8 GPUs
    finds only a's."""
    allocated = AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(
                DeviceRequestAllocationResult(
                    request="gpu", driver=DRIVER, pool="b", device=f"gpu-{i}"
                )
                for i in range(8)
            )
        ),
        node_selector=msgspec.convert(
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
                ]
            },
            type=NodeSelector,
        ),
    )
    old = with_claim(make_task("j", 0), "old", template=False)
    new = with_claim(make_task("j", 1), "new", template=False)
    claims = [claim("old", claim_spec(8), allocation=allocated), claim("new", claim_spec(8))]
    ssn = run(cluster_with([old, new], claims), DEFAULT_CONF)
    assert placed(ssn) == {"j-0": "b", "j-1": "a"}
    (reserve,) = ssn.result.claim_plans[old.uid]
    assert reserve.allocation is None  # allocated before: only the reservation is written


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"admin_access": True}, "adminAccess is not supported"),
        (
            {"selectors": (DeviceSelector(cel=CelDeviceSelector(expression="device.x ==")),)},
            "does not compile",
        ),
    ],
)
def test_unsupported_features_and_bad_selectors_are_refused_clearly(
    extra: dict[str, Any], says: str
) -> None:
    """The pod waits, and its fit error says why."""
    tasks, claims = gang(
        1,
        DeviceClaim(
            requests=(
                DeviceRequest(
                    name="gpu", exactly=ExactDeviceRequest(device_class_name="gpu", **extra)
                ),
            )
        ),
    )
    ssn = run(cluster_with(tasks, claims), DEFAULT_CONF)
    assert placed(ssn) == {}
    assert says in ssn.result.unschedulable["ns/j-0"]


def test_a_pod_waits_for_its_template_claim_and_with_dra_switched_off() -> None:
    """No claim made from the template yet: the pod waits saying so; with
    predicate.DynamicResourceAllocationEnable false it waits too, never bound without devices."""
    task = make_task("j", 0)
    assert task.pod is not None
    task.pod = msgspec.structs.replace(
        task.pod,
        spec=msgspec.structs.replace(
            task.pod.spec,
            resource_claims=(PodResourceClaim(name="gpus", resource_claim_template_name="t"),),
        ),
    )
    ssn = run(cluster_with([task], []), DEFAULT_CONF)
    assert placed(ssn) == {}
    assert "to be made from template 't'" in ssn.result.unschedulable["ns/j-0"]
    off = DEFAULT_CONF.replace(
        "  - name: predicates\n",
        "  - name: predicates\n    arguments: {predicate.DynamicResourceAllocationEnable: false}\n",
    )
    tasks, claims = gang(1, claim_spec(1))
    ssn = run(cluster_with(tasks, claims), off)
    assert placed(ssn) == {}
    assert DRA_DISABLED in ssn.result.unschedulable["ns/j-0"]


def test_released_and_running_tasks_keep_their_devices() -> None:
    """A running pod's claim holds all 8 GPUs of a: a new 1-GPU pod goes to b."""
    allocated = AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(
                DeviceRequestAllocationResult(
                    request="gpu", driver=DRIVER, pool="a", device=f"gpu-{i}"
                )
                for i in range(8)
            )
        )
    )
    running = with_claim(
        make_task("r", 0, status=TaskStatus.RUNNING, node="a"), "held", template=False
    )
    reserved = (
        ResourceClaimConsumerReference(resource="pods", name=running.name, uid=running.uid),
    )
    held = claim("held", claim_spec(8), allocation=allocated, reserved_for=reserved)
    tasks, claims = gang(1, claim_spec(1))
    cluster = cluster_with(tasks, [*claims, held])
    other = make_job("r", [running], min_available=1)
    cluster.jobs[other.key] = other
    cluster.nodes["a"].add_task(running)
    assert placed(run(cluster, DEFAULT_CONF)) == {"j-0": "b"}


@pytest.mark.parametrize("plugin", ["proportion", "capacity"])
def test_a_queue_holds_at_most_its_device_class_capability(plugin: str) -> None:
    """A queue capped at deviceclass/gpu: 8 takes two 4-GPU pods of a 3-pod job, not the
    third (the nodes have 16 GPUs), and the wait record names the class and queue."""
    tasks, claims = gang(3, claim_spec(4))
    cluster = cluster_with(tasks, claims, min_available=1)
    queue = cluster.queues["default"]
    queue.capability = Resources.from_list({"deviceclass/gpu": "8"})
    conf = DEFAULT_CONF
    if plugin == "capacity":
        conf = conf.replace("name: proportion", "name: capacity")
    ssn = run(cluster, conf)
    assert len(placed(ssn)) == 2
    notes = " ".join(text for _, text in ssn.wait_notes.get("ns/j", []))
    assert "deviceclass/gpu 8 held of 8" in notes


PREEMPT_CONF = """\
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_preempting_a_victim_frees_its_devices_for_the_preemptor() -> None:
    """One node, its 8 GPUs held by two running low-priority pods (4 each, one job of
    minAvailable 1); a high-priority pod wanting 4 GPUs evicts one of them and is pipelined
    there. The node has cpu to spare: only the devices make a victim necessary."""
    victims, claims = [], []
    for i in range(2):
        victim = with_claim(
            make_task("low", i, status=TaskStatus.RUNNING, node="a", priority=1),
            f"held-{i}",
            template=False,
        )
        allocated = AllocationResult(
            devices=DeviceAllocationResult(
                results=tuple(
                    DeviceRequestAllocationResult(
                        request="gpu", driver=DRIVER, pool="a", device=f"gpu-{4 * i + k}"
                    )
                    for k in range(4)
                )
            )
        )
        reserved = (
            ResourceClaimConsumerReference(resource="pods", name=victim.name, uid=victim.uid),
        )
        victims.append(victim)
        claims.append(
            claim(f"held-{i}", claim_spec(4), allocation=allocated, reserved_for=reserved)
        )
    preemptor = with_claim(make_task("j", 0, priority=10), "want", template=False)
    cluster = cluster_with([preemptor], [*claims, claim("want", claim_spec(4))], nodes=("a",))
    cluster.jobs["ns/j"].priority = 10
    low = make_job("low", victims, min_available=1, priority=1)
    cluster.jobs[low.key] = low
    for victim in victims:
        cluster.nodes["a"].add_task(victim)
    ssn = run(cluster, PREEMPT_CONF)
    assert len(ssn.result.evictions) == 1
    assert preemptor.status == TaskStatus.PIPELINED
    assert placed(ssn) == {}


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 5)), min_size=1, max_size=5),
    nodes=st.integers(1, 3),
    held=st.integers(0, 8),
)
def test_no_device_is_given_twice_whatever_the_gangs(
    sizes: list[tuple[int, int]], nodes: int, held: int
) -> None:
    """Random gangs (pods, GPUs each) on 8-GPU nodes, node a's first ``held`` GPUs allocated
    already: every planned allocation has its count, on its pod's node, no device twice and
    none of the held ones; a gang is placed whole or not at all."""
    names = tuple("abc"[:nodes])
    tasks, claims, gangs = [], [], []
    for g, (pods, gpus) in enumerate(sizes):
        job_tasks = []
        for i in range(pods):
            task = with_claim(make_task(f"j{g}", i), f"j{g}-{i}", template=True)
            job_tasks.append(task)
            claims.append(claim(f"j{g}-{i}", claim_spec(gpus), owner=task))
        gangs.append(make_job(f"j{g}", job_tasks, min_available=pods))
        tasks += job_tasks
    if held:
        taken = AllocationResult(
            devices=DeviceAllocationResult(
                results=tuple(
                    DeviceRequestAllocationResult(
                        request="gpu", driver=DRIVER, pool="a", device=f"gpu-{i}"
                    )
                    for i in range(held)
                )
            )
        )
        claims.append(claim("held", claim_spec(held), allocation=taken))
    cluster = make_cluster([make_node(n, cpu="64", memory="64Gi") for n in names], gangs)
    cluster.dra = DraView(
        claims={f"ns/{c.metadata.name}": c for c in claims},
        classes={"gpu": CLASS},
        slices=tuple(gpu_slice(n) for n in names),
        slices_version=1,
    )
    ssn = run(cluster, DEFAULT_CONF)
    where = placed(ssn)
    got = devices_of(ssn)
    every = [d for ds in got.values() for d in ds]
    assert len(every) == len(set(every))
    assert not {f"a/gpu-{i}" for i in range(held)} & set(every)
    for pod, ds in got.items():
        g = int(pod.split("-")[0].removeprefix("j"))
        assert len(ds) == sizes[g][1]
        assert all(d.startswith(f"{where[pod]}/") for d in ds)
    for g, (pods, _) in enumerate(sizes):
        bound = [p for p in where if p.startswith(f"j{g}-")]
        assert len(bound) in (0, pods)
    # the first gang meets an empty cluster: it is placed when node a alone could hold it
    if sizes[0][0] * sizes[0][1] <= 8 - held:
        assert sum(p.startswith("j0-") for p in where) == sizes[0][0]
