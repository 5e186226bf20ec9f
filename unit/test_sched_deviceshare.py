"""deviceshare in sessions: vGPU pods placed on HAMi nodes' cards with Volcano's annotations,
cards never over-committed across sessions' running pods, gangs whole or not at all, victims'
cards freed for a preemptor, queues capped on vGPU resources, whole-GPU pods counted, the wait
record naming the short card, and the same decisions with the speed layer withheld."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from prometheus_client import CollectorRegistry

from caldera.api.core import Container, Node, NodeSpec, Pod, PodSpec, ResourceRequirements
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from caldera.api.vgpu import (
    BIND_PHASE,
    IDS,
    REGISTER,
    TO_ALLOCATE,
    Card,
    decode_pod_devices,
    encode_register,
)
from scheduler.api.types import ClusterInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.conf import parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.deviceshare import DeviceSharePlugin
from scheduler.registry import REGISTRY
from unit.sched_fixtures import make_cluster, make_job

CARD_MEMORY = 8000


def conf(policy: str = "binpack", weight: int = 10, actions: str = "enqueue, allocate") -> str:
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
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: "{policy}"
      deviceshare.ScheduleWeight: {weight}
"""


def gpu_node(name: str, cards: int = 2, *, split: int = 10, memory: int = CARD_MEMORY) -> NodeInfo:
    """A HAMi node: its cards registered, the vGPU totals allocatable."""
    registered = [
        Card(i, f"GPU-{name}-{i}", split, memory, "NVIDIA-A100", True, "hami-core")
        for i in range(cards)
    ]
    allocatable = {
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "volcano.sh/vgpu-number": str(cards * split),
        "volcano.sh/vgpu-memory": str(cards * memory),
        "volcano.sh/vgpu-cores": str(cards * 100),
        "nvidia.com/gpu": str(cards),
    }
    node = Node(
        metadata=ObjectMeta(name=name, annotations={REGISTER: encode_register(registered)}),
        spec=NodeSpec(),
    )
    return NodeInfo(name, Resources.from_list(allocatable), node=node)


def vgpu_task(
    job: str,
    index: int,
    *,
    memory: int = 0,
    cores: int = 0,
    number: int = 1,
    node: str = "",
    status: TaskStatus = TaskStatus.PENDING,
    annotations: Mapping[str, str] | None = None,
    priority: int = 0,
    whole: int = 0,
) -> TaskInfo:
    """A pod whose limits ask vGPU (the API server copies them to its requests), or, with
    ``whole``, plain nvidia.com/gpu cards."""
    limits: dict[str, str | int | float] = {"cpu": "1"}
    if whole:
        limits["nvidia.com/gpu"] = str(whole)
    else:
        limits["volcano.sh/vgpu-number"] = str(number)
        if memory:
            limits["volcano.sh/vgpu-memory"] = str(memory)
        if cores:
            limits["volcano.sh/vgpu-cores"] = str(cores)
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


def cards_given(ssn: Session) -> dict[str, list[tuple[str, int, int]]]:
    """Each bound pod's cards (uuid, memory, cores) as its annotation says."""
    given = {}
    for bind in ssn.result.binds:
        written = ssn.result.bind_annotations.get(bind.task.uid, {})
        devices = decode_pod_devices(written.get(IDS, ""))
        given[bind.task.name] = [(d.uuid, d.memory, d.cores) for c in devices for d in c]
    return given


def cluster_of(
    nodes: Sequence[NodeInfo], *jobs: Sequence[TaskInfo], **job_args: object
) -> ClusterInfo:
    built = [make_job(tasks[0].job.split("/")[1], tasks, **job_args) for tasks in jobs]  # type: ignore[arg-type]
    return make_cluster(nodes, built)


def test_binpack_shares_one_card_and_writes_volcano_annotations() -> None:
    """Two 3000 MiB pods share the first card under binpack; each bind carries the cards in
    Volcano's format, the same text in devices-to-allocate, and the allocating phase."""
    cluster = cluster_of(
        [gpu_node("n1")],
        [vgpu_task("a", 0, memory=3000)],
        [vgpu_task("b", 0, memory=3000)],
    )
    ssn = run(cluster, conf("binpack"))
    given = cards_given(ssn)
    assert given["a-0"][0][0] == given["b-0"][0][0]
    written = ssn.result.bind_annotations["uid-a-0"]
    assert written[IDS] == written[TO_ALLOCATE] == f"{given['a-0'][0][0]},NVIDIA,3000,0:"
    assert written[BIND_PHASE] == "allocating"


def test_spread_puts_pods_on_separate_cards_and_nodes() -> None:
    """spread prefers idle cards, and (with a weight) the node with more of them."""
    cluster = cluster_of(
        [gpu_node("n1"), gpu_node("n2")],
        [vgpu_task("a", 0, memory=1000)],
        [vgpu_task("b", 0, memory=1000)],
        [vgpu_task("c", 0, memory=1000)],
    )
    ssn = run(cluster, conf("spread"))
    uuids = [cards[0][0] for cards in cards_given(ssn).values()]
    assert len(set(uuids)) == 3


def test_running_pods_cards_are_counted() -> None:
    """A running pod's annotation holds its card: a pod asking more than what is left there
    goes to the other card, and one asking more than any card has waits with a reason."""
    holder = vgpu_task(
        "r",
        0,
        memory=6000,
        node="n1",
        status=TaskStatus.RUNNING,
        annotations={IDS: "GPU-n1-0,NVIDIA,6000,0:"},
    )
    cluster = cluster_of(
        [gpu_node("n1")],
        [holder],
        [vgpu_task("a", 0, memory=4000)],
        [vgpu_task("b", 0, memory=5000)],
    )
    ssn = run(cluster, conf("binpack"))
    given = cards_given(ssn)
    assert given == {"a-0": [("GPU-n1-1", 4000, 0)]}
    job = ssn.jobs["ns/b"]
    assert "no GPU card fits the vGPU request" in job.fit_errors["uid-b-0"]


def test_wait_record_names_the_short_card() -> None:
    """When the node's vGPU totals fit but no card does, the wait record says which card came
    closest and by how much."""
    holder = vgpu_task(
        "r",
        0,
        number=2,
        memory=3000,
        node="n1",
        status=TaskStatus.RUNNING,
        annotations={IDS: "GPU-n1-0,NVIDIA,6000,0:GPU-n1-1,NVIDIA,3000,0:"},
    )
    cluster = cluster_of([gpu_node("n1")], [holder], [vgpu_task("b", 0, memory=6000)])
    ssn = run(cluster, conf("binpack"))
    assert ssn.result.binds == []
    record = ssn.result.podgroup_why["ns/b"]
    assert "node n1: card GPU-n1-1 has 5000 MiB free, pod asks 6000" in record.details


def test_whole_card_request_takes_an_unshared_card() -> None:
    """100 cores takes a card nobody holds; with none left the pod waits."""
    holder = vgpu_task(
        "r",
        0,
        memory=100,
        node="n1",
        status=TaskStatus.RUNNING,
        annotations={IDS: "GPU-n1-1,NVIDIA,100,0:"},
    )
    cluster = cluster_of(
        [gpu_node("n1")],
        [holder],
        [vgpu_task("w", 0, cores=100)],
        [vgpu_task("x", 0, cores=100)],
    )
    ssn = run(cluster, conf("binpack"))
    assert cards_given(ssn) == {"w-0": [("GPU-n1-0", CARD_MEMORY, 100)]}


def test_gang_binds_whole_or_not_at_all_and_leaves_the_cards() -> None:
    """A gang of three whole-card pods on a two-card cluster binds nothing, and the pod after
    it finds every card as it was."""
    gang = [vgpu_task("g", i, cores=100) for i in range(3)]
    cluster = cluster_of([gpu_node("n1")], gang, [vgpu_task("s", 0, memory=CARD_MEMORY)])
    ssn = run(cluster, conf("binpack"))
    given = cards_given(ssn)
    assert set(given) == {"s-0"}
    assert given["s-0"][0][1] == CARD_MEMORY


def test_whole_gpu_and_vgpu_pods_count_against_each_other() -> None:
    """A running nvidia.com/gpu pod takes a card whole: a whole-card vGPU pod takes the other
    card, and the next waits (volcano#4712)."""
    plain = vgpu_task("p", 0, whole=1, node="n1", status=TaskStatus.RUNNING)
    cluster = cluster_of(
        [gpu_node("n1")], [plain], [vgpu_task("a", 0, cores=100)], [vgpu_task("b", 0, cores=100)]
    )
    ssn = run(cluster, conf("binpack"))
    assert list(cards_given(ssn)) == ["a-0"]


def test_preempt_frees_the_victims_card() -> None:
    """A high-priority pod asking a whole card's memory evicts one low-priority pod holding a
    card and is pipelined there: the victim's card counts as free in the future view, and
    nothing is bound while the victim is still on it."""
    victims = [
        vgpu_task(
            "low",
            i,
            memory=CARD_MEMORY,
            node="n1",
            status=TaskStatus.RUNNING,
            annotations={IDS: f"GPU-n1-{i},NVIDIA,{CARD_MEMORY},0:"},
        )
        for i in range(2)
    ]
    high = vgpu_task("high", 0, memory=CARD_MEMORY, priority=100)
    cluster = make_cluster(
        [gpu_node("n1")],
        [make_job("low", victims, min_available=1), make_job("high", [high], priority=100)],
    )
    ssn = run(cluster, conf("binpack", actions="enqueue, allocate, preempt"))
    assert len(ssn.result.evictions) == 1
    assert ssn.jobs["ns/high"].tasks["uid-high-0"].status == TaskStatus.PIPELINED
    assert ssn.result.binds == []


def test_queue_capability_caps_vgpu_memory() -> None:
    """A queue's capability in volcano.sh/vgpu-memory stops it at that much GPU memory."""
    capped = QueueInfo("capped", capability=Resources.from_list({"volcano.sh/vgpu-memory": "5000"}))
    jobs = [
        make_job(f"j{i}", [vgpu_task(f"j{i}", 0, memory=3000)], queue="capped") for i in range(3)
    ]
    cluster = make_cluster([gpu_node("n1")], jobs, [capped])
    ssn = run(cluster, conf("binpack"))
    assert len(ssn.result.binds) == 1


@pytest.mark.parametrize("policy", ["binpack", "spread", ""])
def test_same_decisions_with_the_speed_layer_withheld(policy: str) -> None:
    """Node verdicts reused through the plugin's node class give what deriving them gives."""

    def build() -> ClusterInfo:
        jobs = [
            [
                vgpu_task(f"j{i}", k, memory=1000 * (1 + (i + k) % 4), cores=(i * 30) % 100)
                for k in range(2)
            ]
            for i in range(12)
        ]
        return cluster_of([gpu_node(f"n{i}", cards=2, split=3) for i in range(3)], *jobs)

    fast = run(build(), conf(policy), speedups=True)
    slow = run(build(), conf(policy), speedups=False)
    assert cards_given(fast) == cards_given(slow)
    assert cards_given(fast)


def test_arguments() -> None:
    """Volcano's argument names; devices Caldera lacks and unknown policies are refused."""
    plugin = DeviceSharePlugin(
        Arguments(
            "deviceshare", {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": "spread"}
        )
    )
    assert plugin.vgpu
    assert plugin.policy == "spread"
    with pytest.raises(ValueError, match=r"deviceshare\.GPUNumberEnable"):
        DeviceSharePlugin(
            Arguments(
                "deviceshare",
                {"deviceshare.GPUNumberEnable": True, "deviceshare.VGPUEnable": True},
            )
        )
    with pytest.raises(ValueError, match="binpack or spread"):
        DeviceSharePlugin(Arguments("deviceshare", {"deviceshare.SchedulePolicy": "pack"}))


def test_card_figures_reach_the_metrics() -> None:
    """The session reports each card's memory, memory and cores given and pods; the process's
    gauges carry them under Caldera's names and Volcano's."""
    holder = vgpu_task(
        "r",
        0,
        memory=6000,
        cores=30,
        node="n1",
        status=TaskStatus.RUNNING,
        annotations={IDS: "GPU-n1-0,NVIDIA,6000,30:"},
    )
    ssn = run(cluster_of([gpu_node("n1")], [holder]), conf("binpack"))
    assert ssn.result.gpu_cards[("n1", "GPU-n1-0")] == (CARD_MEMORY, 6000, 30, 1)
    assert ssn.result.gpu_cards[("n1", "GPU-n1-1")] == (CARD_MEMORY, 0, 0, 0)
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(ssn.result)
    labels = {"node": "n1", "uuid": "GPU-n1-0"}
    used = registry.get_sample_value("caldera_gpu_card_memory_used_bytes", labels)
    assert used == 6000 * 2**20
    volcano = {"devID": "GPU-n1-0", "NodeName": "n1"}
    assert registry.get_sample_value("caldera_vgpu_device_allocated_memory", volcano) == 6000
    assert registry.get_sample_value("caldera_vgpu_device_shared_number", volcano) == 1
