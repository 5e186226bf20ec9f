"""Partitions (PodGroup subGroupPolicy, Volcano v1.14) in the scheduler: gangs within the gang,
each partition whole and under one HyperNode of its tier in hard mode, the job committed only
with minSubGroups whole partitions (scheduler.api.subgroups, scheduler.actions.partitions)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api import volcano as v
from caldera.api.meta import LabelSelector, ObjectMeta
from caldera.api.topology_tree import build_tree
from caldera.api.volcano import NetworkTopologySpec, PodGroup, PodGroupSpec, SubGroupPolicy
from scheduler.api.subgroups import sub_groups, sub_groups_ready, sub_groups_valid
from scheduler.api.types import ClusterInfo, JobInfo, TaskStatus
from scheduler.why import partition_text
from unit.sched_fixtures import add_job, binds, cpu_cluster, make_task, run
from unit.topology_fixtures import racks_and_spines

TOPOLOGY_PLUGINS = (
    ("priority", "gang", "conformance"),
    ("overcommit", "predicates", "nodeorder", "network-topology-aware"),
)
RACK = NetworkTopologySpec(mode="hard", highest_tier_name="rack")


def topology_cluster(
    spines: int = 2, racks: int = 2, nodes: int = 2, cpus: str = "8"
) -> tuple[ClusterInfo, dict[str, tuple[str, str]]]:
    names, hns, where = racks_and_spines(spines, racks, nodes)
    cluster = cpu_cluster(dict.fromkeys(names, cpus))
    cluster.hypernodes = build_tree(hns, {n: {} for n in names})
    return cluster, where


def partitioned(
    cluster: ClusterInfo,
    name: str,
    *,
    partitions: int,
    size: int,
    minimum: int,
    pod_cpu: str = "4",
    topology: NetworkTopologySpec | None = RACK,
) -> JobInfo:
    """A job of ``partitions`` x ``size`` pending pods of task "worker", labelled as the job
    controller labels them, with the subGroupPolicy it writes (minMember minimum x size, or
    every pod when minimum is 0)."""
    min_member = (minimum or partitions) * size
    job = add_job(
        cluster,
        name,
        pending=partitions * size,
        size=pod_cpu,
        min_available=min_member,
        phase="Inqueue",
    )
    for i, task in enumerate(sorted(job.tasks.values(), key=lambda t: int(t.name.rsplit("-")[1]))):
        assert task.pod is not None
        labels = {v.TASK_SPEC_KEY: "worker", v.PARTITION_ID_KEY: str(i // size)}
        task.pod = msgspec.structs.replace(
            task.pod, metadata=msgspec.structs.replace(task.pod.metadata, labels=labels)
        )
    policy = SubGroupPolicy(
        name="worker",
        network_topology=topology,
        sub_group_size=size,
        min_sub_groups=minimum,
        label_selector=LabelSelector(match_labels={v.TASK_SPEC_KEY: "worker"}),
        match_label_keys=(v.PARTITION_ID_KEY,),
    )
    job.podgroup = PodGroup(
        metadata=ObjectMeta(name=name, namespace="ns"),
        spec=PodGroupSpec(min_member=min_member, sub_group_policy=(policy,)),
    )
    return job


def partition_of(pod: str, size: int) -> int:
    return int(pod.rsplit("-", 1)[1]) // size


def racks_by_partition(
    placed: Mapping[str, str], where: Mapping[str, tuple[str, str]], size: int
) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for pod, node in placed.items():
        out.setdefault(partition_of(pod, size), set()).add(where[node][0])
    return out


def occupy(cluster: ClusterInfo, node: str, cpus: str) -> None:
    """A running pod of another job using ``cpus`` on ``node``."""
    add_job(cluster, f"busy-{node}", running=[node], size=cpus, min_available=1)


def test_sub_groups_follow_labels_and_policy() -> None:
    """Pods are grouped by partition-id; a pod of another task or without the label is in no
    sub-group; readiness needs minSubGroups whole sub-groups."""
    cluster, _ = topology_cluster()
    job = partitioned(cluster, "a", partitions=3, size=2, minimum=2)
    stray = make_task("a", 99, {"cpu": "1"}, role="ps")
    job.add_task(stray)
    groups = sub_groups(job)
    assert [(g.key, len(g.tasks)) for g in groups] == [("0", 2), ("1", 2), ("2", 2)]
    assert sub_groups_valid(job)
    assert not sub_groups_ready(job)
    for task in [*groups[0].tasks, *groups[1].tasks[:1], *groups[2].tasks]:
        job.set_status(task, TaskStatus.RUNNING)
    assert sub_groups_ready(job)  # partitions 0 and 2 whole; 1 half
    job.set_status(groups[2].tasks[0], TaskStatus.PENDING)
    assert not sub_groups_ready(job)


def test_each_partition_lands_in_one_rack() -> None:
    """Four partitions of four 4-cpu pods (a rack each): one rack per partition, all bound."""
    cluster, where = topology_cluster()
    partitioned(cluster, "a", partitions=4, size=4, minimum=0)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    assert len(placed) == 16
    racks = racks_by_partition(placed, where, 4)
    assert all(len(r) == 1 for r in racks.values())
    assert len(set().union(*racks.values())) == 4


def test_a_partition_never_spans_racks_even_when_the_pods_would_fit() -> None:
    """Two half-free racks hold four pods between them but no whole 4-pod partition: with all
    four partitions required, nothing is placed and the wait record names the partition."""
    cluster, _ = topology_cluster()
    occupy(cluster, "n0", "8")  # rack r0: 8 of 16 cpu left
    occupy(cluster, "n2", "8")  # rack r1: 8 of 16 cpu left
    partitioned(cluster, "a", partitions=4, size=4, minimum=0)
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    assert not any(k.startswith("a-") for k in binds(ssn))
    expected = partition_text(2, 4, "worker", 4, "has no rack with room")
    assert (
        expected == "partition 3 of 4 (task worker, partition-id 2, 4 pods) has no rack with room"
    )
    record = ssn.result.podgroup_why["ns/a"]
    assert f"task worker (16 pending): {expected}" in record.details
    assert ssn.result.unschedulable["ns/a-8"] == expected
    assert expected in ssn.job_conditions["ns/a"].message


def test_min_partitions_commits_the_partitions_that_fit() -> None:
    """minPartitions 2 of 4, room for 2 whole partitions (two free racks): those two bind,
    each in one rack; the other two wait."""
    cluster, where = topology_cluster()
    for node in ("n0", "n2"):
        occupy(cluster, node, "8")
    partitioned(cluster, "a", partitions=4, size=4, minimum=2)
    placed = {k: n for k, n in binds(run(cluster, tiers=TOPOLOGY_PLUGINS)).items() if k[0] == "a"}
    racks = racks_by_partition(placed, where, 4)
    assert len(racks) == 2
    assert all(len(r) == 1 for r in racks.values())
    assert Counter(partition_of(p, 4) for p in placed) == dict.fromkeys(racks, 4)


def test_partitions_without_topology_are_still_whole() -> None:
    """Without networkTopology a partition may span racks, but is placed whole or not at all:
    10 free cpu-slots of 4 pods each hold two 4-pod partitions, not two and a half."""
    cluster, _ = topology_cluster(spines=1, racks=1, nodes=5, cpus="8")
    partitioned(cluster, "a", partitions=3, size=4, minimum=2, topology=None)
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    assert sorted(Counter(partition_of(p, 4) for p in placed).values()) == [4, 4]


def test_soft_mode_partitions_prefer_a_rack_and_span_when_none_fits() -> None:
    """Soft mode: a partition that fits no rack (every rack half used) is placed anyway,
    whole, across racks."""
    cluster, where = topology_cluster()
    for node in ("n0", "n2", "n4", "n6"):
        occupy(cluster, node, "8")
    soft = NetworkTopologySpec(mode="soft", highest_tier_name="rack")
    partitioned(cluster, "a", partitions=1, size=4, minimum=0, topology=soft)
    placed = {k: n for k, n in binds(run(cluster, tiers=TOPOLOGY_PLUGINS)).items() if k[0] == "a"}
    assert len(placed) == 4
    assert len(racks_by_partition(placed, where, 4)[0]) >= 2


def test_an_unknown_partition_tier_is_named_as_missing() -> None:
    """A partition tier name no HyperNode carries places nothing and says the tier is missing."""
    cluster, _ = topology_cluster()
    zone = NetworkTopologySpec(mode="hard", highest_tier_name="zone")
    partitioned(cluster, "a", partitions=1, size=2, minimum=0, topology=zone)
    ssn = run(cluster, tiers=TOPOLOGY_PLUGINS)
    assert binds(ssn) == {}
    assert ssn.result.unschedulable["ns/a-0"].endswith(
        "has no hypernode of tier 'zone' (no HyperNode has that tier) with room"
    )


def test_partitions_stay_within_the_jobs_hypernode() -> None:
    """A job-level hard spine tier and rack-tier partitions: both partitions in one spine,
    each in one rack of it. Rack r0 is half used, so the first free racks by name (r1, r2)
    are in different spines: the job goes to spine s1 instead."""
    cluster, where = topology_cluster()
    occupy(cluster, "n0", "8")
    job = partitioned(cluster, "a", partitions=2, size=4, minimum=0)
    assert job.podgroup is not None
    spine = NetworkTopologySpec(mode="hard", highest_tier_name="spine")
    job.podgroup = msgspec.structs.replace(
        job.podgroup,
        spec=msgspec.structs.replace(job.podgroup.spec, network_topology=spine),
    )
    placed = binds(run(cluster, tiers=TOPOLOGY_PLUGINS))
    placed = {k: n for k, n in placed.items() if k.startswith("a-")}
    assert len(placed) == 8
    assert {where[n][1] for n in placed.values()} == {"s1"}
    assert all(len(r) == 1 for r in racks_by_partition(placed, where, 4).values())
    assert len(set().union(*racks_by_partition(placed, where, 4).values())) == 2


@settings(max_examples=40, deadline=None)
@given(
    racks=st.integers(1, 4),
    nodes=st.integers(1, 3),
    used=st.lists(st.integers(0, 8), min_size=12, max_size=12),
    partitions=st.integers(1, 4),
    size=st.integers(1, 4),
    minimum=st.integers(0, 4),
    pod_cpu=st.sampled_from(["2", "4", "6"]),
)
def test_committed_partitions_are_whole_and_in_one_rack(
    racks: int,
    nodes: int,
    used: list[int],
    partitions: int,
    size: int,
    minimum: int,
    pod_cpu: str,
) -> None:
    """Whatever the cluster: every partition is bound whole within one rack or not at all,
    and a job that binds anything binds at least minPartitions whole partitions."""
    minimum = min(minimum, partitions)
    cluster, where = topology_cluster(spines=1, racks=racks, nodes=nodes)
    for i, node in enumerate(sorted(where)):
        if used[i]:
            occupy(cluster, node, str(used[i]))
    partitioned(cluster, "job", partitions=partitions, size=size, minimum=minimum, pod_cpu=pod_cpu)
    placed = {
        k: n for k, n in binds(run(cluster, tiers=TOPOLOGY_PLUGINS)).items() if k[:4] == "job-"
    }
    per_partition = Counter(partition_of(p, size) for p in placed)
    assert set(per_partition.values()) <= {size}
    assert all(len(r) == 1 for r in racks_by_partition(placed, where, size).values())
    if placed:
        assert len(per_partition) >= (minimum or partitions)
