"""The scheduler's snapshot: jobs from PodGroups with existing queues, every bound pod's usage
on its node whoever scheduled it, and assumed binds counted before the cache sees them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from caldera.api.core import Node, Pod, PriorityClass
from caldera.api.resources import Resources
from caldera.api.volcano import PodGroup, Queue
from scheduler.api.types import TaskStatus
from scheduler.snapshot import CachedRequests, build_cluster, pod_resources, task_status


def _pod(
    name: str,
    *,
    group: str = "",
    node: str = "",
    phase: str = "Pending",
    cpu: str = "1",
    scheduler: str = "volcano",
    init_cpu: str = "",
    **extra: Any,
) -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    if node:
        spec["nodeName"] = node
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    raw = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": phase},
    }
    raw.update(extra)
    return msgspec.convert(raw, Pod)


def _node(name: str, cpu: str = "4") -> Node:
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": cpu, "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        Node,
    )


def _pg(name: str, queue: str = "default", min_member: int = 1, pc: str = "") -> PodGroup:
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {"minMember": min_member, "queue": queue, "priorityClassName": pc},
            "status": {"phase": "Inqueue"},
        },
        PodGroup,
    )


def _queue(name: str, **spec: Any) -> Queue:
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, Queue)


def test_jobs_tasks_nodes_and_queues() -> None:
    """PodGroups become jobs with their annotated pods; nodes count every bound pod."""
    cluster, report = build_cluster(
        pods=[
            _pod("a-0", group="a"),
            _pod("a-1", group="a", node="n1", phase="Running"),
            _pod("other", node="n1", scheduler="default-scheduler", cpu="2"),
            _pod("unowned"),  # no PodGroup: not ours yet
            _pod("done", node="n1", phase="Succeeded", scheduler="default-scheduler"),
        ],
        nodes=[_node("n1")],
        podgroups=[_pg("a", min_member=2, pc="high"), _pg("lost", queue="nope")],
        queues=[_queue("default", weight=2, capability={"cpu": "10"}, reclaimable=False)],
        priority_classes=[
            msgspec.convert({"metadata": {"name": "high"}, "value": 1000}, PriorityClass)
        ],
    )
    job = cluster.jobs["ns/a"]
    assert (job.min_available, job.priority, job.phase) == (2, 1000, "Inqueue")
    assert {t.name: t.status for t in job.tasks.values()} == {
        "a-0": TaskStatus.PENDING,
        "a-1": TaskStatus.RUNNING,
    }
    node = cluster.nodes["n1"]
    assert node.used == Resources.from_list({"cpu": "3"}), "a-1 and the other scheduler's pod"
    assert node.idle == Resources.from_list({"cpu": "1", "pods": "10"})
    assert node.max_pods == 10
    assert report.missing_queue == {"ns/lost": "nope"}
    q = cluster.queues["default"]
    assert (q.weight, q.reclaimable, q.capability) == (2, False, Resources.from_list({"cpu": "10"}))


def test_assumed_bind_counts_on_its_node() -> None:
    """A pod bound by this process but not yet seen bound is Binding and uses its node."""
    cluster, _ = build_cluster(
        pods=[_pod("a-0", group="a")],
        nodes=[_node("n1")],
        podgroups=[_pg("a")],
        queues=[_queue("default")],
        assumed={"uid-a-0": "n1"},
    )
    task = next(iter(cluster.jobs["ns/a"].tasks.values()))
    assert (task.status, task.node_name) == (TaskStatus.BINDING, "n1")
    assert cluster.nodes["n1"].used == Resources.from_list({"cpu": "1"})


def test_task_status_from_pod() -> None:
    """Pod phase, binding and deletion map onto the scheduler's task statuses."""
    assert task_status(_pod("p")) == TaskStatus.PENDING
    assert task_status(_pod("p", node="n")) == TaskStatus.BOUND
    assert task_status(_pod("p", node="n", phase="Running")) == TaskStatus.RUNNING
    assert task_status(_pod("p", node="n", phase="Failed")) == TaskStatus.FAILED
    deleting = _pod("p", node="n", phase="Running")
    deleting = msgspec.structs.replace(
        deleting,
        metadata=msgspec.structs.replace(
            deleting.metadata, deletion_timestamp="2026-01-01T00:00:00Z"
        ),
    )
    assert task_status(deleting) == TaskStatus.RELEASING


def test_init_containers_raise_only_the_start_request() -> None:
    """Init containers count towards what a pod needs to start, not to run."""
    running, starting = pod_resources(_pod("p", cpu="1", init_cpu="3"))
    assert running == Resources.from_list({"cpu": "1"})
    assert starting == Resources.from_list({"cpu": "3"})


def test_cached_requests_reuse_until_the_pod_spec_changes() -> None:
    """Requests are parsed once per pod spec: a new version with the same spec (a status
    change), whether the same object or an equal one decoded again, reuses them."""
    cache = CachedRequests()
    pod = _pod("p", cpu="1")
    first = cache(pod)
    assert cache(pod) is first
    status_only = msgspec.structs.replace(
        pod,
        metadata=msgspec.structs.replace(pod.metadata, resource_version="2"),
        status=msgspec.structs.replace(pod.status, phase="Running"),
    )
    assert cache(status_only) is first
    decoded = msgspec.json.decode(msgspec.json.encode(status_only), type=Pod)
    decoded = msgspec.structs.replace(
        decoded, metadata=msgspec.structs.replace(decoded.metadata, resource_version="4")
    )
    assert decoded.spec is not pod.spec
    assert cache(decoded) is first
    resized = _pod("p", cpu="2")
    resized = msgspec.structs.replace(
        resized, metadata=msgspec.structs.replace(resized.metadata, resource_version="5")
    )
    assert cache(resized)[0] == Resources.from_list({"cpu": "2"})
    cache.forget([])
    assert cache(pod) is not first


def test_cached_requests_share_a_tasks_figures_between_its_pods() -> None:
    """A new pod of a task gets the figures of the task's last pod when its containers and
    overhead are the same (decoded apart: equal, not the same objects); a pod of another
    shape, task or group gets its own."""
    cache = CachedRequests()
    first = cache(_pod("a-0", group="g", cpu="1"))
    assert cache(_pod("a-1", group="g", cpu="1")) is first
    other = cache(_pod("a-2", group="g", cpu="2"))
    assert other[0] == Resources.from_list({"cpu": "2"})
    assert cache(_pod("b-0", group="h", cpu="2")) is not other
    ungrouped = cache(_pod("c-0", cpu="1"))
    assert ungrouped == first
    assert ungrouped is not first
    init = cache(_pod("a-3", group="g", cpu="2", init_cpu="3"))
    assert init == (Resources.from_list({"cpu": "2"}), Resources.from_list({"cpu": "3"}))


def test_now_is_taken_from_the_caller() -> None:
    """The session's clock is an input, so the simulator can drive it."""
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    cluster, _ = build_cluster(pods=[], nodes=[], podgroups=[], queues=[], now=when)
    assert cluster.now == when
