"""`caldera job view` for a job with partitions: each pod's partition, and how many
partitions of each partitioned task are placed (cli.output.partition_lines)."""

from __future__ import annotations

import datetime as dt

from caldera.api import volcano as v
from caldera.api.core import Pod, PodSpec, PodStatus
from caldera.api.meta import LabelSelector, ObjectMeta
from caldera.api.volcano import (
    Job,
    JobSpec,
    NetworkTopologySpec,
    PodGroup,
    PodGroupSpec,
    SubGroupPolicy,
    TaskSpec,
)
from cli import output

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _pod(index: int, node: str, phase: str = "Running") -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=f"train-worker-{index}",
            namespace="ml",
            labels={v.TASK_SPEC_KEY: "worker", v.PARTITION_ID_KEY: str(index // 2)},
        ),
        spec=PodSpec(node_name=node),
        status=PodStatus(phase=phase),
    )


def _podgroup() -> PodGroup:
    policy = SubGroupPolicy(
        name="worker",
        network_topology=NetworkTopologySpec(mode="hard", highest_tier_name="rack"),
        sub_group_size=2,
        min_sub_groups=2,
        label_selector=LabelSelector(match_labels={v.TASK_SPEC_KEY: "worker"}),
        match_label_keys=(v.PARTITION_ID_KEY,),
    )
    return PodGroup(
        metadata=ObjectMeta(name="train-uid", namespace="ml"),
        spec=PodGroupSpec(min_member=4, sub_group_policy=(policy,)),
    )


def test_job_view_shows_partitions_placed_and_each_pods_partition() -> None:
    """Partitions 0 and 1 have both pods on a node, partition 2 one pod only (the other
    pending), so 2 of 3 are placed; the Pods table gains a Partition column."""
    pods = [_pod(0, "n0"), _pod(1, "n1"), _pod(2, "n2"), _pod(3, "n2"), _pod(4, "n3")]
    pods.append(_pod(5, "", phase="Pending"))
    job = Job(
        metadata=ObjectMeta(name="train", namespace="ml"),
        spec=JobSpec(tasks=(TaskSpec(name="worker", replicas=6),)),
    )
    text = output.render_job_view(job, podgroup=_podgroup(), pods=pods, events=[], now=NOW)
    lines = text.splitlines()
    assert (
        "  Partitions worker: 2 of 3 placed (minSubGroups 2, 2 pods each), network topology "
        "hard mode, tier 'rack'; not placed: 2"
    ) in lines
    table = lines[lines.index("Pods:") + 1 :]
    assert table[0].split() == ["Name", "Ready", "Status", "Restart", "Node", "Partition", "Age"]
    assert table[6].split()[:6] == ["train-worker-5", "0/0", "Pending", "0", "<none>", "2"]


def test_job_view_of_a_job_without_partitions_has_no_partition_column() -> None:
    """No partition label, no subGroupPolicy: the view is as before."""
    pod = Pod(metadata=ObjectMeta(name="p", namespace="ml"), spec=PodSpec(node_name="n0"))
    job = Job(metadata=ObjectMeta(name="train", namespace="ml"))
    podgroup = PodGroup(metadata=ObjectMeta(name="train-uid", namespace="ml"))
    text = output.render_job_view(job, podgroup=podgroup, pods=[pod], events=[], now=NOW)
    assert "Partition" not in text
