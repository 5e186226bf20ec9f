"""deviceshare over many sessions on the live snapshot: random changes (pods come, bind, finish
and go, binds fail, nodes change) on HAMi nodes; no card is ever given more memory, cores or
pods than it has, with the incremental layer and without it."""

from __future__ import annotations

import datetime as dt
import random

import msgspec
import pytest

from caldera.api.core import Container, Node, NodeStatus, Pod, ResourceRequirements
from caldera.api.meta import Condition, ObjectMeta
from caldera.api.vgpu import IDS, REGISTER, Card, cards_in_use, encode_register
from scheduler.api.types import ClusterInfo
from scheduler.conf import parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.test_sched_live_snapshot import STEPS, T0, Cache, _decisions

CONF = parse_conf(
    """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack},
            {name: deviceshare, arguments: {deviceshare.VGPUEnable: true,
             deviceshare.SchedulePolicy: binpack, deviceshare.ScheduleWeight: 10}}]
""",
    actions=ACTIONS.keys(),
    plugins=PLUGINS.keys(),
)
CARDS, SPLIT, MEMORY = 2, 3, 8000
RUNS = 6


class GpuCache(Cache):
    """The live snapshot test's random cache with HAMi nodes and vGPU pods; binds carry the
    session's annotations into the pods, as the API server merges the Binding's."""

    def __init__(self, rng: random.Random) -> None:
        self.grants: dict[str, str] = {}  # pod uid -> ids written with its bind
        super().__init__(rng)

    def put_node(self, name: str, cpu: str, *, ready: bool) -> None:
        cards = [
            Card(i, f"GPU-{name}-{i}", SPLIT, MEMORY, "NVIDIA-A100", True, "hami-core")
            for i in range(CARDS)
        ]
        node = Node(
            metadata=ObjectMeta(
                name=name,
                resource_version=str(self.serial),
                annotations={REGISTER: encode_register(cards)},
            ),
            status=NodeStatus(
                allocatable={
                    "cpu": cpu,
                    "memory": "16Gi",
                    "pods": "110",
                    "volcano.sh/vgpu-number": str(CARDS * SPLIT),
                    "volcano.sh/vgpu-memory": str(CARDS * MEMORY),
                    "volcano.sh/vgpu-cores": str(CARDS * 100),
                },
                conditions=(Condition(type="Ready", status="True" if ready else "False"),),
            ),
        )
        self.serial += 1
        self.nodes.items[name] = node
        self.live.node_changed(node)

    def new_pod(self, name: str, group: str) -> Pod:
        pod = super().new_pod(name, group)
        asked: dict[str, str | int | float] = {
            "cpu": "500m",
            "volcano.sh/vgpu-number": "1",
            "volcano.sh/vgpu-memory": str(self.rng.choice([1000, 3000, 5000, 8000])),
        }
        cores = self.rng.choice([0, 0, 30, 100])
        if cores:
            asked["volcano.sh/vgpu-cores"] = str(cores)
        container = Container(
            name="c", resources=ResourceRequirements(requests=asked, limits=asked)
        )
        return msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, containers=(container,))
        )

    def put_pod(self, pod: Pod) -> None:
        ids = self.grants.get(pod.metadata.uid)
        if pod.spec.node_name and ids and IDS not in pod.metadata.annotations:
            meta = msgspec.structs.replace(
                pod.metadata, annotations={**pod.metadata.annotations, IDS: ids}
            )
            pod = msgspec.structs.replace(pod, metadata=meta)
        super().put_pod(pod)

    def live_cluster(self, now: dt.datetime) -> ClusterInfo:
        cluster = super().live_cluster(now)
        cluster.device_grants = {u: g for u, g in self.grants.items() if u in self.assumed}
        return cluster

    def session(self, cluster: ClusterInfo, *, speedups: bool = True) -> SessionResult:
        session = Session(cluster, CONF.tiers, speedups=speedups)
        try:
            result = run_session(session, CONF, REGISTRY)
        finally:
            self.live.after_session(session)
        for bind in result.binds:
            self.assumed[bind.task.uid] = bind.node
            written = result.bind_annotations.get(bind.task.uid)
            if written is not None:
                self.grants[bind.task.uid] = written[IDS]
        return result

    def overcommitted(self) -> list[str]:
        """Cards whose bound and in-flight vGPU pods hold more than the card has."""
        held: dict[str, list[str]] = {}
        for pod in self.pods.items.values():
            node = pod.spec.node_name or self.assumed.get(pod.metadata.uid, "")
            ids = pod.metadata.annotations.get(IDS) or self.grants.get(pod.metadata.uid)
            if node and ids and pod.status.phase not in ("Succeeded", "Failed"):
                held.setdefault(node, []).append(ids)
        found = []
        for name, registered in self.nodes.items.items():
            register = registered.metadata.annotations[REGISTER]
            for use in cards_in_use(register, held.get(name, [])):
                card = use.card
                if use.memory > card.memory or use.cores > 100 or use.pods > card.split:
                    found.append(f"{name} {card.uuid}: {use}")
        return found


@pytest.mark.parametrize("speedups", [True, False])
def test_no_card_overcommitted_over_random_sessions(speedups: bool) -> None:
    """Random changes and sessions, with the incremental layer (node verdicts kept across
    sessions through the plugin's node class) and without it: after every session the cards
    hold no more memory, cores or pods than they have, counting the bound pods' annotations
    and the binds in flight."""
    binds = 0
    for seed in range(RUNS):
        cache = GpuCache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for _ in range(cache.rng.randint(0, 4)):
                cache.change()
            cluster = cache.live_cluster(T0 + dt.timedelta(seconds=step))
            result = cache.session(cluster, speedups=speedups)
            assert cache.overcommitted() == [], f"seed {seed} step {step}"
            assert set(result.bind_annotations) <= {b.task.uid for b in result.binds}
            cache.write_back(result)
            binds += len(result.binds)
    assert binds > 0


def test_the_incremental_layer_decides_as_without_it() -> None:
    """The same random changes on two caches, one session with the incremental layer, one
    without: the same decisions at every step. Failed binds of GPU pods caught a job settled
    by the very session that bound its pod: when the bind failed, the live snapshot kept the
    pod Binding, and the layer's session never placed it again."""
    compared = 0
    for seed in range(RUNS):
        fast = GpuCache(random.Random(seed))  # noqa: S311 - seeded test data
        plain = GpuCache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for cache in (fast, plain):
                for _ in range(cache.rng.randint(0, 4)):
                    cache.change()
            now = T0 + dt.timedelta(seconds=step)
            with_layer, without = fast.live_cluster(now), plain.live_cluster(now)
            got = fast.session(with_layer)
            expected = plain.session(without, speedups=False)
            assert _decisions(got, with_layer) == _decisions(expected, without), (
                f"seed {seed} step {step}"
            )
            fast.write_back(got)
            plain.write_back(expected)
            compared += len(got.binds)
    assert compared > 0
