"""preemption-toleration: the victim's PriorityClass annotations decide who may preempt it and
after how long, in both key families, with Never preemptors and bad annotations handled."""

from __future__ import annotations

import datetime as dt

import pytest

from caldera.api.core import Pod, PodSpec, PriorityClass
from caldera.api.meta import ObjectMeta
from caldera.api.resources import Resources
from scheduler.api.types import ClusterInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.session import Session
from scheduler.plugins.preemption_toleration import (
    EVENT_REASON,
    PreemptionTolerationPlugin,
    TolerationPolicy,
    parse_policy,
)
from scheduler.snapshot import build_cluster

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
X = "preemption-toleration.scheduling.x-k8s.io/"
SIGS = "preemption-toleration.scheduling.sigs.k8s.io/"
MIN = "minimum-preemptable-priority"
SECS = "toleration-seconds"
VICTIM_CLASS_VALUE = 100


def priority_class(
    name: str, value: int, annotations: dict[str, str], preemption_policy: str | None = None
) -> PriorityClass:
    return PriorityClass(
        metadata=ObjectMeta(name=name, annotations=annotations),
        value=value,
        preemption_policy=preemption_policy,
    )


def task(
    name: str,
    priority: int,
    *,
    class_name: str = "",
    policy: str | None = None,
    scheduled_ago: float | None = None,
) -> TaskInfo:
    pod = Pod(
        metadata=ObjectMeta(name=name, namespace="ns"),
        spec=PodSpec(priority=priority, priority_class_name=class_name, preemption_policy=policy),
    )
    req = Resources.from_list({"cpu": "1"})
    return TaskInfo(
        uid=name,
        namespace="ns",
        name=name,
        job="ns/j",
        role="w",
        resreq=req,
        init_resreq=req,
        priority=priority,
        status=TaskStatus.RUNNING,
        node_name="n0",
        pod=pod,
        scheduled_at=None if scheduled_ago is None else NOW - dt.timedelta(seconds=scheduled_ago),
    )


def open_session(*classes: PriorityClass) -> Session:
    cluster = ClusterInfo(now=NOW, priority_classes={pc.metadata.name: pc for pc in classes})
    ssn = Session(cluster, [[PluginOption("preemption-toleration")]])
    PreemptionTolerationPlugin(Arguments("preemption-toleration", {})).on_session_open(ssn)
    return ssn


@pytest.mark.parametrize(
    ("annotations", "preemptor_priority", "scheduled_ago", "preempted"),
    [
        pytest.param({}, 101, 0, True, id="no-annotations-higher-preempts-at-once"),
        # x-k8s.io: toleration-seconds default 0, minimum default value + 1
        pytest.param({X + MIN: "1000"}, 500, 5, True, id="x-default-zero-seconds"),
        pytest.param({X + MIN: "1000", X + SECS: "60"}, 500, 30, False, id="x-tolerated"),
        pytest.param({X + MIN: "1000", X + SECS: "60"}, 500, 60, True, id="x-expired-at-60s"),
        pytest.param({X + MIN: "1000", X + SECS: "60"}, 1000, 1, True, id="x-minimum-at-once"),
        pytest.param({X + MIN: "1000", X + SECS: "-1"}, 999, 10**7, False, id="x-negative"),
        pytest.param({X + SECS: "60"}, 101, 1, True, id="x-default-minimum-value+1"),
        pytest.param({X + SECS: "60"}, 100, 1, False, id="x-equal-priority-waits"),
        pytest.param({X + MIN: "1000", X + SECS: "60"}, 500, None, False, id="x-unscheduled"),
        # sigs.k8s.io: toleration-seconds default forever
        pytest.param({SIGS + MIN: "1000"}, 999, 10**7, False, id="sigs-default-forever"),
        pytest.param({SIGS + MIN: "1000"}, 1000, 0, True, id="sigs-minimum-at-once"),
        pytest.param({SIGS + MIN: "1000", SIGS + SECS: "60"}, 500, 61, True, id="sigs-expired"),
        pytest.param({SIGS + MIN: "1000", SIGS + SECS: "0"}, 500, 0, True, id="sigs-zero"),
        pytest.param({SIGS + SECS: "60"}, 150, 1, True, id="sigs-default-minimum"),
        # a class with an x-k8s.io key is read in that family alone
        pytest.param({X + MIN: "1000", SIGS + SECS: "-1"}, 500, 5, True, id="x-family-wins-whole"),
    ],
)
def test_toleration_rules(
    annotations: dict[str, str],
    preemptor_priority: int,
    scheduled_ago: float | None,
    preempted: bool,
) -> None:
    """Both key families with their defaults; time counted from the PodScheduled time."""
    ssn = open_session(priority_class("batch", VICTIM_CLASS_VALUE, annotations))
    victim = task("victim", VICTIM_CLASS_VALUE, class_name="batch", scheduled_ago=scheduled_ago)
    preemptor = task("preemptor", preemptor_priority)
    chosen = ssn.preemptable(preemptor, [victim])
    assert (chosen == [victim]) is preempted
    assert ssn.reclaimable(preemptor, [victim]) == chosen
    assert ssn.result.events == []


@pytest.mark.parametrize(
    ("annotations", "policy"),
    [
        pytest.param({}, TolerationPolicy(101, 0), id="defaults"),
        pytest.param({X + MIN: "+7", X + SECS: "-5"}, TolerationPolicy(7, -5), id="signs"),
        pytest.param({SIGS + MIN: "3"}, TolerationPolicy(3, -1), id="sigs-forever"),
    ],
)
def test_parse_policy(annotations: dict[str, str], policy: TolerationPolicy) -> None:
    """Annotations read as Go's ParseInt would, defaults filled in per family."""
    assert parse_policy(priority_class("c", 100, annotations)) == policy


@pytest.mark.parametrize(
    "annotations",
    [
        pytest.param({X + SECS: "forever"}, id="word"),
        pytest.param({X + SECS: "1.5"}, id="fraction"),
        pytest.param({X + MIN: " 5"}, id="space"),
        pytest.param({X + MIN: "99999999999"}, id="beyond-int32"),
        pytest.param({SIGS + SECS: "1_000"}, id="underscore"),
    ],
)
def test_bad_annotation_means_no_toleration_and_one_event(annotations: dict[str, str]) -> None:
    """An unparseable annotation: the victim does not tolerate, and its Pod gets one Warning
    event per session naming the annotation."""
    ssn = open_session(priority_class("broken", VICTIM_CLASS_VALUE, annotations))
    victim = task("victim", VICTIM_CLASS_VALUE, class_name="broken", scheduled_ago=1)
    preemptor = task("preemptor", 50)  # far below any minimum
    assert ssn.preemptable(preemptor, [victim]) == [victim]
    assert ssn.reclaimable(preemptor, [victim]) == [victim]
    [event] = ssn.result.events
    assert (event.kind, event.namespace, event.name, event.type, event.reason) == (
        "Pod",
        "ns",
        "victim",
        "Warning",
        EVENT_REASON,
    )
    assert next(iter(annotations)) in event.message
    assert "broken" in event.message


@pytest.mark.parametrize(
    ("pod_policy", "class_policy"),
    [
        pytest.param("Never", None, id="pod-never"),
        pytest.param(None, "Never", id="class-never"),
    ],
)
def test_never_preemptor_preempts_nobody(pod_policy: str | None, class_policy: str | None) -> None:
    """A preemptor with preemptionPolicy Never gets no victims, tolerant or not."""
    ssn = open_session(
        priority_class("batch", VICTIM_CLASS_VALUE, {}),
        priority_class("urgent", 10_000, {}, preemption_policy=class_policy),
    )
    victims = [
        task("plain", 0, scheduled_ago=1000),
        task("batch", VICTIM_CLASS_VALUE, class_name="batch", scheduled_ago=1000),
    ]
    preemptor = task("preemptor", 10_000, class_name="urgent", policy=pod_policy)
    assert ssn.preemptable(preemptor, victims) == []
    assert ssn.reclaimable(preemptor, victims) == []


def test_victims_without_a_known_class_do_not_tolerate() -> None:
    """No priorityClassName, or a class missing from the snapshot: no toleration."""
    ssn = open_session(priority_class("tolerant", 100, {SIGS + MIN: "10000"}))
    victims = [
        task("no-class", 0, scheduled_ago=1),
        task("unknown", 0, class_name="gone", scheduled_ago=1),
        task("tolerant", 100, class_name="tolerant", scheduled_ago=1),
    ]
    chosen = ssn.preemptable(task("preemptor", 500), victims)
    assert [t.name for t in chosen] == ["no-class", "unknown"]


def test_snapshot_carries_priority_classes() -> None:
    """The snapshot keeps PriorityClasses by name, where the plugin reads victims' policies."""
    pc = priority_class("batch", 100, {X + SECS: "60"})
    cluster, _ = build_cluster(pods=[], nodes=[], podgroups=[], queues=[], priority_classes=[pc])
    assert cluster.priority_classes == {"batch": pc}
