"""bench/_clusters.py: the scheduler benches' one way to build nodes and gangs."""

from __future__ import annotations

import datetime as dt

from bench._clusters import NODE_ALLOCATABLE, T0, empty_cluster, gang_job, node_object
from caldera.api.core import Pod
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from scheduler.api.types import TaskStatus


def test_empty_cluster_has_the_nodes_and_the_default_queue() -> None:
    alloc = Resources.from_list({"cpu": "16"})
    cluster = empty_cluster(["a", "b"], alloc)
    assert list(cluster.nodes) == ["a", "b"]
    assert cluster.nodes["a"].allocatable == alloc
    assert list(cluster.queues) == ["default"]
    assert cluster.now == T0


def test_gang_job_is_a_whole_gang_of_pending_tasks() -> None:
    request = Resources.from_list({"cpu": "1"})

    def pod(name: str, uid: str) -> Pod:
        return Pod(metadata=ObjectMeta(name=name, namespace="bench", uid=uid))

    created = T0 + dt.timedelta(seconds=3)
    job = gang_job("job-0", 2, request, created=created, uid_prefix="uid-", pod=pod)
    assert (job.key, job.min_available, job.creation, job.phase) == (
        "bench/job-0",
        2,
        created,
        "Inqueue",
    )
    tasks = sorted(job.tasks.values(), key=lambda t: t.name)
    assert [(t.name, t.uid, t.status) for t in tasks] == [
        ("job-0-0", "uid-job-0-0", TaskStatus.PENDING),
        ("job-0-1", "uid-job-0-1", TaskStatus.PENDING),
    ]
    assert all(t.pod is not None and t.pod.metadata.uid == t.uid for t in tasks)
    assert all(t.resreq == request for t in tasks)


def test_node_object_is_ready_with_the_allocatable() -> None:
    node = node_object("n0")
    assert node.metadata.name == "n0"
    assert node.status is not None
    assert node.status.allocatable == dict(NODE_ALLOCATABLE)
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", "True")]
