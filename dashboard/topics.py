"""Which live pages a change of a cached object touches.

A page subscribes to one topic: ``overview``, ``jobs`` (the job list), ``queue:<name>`` or
``job:<namespace>/<name>``. An informer handler asks these functions for the topics of the old
and the new object and tells the hub; pages of other topics hear nothing. A purely
computational module with no side-effects.
"""

from __future__ import annotations

import re
from typing import Final

from caldera.api.core import Node, Pod
from caldera.api.meta import controller_of
from caldera.api.volcano import JOB_NAME_KEY, Job, PodGroup, Queue
from dashboard.overview import GPU, queue_of

__all__ = [
    "JOBS",
    "NODES",
    "OVERVIEW",
    "TOPOLOGY",
    "job_topic",
    "job_topics",
    "node_topics",
    "pod_topics",
    "podgroup_topics",
    "queue_topic",
    "queue_topics",
    "topic_namespace",
    "valid_topic",
]

OVERVIEW: Final = "overview"
JOBS: Final = "jobs"
NODES: Final = "nodes"
TOPOLOGY: Final = "topology"
_NAME: Final = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_TOPIC: Final = re.compile(rf"overview|jobs|nodes|topology|queue:{_NAME}|job:{_NAME}/{_NAME}")


def valid_topic(topic: str) -> bool:
    """Whether a page may subscribe to `topic` (names as Kubernetes accepts them)."""
    return _TOPIC.fullmatch(topic) is not None


def topic_namespace(topic: str) -> str | None:
    """The namespace a job's topic is about (who may subscribe depends on it); None for the
    others, which name no namespace."""
    if not topic.startswith("job:"):
        return None
    return topic[len("job:") :].partition("/")[0]


def job_topic(namespace: str, name: str) -> str:
    return f"job:{namespace}/{name}"


def queue_topic(name: str) -> str:
    return f"queue:{name}"


def job_topics(job: Job) -> set[str]:
    return {
        OVERVIEW,
        JOBS,
        queue_topic(queue_of(job)),
        job_topic(job.metadata.namespace, job.metadata.name),
    }


def podgroup_topics(pg: PodGroup) -> set[str]:
    # A PodGroup's phase and wait record show on its job's rows and page.
    topics = {JOBS, queue_topic(pg.spec.queue or "default")}
    ref = controller_of(pg.metadata)
    if ref is not None and ref.kind == "Job":
        topics.add(job_topic(pg.metadata.namespace, ref.name))
    return topics


def pod_topics(pod: Pod) -> set[str]:
    topics = set()
    job = pod.metadata.annotations.get(JOB_NAME_KEY) or pod.metadata.labels.get(JOB_NAME_KEY)
    if job:
        topics.add(job_topic(pod.metadata.namespace, job))
    # The nodes page sums what bound pods request; the overview counts their GPUs.
    if pod.spec.node_name:
        topics.add(NODES)
        if any(
            GPU in c.resources.requests or GPU in c.resources.limits for c in pod.spec.containers
        ):
            topics.add(OVERVIEW)
    return topics


def queue_topics(queue: Queue) -> set[str]:
    return {OVERVIEW, queue_topic(queue.metadata.name)}


def node_topics(old: Node | None, new: Node | None) -> set[str]:
    """A node's change matters to the overview and the nodes page only if what they show
    moved: a node came or went, or its allocatable, schedulability or conditions' statuses
    changed (not a heartbeat's timestamps)."""
    if old is None or new is None:
        return {OVERVIEW, NODES, TOPOLOGY}

    def shown(n: Node) -> object:
        conditions = tuple((c.type, c.status) for c in n.status.conditions)
        return (n.status.allocatable, n.spec.unschedulable, conditions)

    touched = {OVERVIEW, NODES} if shown(old) != shown(new) else set()
    if old.metadata.labels != new.metadata.labels:
        touched.add(TOPOLOGY)  # label members of HyperNodes
    return touched
