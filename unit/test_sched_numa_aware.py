"""numa-aware: the Numatopology read, the CPU manager's hints, the topology manager's policies
(none, best-effort, restricted, single-numa-node) over Guaranteed pods and NUMA fits, Volcano's
reasons, and the plugin in a session (the CPUs placed pods take, the narrowest spread)."""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import Container, Pod, PodSpec, ResourceRequirements
from caldera.api.kinds import KindInfo
from caldera.api.meta import ObjectMeta
from caldera.api.numatopology import CpuInfo, NumaResourceInfo, Numatopology, NumatopoSpec
from informers.store import HandlerFuncs
from scheduler.api.types import ClusterInfo, TaskInfo
from scheduler.conf import DEFAULT_CONF, parse_conf
from scheduler.framework.plugin import Arguments
from scheduler.plugins.numa_aware import NumaAwarePlugin
from scheduler.plugins.numa_policy import (
    BEST_EFFORT,
    NONE,
    POLICY_KEY,
    RESTRICTED,
    SINGLE_NUMA_NODE,
    Hint,
    NodeNuma,
    admit,
    cpu_hints,
    guaranteed_cpus,
    is_guaranteed,
    node_numa,
    node_refusal,
    parse_cpuset,
    place,
    pod_numa,
    spread_score,
)
from scheduler.process import SchedulerLoop
from scheduler.registry import REGISTRY
from unit.sched_fixtures import make_cluster, make_job, make_node, make_task
from unit.test_sched_nodegroup import placed, run


def topology(
    name: str = "n",
    *,
    numa_nodes: int = 2,
    per_node: int = 4,
    free: str | None = None,
    cpu_manager: str = "static",
    policy: str = SINGLE_NUMA_NODE,
    reserved: str | None = None,
) -> Numatopology:
    """``numa_nodes`` NUMA nodes of ``per_node`` CPUs each (CPU i on NUMA node i // per_node,
    one core each); all free unless ``free``."""
    total = numa_nodes * per_node
    return Numatopology(
        metadata=ObjectMeta(name=name),
        spec=NumatopoSpec(
            policies={"CPUManagerPolicy": cpu_manager, "TopologyManagerPolicy": policy},
            res_reserved={"cpu": reserved} if reserved else {},
            numares={
                "cpu": NumaResourceInfo(free if free is not None else f"0-{total - 1}", total)
            },
            cpu_detail={str(i): CpuInfo(numa=i // per_node, core=i) for i in range(total)},
        ),
    )


def layout(**kwargs: object) -> NodeNuma:
    read = node_numa(topology(**kwargs))  # type: ignore[arg-type]
    assert read is not None
    return read


def container(cpu: str, *, memory: str = "1Gi", name: str = "c", limits: bool = True) -> Container:
    requests: dict[str, str | int | float] = {"cpu": cpu, "memory": memory}
    return Container(
        name=name,
        resources=ResourceRequirements(requests=requests, limits=dict(requests) if limits else {}),
    )


def pod(*containers: Container, policy: str | None = None) -> Pod:
    notes = {POLICY_KEY: policy} if policy is not None else {}
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", annotations=notes),
        spec=PodSpec(containers=containers),
    )


# ---- reading the Numatopology ------------------------------------------------------------------


def test_cpuset_lists_ranges_and_refuses_what_does_not_parse() -> None:
    assert parse_cpuset("0-3,8, 10-11") == {0, 1, 2, 3, 8, 10, 11}
    assert parse_cpuset("") == frozenset()
    for bad in ("3-1", "a", "0-99999999", "-1"):
        with pytest.raises(ValueError, match=r"cpuset|invalid literal"):
            parse_cpuset(bad)


def test_node_layout_policies_free_and_reserved_cpus() -> None:
    read = layout(free="1-7", reserved="1500m")
    assert (read.cpu_manager_policy, read.topology_policy) == ("static", SINGLE_NUMA_NODE)
    assert read.numa_nodes == (0, 1)
    assert read.free == frozenset(range(1, 8))
    assert read.reserved == {0, 1}  # 1.5 cpu kept: rounded up to two whole CPUs


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"free": "0-x"}, id="bad-cpuset"),
        pytest.param({"reserved": "lots"}, id="bad-quantity"),
        pytest.param({"numa_nodes": 9, "per_node": 1}, id="more-than-8-numa-nodes"),
    ],
)
def test_an_unreadable_numatopology_is_none(spec: dict[str, object]) -> None:
    assert node_numa(topology(**spec)) is None  # type: ignore[arg-type]


# ---- the pod -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("containers", "guaranteed"),
    [
        pytest.param((container("2"),), True, id="requests-equal-limits"),
        pytest.param((container("2", limits=False),), False, id="best-effort-limits-missing"),
        pytest.param(
            (
                Container(
                    resources=ResourceRequirements(
                        requests={"cpu": "1", "memory": "1Gi"},
                        limits={"cpu": "2", "memory": "1Gi"},
                    )
                ),
            ),
            False,
            id="burstable",
        ),
        pytest.param(
            (Container(resources=ResourceRequirements(limits={"cpu": "2", "memory": "1Gi"})),),
            True,
            id="limits-only",
        ),
        pytest.param(
            (Container(resources=ResourceRequirements(limits={"cpu": "2"})),), False, id="no-memory"
        ),
    ],
)
def test_guaranteed_qos(containers: tuple[Container, ...], guaranteed: bool) -> None:
    assert is_guaranteed(pod(*containers)) is guaranteed


def test_only_whole_cpus_are_hinted() -> None:
    assert guaranteed_cpus(container("2")) == 2
    assert guaranteed_cpus(container("1500m")) == 0
    assert cpu_hints(guaranteed_cpus(container("1500m")), layout(), layout().free) is None


# ---- hints and policies ------------------------------------------------------------------------


def test_hints_prefer_the_narrowest_sets_that_could_hold_the_request() -> None:
    numa = layout()
    hints = cpu_hints(2, numa, numa.free)
    assert hints == [
        Hint(frozenset({0}), True),
        Hint(frozenset({1}), True),
        Hint(frozenset({0, 1}), False),
    ]
    # 3 CPUs when NUMA node 0 has 1 free: only node 1 alone, or both
    hints = cpu_hints(3, numa, frozenset({0, 4, 5, 6, 7}))
    assert hints == [Hint(frozenset({1}), True), Hint(frozenset({0, 1}), False)]
    # more than one NUMA node holds: the pair is the narrowest, so preferred
    assert cpu_hints(6, numa, numa.free) == [Hint(frozenset({0, 1}), True)]


# The cases: free CPUs of a 2 x 4-CPU node and a container's whole CPUs.
ONE_NODE = ("0-7", "3")  # fits one NUMA node
SPANS = ("0-7", "6")  # needs both, as any placement would
FRAGMENTED = ("0-1,4-5", "3")  # one NUMA node could hold it, but none has 3 free
TOO_BIG = ("0-7", "9")  # not on this node at all


@pytest.mark.parametrize(
    ("policy", "case", "admitted", "best"),
    [
        (NONE, ONE_NODE, True, None),
        (NONE, FRAGMENTED, True, None),
        (BEST_EFFORT, ONE_NODE, True, {0}),
        (BEST_EFFORT, SPANS, True, {0, 1}),
        (BEST_EFFORT, FRAGMENTED, True, {0, 1}),
        (BEST_EFFORT, TOO_BIG, True, {0, 1}),
        (RESTRICTED, ONE_NODE, True, {0}),
        (RESTRICTED, SPANS, True, {0, 1}),
        (RESTRICTED, FRAGMENTED, False, {0, 1}),
        (RESTRICTED, TOO_BIG, False, {0, 1}),
        (SINGLE_NUMA_NODE, ONE_NODE, True, {0}),
        (SINGLE_NUMA_NODE, SPANS, False, {0, 1}),
        (SINGLE_NUMA_NODE, FRAGMENTED, False, {0, 1}),
        (SINGLE_NUMA_NODE, TOO_BIG, False, {0, 1}),
    ],
)
def test_policies_over_numa_fits(
    policy: str, case: tuple[str, str], admitted: bool, best: set[int] | None
) -> None:
    free, cpus = case
    numa = layout(policy=policy)
    hint, ok = admit(policy, numa.numa_nodes, cpu_hints(int(cpus), numa, parse_cpuset(free)))
    assert ok is admitted
    assert hint.affinity == (None if best is None else frozenset(best))


@pytest.mark.parametrize("policy", [BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE])
def test_no_whole_cpus_is_no_preference_and_admitted(policy: str) -> None:
    hint, ok = admit(policy, (0, 1), None)
    assert ok
    assert hint == Hint(frozenset({0, 1}), True)


@pytest.mark.parametrize(
    ("policy", "numa", "applies", "reason"),
    [
        (SINGLE_NUMA_NODE, None, False, "numa info is empty"),
        (SINGLE_NUMA_NODE, {"cpu_manager": "none"}, False, "cpu manager policy isn't static"),
        (
            SINGLE_NUMA_NODE,
            {"policy": RESTRICTED},
            False,
            "task topology policy[single-numa-node] is different with node[restricted]",
        ),
        (SINGLE_NUMA_NODE, {"free": ""}, False, "cpu allocatable map is empty"),
        (SINGLE_NUMA_NODE, {}, True, None),
        ("", None, False, None),
        ("", {"cpu_manager": "none"}, False, None),
        (NONE, {"policy": NONE}, False, None),
        ("", {}, True, None),
    ],
)
def test_node_filter_by_policy(
    policy: str, numa: dict[str, object] | None, applies: bool, reason: str | None
) -> None:
    read = None if numa is None else layout(**numa)
    assert node_refusal(policy, read) == (applies, reason)


def test_containers_take_cpus_in_turn() -> None:
    """Two 3-CPU containers on a single-numa-node 2 x 4 node: one NUMA node each; a third
    would not fit one NUMA node."""
    numa = layout()
    cpus, reason = place(
        pod_numa(pod(container("3", name="a"), container("3", name="b"))), numa, numa.free
    )
    assert reason is None
    assert cpus is not None
    assert len(cpus) == 6
    assert {cpu // 4 for cpu in cpus} == {0, 1}
    three = pod(container("3", name="a"), container("3", name="b"), container("3", name="c"))
    assert place(pod_numa(three), numa, numa.free) == (
        None,
        "container c cannot be assigned by numa",
    )


def test_reserved_cpus_are_never_taken() -> None:
    numa = layout(reserved="2")
    cpus, _ = place(pod_numa(pod(container("4"))), numa, numa.free)
    assert cpus == frozenset({4, 5, 6, 7})  # NUMA node 0 has only 2 after the reserved CPUs 0 and 1


@given(
    free=st.frozensets(st.integers(0, 15)),
    requests=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    policy=st.sampled_from([NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE]),
)
def test_placements_take_only_free_cpus_and_single_numa_stays_on_one(
    free: frozenset[int], requests: list[int], policy: str
) -> None:
    numa = layout(numa_nodes=4, policy=policy)
    containers = [container(str(n), name=f"c{i}") for i, n in enumerate(requests)]
    cpus, reason = place(pod_numa(pod(*containers)), numa, free)
    if cpus is None:
        assert reason is not None
        assert policy in (RESTRICTED, SINGLE_NUMA_NODE)
        return
    assert cpus <= free
    if len(free) >= sum(requests):
        assert len(cpus) == sum(requests)
    if policy == SINGLE_NUMA_NODE:
        # every container's CPUs on one NUMA node: check by placing them one at a time
        left = free
        for c in containers:
            taken, _ = place(pod_numa(pod(c)), numa, left)
            assert taken is not None
            assert len({cpu // 4 for cpu in taken}) <= 1
            left = left - taken


def test_spread_score_prefers_fewer_numa_nodes() -> None:
    assert spread_score(1, 2, 1) == 50.0
    assert spread_score(2, 2, 1) == 0.0
    assert spread_score(1, 4, 10) == 750.0
    assert spread_score(0, 0, 1) == 100.0


# ---- in a session ------------------------------------------------------------------------------

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder},
            {name: numa-aware, arguments: {weight: 10}}]
"""


def numa_task(index: int, cpus: str, policy: str | None = SINGLE_NUMA_NODE) -> TaskInfo:
    task = make_task("j", index, {"cpu": cpus, "memory": "1Gi"})
    task.pod = pod(container(cpus), policy=policy)
    task.pod = msgspec.structs.replace(
        task.pod, metadata=msgspec.structs.replace(task.pod.metadata, name=task.name)
    )
    return task


def cluster_of(
    tasks: list[TaskInfo], *topologies: Numatopology, nodes: tuple[str, ...]
) -> ClusterInfo:
    job = make_job("j", tasks, min_available=1)
    cluster = make_cluster([make_node(name, cpu="16", memory="64Gi") for name in nodes], [job])
    cluster.numa_topologies = {t.metadata.name: t for t in topologies}
    return cluster


def test_a_pod_goes_where_its_cpus_fit_one_numa_node() -> None:
    cluster = cluster_of(
        [numa_task(0, "3")],
        topology("a", free="0-1,4-5"),
        topology("b"),
        nodes=("a", "b", "c"),
    )
    assert placed(run(cluster, CONF)) == {"j-0": "b"}


@pytest.mark.parametrize("speedups", [True, False])
def test_the_cpus_placed_pods_take_are_gone_for_the_next(speedups: bool) -> None:
    """Three 3-CPU pods, one 2 x 4 node: two fit (one per NUMA node), the third does not,
    though the node's allocatable (16 cpu) holds all three; the same with the verdicts
    shared between the pods as without."""
    cluster = cluster_of([numa_task(i, "3") for i in range(3)], topology("n"), nodes=("n",))
    assert sorted(placed(run(cluster, CONF, speedups=speedups))) == ["j-0", "j-1"]


def test_pods_without_guaranteed_qos_or_on_unaligned_nodes_pass() -> None:
    burstable = make_task("j", 0, {"cpu": "3", "memory": "1Gi"})
    unaligned = numa_task(1, "3", policy=None)
    cluster = cluster_of([burstable, unaligned], topology("n", free="0-1,4-5"), nodes=("n",))
    # the burstable pod is not checked; the pod without a policy is, on a single-numa-node node
    assert placed(run(cluster, CONF)) == {"j-0": "n"}
    cluster = cluster_of([numa_task(0, "3", policy=None)], nodes=("n",))
    assert placed(run(cluster, CONF)) == {"j-0": "n"}  # no Numatopology: not checked


def test_a_pod_with_a_policy_needs_a_numatopology() -> None:
    cluster = cluster_of([numa_task(0, "1")], nodes=("n",))
    ssn = run(cluster, CONF)
    assert placed(ssn) == {}


def test_the_score_prefers_the_narrowest_spread() -> None:
    """best-effort admits both; on a the pod spans two NUMA nodes, on b one."""
    cluster = cluster_of(
        [numa_task(0, "3", policy=BEST_EFFORT)],
        topology("a", free="0-1,4-5", policy=BEST_EFFORT),
        topology("b", free="0-1,4-7", policy=BEST_EFFORT),
        nodes=("a", "b"),
    )
    assert placed(run(cluster, CONF)) == {"j-0": "b"}


def test_weight_is_a_whole_number() -> None:
    assert NumaAwarePlugin(Arguments("numa-aware", {})).weight == 1
    with pytest.raises(ValueError, match="numa-aware: argument weight"):
        NumaAwarePlugin(Arguments("numa-aware", {"weight": "x"}))


# ---- the process watches Numatopology objects only when configured -----------------------------


class _Informer:
    def __init__(self) -> None:
        self.handlers: list[HandlerFuncs[Numatopology]] = []
        self.objects: list[Numatopology] = []
        self.store = self

    def add_handler(self, handler: HandlerFuncs[Numatopology]) -> None:
        self.handlers.append(handler)

    def list(self) -> list[Numatopology]:
        return self.objects


class _Factory:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.made = _Informer()

    def informer(self, kind: KindInfo[Numatopology]) -> _Informer:
        self.asked.append(kind.kind)
        return self.made


def test_the_process_watches_numatopologies_from_the_first_configuration_naming_the_plugin() -> (
    None
):
    loop = SchedulerLoop.__new__(SchedulerLoop)
    factory = _Factory()
    loop.factory = factory  # type: ignore[assignment]
    loop.numa_topologies = None
    loop._numa_news = False
    loop._wake = asyncio.Event()
    without = parse_conf(DEFAULT_CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    with_numa = parse_conf(CONF, actions=REGISTRY.actions, plugins=REGISTRY.plugins)

    assert loop._watch_numa(without) is False
    assert factory.asked == []
    assert loop._numa_objects() == {}

    assert loop._watch_numa(with_numa) is True
    assert loop._watch_numa(with_numa) is True
    assert factory.asked == ["Numatopology"]  # one informer, asked once
    factory.made.objects.append(topology("n1"))
    assert list(loop._numa_objects()) == ["n1"]
    # a changed Numatopology is news to the quiet sessions, and wakes the loop
    factory.made.handlers[0].on_add(topology("n1"))
    assert loop._numa_news
    assert loop._wake.is_set()
