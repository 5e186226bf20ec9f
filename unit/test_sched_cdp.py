"""cdp (cooldown protection): a Running pod within ``volcano.sh/cooldown-time`` of its
PodScheduled time is no victim of preempt or reclaim; the session asks to come back when the
cooldown ends; a bad value is reported and protects nothing."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from caldera.api.core import Pod, PodStatus
from caldera.api.duration import DurationError
from scheduler.api.types import ClusterInfo, JobInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.plugins.cdp import (
    COOLDOWN_TIME,
    EVENT_REASON,
    CooldownProtectionPlugin,
    cooldown,
    protected_until,
)
from unit.sched_fixtures import T0, add_job, cpu_cluster, make_task, open_session, run_conf

CONF = """\
actions: "enqueue, allocate, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: cdp}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def cooling(
    task: TaskInfo,
    *,
    label: str | None = None,
    annotation: str | None = None,
    phase: str = "Running",
) -> TaskInfo:
    """``task`` with its pod Running (or ``phase``) and the cooldown key set."""
    assert task.pod is not None
    meta = task.pod.metadata
    labels = {**meta.labels, **({COOLDOWN_TIME: label} if label is not None else {})}
    notes = {**meta.annotations, **({COOLDOWN_TIME: annotation} if annotation else {})}
    task.pod = msgspec.structs.replace(
        task.pod,
        metadata=msgspec.structs.replace(meta, labels=labels, annotations=notes),
        status=PodStatus(phase=phase),
    )
    return task


def running(index: int = 0, **keys: str) -> TaskInfo:
    """Pod ``low-<index>``, scheduled an hour before T0."""
    task = make_task("low", index, node="n0", scheduled_at=T0 - dt.timedelta(hours=1))
    return cooling(task, **keys)


def pod_of(task: TaskInfo) -> Pod:
    assert task.pod is not None
    return task.pod


def test_the_label_is_read_before_the_annotation() -> None:
    assert cooldown(pod_of(running(label="2h", annotation="1m"))) == dt.timedelta(hours=2)
    assert cooldown(pod_of(running(annotation="90s"))) == dt.timedelta(seconds=90)
    assert cooldown(pod_of(running())) is None


def test_a_bad_value_names_the_key() -> None:
    with pytest.raises(DurationError, match=f"^{COOLDOWN_TIME}: invalid duration"):
        cooldown(pod_of(running(label="ten minutes")))


@pytest.mark.parametrize(
    ("phase", "scheduled", "until"),
    [
        pytest.param("Running", True, T0 + dt.timedelta(hours=1), id="running"),
        pytest.param("Pending", True, None, id="not-running"),
        pytest.param("Running", False, None, id="no-podscheduled-time"),
    ],
)
def test_only_a_running_scheduled_pod_is_protected(
    phase: str, scheduled: bool, until: dt.datetime | None
) -> None:
    task = cooling(
        make_task(
            "low", 0, node="n0", scheduled_at=T0 - dt.timedelta(hours=1) if scheduled else None
        ),
        phase=phase,
    )
    assert protected_until(task, dt.timedelta(hours=2)) == until


def test_victims_leave_out_the_pods_still_cooling_and_ask_for_a_session_then() -> None:
    ssn = open_session(cpu_cluster({"n0": "4"}), [CooldownProtectionPlugin(Arguments("cdp", {}))])
    preemptor = make_task("high", 0, priority=10)
    hot = running(0, label="90m")  # protected until T0 + 30 min
    cold = running(1, label="30m")  # its cooldown ended at T0 - 30 min
    plain = running(2)
    assert ssn.preemptable(preemptor, [hot, cold, plain]) == [cold, plain]
    assert ssn.reclaimable(preemptor, [hot, cold, plain]) == [cold, plain]
    assert ssn.result.revisit_after == 30 * 60
    assert ssn.result.events == []


def test_a_bad_value_is_reported_once_and_protects_nothing() -> None:
    ssn = open_session(cpu_cluster({"n0": "4"}), [CooldownProtectionPlugin(Arguments("cdp", {}))])
    preemptor = make_task("high", 0, priority=10)
    bad = running(annotation="soon")
    assert ssn.preemptable(preemptor, [bad]) == [bad]
    assert ssn.reclaimable(preemptor, [bad]) == [bad]
    assert [(e.reason, e.type) for e in ssn.result.events] == [(EVENT_REASON, "Warning")]
    assert "volcano.sh/cooldown-time: invalid duration" in ssn.result.events[0].message
    assert ssn.result.revisit_after is None


def low_and_high(cooldown_text: str) -> tuple[ClusterInfo, JobInfo, JobInfo]:
    """A node full of a low-priority job's pods (scheduled an hour before T0, with the
    cooldown), and a high-priority job of one pod waiting."""
    cluster = cpu_cluster({"n0": "2"})
    low = add_job(cluster, "low", priority=1, running=2)
    for task in low.tasks.values():
        cooling(task, label=cooldown_text)
    high = add_job(cluster, "high", priority=10, pending=1, phase="Inqueue")
    return cluster, low, high


def test_preempt_waits_for_the_cooldown_then_evicts() -> None:
    """In a whole session: nothing is evicted while the victims cool down, and the session asks
    to run again when the first cooldown ends; once it has, preempt evicts."""
    cluster, _low, _high = low_and_high("90m")
    ssn = run_conf(cluster, CONF)
    assert ssn.result.evictions == []
    assert ssn.result.revisit_after == 30 * 60

    cluster, _low, _high = low_and_high("30m")
    ssn = run_conf(cluster, CONF)
    assert [e.reason for e in ssn.result.evictions] == ["preempt"]


def test_the_cluster_bounds_the_cooldown_a_pod_may_claim() -> None:
    """With cdp.max-cooldown-time, a pod claiming 100 days is protected for the bound only; a
    bound that is no duration is refused, naming the argument."""
    plugin = CooldownProtectionPlugin(Arguments("cdp", {"cdp.max-cooldown-time": "90m"}))
    ssn = open_session(cpu_cluster({"n0": "4"}), [plugin])
    preemptor = make_task("high", 0, priority=10)
    greedy = running(0, label="2400h")  # scheduled an hour ago: 30 min of the bound left
    assert ssn.preemptable(preemptor, [greedy]) == []
    assert ssn.result.revisit_after == 30 * 60
    short = CooldownProtectionPlugin(Arguments("cdp", {"cdp.max-cooldown-time": "30m"}))
    ssn = open_session(cpu_cluster({"n0": "4"}), [short])
    assert ssn.preemptable(preemptor, [greedy]) == [greedy]
    with pytest.raises(ValueError, match=r"plugin cdp: argument cdp\.max-cooldown-time"):
        CooldownProtectionPlugin(Arguments("cdp", {"cdp.max-cooldown-time": "forever"}))
