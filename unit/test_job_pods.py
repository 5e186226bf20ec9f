"""The objects the job controller builds for a Job: pods, per-pod PVCs from volumeClaimTemplates,
and the PodGroup with its minResources (pure functions)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import yaml

from caldera.api import volcano as v
from caldera.api.meta import ObjectMeta, TemplateMeta
from caldera.api.resources import Resources
from caldera.api.volcano import Job, JobSpec, JobStatus, TaskSpec, VolumeClaimTemplate, VolumeSpec
from controllers.job.pods import (
    build_pod,
    build_podgroup,
    invalid_pvc_name,
    job_volume_name,
    min_resources,
    podgroup_drift,
    podgroup_name,
    priority_lookup,
)
from unit.examples import EXAMPLES


def _tf_job() -> Job:
    raw = yaml.safe_load(
        (EXAMPLES / "integrations_tensorflow_dist-mnist_tf-dist-mnist-example.yaml").read_text()
    )
    raw["metadata"].update(
        {"namespace": "ml", "uid": "u-1", "annotations": {v.PREEMPTABLE_KEY: "false"}}
    )
    return msgspec.convert(raw, Job)


def _task(
    name: str, replicas: int, cpu: str, *, min_available: int | None = None, pc: str = ""
) -> TaskSpec:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    }
    if pc:
        spec["priorityClassName"] = pc
    return TaskSpec(
        name=name, replicas=replicas, min_available=min_available, template={"spec": spec}
    )


def _job(*tasks: TaskSpec, min_available: int, **spec: Any) -> Job:
    return Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="uid-9"),
        spec=JobSpec(tasks=tasks, min_available=min_available, **spec),
    )


def test_pod_has_volcano_names_labels_annotations_and_owner() -> None:
    """A pod is <job>-<task>-<index> with Volcano's labels and annotations and a controller
    reference to its Job; the Job's schedulerName fills an empty template field."""
    job = msgspec.structs.replace(_tf_job(), status=JobStatus(version=2, retry_count=1))
    pod = build_pod(job, job.spec.tasks[1], 1).pod
    meta = pod["metadata"]
    assert meta["name"] == "tensorflow-dist-mnist-worker-1"
    assert meta["namespace"] == "ml"
    assert {
        v.TASK_INDEX_KEY: "1",
        v.TASK_SPEC_KEY: "worker",
        v.KUBE_GROUP_NAME_KEY: "tensorflow-dist-mnist-u-1",
        v.JOB_NAME_KEY: "tensorflow-dist-mnist",
        v.QUEUE_NAME_KEY: "default",
        v.JOB_VERSION_KEY: "2",
        v.TEMPLATE_UID_KEY: "tensorflow-dist-mnist-worker",
        v.JOB_RETRY_COUNT_KEY: "1",
        v.PREEMPTABLE_KEY: "false",
    }.items() <= meta["annotations"].items()
    assert {
        v.TASK_INDEX_KEY: "1",
        v.JOB_NAME_KEY: "tensorflow-dist-mnist",
        v.TASK_SPEC_KEY: "worker",
        v.JOB_NAMESPACE_KEY: "ml",
        v.QUEUE_NAME_KEY: "default",
    }.items() <= meta["labels"].items()
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", "u-1", True)
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["spec"]["containers"][0]["image"] == "volcanosh/dist-mnist-tf-example:0.0.1"


def test_build_pod_does_not_mutate_the_job_template() -> None:
    """Building pods leaves the Job's template untouched (the cache is shared)."""
    job = _job(
        _task("t", 1, "1"),
        min_available=1,
        volumes=(VolumeSpec(mount_path="/data", volume_claim_name="d"),),
    )
    before = msgspec.json.encode(job)
    build_pod(job, job.spec.tasks[0], 0)
    assert msgspec.json.encode(job) == before


def test_job_volumes_are_mounted_in_every_container() -> None:
    """Each job-level volume becomes a PVC volume mounted at its path in every container."""
    task = TaskSpec(
        name="t",
        replicas=1,
        template={
            "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}
        },
    )
    job = _job(
        task, min_available=1, volumes=(VolumeSpec(mount_path="/data", volume_claim_name="shared"),)
    )
    spec = build_pod(job, task, 0).pod["spec"]
    name = job_volume_name("j", "/data")
    assert {"name": name, "persistentVolumeClaim": {"claimName": "shared"}} in spec["volumes"]
    for container in spec["containers"]:
        assert {"name": name, "mountPath": "/data"} in container["volumeMounts"]


def test_volume_claim_templates_give_one_pvc_per_pod_unless_overridden() -> None:
    """A template gives PVC <template>-<pod> owned by the Job; a template volume of the same
    name in the pod template wins and gives no PVC."""
    templates = (
        VolumeClaimTemplate(
            metadata=TemplateMeta(name="data"), spec={"resources": {"requests": {"storage": "1Gi"}}}
        ),
        VolumeClaimTemplate(metadata=TemplateMeta(name="scratch"), spec={}),
    )
    task = TaskSpec(
        name="w",
        replicas=2,
        volume_claim_templates=templates,
        template={
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "i",
                        "volumeMounts": [{"name": "data", "mountPath": "/d"}],
                    }
                ],
                "volumes": [{"name": "scratch", "emptyDir": {}}],
            }
        },
    )
    plan = build_pod(_job(task, min_available=2), task, 1)
    assert [p["metadata"]["name"] for p in plan.pvcs] == ["data-j-w-1"]
    pvc = plan.pvcs[0]
    assert pvc["spec"] == {"resources": {"requests": {"storage": "1Gi"}}}
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "uid-9"
    volumes = {vol["name"]: vol for vol in plan.pod["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "persistentVolumeClaim": {"claimName": "data-j-w-1"}}
    assert volumes["scratch"] == {"name": "scratch", "emptyDir": {}}


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("data-j-w-1", None),
        ("x" * 253, None),
        ("x" * 254, "at most 253"),
        ("Data-j", "DNS subdomain"),
        ("data_j", "DNS subdomain"),
    ],
)
def test_invalid_pvc_names_are_explained(name: str, problem: str | None) -> None:
    """A PVC name must be a lowercase DNS subdomain of at most 253 characters."""
    reason = invalid_pvc_name(name)
    if problem is None:
        assert reason is None
    else:
        assert reason is not None
        assert problem in reason


def test_podgroup_carries_gang_and_job_metadata() -> None:
    """The PodGroup is <job>-<uid> with minMember, minTaskMember, queue and the Job's labels."""
    job = _job(
        _task("ps", 2, "1"), _task("worker", 4, "2", min_available=3), min_available=5, queue="q1"
    )
    job = msgspec.structs.replace(
        job, metadata=msgspec.structs.replace(job.metadata, labels={"a": "b"})
    )
    pg = build_podgroup(job, priority_lookup({}))
    assert pg.metadata.name == podgroup_name(job) == "j-uid-9"
    assert pg.metadata.labels == {"a": "b"}
    assert pg.metadata.owner_references[0].uid == "uid-9"
    assert pg.spec.min_member == 5
    assert pg.spec.min_task_member == {"ps": 2, "worker": 3}
    assert pg.spec.queue == "q1"
    # 2 ps x 1 cpu + 3 workers x 2 cpu = 8 cpu
    assert Resources.from_list(pg.spec.min_resources or {}) == Resources.from_list({"cpu": "8"})


@pytest.mark.parametrize(
    ("min_available", "expected_cpu"),
    [
        # below the tasks' sum (3+1=4): the first pods by priority, high (2 cpu each) first
        (1, "2"),
        (2, "4"),
        (3, "4100m"),
        # equal to the sum: each task's minAvailable
        (4, "1"),
    ],
)
def test_min_resources_follow_priority_order(min_available: int, expected_cpu: str) -> None:
    """minResources takes the highest-priority task's pods first when minAvailable is below the
    tasks' minimums, else each task's minAvailable pods."""
    low = _task("low", 3, "100m", min_available=3, pc="low")
    high = _task("high", 2, "2", min_available=1, pc="high")
    job = _job(low, high, min_available=min_available)
    got = min_resources(job, priority_lookup({"high": 1000, "low": 1}))
    if min_available == 4:
        expected = Resources.from_list({"cpu": "2300m"})  # 3 x 100m + 1 x 2
    else:
        expected = Resources.from_list({"cpu": expected_cpu})
    assert got == expected


def test_min_resources_fill_up_from_remaining_replicas() -> None:
    """Above the tasks' minimums, the rest up to minAvailable comes from spare replicas."""
    a = _task("a", 3, "1", min_available=1, pc="high")
    b = _task("b", 3, "10", min_available=1, pc="low")
    job = _job(a, b, min_available=4)
    got = min_resources(job, priority_lookup({"high": 10, "low": 1}))
    # minimums: 1 + 10; then 2 more replicas of the higher-priority task a: 2 x 1
    assert got == Resources.from_list({"cpu": "13"})


def test_podgroup_drift_patches_only_what_changed() -> None:
    """Scaling a task changes minTaskMember; raising minAvailable changes minMember and
    minResources; nothing else is patched."""
    before = build_podgroup(_job(_task("w", 2, "1"), min_available=2), priority_lookup({}))
    scaled = build_podgroup(_job(_task("w", 4, "1"), min_available=2), priority_lookup({}))
    raised = build_podgroup(_job(_task("w", 4, "1"), min_available=4), priority_lookup({}))
    assert podgroup_drift(before.spec, before.spec) == {}
    assert podgroup_drift(before.spec, scaled.spec) == {"spec": {"minTaskMember": {"w": 4}}}
    assert podgroup_drift(scaled.spec, raised.spec) == {
        "spec": {"minMember": 4, "minResources": {"cpu": "4"}}
    }
    # The same spec written another way (a copy; quantities equal by value) is no drift.
    copy = msgspec.structs.replace(before.spec, min_resources={"cpu": "2000m"})
    assert podgroup_drift(copy, before.spec) == {}
    assert podgroup_drift(msgspec.structs.replace(copy, min_resources={"cpu": "3"}), before.spec)
