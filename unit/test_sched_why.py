"""Why a job waits: the record a session composes for each waiting job (scheduler/why.py), with
the text a user reads, its bounds, when it is written, and the per-reason pod counts."""

from __future__ import annotations

import datetime as dt

import msgspec

from caldera.api.core import Taint
from caldera.api.meta import ObjectMeta, format_time
from caldera.api.resources import Resources
from caldera.api.volcano import PodGroup, PodGroupSpec
from caldera.api.why import (
    MAX_DETAILS,
    MAX_LINE,
    REFRESH_SECONDS,
    WHY_ANNOTATION,
    WaitRecord,
    WaitStage,
    bounded,
    decode_record,
    encode_record,
)
from scheduler.api.types import ClusterInfo, QueueInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.plugin import PluginOption
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.registry import REGISTRY
from scheduler.why import gate_text, message_reasons, publish, unschedulable_reasons
from unit.sched_fixtures import (
    DEFAULT_PLUGINS,
    T0,
    make_cluster,
    make_job,
    make_node,
    make_task,
)

FULL = "enqueue, allocate, backfill, reclaim, preempt"
PROPORTION = (("priority", "gang", "conformance"), ("drf", "predicates", "proportion", "nodeorder"))


def run(
    cluster: ClusterInfo,
    actions: str = "enqueue, allocate, backfill",
    tiers: tuple[tuple[str, ...], ...] = DEFAULT_PLUGINS,
) -> Session:
    """One full session with every plugin Caldera has available."""
    conf = SchedulerConf(
        actions=tuple(a.strip() for a in actions.split(",")),
        tiers=tuple(tuple(PluginOption(p) for p in tier) for tier in tiers),
    )
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, REGISTRY)
    return ssn


def test_a_session_told_not_to_explain_composes_no_record() -> None:
    """``Session.explain`` off (the simulator): the same decisions and statuses, no records,
    notes or Events."""

    def cluster() -> ClusterInfo:
        big = make_job("big", 3, min_resources={"cpu": "3"}, phase="Inqueue")
        return make_cluster([make_node("n0", "2", "8Gi")], [big], [])

    conf = SchedulerConf(
        actions=("enqueue", "allocate", "backfill"),
        tiers=tuple(tuple(PluginOption(p) for p in tier) for tier in DEFAULT_PLUGINS),
    )
    told = run(cluster())
    quiet = Session(cluster(), conf.tiers)
    quiet.explain = False
    run_session(quiet, conf, REGISTRY)
    assert told.result.podgroup_why  # the job waits: explained when asked
    assert told.result.events
    assert told.wait_notes
    assert not quiet.result.podgroup_why
    assert not quiet.result.events
    assert not quiet.wait_notes
    assert quiet.result.podgroup_status == told.result.podgroup_status
    assert quiet.result.unschedulable == told.result.unschedulable


def test_queue_quota_says_what_must_free_up() -> None:
    """A queue capped at 8 cpu with 6 allocated and a 4-cpu job inqueue: a job needing 6 cpu
    waits at the gate, and the record says by how much."""
    running = make_job(
        "run",
        [make_task("run", i, status=TaskStatus.RUNNING, node="n0") for i in range(6)],
        queue="team-a",
        phase="Running",
        min_resources={"cpu": "6"},
    )
    admitted = make_job("adm", 4, queue="team-a", min_resources={"cpu": "4"}, created=1)
    waiting = make_job(
        "wait", 6, queue="team-a", phase="Pending", min_resources={"cpu": "6"}, created=2
    )
    queue = QueueInfo("team-a", capability=Resources.from_list({"cpu": "8"}))
    cluster = make_cluster([make_node("n0", "32", "64Gi")], [running, admitted, waiting], [queue])
    ssn = run(cluster, FULL, PROPORTION)
    record = ssn.result.podgroup_why["ns/wait"]
    assert record.stage == WaitStage.ENQUEUE
    assert record.summary == (
        "queue team-a has 6 cpu of 8 cpu allocated and 4 cpu reserved by inqueue jobs; this "
        "job needs 6 cpu at least; it enqueues when 8 cpu free up"
    )


def test_closed_queue_holds_its_jobs() -> None:
    """A job of a Closed queue waits for the queue, and the record names its state."""
    job = make_job("j", 1, queue="q", phase="Pending", min_resources={"cpu": "1"})
    ssn = run(
        make_cluster([make_node("n0")], [job], [QueueInfo("q", state="Closed")]), FULL, PROPORTION
    )
    record = ssn.result.podgroup_why["ns/j"]
    assert record.stage == WaitStage.QUEUE
    assert record.summary == "queue q is Closed: no job in it is admitted until it is opened"


def test_overcommit_gate_names_the_cluster() -> None:
    """Overcommit refuses a job bigger than the cluster's promise (allocatable x 1.2)."""
    job = make_job("big", 1, phase="Pending", min_resources={"cpu": "10"})
    ssn = run(make_cluster([make_node("n0", "4")], [job]))
    record = ssn.result.podgroup_why["ns/big"]
    assert record.stage == WaitStage.ENQUEUE
    assert record.summary == (
        "this job needs 10 cpu at least, more than the cluster (allocatable x 1.2, overcommit) "
        "can ever give (4800m cpu): it cannot enqueue until that limit grows"
    )


def test_predicates_give_each_task_its_node_histogram() -> None:
    """A gang of 3 GPU pods on nodes without GPUs or with a taint: the gang's need, and the
    rejected task's kube-scheduler style histogram."""
    nodes = [
        make_node("cpu-1"),
        make_node("cpu-2"),
        make_node(
            "gpu-1",
            extra={"nvidia.com/gpu": "4"},
            taints=[Taint(key="gpu", value="a100", effect="NoSchedule")],
        ),
    ]
    tasks = [make_task("train", i, {"cpu": "1", "nvidia.com/gpu": "1"}) for i in range(3)]
    ssn = run(make_cluster(nodes, [make_job("train", tasks)]))
    record = ssn.result.podgroup_why["ns/train"]
    assert record.stage == WaitStage.ALLOCATE
    assert record.summary == "needs 3 pods at once (minAvailable); 0 fit now"
    assert record.details == (
        "task worker (3 pending): 0/3 nodes are available: 1 node(s) had untolerated taint "
        "{gpu: a100}, 2 Insufficient nvidia.com/gpu.",
    )


def test_preemption_considered_says_why_no_victim() -> None:
    """A starving gang whose queue holds only equal-priority pods: preemption was considered
    and priority ruled every job out."""
    running = make_job(
        "old",
        [make_task("old", i, status=TaskStatus.RUNNING, node="n0") for i in range(4)],
        phase="Running",
    )
    ssn = run(make_cluster([make_node("n0")], [running, make_job("new", 2, created=1)]), FULL)
    record = ssn.result.podgroup_why["ns/new"]
    assert record.stage == WaitStage.ALLOCATE
    assert (
        "preemption considered: none of the 1 jobs with running pods in queue default may "
        "give one (1 equal or higher priority)"
    ) in record.details


def test_a_placed_gang_gets_no_record_until_it_waited() -> None:
    """A gang placed at once has nothing to explain; one that waited gets "not waiting"."""
    ssn = run(make_cluster([make_node("n0")], [make_job("a", 2)]))
    assert "ns/a" not in ssn.result.podgroup_why
    job = make_job("b", 2)
    waited = WaitRecord(stage="allocate", summary="needs 2", time=format_time(T0))
    job.podgroup = PodGroup(
        metadata=ObjectMeta(
            name="b", namespace="ns", annotations={WHY_ANNOTATION: encode_record(waited)}
        ),
        spec=PodGroupSpec(min_member=2),
    )
    ssn = run(make_cluster([make_node("n0")], [job]))
    assert ssn.result.podgroup_why["ns/b"].stage == WaitStage.NONE
    assert ssn.result.podgroup_why["ns/b"].summary == "2 of 2 pods (minAvailable) placed"


def test_a_changed_finding_of_the_same_stage_waits_for_its_refresh() -> None:
    """New numbers at the same stage are held back until the last record is REFRESH_SECONDS
    old; a new stage is written at once; the same finding is never rewritten."""
    job = make_job("j", 1)
    now = T0 + dt.timedelta(seconds=5)
    last = WaitRecord(stage="enqueue", summary="old numbers", time=format_time(T0))
    job.podgroup = PodGroup(
        metadata=ObjectMeta(
            name="j", namespace="ns", annotations={WHY_ANNOTATION: encode_record(last)}
        ),
    )
    newer = msgspec.structs.replace(last, summary="new numbers", time=format_time(now))
    assert publish(job, newer, now) == (None, True)
    later = now + dt.timedelta(seconds=REFRESH_SECONDS)
    assert publish(job, newer, later) == (newer, False)
    moved = WaitRecord(stage="allocate", summary="needs 1", time=format_time(now))
    assert publish(job, moved, now) == (moved, False)
    same = msgspec.structs.replace(last, time=format_time(later))
    assert publish(job, same, later) == (None, False)


def test_records_are_bounded_and_survive_bad_annotations() -> None:
    """Long lines are clipped, extra details cut with a count; bad JSON reads as no record."""
    record = bounded("allocate", "x" * 1000, [f"line {i}" for i in range(20)], "")
    assert len(record.summary) == MAX_LINE
    assert len(record.details) == MAX_DETAILS
    assert record.details[-1] == f"... and {20 - MAX_DETAILS + 1} more"
    assert decode_record(encode_record(record)) == record
    assert decode_record("{not json") is None
    assert decode_record('{"summary": "no stage"}') is None


def test_gate_text_lists_only_the_resources_that_hold_the_job() -> None:
    """Only the resources short of room appear; memory is written as a quantity."""
    text = gate_text(
        holder="queue q",
        limit=Resources.from_list({"cpu": "8", "memory": "16Gi"}),
        allocated=Resources.from_list({"cpu": "2", "memory": "12Gi"}),
        reserved=Resources.from_list({"memory": "2Gi"}),
        need=Resources.from_list({"cpu": "1", "memory": "4Gi"}),
        freed_by=Resources.from_list({"memory": "2Gi"}),
    )
    assert text == (
        "queue q has 12Gi memory of 16Gi memory allocated and 2Gi memory reserved by inqueue "
        "jobs; this job needs 4Gi memory at least; it enqueues when 2Gi memory free up"
    )


def test_a_job_bigger_than_the_limit_is_told_so() -> None:
    """A need above the whole limit cannot be met by waiting; elastic use is named."""
    limit = Resources.from_list({"cpu": "2"})
    text = gate_text(
        holder="queue q",
        limit=limit,
        allocated=Resources(),
        reserved=Resources(),
        need=Resources.from_list({"cpu": "3"}),
        freed_by=Resources.from_list({"cpu": "1"}),
    )
    assert text == (
        "this job needs 3 cpu at least, more than queue q can ever give (2 cpu): it cannot "
        "enqueue until that limit grows"
    )
    text = gate_text(
        holder="queue q",
        limit=Resources.from_list({"cpu": "8"}),
        allocated=Resources.from_list({"cpu": "6"}),
        reserved=Resources(),
        need=Resources.from_list({"cpu": "4"}),
        freed_by=Resources.from_list({"cpu": "2"}),
        elastic=Resources.from_list({"cpu": "1"}),
    )
    assert "6 cpu of 8 cpu allocated (1 cpu of it above its jobs' minResources" in text


def test_reasons_are_counted_per_pod_without_values() -> None:
    """A pod counts once under every reason its message names; taint values are dropped."""
    messages = [
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: a100}, "
        "2 Insufficient nvidia.com/gpu.",
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "Pod ns/p can possibly be assigned to n0, once minAvailable is satisfied",
        "all nodes are unavailable",
    ]
    assert message_reasons(messages[0]) == [
        "node(s) had untolerated taint",
        "Insufficient nvidia.com/gpu",
    ]
    assert unschedulable_reasons(messages) == {
        "node(s) had untolerated taint": 1,
        "Insufficient nvidia.com/gpu": 2,
        "gang": 1,
        "other": 1,
    }
    # A message many pods share counts once per pod.
    assert unschedulable_reasons([messages[1], messages[0], messages[1]]) == {
        "Insufficient nvidia.com/gpu": 3,
        "node(s) had untolerated taint": 1,
    }


def test_reclaim_considered_names_the_gang_rule() -> None:
    """A queue over its share whose only job sits at its minAvailable gives nothing to a
    starving gang of another queue: the record says reclaim was considered and why."""
    running = make_job(
        "full",
        [make_task("full", i, status=TaskStatus.RUNNING, node="n0") for i in range(4)],
        queue="qa",
        phase="Running",
    )
    waiting = make_job("want", 2, queue="qb", created=1)
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    cluster = make_cluster([make_node("n0", "4", "16Gi")], [running, waiting], queues)
    ssn = run(cluster, FULL, PROPORTION)
    record = ssn.result.podgroup_why["ns/want"]
    assert record.stage == WaitStage.ALLOCATE
    assert (
        "reclaim considered: none of the 1 jobs with running pods in other queues may give "
        "one (1 at minAvailable)"
    ) in record.details, record.details
