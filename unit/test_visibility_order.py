"""The visibility API's order of waiting jobs (scheduler.visibility.order): positions in the
queue by job order and in the cluster by the queues' round-robin; the order is the one the
enqueue action then admits in; since when a job waits."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import PodGroup
from caldera.api.why import WHY_ANNOTATION, WaitRecord, encode_record
from scheduler.api.types import ClusterInfo, QueueInfo
from scheduler.visibility.order import (
    PendingEntry,
    owning_job,
    publish,
    served_order,
)
from unit.sched_fixtures import T0, make_cluster, make_job, make_node, run_conf


def conf(actions: str) -> str:
    """Volcano's default plugins with ``actions``."""
    return f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


def test_served_order_takes_queue_after_queue() -> None:
    """Every member of the first queue in queue order, then the next queue's."""
    merged = served_order(["b", "a", "c"], {"a": [1, 2, 3], "b": [10], "c": [20, 21]})
    assert merged == [10, 1, 2, 3, 20, 21]


def test_positions_by_priority_then_creation_in_queue_and_queue_order_across() -> None:
    """In a queue, the higher priority first, then the older; across queues, queue order
    (equal shares: by name)."""
    jobs = [
        make_job("a-low-old", 1, queue="qa", phase="Pending", created=0),
        make_job("a-high", 1, queue="qa", phase="Pending", priority=10, created=5),
        make_job("a-low-new", 1, queue="qa", phase="Pending", created=9),
        make_job("b-one", 1, queue="qb", phase="Pending", created=1),
    ]
    cluster = make_cluster([make_node("n0", "0")], jobs, (QueueInfo("qa"), QueueInfo("qb")))
    pending = run_conf(cluster, conf("backfill")).result.pending
    in_queue = {e.podgroup: (e.queue, e.position_in_queue) for e in pending}
    assert in_queue == {
        "a-high": ("qa", 1),
        "a-low-old": ("qa", 2),
        "a-low-new": ("qa", 3),
        "b-one": ("qb", 1),
    }
    assert [(e.podgroup, e.position_in_cluster) for e in pending] == [
        ("a-high", 1),
        ("a-low-old", 2),
        ("a-low-new", 3),
        ("b-one", 4),
    ]


def test_entries_carry_priority_phase_and_the_sessions_wait_record() -> None:
    """A gang no node has room for: its entry has what the session found."""
    job = make_job("held", 1, queue="q", phase="Inqueue", priority=7)
    cluster = make_cluster([make_node("n0", "0")], [job], (QueueInfo("q"),))
    (entry,) = run_conf(cluster, conf("enqueue, allocate")).result.pending
    assert (entry.priority, entry.phase, entry.queue) == (7, "Inqueue", "q")
    assert entry.record is not None
    assert entry.record.stage == "allocate"
    assert entry.record.summary == "needs 1 pods at once (minAvailable); 0 fit now"


def test_without_a_finding_the_podgroups_last_record_is_kept() -> None:
    """A session that finds nothing new about a job shows the record its PodGroup holds."""
    record = WaitRecord(stage="allocate", summary="needs 2 pods at once", time="t")
    job = make_job(
        "quiet",
        0,
        min_available=1,
        phase="Inqueue",
        annotations={WHY_ANNOTATION: encode_record(record)},
    )
    cluster = make_cluster([make_node("n0")], [job])
    (entry,) = run_conf(cluster, conf("backfill")).result.pending
    assert entry.record == record


def test_owning_job_is_the_volcano_job_controller() -> None:
    """The Volcano Job that controls the PodGroup; none for another owner kind."""
    job = make_job("pg", 1)

    def owned(kind: str, api_version: str) -> str:
        ref = OwnerReference(api_version=api_version, kind=kind, name="train", uid="u")
        job.podgroup = PodGroup(
            metadata=ObjectMeta(name="pg", owner_references=(_controller(ref),), namespace="ns")
        )
        return owning_job(job)

    assert owned("Job", "batch.volcano.sh/v1alpha1") == "train"
    assert owned("Job", "batch/v1") == ""
    assert owned("MPIJob", "kubeflow.org/v1") == ""


def _controller(ref: OwnerReference) -> OwnerReference:
    return OwnerReference(
        api_version=ref.api_version, kind=ref.kind, name=ref.name, uid=ref.uid, controller=True
    )


def _entry(key: str, created: int) -> PendingEntry:
    namespace, _, name = key.partition("/")
    return PendingEntry(
        key=key,
        namespace=namespace,
        podgroup=name,
        job="",
        queue="q",
        position_in_queue=1,
        position_in_cluster=1,
        priority=0,
        phase="Pending",
        record=None,
        created=T0 + dt.timedelta(seconds=created),
    )


def test_since_is_kept_and_a_job_waiting_again_waits_since_now() -> None:
    """First publication: since creation. Later: a job already waiting keeps its time; a new
    PodGroup waits since its creation; an old one that waits again, since now."""
    first = publish((_entry("ns/a", 0),), T0 + dt.timedelta(seconds=10), None)
    assert first.since == {"ns/a": "2026-01-01T00:00:00Z"}
    later = publish(
        (_entry("ns/a", 0), _entry("ns/new", 15), _entry("ns/again", 2)),
        T0 + dt.timedelta(seconds=20),
        first,
    )
    assert later.since == {
        "ns/a": "2026-01-01T00:00:00Z",
        "ns/new": "2026-01-01T00:00:15Z",
        "ns/again": "2026-01-01T00:00:20Z",
    }
    assert later.observed_at == "2026-01-01T00:00:20Z"
    assert [e.key for e in later.by_namespace["ns"]] == ["ns/a", "ns/new", "ns/again"]


_JOB = st.tuples(
    st.sampled_from(["qa", "qb", "qc"]), st.integers(0, 3), st.integers(0, 5)
)  # queue, priority, creation


@settings(max_examples=60, deadline=None)
@given(st.lists(_JOB, min_size=1, max_size=12))
def test_the_published_order_is_the_order_enqueue_then_admits(
    specs: list[tuple[str, int, int]],
) -> None:
    """A session that admits nothing publishes an order; a session on the same cluster that
    admits every job (none has minResources) admits them in exactly that order."""

    def cluster_of() -> ClusterInfo:
        jobs = [
            make_job(f"j{i}", 1, queue=q, priority=p, created=c, phase="Pending")
            for i, (q, p, c) in enumerate(specs)
        ]
        queues = (QueueInfo("qa"), QueueInfo("qb", weight=2), QueueInfo("qc"))
        return make_cluster([make_node("n0", "0")], jobs, queues)

    order = [e.key for e in run_conf(cluster_of(), conf("backfill")).result.pending]
    admitted = run_conf(cluster_of(), conf("enqueue")).result.podgroup_phase_inqueue
    assert order == admitted
