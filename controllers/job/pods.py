"""What the job controller creates for a Job, as pure functions: its pods, the PVCs of its
``volumeClaimTemplates`` (a Caldera extension), and its PodGroup.

Names are deterministic so that reconciles are idempotent: pod ``<job>-<task>-<index>``, PodGroup
``<job>-<job uid>``, PVC ``<template>-<pod>``, job-level volume ``<job>-<digest of its mount
path>`` (Volcano draws a random suffix; a digest names the same volume on every reconcile).
Anyone can make such a name first, so an existing object is the Job's only if its controller
reference carries the Job's UID (``caldera.api.ownership``); the I/O layer checks that.
Pods are plain dicts built from the task's pod template, which is passed on whole.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from caldera.api import volcano as v
from caldera.api.codec import copy_json
from caldera.api.kinds import JOB, controller_reference
from caldera.api.meta import LabelSelector, ObjectMeta, OwnerReference, ResourceList
from caldera.api.names import pod_name, pvc_name
from caldera.api.resources import Resources, pod_requests
from caldera.api.volcano import Job, PodGroup, PodGroupSpec, SubGroupPolicy, TaskSpec
from controllers.job.sync import task_min_available

DEFAULT_TASK_SPEC = "default"
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)

# Copied from the Job's annotations onto each pod (Volcano's list, §1.6).
_COPIED_ANNOTATIONS = (v.PREEMPTABLE_KEY, v.COOLDOWN_TIME_KEY, v.REVOCABLE_ZONE_KEY)
_COPIED_LABELS = (v.PREEMPTABLE_KEY, v.COOLDOWN_TIME_KEY)


def podgroup_name(job: Job) -> str:
    return f"{job.metadata.name}-{job.metadata.uid}"


def job_owner(job: Job) -> OwnerReference:
    """The controller reference every object the Job owns carries (GC deletes them with it)."""
    return controller_reference(JOB, job.metadata)


def owner_dict(job: Job) -> dict[str, Any]:
    """``job_owner`` as the plain dict that objects built as dicts carry."""
    owner: dict[str, Any] = msgspec.to_builtins(job_owner(job))
    return owner


def _mount_digest(mount_path: str) -> str:
    return hashlib.sha256(mount_path.encode()).hexdigest()[:12]


def job_volume_name(job_name: str, mount_path: str) -> str:
    """The pod volume of a job-level volume: ``<job>-<digest of its mount path>``."""
    return f"{job_name}-{_mount_digest(mount_path)}"


def job_volume_claim_name(job_name: str, mount_path: str) -> str:
    """The PVC made from a job-level ``volumeClaim``: ``<job>-pvc-<digest of its mount path>``
    (written back into the spec as its volumeClaimName)."""
    return f"{job_name}-pvc-{_mount_digest(mount_path)}"


def build_job_volume_claim(job: Job, name: str, spec: Any) -> dict[str, Any]:
    """The PVC ``name`` of a job-level volume's claim template ``spec``, owned by the Job."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "ownerReferences": [owner_dict(job)],
        },
        "spec": spec,
    }


def invalid_pvc_name(name: str) -> str | None:
    """Why ``name`` cannot name a PVC (a DNS subdomain of at most 253 characters), or None."""
    if len(name) > 253:
        return f"PVC name {name!r} is {len(name)} characters long; at most 253 are allowed"
    if not _DNS1123_SUBDOMAIN.match(name):
        return f"PVC name {name!r} is not a lowercase DNS subdomain"
    return None


def task_spec_name(task: TaskSpec) -> str:
    return task.name or DEFAULT_TASK_SPEC


@dataclass(frozen=True)
class PodPlan:
    """A pod to create and the PVCs that must exist before it."""

    pod: dict[str, Any]
    pvcs: tuple[dict[str, Any], ...]


def build_pod(job: Job, task: TaskSpec, index: int) -> PodPlan:
    """The pod ``index`` of ``task``, before plugins mutate it.

    Labels and annotations as Volcano sets them; the Job's schedulerName and priorityClassName
    where the template names none; job-level volumes mounted in every container; one PVC per
    volumeClaimTemplate unless the template already has a volume of that name.
    """
    template = copy_json(job_template(task))
    meta: dict[str, Any] = template.get("metadata") or {}
    spec: dict[str, Any] = template.get("spec") or {}
    job_name, namespace = job.metadata.name, job.metadata.namespace
    name = pod_name(job_name, task.name, index)
    ts_name = task_spec_name(task)

    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    annotations.update(
        {
            v.TASK_INDEX_KEY: str(index),
            v.TASK_SPEC_KEY: ts_name,
            v.KUBE_GROUP_NAME_KEY: podgroup_name(job),
            v.JOB_NAME_KEY: job_name,
            v.QUEUE_NAME_KEY: job.spec.queue,
            v.JOB_VERSION_KEY: str(job.status.version),
            v.TEMPLATE_UID_KEY: f"{job_name}-{task.name}",
            v.JOB_RETRY_COUNT_KEY: str(job.status.retry_count),
        }
    )
    if task.topology_policy:
        annotations[v.NUMA_TOPOLOGY_POLICY_KEY] = task.topology_policy
    for key in _COPIED_ANNOTATIONS:
        if key in job.metadata.annotations:
            annotations[key] = job.metadata.annotations[key]
    if v.JDB_MIN_AVAILABLE_KEY in job.metadata.annotations:
        annotations[v.JDB_MIN_AVAILABLE_KEY] = job.metadata.annotations[v.JDB_MIN_AVAILABLE_KEY]
    elif v.JDB_MAX_UNAVAILABLE_KEY in job.metadata.annotations:
        annotations[v.JDB_MAX_UNAVAILABLE_KEY] = job.metadata.annotations[v.JDB_MAX_UNAVAILABLE_KEY]

    labels: dict[str, str] = dict(meta.get("labels") or {})
    labels.update(
        {
            v.TASK_INDEX_KEY: str(index),
            v.JOB_NAME_KEY: job_name,
            v.TASK_SPEC_KEY: ts_name,
            v.JOB_NAMESPACE_KEY: namespace,
            v.QUEUE_NAME_KEY: job.spec.queue,
        }
    )
    for key in _COPIED_LABELS:
        if key in job.metadata.labels:
            labels[key] = job.metadata.labels[key]
    partition = partition_of(task, index)
    if partition is not None:
        labels[v.PARTITION_ID_KEY] = str(partition)

    if not spec.get("schedulerName") and job.spec.scheduler_name:
        spec["schedulerName"] = job.spec.scheduler_name
    if not spec.get("priorityClassName") and job.spec.priority_class_name:
        spec["priorityClassName"] = job.spec.priority_class_name

    volumes: list[dict[str, Any]] = list(spec.get("volumes") or [])
    existing = {vol.get("name") for vol in volumes}
    for volume in job.spec.volumes:
        vol_name = job_volume_name(job_name, volume.mount_path)
        if vol_name not in existing:
            claim = volume.volume_claim_name
            volumes.append({"name": vol_name, "persistentVolumeClaim": {"claimName": claim}})
            existing.add(vol_name)
        for container in spec.get("containers") or []:
            mounts = container.setdefault("volumeMounts", [])
            if not any(m.get("name") == vol_name for m in mounts):
                mounts.append({"name": vol_name, "mountPath": volume.mount_path})

    pvcs: list[dict[str, Any]] = []
    for claim_template in task.volume_claim_templates:
        tname = claim_template.metadata.name
        if tname in existing:
            continue  # the pod template's own volume of that name wins
        claim = pvc_name(tname, name)
        volumes.append({"name": tname, "persistentVolumeClaim": {"claimName": claim}})
        existing.add(tname)
        pvcs.append(build_template_pvc(job, claim_template, claim, task.name, index))
    if volumes:
        spec["volumes"] = volumes

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_dict(job)],
        },
        "spec": spec,
    }
    return PodPlan(pod=pod, pvcs=tuple(pvcs))


def job_template(task: TaskSpec) -> dict[str, Any]:
    return task.template or {}


def build_template_pvc(
    job: Job, template: v.VolumeClaimTemplate, name: str, task_name: str, index: int
) -> dict[str, Any]:
    """The PVC of one pod and one volumeClaimTemplate, owned by the Job (kept across pod
    restarts, deleted with the Job)."""
    labels = dict(template.metadata.labels)
    labels.update(
        {
            v.JOB_NAME_KEY: job.metadata.name,
            v.JOB_NAMESPACE_KEY: job.metadata.namespace,
            v.TASK_SPEC_KEY: task_name or DEFAULT_TASK_SPEC,
            v.TASK_INDEX_KEY: str(index),
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": job.metadata.namespace,
            "labels": labels,
            "annotations": dict(template.metadata.annotations),
            "ownerReferences": [owner_dict(job)],
        },
        "spec": copy_json(template.spec),
    }


def task_request(task: TaskSpec) -> Resources:
    return pod_requests((task.template or {}).get("spec") or {})


def min_resources(job: Job, priority_of: Callable[[str], int]) -> Resources:
    """The resources the gang needs before it may start (Volcano's calcPGMinResources).

    Tasks are taken highest PriorityClass first. If the Job's minAvailable is below the sum of
    the tasks' minAvailable, the first minAvailable pods in that order count; otherwise each
    task's minAvailable pods count, and the rest up to minAvailable is filled from the remaining
    replicas, higher priority first.
    """

    def priority(task: TaskSpec) -> int:
        spec = (task.template or {}).get("spec") or {}
        return priority_of(spec.get("priorityClassName") or job.spec.priority_class_name)

    tasks = sorted(job.spec.tasks, key=priority, reverse=True)
    wanted = job.spec.min_available
    total = Resources()
    if wanted < sum(task_min_available(t) for t in tasks):
        left = wanted
        for task in tasks:
            take = min(left, task.replicas)
            total = total + task_request(task).multiply(take)
            left -= take
            if left <= 0:
                break
        return total
    counted = 0
    for task in tasks:
        take = min(task_min_available(task), task.replicas)
        total = total + task_request(task).multiply(take)
        counted += take
    for task in tasks:
        if counted >= wanted:
            break
        extra = min(task.replicas - min(task_min_available(task), task.replicas), wanted - counted)
        if extra > 0:
            total = total + task_request(task).multiply(extra)
            counted += extra
    return total


def partition_of(task: TaskSpec, index: int) -> int | None:
    """The partition of the task's pod ``index`` (Volcano's ``createJobPod``: pods
    ``k*partitionSize .. (k+1)*partitionSize-1`` form partition k, the pod's
    ``volcano.sh/partition-id`` label), None for a task without partitionPolicy."""
    policy = task.partition_policy
    if policy is None:
        return None
    return index // policy.partition_size if policy.partition_size > 0 else 0


def sub_group_policy(task: TaskSpec) -> SubGroupPolicy | None:
    """The PodGroup's subGroupPolicy for a partitioned task (Volcano's ``getSubGroupPolicy``):
    named after the task, its pods selected by ``volcano.sh/task-spec`` and grouped by
    ``volcano.sh/partition-id``, each group partitionSize pods, minPartitions of them needed."""
    policy = task.partition_policy
    if policy is None:
        return None
    return SubGroupPolicy(
        name=task.name,
        network_topology=policy.network_topology,
        sub_group_size=policy.partition_size,
        min_sub_groups=policy.min_partitions,
        label_selector=LabelSelector(match_labels={v.TASK_SPEC_KEY: task.name}),
        match_label_keys=(v.PARTITION_ID_KEY,),
    )


def sub_group_policies(job: Job) -> tuple[SubGroupPolicy, ...]:
    """One subGroupPolicy per partitioned task, in task order."""
    return tuple(p for t in job.spec.tasks if (p := sub_group_policy(t)) is not None)


def build_podgroup(job: Job, priority_of: Callable[[str], int]) -> PodGroup:
    """The Job's PodGroup: its labels and annotations, minMember, minTaskMember, queue,
    priorityClassName, minResources and networkTopology, and a subGroupPolicy per partitioned
    task, owned by the Job."""
    return PodGroup(
        metadata=ObjectMeta(
            name=podgroup_name(job),
            namespace=job.metadata.namespace,
            labels=dict(job.metadata.labels),
            annotations=dict(job.metadata.annotations),
            owner_references=(job_owner(job),),
        ),
        spec=PodGroupSpec(
            min_member=job.spec.min_available,
            min_task_member={t.name: task_min_available(t) for t in job.spec.tasks},
            queue=job.spec.queue,
            priority_class_name=job.spec.priority_class_name,
            min_resources=_resource_list(min_resources(job, priority_of)),
            network_topology=job.spec.network_topology,
            sub_group_policy=sub_group_policies(job),
        ),
    )


def _resource_list(resources: Resources) -> ResourceList | None:
    listed: ResourceList = dict(resources.to_list())
    return listed or None


def podgroup_drift(current: PodGroupSpec, desired: PodGroupSpec) -> dict[str, Any]:
    """The merge patch that brings an existing PodGroup's spec in line with the Job (what keeps
    scale up and down working), or {} when nothing differs."""
    if current is desired:  # the spec the controller wrote, read back: every sync asks
        return {}
    patch: dict[str, Any] = {}
    if current.min_member != desired.min_member:
        patch["minMember"] = desired.min_member
    if dict(current.min_task_member) != dict(desired.min_task_member):
        patch["minTaskMember"] = dict(desired.min_task_member)
    if current.priority_class_name != desired.priority_class_name:
        patch["priorityClassName"] = desired.priority_class_name
    # Quantities are compared by value ("1" and "1000m" are equal) when the strings differ.
    if (current.min_resources or {}) != (desired.min_resources or {}) and Resources.from_list(
        current.min_resources or {}
    ) != Resources.from_list(desired.min_resources or {}):
        patch["minResources"] = desired.min_resources
    # Volcano's updatePgSubGroupPolicy: partitionPolicy may change with the Job (a merge
    # patch replaces the whole list).
    if current.sub_group_policy != desired.sub_group_policy:
        patch["subGroupPolicy"] = msgspec.to_builtins(desired.sub_group_policy)
    return {"spec": patch} if patch else {}


def priority_lookup(values: Mapping[str, int], default: int = 0) -> Callable[[str], int]:
    """A PriorityClass name -> value function over a snapshot of the cluster's classes."""
    return lambda name: values.get(name, default) if name else default
