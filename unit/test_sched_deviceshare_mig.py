"""deviceshare in sessions on MIG nodes: pods given MIG instances named as Volcano names them,
running pods' instances held, the geometry kept on a card in use, the wait record naming why a
MIG card refuses, and the same decisions with the speed layer withheld."""

from __future__ import annotations

import pytest

from caldera.api.core import Node, NodeSpec
from caldera.api.meta import ObjectMeta
from caldera.api.mig import DeviceConfig, Geometry, Instance, ModelGeometries
from caldera.api.resources import Resources
from caldera.api.vgpu import IDS, MIG, MODE, REGISTER, TO_ALLOCATE, Card, encode_register
from scheduler.api.types import ClusterInfo, NodeInfo, TaskStatus
from unit.sched_fixtures import make_cluster, make_job
from unit.test_sched_deviceshare import cards_given, cluster_of, conf, run, vgpu_task

A30: tuple[Geometry, ...] = (
    Geometry("group1", (Instance("1g.6gb", 6144, 4),)),
    Geometry("group2", (Instance("2g.12gb", 12288, 2),)),
    Geometry("group3", (Instance("4g.24gb", 24576, 1),)),
)
CONFIG = DeviceConfig((ModelGeometries(("A30",), A30),))


def mig_node(name: str, cards: int = 1) -> NodeInfo:
    """A HAMi node in MIG mode: A30 cards of 24 GiB, the vGPU totals allocatable."""
    registered = [
        Card(i, f"GPU-{name}-{i}", 7, 24576, "NVIDIA-A30", True, MIG) for i in range(cards)
    ]
    allocatable = {
        "cpu": "64",
        "memory": "256Gi",
        "pods": "110",
        "volcano.sh/vgpu-number": str(cards * 7),
        "volcano.sh/vgpu-memory": str(cards * 24576),
        "volcano.sh/vgpu-cores": str(cards * 100),
    }
    node = Node(
        metadata=ObjectMeta(name=name, annotations={REGISTER: encode_register(registered)}),
        spec=NodeSpec(),
    )
    return NodeInfo(name, Resources.from_list(allocatable), node=node)


def with_config(cluster: ClusterInfo, config: DeviceConfig = CONFIG) -> ClusterInfo:
    cluster.device_config = config
    return cluster


def test_pods_get_mig_instances_named_as_volcano() -> None:
    """Two 5000 MiB pods share one A30 partitioned as group1: two 1g.6gb instances, named
    uuid[group-position] in the ids and devices-to-allocate annotations, with the asked MiB."""
    cluster = with_config(
        cluster_of(
            [mig_node("n1")],
            [vgpu_task("a", 0, memory=5000)],
            [vgpu_task("b", 0, memory=5000)],
        )
    )
    ssn = run(cluster, conf("binpack"))
    given = cards_given(ssn)
    assert sorted(uuid for cards in given.values() for uuid, _, _ in cards) == [
        "GPU-n1-0[group1-0]",
        "GPU-n1-0[group1-1]",
    ]
    written = ssn.result.bind_annotations["uid-a-0"]
    assert written[IDS] == written[TO_ALLOCATE]
    assert written[IDS].endswith(",NVIDIA,5000,0:")


def test_running_pods_instances_and_geometry_are_kept() -> None:
    """A running pod on group1 position 0 keeps the card in group1: a 5000 MiB pod gets
    position 1, and an 8000 MiB pod waits (group1's instances are 6 GB), its record saying
    so."""
    holder = vgpu_task(
        "r",
        0,
        memory=5000,
        node="n1",
        status=TaskStatus.RUNNING,
        annotations={IDS: "GPU-n1-0[group1-0],NVIDIA,5000,0:"},
    )
    cluster = with_config(
        cluster_of(
            [mig_node("n1")],
            [holder],
            [vgpu_task("a", 0, memory=5000)],
            [vgpu_task("b", 0, memory=8000)],
        )
    )
    ssn = run(cluster, conf("binpack"))
    assert cards_given(ssn) == {"a-0": [("GPU-n1-0[group1-1]", 5000, 0)]}
    record = ssn.result.podgroup_why["ns/b"]
    assert any(
        "partitioned as group1: no free MIG instance of 8000" in detail for detail in record.details
    ), record.details


def test_without_geometries_mig_nodes_share_nothing_and_say_why() -> None:
    """No ConfigMap read: the pod waits, and its record names the card and the problem."""
    cluster = cluster_of([mig_node("n1")], [vgpu_task("a", 0, memory=1000)])
    ssn = run(cluster, conf("binpack"))
    assert ssn.result.binds == []
    details = ssn.result.podgroup_why["ns/a"].details
    assert any("has no known MIG geometry" in d for d in details), details
    assert any("no device configuration read" in d for d in details), details


def test_the_pods_mode_annotation_picks_the_nodes() -> None:
    """volcano.sh/vgpu-mode: hami-core keeps a pod off MIG nodes; mig lets it on."""
    cluster = with_config(
        cluster_of(
            [mig_node("n1")],
            [vgpu_task("h", 0, memory=1000, annotations={MODE: "hami-core"})],
            [vgpu_task("m", 0, memory=1000, annotations={MODE: MIG})],
        )
    )
    assert list(cards_given(run(cluster, conf("binpack")))) == ["m-0"]


def test_a_gang_that_does_not_fit_leaves_the_instances() -> None:
    """A gang of three 20000 MiB pods on two A30s binds nothing; a pod after it gets the first
    instance of an unpartitioned card."""
    gang = [vgpu_task("g", i, memory=20000) for i in range(3)]
    cluster = with_config(
        cluster_of([mig_node("n1", cards=2)], gang, [vgpu_task("s", 0, memory=1000)])
    )
    given = cards_given(run(cluster, conf("binpack")))
    assert set(given) == {"s-0"}
    assert given["s-0"][0][0].endswith("[group1-0]")


@pytest.mark.parametrize("policy", ["binpack", "spread", ""])
def test_same_decisions_with_the_speed_layer_withheld(policy: str) -> None:
    """Node verdicts reused through the node class give what deriving them gives."""

    def build() -> ClusterInfo:
        jobs = [
            [vgpu_task(f"j{i}", 0, memory=[3000, 6000, 10000, 20000][i % 4])] for i in range(10)
        ]
        return with_config(cluster_of([mig_node(f"n{i}", cards=2) for i in range(2)], *jobs))

    fast = run(build(), conf(policy), speedups=True)
    slow = run(build(), conf(policy), speedups=False)
    assert cards_given(fast) == cards_given(slow)
    assert cards_given(fast)


def test_preempt_frees_the_victims_instance() -> None:
    """A high-priority pod asking 20000 MiB evicts one of the low-priority pods holding each
    card's one 4g.24gb instance and is pipelined there; nothing is bound while the victim is
    on it."""
    victims = [
        vgpu_task(
            "low",
            i,
            memory=20000,
            node="n1",
            status=TaskStatus.RUNNING,
            annotations={IDS: f"GPU-n1-{i}[group3-0],NVIDIA,20000,0:"},
        )
        for i in range(2)
    ]
    high = vgpu_task("high", 0, memory=20000, priority=100)
    cluster = with_config(
        make_cluster(
            [mig_node("n1", cards=2)],
            [make_job("low", victims, min_available=1), make_job("high", [high], priority=100)],
        )
    )
    ssn = run(cluster, conf("binpack", actions="enqueue, allocate, preempt"))
    assert len(ssn.result.evictions) == 1
    assert ssn.jobs["ns/high"].tasks["uid-high-0"].status == TaskStatus.PIPELINED
    assert ssn.result.binds == []
