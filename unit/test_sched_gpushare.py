"""deviceshare's older GPU memory / number mode in sessions: pods placed on a node's cards with
Volcano's annotations, running pods' and in-flight binds' cards counted, whole cards in the
number mode, gangs whole or not at all, victims' cards freed for a preemptor, queues capped on
the GPU resources, the wait record naming the short card, the same decisions with the speed
layer withheld, and Volcano's conflicting arguments refused."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import pytest

from caldera.api.core import (
    Container,
    Node,
    NodeSpec,
    NodeStatus,
    Pod,
    PodSpec,
    ResourceRequirements,
)
from caldera.api.gpushare import GPU_INDEX, PREDICATE_TIME
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from caldera.api.vgpu import node_lock_patch
from scheduler.api.types import ClusterInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins.deviceshare import DeviceSharePlugin
from scheduler.process import _node_lock_key
from scheduler.registry import REGISTRY
from unit.sched_fixtures import make_cluster, make_job

CARD_MEMORY = 8000


def conf(argument: str = "GPUSharingEnable", actions: str = "enqueue, allocate") -> str:
    return f"""
actions: "{actions}"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.{argument}: true
"""


NUMBER_CONF = conf("GPUNumberEnable")


def gpu_node(name: str, cards: int = 2, *, unhealthy: str = "") -> NodeInfo:
    """A node whose device plugin advertises cards and their memory in its capacity."""
    resources: dict[str, str | int | float] = {
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "volcano.sh/gpu-number": str(cards),
        "volcano.sh/gpu-memory": str(cards * CARD_MEMORY),
    }
    annotations = {"volcano.sh/gpu-unhealthy-ids": unhealthy} if unhealthy else {}
    node = Node(
        metadata=ObjectMeta(name=name, annotations=annotations),
        spec=NodeSpec(),
        status=NodeStatus(capacity=resources, allocatable=resources),
    )
    return NodeInfo(name, Resources.from_list(resources), node=node)


def gpu_task(
    job: str,
    index: int,
    *,
    memory: int = 0,
    number: int = 0,
    node: str = "",
    status: TaskStatus = TaskStatus.PENDING,
    annotations: Mapping[str, str] | None = None,
    priority: int = 0,
) -> TaskInfo:
    limits: dict[str, str | int | float] = {"cpu": "1"}
    if memory:
        limits["volcano.sh/gpu-memory"] = str(memory)
    if number:
        limits["volcano.sh/gpu-number"] = str(number)
    name = f"{job}-{index}"
    pod = Pod(
        metadata=ObjectMeta(
            name=name, namespace="ns", uid=f"uid-{name}", annotations=dict(annotations or {})
        ),
        spec=PodSpec(
            containers=(
                Container(name="c", resources=ResourceRequirements(requests=limits, limits=limits)),
            ),
            priority=priority,
        ),
    )
    requests = Resources.from_list(limits)
    return TaskInfo(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        job=f"ns/{job}",
        role="worker",
        resreq=requests,
        init_resreq=requests,
        priority=priority,
        status=status,
        node_name=node,
        pod=pod,
    )


def run(cluster: ClusterInfo, text: str, *, speedups: bool = True) -> Session:
    parsed = parse_conf(text, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    ssn = Session(cluster, parsed.tiers, speedups=speedups)
    run_session(ssn, parsed, REGISTRY)
    return ssn


def cards_given(ssn: Session) -> dict[str, tuple[str, str]]:
    """Each bound pod's node and gpu-index annotation."""
    return {
        bind.task.name: (bind.node, ssn.result.bind_annotations[bind.task.uid][GPU_INDEX])
        for bind in ssn.result.binds
    }


def cluster_of(
    nodes: Sequence[NodeInfo], *jobs: Sequence[TaskInfo], **job_args: object
) -> ClusterInfo:
    built = [make_job(tasks[0].job.split("/")[1], tasks, **job_args) for tasks in jobs]  # type: ignore[arg-type]
    return make_cluster(nodes, built)


def test_memory_pods_share_the_lowest_card_with_volcanos_annotations() -> None:
    """Two 3000 pods share card 0; a 5000 pod finds 2000 left there and takes card 1. Each
    bind carries gpu-index and the predicate time in Unix nanoseconds."""
    cluster = cluster_of(
        [gpu_node("n1")],
        [gpu_task("a", 0, memory=3000)],
        [gpu_task("b", 0, memory=3000)],
        [gpu_task("c", 0, memory=5000)],
    )
    ssn = run(cluster, conf())
    assert cards_given(ssn) == {"a-0": ("n1", "0"), "b-0": ("n1", "0"), "c-0": ("n1", "1")}
    stamp = ssn.result.bind_annotations["uid-a-0"][PREDICATE_TIME]
    assert int(stamp) // 1_000_000_000 == int(ssn.now.timestamp())


def test_running_and_in_flight_pods_hold_their_cards() -> None:
    """A running pod's gpu-index and an in-flight bind's grant hold their cards: the pod after
    them goes to the card left, or waits."""
    running = gpu_task(
        "r", 0, memory=6000, node="n1", status=TaskStatus.RUNNING, annotations={GPU_INDEX: "1"}
    )
    flying = gpu_task("f", 0, memory=7000, node="n1", status=TaskStatus.BINDING)
    cluster = cluster_of(
        [gpu_node("n1")],
        [running],
        [flying],
        [gpu_task("a", 0, memory=2000)],
        [gpu_task("b", 0, memory=2000)],
    )
    cluster.device_grants = {"uid-f-0": "0"}
    ssn = run(cluster, conf())
    assert cards_given(ssn) == {"a-0": ("n1", "1")}


def test_a_memory_pods_card_is_not_idle_in_the_number_mode() -> None:
    """A pod bound with an index by memory (before the mode changed) still holds its card: a
    number-mode pod takes the other one (Volcano counts every pod with either request)."""
    running = gpu_task(
        "r", 0, memory=1000, node="n1", status=TaskStatus.RUNNING, annotations={GPU_INDEX: "0"}
    )
    cluster = cluster_of([gpu_node("n1")], [running], [gpu_task("a", 0, number=1)])
    ssn = run(cluster, NUMBER_CONF)
    assert cards_given(ssn) == {"a-0": ("n1", "1")}


def test_pod_bound_without_an_index_is_counted() -> None:
    """A pod bound by another scheduler, without gpu-index, still takes room (Volcano would
    not count it): fitted on the first card with room."""
    bare = gpu_task("r", 0, memory=7000, node="n1", status=TaskStatus.RUNNING)
    cluster = cluster_of([gpu_node("n1", cards=1)], [bare], [gpu_task("a", 0, memory=2000)])
    ssn = run(cluster, conf())
    assert cards_given(ssn) == {}


def test_wait_record_names_the_short_card() -> None:
    running = gpu_task(
        "r", 0, memory=5000, node="n1", status=TaskStatus.RUNNING, annotations={GPU_INDEX: "0"}
    )
    cluster = cluster_of(
        [gpu_node("n1", cards=2, unhealthy="1")], [running], [gpu_task("b", 0, memory=6000)]
    )
    ssn = run(cluster, conf())
    assert ssn.result.binds == []
    record = ssn.result.podgroup_why["ns/b"]
    assert "node n1: card 0 has 3000 gpu-memory free, pod asks 6000" in record.details


def test_number_mode_takes_idle_cards_whole() -> None:
    """Three pods asking one card each on a four-card node with card 1 held and card 3
    unhealthy: the first two take cards 0 and 2 whole; the third waits, the node's resources
    fitting but no card."""
    held = gpu_task(
        "r", 0, number=1, node="n1", status=TaskStatus.RUNNING, annotations={GPU_INDEX: "1"}
    )
    cluster = cluster_of(
        [gpu_node("n1", cards=4, unhealthy="3")],
        [held],
        [gpu_task("a", 0, number=1)],
        [gpu_task("b", 0, number=1)],
        [gpu_task("c", 0, number=1)],
    )
    ssn = run(cluster, NUMBER_CONF)
    assert cards_given(ssn) == {"a-0": ("n1", "0"), "b-0": ("n1", "2")}
    record = ssn.result.podgroup_why["ns/c"]
    assert "node n1 has 0 GPU cards idle, pod asks 1" in record.details


def test_number_mode_gang_binds_whole_or_not_at_all() -> None:
    """A gang of three two-card pods on two four-card nodes binds nothing and leaves the cards
    to the pod after it; a gang of two binds both, on separate cards."""
    big = [gpu_task("g", i, number=2) for i in range(3)]

    def nodes() -> list[NodeInfo]:
        return [gpu_node("n1", cards=2), gpu_node("n2", cards=2)]

    ssn = run(cluster_of(nodes(), big, [gpu_task("s", 0, number=2)]), NUMBER_CONF)
    assert set(cards_given(ssn)) == {"s-0"}
    assert cards_given(ssn)["s-0"][1] == "0,1"
    pair = [gpu_task("p", i, number=2) for i in range(2)]
    ssn = run(cluster_of(nodes(), pair), NUMBER_CONF)
    given = cards_given(ssn)
    assert sorted(given.values()) == [("n1", "0,1"), ("n2", "0,1")]


def test_preempt_frees_the_victims_card() -> None:
    """A high-priority pod asking a whole card's memory evicts one low-priority holder and is
    pipelined: the victim's card counts as free in the future view only."""
    victims = [
        gpu_task(
            "low",
            i,
            memory=CARD_MEMORY,
            node="n1",
            status=TaskStatus.RUNNING,
            annotations={GPU_INDEX: str(i)},
        )
        for i in range(2)
    ]
    high = gpu_task("high", 0, memory=CARD_MEMORY, priority=100)
    cluster = make_cluster(
        [gpu_node("n1")],
        [make_job("low", victims, min_available=1), make_job("high", [high], priority=100)],
    )
    ssn = run(cluster, conf(actions="enqueue, allocate, preempt"))
    assert len(ssn.result.evictions) == 1
    assert ssn.jobs["ns/high"].tasks["uid-high-0"].status == TaskStatus.PIPELINED
    assert ssn.result.binds == []


@pytest.mark.parametrize(
    ("resource", "cap", "argument", "memory", "number"),
    [
        ("volcano.sh/gpu-memory", "5000", "GPUSharingEnable", 3000, 0),
        ("volcano.sh/gpu-number", "1", "GPUNumberEnable", 0, 1),
    ],
)
def test_queue_capability_caps_the_gpu_resources(
    resource: str, cap: str, argument: str, memory: int, number: int
) -> None:
    """A queue's capability in the GPU resource stops it there (they are plain resources)."""
    capped = QueueInfo("capped", capability=Resources.from_list({resource: cap}))
    jobs = [
        make_job(f"j{i}", [gpu_task(f"j{i}", 0, memory=memory, number=number)], queue="capped")
        for i in range(3)
    ]
    cluster = make_cluster([gpu_node("n1", cards=4)], jobs, [capped])
    ssn = run(cluster, conf(argument))
    assert len(ssn.result.binds) == 1


@pytest.mark.parametrize("argument", ["GPUSharingEnable", "GPUNumberEnable"])
def test_same_decisions_with_the_speed_layer_withheld(argument: str) -> None:
    def build() -> ClusterInfo:
        jobs = [
            [
                gpu_task(f"j{i}", k, memory=1000 * (1 + (i + k) % 5), number=1 + (i % 2))
                for k in range(2)
            ]
            for i in range(10)
        ]
        return cluster_of([gpu_node(f"n{i}", cards=3) for i in range(3)], *jobs)

    fast = run(build(), conf(argument), speedups=True)
    slow = run(build(), conf(argument), speedups=False)
    assert cards_given(fast) == cards_given(slow)
    assert cards_given(fast)


def test_arguments_refuse_what_volcano_refuses() -> None:
    """Either mode alone is accepted; both, or either with VGPUEnable, are refused naming the
    arguments."""

    def plugin(**flags: bool) -> DeviceSharePlugin:
        return DeviceSharePlugin(
            Arguments("deviceshare", {f"deviceshare.{k}": v for k, v in flags.items()})
        )

    assert plugin(GPUSharingEnable=True).gpushare is not None
    assert plugin(GPUNumberEnable=True).gpushare is not None
    assert plugin(VGPUEnable=True).gpushare is None
    with pytest.raises(ValueError, match=r"GPUSharingEnable and deviceshare\.GPUNumberEnable"):
        plugin(GPUSharingEnable=True, GPUNumberEnable=True)
    with pytest.raises(ValueError, match=r"GPUSharingEnable cannot be true with .*VGPUEnable"):
        plugin(GPUSharingEnable=True, VGPUEnable=True)


@pytest.mark.parametrize(
    ("arguments", "lock"),
    [
        ("{deviceshare.VGPUEnable: true, deviceshare.NodeLockEnable: true}", "hamivgpu"),
        ("{deviceshare.GPUSharingEnable: true, deviceshare.NodeLockEnable: true}", "gpu"),
        ("{deviceshare.GPUNumberEnable: true, deviceshare.NodeLockEnable: true}", ""),
        ("{deviceshare.GPUSharingEnable: true}", ""),
    ],
)
def test_the_process_takes_volcanos_node_lock_per_mode(arguments: str, lock: str) -> None:
    """The node annotation a device bind locks: HAMi's for vGPU, "gpu" for the memory mode,
    none for the number mode (Volcano locks only those two) or without NodeLockEnable."""
    text = f"""
actions: "allocate"
tiers:
- plugins: [{{name: deviceshare, arguments: {arguments}}}]
"""
    parsed = parse_conf(text, actions=REGISTRY.actions.keys(), plugins=REGISTRY.plugins.keys())
    assert _node_lock_key(parsed) == lock
    if lock:
        patch = node_lock_patch({}, "7", dt.datetime(2026, 1, 2, tzinfo=dt.UTC), lock=lock)
        assert patch == {
            "metadata": {"resourceVersion": "7", "annotations": {lock: "2026-01-02T00:00:00Z"}}
        }
