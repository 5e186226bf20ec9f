"""reservation: a gang past its threshold holds the nodes where it starts soonest; other pods
use them only beyond the hold, when they end before the expected start, or when their job's
priority is higher; the record survives a new process (annotation), expires, and tells why."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from caldera.api.core import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    PodStatus,
)
from caldera.api.meta import ObjectMeta, format_time
from caldera.api.reservation import (
    EXPECTED_RUNTIME_ANNOTATION,
    RESERVATION_ANNOTATION,
    RESERVE_AFTER_ANNOTATION,
    ReservationRecord,
    decode_reservation,
    encode_reservation,
)
from caldera.api.volcano import PodGroup
from scheduler.actions.reservation_preempt import ReservationPreemptAction
from scheduler.api.types import ClusterInfo, JobInfo, QueueInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.reservation import ReservationPlugin, duration_text
from unit.sched_fixtures import T0, add_job, binds, cpu_cluster, make_task, run_conf

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}}{reservation}]
- plugins: [{{name: overcommit}}, {{name: drf}}, {{name: predicates}}, {{name: proportion}},
            {{name: nodeorder}}]
"""
ON = ", {name: reservation, arguments: {wait: 10m}}"


def session(cluster: ClusterInfo, reservation: str = ON) -> Session:
    return run_conf(cluster, CONF.format(reservation=reservation))


def busy_cluster(*, small_deadline: int | None = None) -> tuple[ClusterInfo, JobInfo]:
    """Two 4-cpu nodes, each running three 1-cpu pods (an hour old), one cpu idle on each; a
    gang of two 4-cpu pods waiting since an hour; a 1-cpu job that arrived later."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "old", running=["n0", "n0", "n0", "n1", "n1", "n1"], min_available=1)
    big = add_job(cluster, "big", pending=2, size="4", min_available=2, phase="Inqueue")
    big.creation = T0 - dt.timedelta(hours=1)
    small = add_job(cluster, "small", pending=1, min_available=1, phase="Inqueue")
    if small_deadline is not None:
        for task in small.tasks.values():
            assert task.pod is not None
            spec = msgspec.structs.replace(task.pod.spec, active_deadline_seconds=small_deadline)
            task.pod = msgspec.structs.replace(task.pod, spec=spec)
    return cluster, big


def annotate(job: JobInfo, annotations: dict[str, str]) -> None:
    """Give the job a PodGroup carrying ``annotations``."""
    job.podgroup = PodGroup(
        metadata=ObjectMeta(name=job.name, namespace=job.namespace, annotations=annotations)
    )


def test_without_the_plugin_the_small_job_takes_the_idle_cpu() -> None:
    """Today's behaviour: the small job takes a cpu the gang would need."""
    cluster, _ = busy_cluster()
    assert binds(session(cluster, reservation="")) == {"small-0": "n0"}


def test_the_gang_holds_what_frees_up_on_its_nodes() -> None:
    """With the plugin, the gang (waited 1h > 10m) reserves both nodes; the small job, of
    unknown runtime, finds no room beyond the hold; the record goes on the PodGroup; the why
    record tells the reservation."""
    cluster, _ = busy_cluster()
    ssn = session(cluster)
    assert binds(ssn) == {}
    written = ssn.result.podgroup_annotations["ns/big"][RESERVATION_ANNOTATION]
    assert written is not None
    record = decode_reservation(written)
    assert record is not None
    assert record.nodes == ("n0", "n1")
    assert record.since == format_time(T0)
    assert record.expires == format_time(T0 + dt.timedelta(hours=6))
    figure = ssn.result.reservations[0]
    assert (figure.job, figure.nodes) == ("ns/big", 2)
    assert figure.held.get("cpu") == 2000  # one idle cpu on each node, kept
    assert figure.need.get("cpu") == 8000
    why = ssn.result.podgroup_why["ns/big"]
    assert any(
        "reserved 2 nodes (n0, n1); 2 of 8 cpu held; expected start in 1 h 0 min (estimated" in d
        for d in why.details
    ), why.details
    assert "held for a waiting gang" in ssn.result.unschedulable["ns/small-0"]


def test_a_pod_that_ends_before_the_expected_start_backfills() -> None:
    """A small pod whose activeDeadlineSeconds ends well before the gang's expected start
    (an hour away) takes the held cpu; one ending after it does not."""
    cluster, _ = busy_cluster(small_deadline=600)
    assert binds(session(cluster)) == {"small-0": "n0"}
    cluster, _ = busy_cluster(small_deadline=4000)
    assert binds(session(cluster)) == {}


def test_declared_runtime_backfills_only_when_trusted() -> None:
    """A job's declared runtime lets it backfill only with trust-declared-runtime."""
    for trusted, placed in ((False, {}), (True, {"small-0": "n0"})):
        cluster, _ = busy_cluster()
        small = cluster.jobs["ns/small"]
        annotate(small, {EXPECTED_RUNTIME_ANNOTATION: "5m"})
        conf = (
            ", {name: reservation, arguments: {wait: 10m, trust-declared-runtime: "
            f"{'true' if trusted else 'false'}}}}}"
        )
        assert binds(session(cluster, conf)) == placed


def pending_gang(old_deadline: int | None) -> ClusterInfo:
    """Two 4-cpu nodes with three 1-cpu pods each (an hour old, ``old_deadline`` their
    activeDeadlineSeconds); a Pending gang (no pods yet) of minResources 8 cpu."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    old = add_job(cluster, "old", running=["n0", "n0", "n0", "n1", "n1", "n1"], min_available=1)
    for task in old.tasks.values():
        assert task.pod is not None
        spec = msgspec.structs.replace(task.pod.spec, active_deadline_seconds=old_deadline)
        task.pod = msgspec.structs.replace(task.pod, spec=spec)
    big = add_job(cluster, "big", min_available=2, phase="Pending", min_resources={"cpu": "8"})
    big.creation = T0 - dt.timedelta(hours=1)
    return cluster


def test_a_gang_not_admitted_yet_reserves_and_is_admitted_near_its_start() -> None:
    """A Volcano Job's pods come once its PodGroup is Inqueue: a Pending gang reserves as
    minMember pods of an equal share of its minResources; its reservation admits it over the
    enqueue gates that keep it out (overcommit: a busy cluster) once its expected start is at
    most admit-before (1m) away, not earlier (admitted, it would count against the gates)."""
    assert "ns/big" not in session(pending_gang(3630), "").result.podgroup_phase_inqueue
    far = session(pending_gang(None))  # unknown runtimes: expected in an hour
    assert "ns/big" not in far.result.podgroup_phase_inqueue
    figure = far.result.reservations[0]
    assert (figure.nodes, figure.need.get("cpu")) == (2, 8000)
    near = session(pending_gang(3630))  # the old pods end in 30 s
    assert "ns/big" in near.result.podgroup_phase_inqueue
    assert near.result.reservations[0].start_seconds == 60  # min-remaining


def test_a_higher_priority_job_is_never_held_back() -> None:
    """A reservation is just another claim: a job of higher priority than the gang uses the
    held room."""
    cluster, _ = busy_cluster()
    cluster.jobs["ns/small"].priority = 10
    assert binds(session(cluster)) == {"small-0": "n0"}


def test_no_threshold_no_reservation() -> None:
    """Without a threshold (argument, annotations, sla) nothing is reserved and decisions
    are as without the plugin."""
    cluster, _ = busy_cluster()
    ssn = session(cluster, ", {name: reservation}")
    assert binds(ssn) == {"small-0": "n0"}
    assert ssn.result.reservations == []
    assert ssn.result.podgroup_annotations == {}


def test_threshold_not_reached_asks_for_a_later_session() -> None:
    """A gang that has waited less than its threshold (its own annotation) reserves nothing
    and the session asks to run again when it will have."""
    cluster, big = busy_cluster()
    big.creation = T0 - dt.timedelta(minutes=5)
    annotate(big, {RESERVE_AFTER_ANNOTATION: "20m"})
    ssn = session(cluster)
    assert binds(ssn) == {"small-0": "n0"}
    assert ssn.result.revisit_after == pytest.approx(15 * 60)


def test_a_record_read_back_keeps_its_nodes_and_age() -> None:
    """A restarted scheduler (a new snapshot, no memory) reads the record from the PodGroup:
    the gang keeps the node it had (n1, though n0 is as good) and its age."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    add_job(cluster, "old", running=["n0", "n0", "n1", "n1"], min_available=1)
    big = add_job(cluster, "big", pending=1, size="4", min_available=1, phase="Inqueue")
    big.creation = T0 - dt.timedelta(hours=1)
    since = format_time(T0 - dt.timedelta(minutes=30))
    record = ReservationRecord(
        nodes=("n1",), since=since, expires=format_time(T0 + dt.timedelta(minutes=30))
    )
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(record)})
    add_job(cluster, "small", pending=2, min_available=1, phase="Inqueue", size="2")
    ssn = session(cluster)
    # small's pods (2 cpu each, unknown runtime) may not take n1's two idle cpus.
    assert binds(ssn) == {"small-0": "n0"}
    assert "ns/big" not in ssn.result.podgroup_annotations  # the record stands as written
    figure = ssn.result.reservations[0]
    assert figure.age_seconds == 30 * 60


def test_a_forged_record_gets_no_more_than_the_plugin_would_give() -> None:
    """The record is within a tenant's reach (a Job's annotations reach its PodGroup): one for
    a gang that could not reserve yet is ignored; an older since is moved to when the gang
    could first reserve, and the expiry to within the hold limit of it."""
    cluster, big = busy_cluster()
    big.creation = T0 - dt.timedelta(minutes=5)  # threshold 10m: may not reserve yet
    forged = ReservationRecord(
        nodes=("n0", "n1"),
        since=format_time(T0 - dt.timedelta(days=30)),
        expires=format_time(T0 + dt.timedelta(days=30)),
    )
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(forged)})
    ssn = session(cluster)
    assert ssn.result.reservations == []
    assert binds(ssn) == {"small-0": "n0"}
    cluster, big = busy_cluster()
    big.creation = T0 - dt.timedelta(minutes=15)
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(forged)})
    ssn = session(cluster)
    assert ssn.result.reservations[0].age_seconds == 5 * 60
    written = decode_reservation(ssn.result.podgroup_annotations["ns/big"][RESERVATION_ANNOTATION])
    assert written is not None
    assert written.since == format_time(T0 - dt.timedelta(minutes=5))
    assert written.expires == format_time(T0 + dt.timedelta(hours=5, minutes=55))


def test_a_reservation_expires_then_cools_down() -> None:
    """Past its hold limit a reservation lets go (an Event, a record with a retry time); the
    gang reserves again once the cooldown is over."""
    cluster, big = busy_cluster()
    record = ReservationRecord(
        nodes=("n0", "n1"),
        since=format_time(T0 - dt.timedelta(hours=2)),
        expires=format_time(T0 - dt.timedelta(minutes=1)),
    )
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(record)})
    ssn = session(cluster)
    assert binds(ssn) == {"small-0": "n0"}
    assert any(e.reason == "ReservationExpired" for e in ssn.result.events)
    written = decode_reservation(ssn.result.podgroup_annotations["ns/big"][RESERVATION_ANNOTATION])
    assert written is not None
    assert written.nodes == ()
    assert written.retry == format_time(T0 + dt.timedelta(minutes=10))


def test_the_gang_lets_go_when_it_starts() -> None:
    """When the gang's nodes have room, it is placed on them and its record is removed."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"})
    big = add_job(cluster, "big", pending=2, size="4", min_available=2, phase="Inqueue")
    big.creation = T0 - dt.timedelta(hours=1)
    record = ReservationRecord(
        nodes=("n0", "n1"), since=format_time(T0), expires=format_time(T0 + dt.timedelta(hours=1))
    )
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(record)})
    ssn = session(cluster)
    assert sorted(binds(ssn)) == ["big-0", "big-1"]
    assert ssn.result.podgroup_annotations["ns/big"] == {RESERVATION_ANNOTATION: None}
    assert ssn.result.reservations_started == 1


def test_memory_carries_the_reservation_between_sessions() -> None:
    """On a snapshot kept across sessions the plugin remembers the reservation before its
    PodGroup shows the record: the second session keeps its since."""
    cluster, _ = busy_cluster()
    session(cluster)
    cluster.now = T0 + dt.timedelta(minutes=5)
    ssn = session(cluster)
    assert ssn.result.reservations[0].age_seconds == 5 * 60
    assert binds(ssn) == {}


def test_bad_arguments_name_the_key() -> None:
    """Bad arguments are errors that name the plugin and the key."""
    with pytest.raises(ValueError, match="argument wait"):
        ReservationPlugin(Arguments("reservation", {"wait": "soon"}))
    with pytest.raises(ValueError, match="argument max-reservations"):
        ReservationPlugin(Arguments("reservation", {"max-reservations": 1000}))
    with pytest.raises(ValueError, match="argument hold-limit must not be negative"):
        ReservationPlugin(Arguments("reservation", {"hold-limit": "-1h"}))


def test_bad_records_are_ignored() -> None:
    """A hand-edited record that does not decode, or names too many nodes, is no record."""
    assert decode_reservation("{") is None
    assert decode_reservation('{"nodes": 3}') is None
    too_many = ReservationRecord(nodes=tuple(f"n{i}" for i in range(600)))
    assert decode_reservation(encode_reservation(too_many)) is None


def test_duration_text() -> None:
    """Minutes, then hours and minutes."""
    assert duration_text(30) == "under 1 min"
    assert duration_text(12 * 60 + 5) == "12 min"
    assert duration_text(125 * 60) == "2 h 5 min"


def test_task_status_of_held_gang_unchanged() -> None:
    """The held gang's pods stay pending (nothing is placed for them in advance)."""
    cluster, big = busy_cluster()
    session(cluster)
    assert all(t.status == TaskStatus.PENDING for t in big.tasks.values())


def test_metrics_export_the_reservations() -> None:
    """The process's gauges: reservations per queue, what they keep idle, the oldest one's
    age and expected start; a gang placed counts a reservation ended as started."""
    cluster, _ = busy_cluster()
    session(cluster)
    cluster.now = T0 + dt.timedelta(minutes=5)
    ssn = session(cluster)
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    metrics.observe(ssn.result)
    assert registry.get_sample_value("caldera_reservations", {"queue_name": "default"}) == 1
    assert registry.get_sample_value("caldera_reservation_held_resources", {"resource": "cpu"}) == 2
    assert (
        registry.get_sample_value("caldera_reservation_age_seconds", {"queue_name": "default"})
        == 300
    )
    start = registry.get_sample_value(
        "caldera_reservation_expected_start_seconds", {"queue_name": "default"}
    )
    assert start is not None
    assert start > 0
    ssn.result.reservations.clear()
    ssn.result.reservations_started = 1
    metrics.observe(ssn.result)
    assert registry.get_sample_value("caldera_reservations", {"queue_name": "default"}) is None
    assert registry.get_sample_value("caldera_reservations_ended_total", {"how": "started"}) == 1


PREEMPT_CONF = """\
actions: "enqueue, allocate, backfill, reservation-preempt"
configurations:
- name: reservation-preempt
  arguments: {{after: {after}}}
tiers:
- plugins: [{{name: priority}}, {{name: gang}}, {{name: conformance}},
            {{name: reservation, arguments: {{wait: 10m}}}}]
- plugins: [{{name: overcommit}}, {{name: drf}}, {{name: predicates}}, {{name: proportion}},
            {{name: nodeorder}}]
"""


def two_queues(gang_pods: int) -> ClusterInfo:
    """Queue 'small' (reclaimable) fills two 4-cpu nodes with eight 1-cpu pods (single-pod
    gangs, lowest priority first in victim order); queue 'big' has a gang of ``gang_pods``
    2-cpu pods reserving both nodes for an hour."""
    cluster = cpu_cluster({"n0": "4", "n1": "4"}, queues=[QueueInfo("small"), QueueInfo("big")])
    for i, node in enumerate(["n0"] * 4 + ["n1"] * 4):
        add_job(cluster, f"s{i}", running=[node], queue="small", priority=i % 2)
    big = add_job(
        cluster,
        "big",
        pending=gang_pods,
        size="2",
        min_available=gang_pods,
        queue="big",
        phase="Inqueue",
    )
    big.creation = T0 - dt.timedelta(hours=2)
    record = ReservationRecord(
        nodes=("n0", "n1"),
        since=format_time(T0 - dt.timedelta(minutes=40)),
        expires=format_time(T0 + dt.timedelta(minutes=20)),
    )
    annotate(big, {RESERVATION_ANNOTATION: encode_reservation(record)})
    return cluster


def test_reservation_preempt_reclaims_for_a_long_reservation() -> None:
    """A reservation 40 minutes old (after: 30m) takes back from queue 'small', above its
    deserved half, what its 2-pod gang needs: four pods, the lowest priority first, and the
    gang is pipelined on the freed room."""
    cluster = two_queues(2)
    ssn = run_conf(cluster, PREEMPT_CONF.format(after="30m"))
    evicted = sorted(e.task.job for e in ssn.result.evictions)
    assert len(evicted) == 4
    assert {cluster.jobs[k].priority for k in evicted} == {0}
    assert {e.reason for e in ssn.result.evictions} == {"reservation-preempt"}
    big = cluster.jobs["ns/big"]
    assert big.count(TaskStatus.PIPELINED) == 2


def test_reservation_preempt_waits_for_after() -> None:
    """A reservation younger than ``after`` evicts nothing."""
    ssn = run_conf(two_queues(2), PREEMPT_CONF.format(after="2h"))
    assert ssn.result.evictions == []


def test_reservation_preempt_evicts_nothing_unless_the_gang_then_starts() -> None:
    """The gang-level contract: a 4-pod gang (8 cpu) would need more than queue 'small' may
    give back (its deserved half): nothing is evicted, and the wait record says so."""
    ssn = run_conf(two_queues(4), PREEMPT_CONF.format(after="30m"))
    assert ssn.result.evictions == []
    notes = [text for _, text in ssn.wait_notes.get("ns/big", [])]
    assert (
        "reservation-preempt: evicting every pod that may go would not free enough for the gang"
        in notes
    )


def test_reservation_preempt_argument_errors() -> None:
    """A bad ``after`` names the action and the argument."""
    with pytest.raises(ValueError, match="action reservation-preempt: argument after"):
        ReservationPreemptAction({"after": "soon"})


def test_runtimes_learnt_from_finished_pods_set_the_expected_start() -> None:
    """A pod of no known runtime is expected to run as long as finished pods of its queue and
    shape ran (3 h here: the hour-old pods end in 2 h), not as long again as it has (1 h)."""
    cluster, _ = busy_cluster()
    assert session(cluster).result.reservations[0].start_seconds == 3600
    cluster, _ = busy_cluster()
    done = add_job(cluster, "done", min_available=1, phase="Completed")
    task = make_task("done", 0, {"cpu": "1"}, status=TaskStatus.SUCCEEDED)
    assert task.pod is not None
    terminated = ContainerState(
        terminated=ContainerStateTerminated(finished_at=format_time(T0 - dt.timedelta(hours=1)))
    )
    status = PodStatus(
        phase="Succeeded",
        start_time=format_time(T0 - dt.timedelta(hours=4)),
        container_statuses=(ContainerStatus(name="main", state=terminated),),
    )
    task.pod = msgspec.structs.replace(task.pod, status=status)
    done.add_task(task)
    assert session(cluster).result.reservations[0].start_seconds == 7200


def test_reservation_preempt_asks_for_a_session_when_a_reservation_comes_of_age() -> None:
    """A reservation 40 minutes old, with after: 50m, asks for a session in 10 minutes
    (before its expiry, in 20)."""
    ssn = run_conf(two_queues(2), PREEMPT_CONF.format(after="50m"))
    assert ssn.result.revisit_after == pytest.approx(10 * 60)
