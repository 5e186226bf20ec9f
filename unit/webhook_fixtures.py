"""Builders of Jobs, Queues and AdmissionReviews shared by the webhook unit tests and benchmark."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import msgspec

from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Job, Queue, QueueSpec, QueueStatus


def container(name: str = "main", cpu: str = "1", **extra: Any) -> dict[str, Any]:
    """A container with an image and a cpu/memory request."""
    return {
        "name": name,
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
        **extra,
    }


def task(name: str = "worker", replicas: int = 2, **extra: Any) -> dict[str, Any]:
    """A task with a one-container template."""
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"containers": [container()], "restartPolicy": "Never"}},
        **extra,
    }


def job_dict(name: str = "train", **spec: Any) -> dict[str, Any]:
    """A valid job as a user writes it (after the CRD defaults): override any spec field."""
    body: dict[str, Any] = {"queue": "default", "tasks": [task()], **spec}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": body,
    }


def three_task_job() -> dict[str, Any]:
    """A realistic pytorch job: master, workers and an evaluator, with policies and plugins."""
    return job_dict(
        "pytorch-train",
        minAvailable=0,
        plugins={"pytorch": ["--master=master", "--worker=worker", "--port=23456"], "env": []},
        policies=[{"event": "PodEvicted", "action": "RestartJob"}],
        tasks=[
            task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
            task("worker", 8, policies=[{"exitCode": 137, "action": "RestartTask"}]),
            task("evaluator", 1, dependsOn={"name": ["master"]}),
        ],
    )


def to_job(data: dict[str, Any]) -> Job:
    """Decode a dict as the webhook decodes the review's object."""
    return msgspec.json.decode(msgspec.json.encode(data), type=Job)


def queue(
    name: str,
    *,
    parent: str = "",
    state: str = "Open",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Queue:
    """A queue model with the given spec fields (python names)."""
    return Queue(
        metadata=ObjectMeta(name=name, annotations=annotations or {}),
        spec=QueueSpec(parent=parent, **spec),
        status=QueueStatus(state=state),
    )


def review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    group: str = "batch.volcano.sh",
    version: str = "v1alpha1",
    kind: str = "Job",
    namespace: str = "ns",
) -> dict[str, Any]:
    """An AdmissionReview request as the API server sends it."""
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": namespace,
        "name": _name(obj) or _name(old),
        "userInfo": {"username": "admin"},
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""
