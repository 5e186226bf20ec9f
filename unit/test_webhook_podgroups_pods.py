"""PodGroup and pod admission rules (Volcano's pkg/webhooks/admission/podgroups/ and pods/)."""

from __future__ import annotations

import pytest

from caldera.api.core import Namespace, Pod, PodSpec
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    NetworkTopologySpec,
    PodGroup,
    PodGroupSpec,
    SubGroupPolicy,
)
from unit.webhook_fixtures import queue
from webhooks.podgroups import mutate_podgroup, validate_podgroup
from webhooks.pods import validate_pod
from webhooks.view import StaticView

CLUSTER = StaticView(
    [
        queue("root"),
        queue("default"),
        queue("team"),
        queue("shut", state="Closed"),
        queue("org"),
        queue("project", parent="org"),
    ],
    [
        Namespace(
            metadata=ObjectMeta(
                name="annotated", annotations={"scheduling.volcano.sh/queue-name": "team"}
            )
        ),
        Namespace(metadata=ObjectMeta(name="plain")),
    ],
)


def pg(namespace: str = "plain", **spec: object) -> PodGroup:
    return PodGroup(metadata=ObjectMeta(name="pg", namespace=namespace), spec=PodGroupSpec(**spec))  # type: ignore[arg-type]


def test_queue_from_namespace_annotation() -> None:
    """A PodGroup of the default queue in an annotated namespace moves to the namespace's queue."""
    assert mutate_podgroup(pg("annotated"), CLUSTER) == [
        {"op": "add", "path": "/spec/queue", "value": "team"}
    ]
    assert mutate_podgroup(pg("annotated", queue="other"), CLUSTER) == []
    assert mutate_podgroup(pg("plain"), CLUSTER) == []
    assert mutate_podgroup(pg("annotated"), CLUSTER, has_spec=False) == [
        {"op": "add", "path": "/spec", "value": {"queue": "team"}}
    ]


@pytest.mark.parametrize(
    ("podgroup", "message"),
    [
        (pg(queue="team"), ""),
        (
            pg(queue="ghost"),
            'spec.queue: unable to find queue: queue.scheduling.volcano.sh "ghost"',
        ),
        (
            pg(queue="shut"),
            "spec.queue: can only submit PodGroup to queue with state `Open`, "
            "queue `shut` status is `Closed`;",
        ),
        (pg(queue="project"), ""),
        (
            pg(queue="org"),
            "spec.queue: can only submit PodGroup to leaf queue, queue `org` has 1 child queues;",
        ),
        (pg(queue="root"), "spec.queue: can not submit PodGroup to root queue;"),
        (
            pg(network_topology=NetworkTopologySpec(highest_tier_allowed=1, highest_tier_name="x")),
            "spec.networkTopology: must not specify 'highestTierAllowed' and 'highestTierName'",
        ),
        (
            pg(
                sub_group_policy=(
                    SubGroupPolicy(
                        name="s",
                        network_topology=NetworkTopologySpec(
                            highest_tier_allowed=1, highest_tier_name="x"
                        ),
                    ),
                )
            ),
            "spec.subGroupPolicy[0].networkTopology: must not specify 'highestTierAllowed'",
        ),
        (pg(min_member=-1), "spec.minMember: 'minMember' must be >= 0;"),
    ],
)
def test_podgroup_rules(podgroup: PodGroup, message: str) -> None:
    """Queue existence and state, and the networkTopology exclusivity, name their fields."""
    refusal = validate_podgroup(podgroup, CLUSTER)
    assert (message in refusal) if message else refusal == ""


def pod(scheduler: str = "volcano", **annotations: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", annotations=annotations),
        spec=PodSpec(scheduler_name=scheduler),
    )


MIN, MAX = "volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable"


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({}, ""),
        ({MIN: "1"}, ""),
        ({MAX: "99%"}, ""),
        ({MIN: "1%"}, ""),
        ({MIN: "0"}, f"metadata.annotations[{MIN}]: invalid value '0'"),
        ({MAX: "100%"}, f"metadata.annotations[{MAX}]: invalid value '100%'"),
        ({MAX: "0%"}, "it must be a positive integer or a percentage between 1% and 99%"),
        ({MIN: "-1"}, "invalid value '-1'"),
        ({MIN: "two"}, "invalid value 'two'"),
        (
            {MIN: "1", MAX: "1"},
            f"not allow configure multiple annotations <[{MIN} {MAX}]> at same time",
        ),
    ],
)
def test_pod_rules(annotations: dict[str, str], message: str) -> None:
    """The disruption-budget annotations: one of them, a positive integer or 1%-99%."""
    refusal = validate_pod(pod(**annotations), ("volcano",))
    assert (message in refusal) if message else refusal == ""


def test_pods_of_other_schedulers_are_not_checked() -> None:
    """Only pods of the configured scheduler names are validated."""
    assert validate_pod(pod("default-scheduler", **{MIN: "0"}), ("volcano",)) == ""
    assert validate_pod(pod("caldera", **{MIN: "0"}), ("volcano", "caldera")) != ""
