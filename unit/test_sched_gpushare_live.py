"""deviceshare's GPU memory / number mode over many sessions on the live snapshot: random
changes (pods come, bind, finish and go, binds fail, nodes change) on nodes whose capacity
names their cards; no card is ever given more memory than it has (memory mode) or shared once
given whole (number mode), counting bound pods' gpu-index and binds in flight, with the
incremental layer and without it."""

from __future__ import annotations

import datetime as dt
import random

import msgspec
import pytest

from caldera.api.core import Container, Node, NodeStatus, Pod, ResourceRequirements
from caldera.api.gpushare import GPU_INDEX, parse_gpu_index
from caldera.api.meta import Condition, ObjectMeta
from scheduler.api.types import ClusterInfo
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.test_sched_live_snapshot import STEPS, T0, Cache, _decisions


def conf_of(argument: str) -> SchedulerConf:
    return parse_conf(
        f"""\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}]
- plugins: [{{name: overcommit}}, {{name: drf}}, {{name: predicates}}, {{name: proportion}},
            {{name: nodeorder}}, {{name: binpack}},
            {{name: deviceshare, arguments: {{deviceshare.{argument}: true}}}}]
""",
        actions=ACTIONS.keys(),
        plugins=PLUGINS.keys(),
    )


CARDS, MEMORY = 3, 8000
RUNS = 5
MODES = ["GPUSharingEnable", "GPUNumberEnable"]


class ShareCache(Cache):
    """The live snapshot test's random cache with GPU share nodes and pods; binds carry the
    session's annotations into the pods, as the API server merges the Binding's."""

    def __init__(self, rng: random.Random, argument: str) -> None:
        self.argument = argument
        self.conf = conf_of(argument)
        self.grants: dict[str, str] = {}  # pod uid -> gpu-index written with its bind
        super().__init__(rng)

    def put_node(self, name: str, cpu: str, *, ready: bool) -> None:
        gpus = {"volcano.sh/gpu-number": str(CARDS), "volcano.sh/gpu-memory": str(CARDS * MEMORY)}
        node = Node(
            metadata=ObjectMeta(name=name, resource_version=str(self.serial)),
            status=NodeStatus(
                capacity=dict(gpus),
                allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110", **gpus},
                conditions=(Condition(type="Ready", status="True" if ready else "False"),),
            ),
        )
        self.serial += 1
        self.nodes.items[name] = node
        self.live.node_changed(node)

    def new_pod(self, name: str, group: str) -> Pod:
        pod = super().new_pod(name, group)
        asked: dict[str, str | int | float] = {"cpu": "500m"}
        if self.argument == "GPUSharingEnable":
            asked["volcano.sh/gpu-memory"] = str(self.rng.choice([1000, 3000, 5000, 8000]))
        else:
            asked["volcano.sh/gpu-number"] = str(self.rng.choice([1, 1, 2]))
        container = Container(
            name="c", resources=ResourceRequirements(requests=asked, limits=asked)
        )
        return msgspec.structs.replace(
            pod, spec=msgspec.structs.replace(pod.spec, containers=(container,))
        )

    def put_pod(self, pod: Pod) -> None:
        ids = self.grants.get(pod.metadata.uid)
        if pod.spec.node_name and ids and GPU_INDEX not in pod.metadata.annotations:
            meta = msgspec.structs.replace(
                pod.metadata, annotations={**pod.metadata.annotations, GPU_INDEX: ids}
            )
            pod = msgspec.structs.replace(pod, metadata=meta)
        super().put_pod(pod)

    def live_cluster(self, now: dt.datetime) -> ClusterInfo:
        cluster = super().live_cluster(now)
        cluster.device_grants = {u: g for u, g in self.grants.items() if u in self.assumed}
        return cluster

    def session(self, cluster: ClusterInfo, *, speedups: bool = True) -> SessionResult:
        session = Session(cluster, self.conf.tiers, speedups=speedups)
        try:
            result = run_session(session, self.conf, REGISTRY)
        finally:
            self.live.after_session(session)
        for bind in result.binds:
            self.assumed[bind.task.uid] = bind.node
            written = result.bind_annotations.get(bind.task.uid)
            if written is not None:
                self.grants[bind.task.uid] = written[GPU_INDEX]
        return result

    def overcommitted(self) -> list[str]:
        """Cards whose bound and in-flight pods hold more than the mode allows."""
        memory: dict[tuple[str, int], int] = {}
        holders: dict[tuple[str, int], int] = {}
        for pod in self.pods.items.values():
            node = pod.spec.node_name or self.assumed.get(pod.metadata.uid, "")
            text = pod.metadata.annotations.get(GPU_INDEX) or self.grants.get(pod.metadata.uid)
            if not node or not text or pod.status.phase in ("Succeeded", "Failed"):
                continue
            limits = pod.spec.containers[0].resources.limits
            for card in parse_gpu_index(text) or ():
                key = (node, card)
                memory[key] = memory.get(key, 0) + int(limits.get("volcano.sh/gpu-memory", 0))
                holders[key] = holders.get(key, 0) + 1
        if self.argument == "GPUSharingEnable":
            return [f"{k}: {m}" for k, m in memory.items() if m > MEMORY]
        return [f"{k}: {n} holders" for k, n in holders.items() if n > 1]


@pytest.mark.parametrize("speedups", [True, False])
@pytest.mark.parametrize("argument", MODES)
def test_no_card_overcommitted_over_random_sessions(argument: str, speedups: bool) -> None:
    binds = 0
    for seed in range(RUNS):
        cache = ShareCache(random.Random(seed), argument)  # noqa: S311 - seeded test data
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


@pytest.mark.parametrize("argument", MODES)
def test_the_incremental_layer_decides_as_without_it(argument: str) -> None:
    compared = 0
    for seed in range(RUNS):
        fast = ShareCache(random.Random(seed), argument)  # noqa: S311 - seeded test data
        plain = ShareCache(random.Random(seed), argument)  # noqa: S311 - seeded test data
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
