"""The job controller's partitions (Volcano v1.14 partitionPolicy): pod labels, the PodGroup's
subGroupPolicy, and RestartPartition restarting one partition."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api import volcano as v
from caldera.api.core import Pod, PodStatus
from caldera.api.meta import LabelSelector, ObjectMeta, OwnerReference
from caldera.api.volcano import (
    Action,
    Event,
    Job,
    JobPhase,
    JobSpec,
    JobState,
    JobStatus,
    NetworkTopologySpec,
    PartitionPolicy,
    SubGroupPolicy,
    TaskSpec,
)
from controllers.job.events import Request, on_pod_update
from controllers.job.pods import (
    build_pod,
    build_podgroup,
    partition_of,
    podgroup_drift,
    priority_lookup,
)
from controllers.job.policy import Decision, DelayedActions, target_of
from controllers.job.state import Step, Target, TargetKind, kill_victims, plan

RACK = NetworkTopologySpec(mode="hard", highest_tier_name="rack")


def _task(total: int = 3, size: int = 2, minimum: int = 0, name: str = "w") -> TaskSpec:
    return TaskSpec(
        name=name,
        replicas=total * size,
        template={"spec": {"containers": [{"name": "c", "image": "i"}]}},
        partition_policy=PartitionPolicy(
            total_partitions=total,
            partition_size=size,
            min_partitions=minimum,
            network_topology=RACK,
        ),
    )


def _job(*tasks: TaskSpec) -> Job:
    return Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="uid-1"),
        spec=JobSpec(tasks=tasks, min_available=4),
        status=JobStatus(state=JobState(phase=JobPhase.RUNNING)),
    )


def test_pods_carry_their_partition_by_index() -> None:
    """Pods k*size .. (k+1)*size-1 of a partitioned task are labelled partition k (Volcano's
    createJobPod); a task without partitionPolicy gets no such label."""
    job = _job(_task(total=3, size=2), TaskSpec(name="ps", replicas=1))
    ids = [
        build_pod(job, job.spec.tasks[0], i).pod["metadata"]["labels"][v.PARTITION_ID_KEY]
        for i in range(6)
    ]
    assert ids == ["0", "0", "1", "1", "2", "2"]
    assert v.PARTITION_ID_KEY not in build_pod(job, job.spec.tasks[1], 0).pod["metadata"]["labels"]
    assert partition_of(job.spec.tasks[1], 0) is None


@given(total=st.integers(1, 20), size=st.integers(1, 20))
def test_partitions_are_contiguous_runs_of_partition_size(total: int, size: int) -> None:
    """For any totalPartitions x partitionSize, the pods' partition ids are 0..total-1, each
    held by exactly partitionSize consecutive pods."""
    task = _task(total=total, size=size)
    ids = [partition_of(task, i) or 0 for i in range(task.replicas)]
    assert ids == sorted(ids)
    assert {i: ids.count(i) for i in set(ids)} == dict.fromkeys(range(total), size)


def test_podgroup_gets_one_sub_group_policy_per_partitioned_task() -> None:
    """subGroupPolicy is Volcano's getSubGroupPolicy: named after the task, pods selected by
    task-spec and grouped by partition-id, size partitionSize, minSubGroups minPartitions, the
    partition's networkTopology."""
    job = _job(TaskSpec(name="ps", replicas=1), _task(total=4, size=2, minimum=3))
    pg = build_podgroup(job, priority_lookup({}))
    assert pg.spec.sub_group_policy == (
        SubGroupPolicy(
            name="w",
            network_topology=RACK,
            sub_group_size=2,
            min_sub_groups=3,
            label_selector=LabelSelector(match_labels={v.TASK_SPEC_KEY: "w"}),
            match_label_keys=(v.PARTITION_ID_KEY,),
        ),
    )
    unpartitioned = build_podgroup(_job(TaskSpec(name="ps", replicas=1)), priority_lookup({}))
    assert unpartitioned.spec.sub_group_policy == ()


def test_podgroup_drift_follows_a_changed_partition_policy() -> None:
    """A changed partitionPolicy patches the whole subGroupPolicy list; an equal one nothing."""
    before = build_podgroup(_job(_task(minimum=1)), priority_lookup({})).spec
    after = build_podgroup(_job(_task(minimum=2)), priority_lookup({})).spec
    patch = podgroup_drift(before, after)
    assert patch["spec"]["subGroupPolicy"][0]["minSubGroups"] == 2
    assert podgroup_drift(after, msgspec.structs.replace(after)) == {}
    dropped = podgroup_drift(after, msgspec.structs.replace(after, sub_group_policy=()))
    assert dropped == {"spec": {"subGroupPolicy": ()}}


def _pod(index: int, *, task: str = "w", size: int = 2, phase: str = "Running") -> Pod:
    labels = {v.TASK_SPEC_KEY: task, v.PARTITION_ID_KEY: str(index // size)}
    annotations = {
        v.TASK_SPEC_KEY: task,
        v.JOB_NAME_KEY: "j",
        v.JOB_VERSION_KEY: "0",
    }
    return Pod(
        metadata=ObjectMeta(
            name=f"j-{task}-{index}",
            namespace="ns",
            uid=f"p{index}",
            labels=labels,
            annotations=annotations,
            owner_references=(
                msgspec.convert(
                    {
                        "apiVersion": v.BATCH_API_VERSION,
                        "kind": "Job",
                        "name": "j",
                        "uid": "uid-1",
                        "controller": True,
                    },
                    type=OwnerReference,
                ),
            ),
        ),
        status=PodStatus(phase=phase),
    )


def test_a_failed_pods_request_carries_its_partition() -> None:
    """The request of a pod that failed names its partition (Volcano's GetPartitionID)."""
    request = on_pod_update(
        _pod(3), _pod(3, phase="Failed"), task_pods=(), task_max_retry=3, task_replicas=6
    )
    assert request is not None
    assert (request.event, request.partition_id) == (Event.POD_FAILED, "1")


def test_restart_partition_targets_the_failed_pods_partition() -> None:
    """RestartPartition targets the request's partition; without one, the task; without a
    task, the Job."""
    with_partition = Request("ns", "j", task_name="w", pod_name="j-w-3", partition_id="1")
    assert target_of(Action.RESTART_PARTITION, with_partition) == (
        Action.RESTART_PARTITION,
        Target.of_partition("w", "1"),
    )
    no_partition = Request("ns", "j", task_name="w", pod_name="j-w-3")
    assert target_of(Action.RESTART_PARTITION, no_partition)[1] == Target.of_task("w")
    assert target_of(Action.RESTART_PARTITION, Request("ns", "j"))[0] is Action.RESTART_JOB


@pytest.mark.parametrize("phase", [JobPhase.RUNNING, JobPhase.PENDING])
def test_restart_partition_kills_only_that_partitions_pods(phase: JobPhase) -> None:
    """The kill deletes the pods of the task's partition only: not the other partitions, not
    another task's pods with the same partition id; the Job goes Restarting."""
    job = msgspec.structs.replace(
        _job(_task(), _task(name="x")), status=JobStatus(state=JobState(phase=phase))
    )
    pods = [_pod(i) for i in range(6)] + [_pod(i, task="x") for i in range(6)]
    p = plan(job, Action.RESTART_PARTITION, Target.of_partition("w", "1"))
    assert p.step is Step.KILL_TARGET
    assert p.target.kind is TargetKind.PARTITION
    assert p.phase is JobPhase.RESTARTING
    assert [pod.metadata.name for pod in kill_victims(p, pods)] == ["j-w-2", "j-w-3"]


def test_a_partition_restart_cancels_only_that_partitions_delayed_actions() -> None:
    """Once a RestartPartition ran, the delayed actions of its partition are cancelled, those of
    the task's other partitions are kept."""
    delayed = DelayedActions()
    same = Request(
        "ns", "j", task_name="w", pod_name="j-w-2", partition_id="1", event=Event.POD_FAILED
    )
    other = Request(
        "ns", "j", task_name="w", pod_name="j-w-4", partition_id="2", event=Event.POD_FAILED
    )
    restart = Decision(Action.RESTART_PARTITION, 5.0, Target.of_partition("w", "1"))
    first = delayed.schedule(same, restart)
    second = delayed.schedule(other, restart)
    assert first is not None
    assert second is not None
    gone = delayed.on_action_ran("ns/j", Decision(Action.RESTART_PARTITION, None, restart.target))
    assert [a.token for a in gone] == [first.token]
    assert [a.token for a in delayed.pending("ns/j")] == [second.token]
