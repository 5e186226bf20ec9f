"""Queue admission rules (Volcano's pkg/webhooks/admission/queues/): defaults, and one row per
refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.api.volcano import Guarantee, Queue, QueueStatus
from unit.webhook_fixtures import queue
from webhooks.queues import QueueRules, mutate_queue, validate_queue
from webhooks.view import StaticView

RULES = QueueRules()
EXISTING = [
    queue("root", capability={"cpu": "100"}),
    queue("default"),
    queue(
        "team",
        capability={"cpu": "50"},
        deserved={"cpu": "20"},
        guarantee=Guarantee(resource={"cpu": "10"}),
    ),
    queue(
        "team-a", parent="team", deserved={"cpu": "15"}, guarantee=Guarantee(resource={"cpu": "8"})
    ),
    queue("busy"),
    queue("plain"),
    queue(
        "legacy",
        annotations={
            "volcano.sh/hierarchy": "root/eng/ml",
            "volcano.sh/hierarchy-weights": "1/2/3",
        },
    ),
]


def _with_allocated(q: Queue) -> Queue:
    return msgspec.structs.replace(q, status=QueueStatus(state="Open", allocated={"cpu": "2"}))


CLUSTER = StaticView([*(_with_allocated(q) if q.metadata.name == "busy" else q for q in EXISTING)])


def create(q: Queue, cluster: StaticView = CLUSTER) -> str:
    return validate_queue("CREATE", q, None, cluster=cluster, rules=RULES)


def test_defaults() -> None:
    """reclaimable true and weight 1 are added; values the user set are kept."""
    assert mutate_queue(queue("q", weight=0)) == [
        {"op": "add", "path": "/spec/reclaimable", "value": True},
        {"op": "add", "path": "/spec/weight", "value": 1},
    ]
    assert mutate_queue(queue("q", weight=3, reclaimable=False)) == []


def test_queue_without_spec_gets_one() -> None:
    """A queue with no spec at all gets a whole spec (a patch cannot add under a missing key)."""
    assert mutate_queue(queue("q"), has_spec=False) == [
        {"op": "add", "path": "/spec", "value": {"reclaimable": True, "weight": 1}}
    ]


def test_hierarchy_annotation_is_rooted() -> None:
    """A legacy hierarchy not starting at root gets root/ and a weight 1/ prefix."""
    q = queue(
        "q",
        reclaimable=True,
        annotations={"volcano.sh/hierarchy": "eng/ml", "volcano.sh/hierarchy-weights": "2/3"},
    )
    assert mutate_queue(q) == [
        {
            "op": "add",
            "path": "/metadata/annotations/volcano.sh~1hierarchy",
            "value": "root/eng/ml",
        },
        {
            "op": "add",
            "path": "/metadata/annotations/volcano.sh~1hierarchy-weights",
            "value": "1/2/3",
        },
    ]


def test_valid_queues_are_admitted() -> None:
    """A plain queue, a child within its parent's limits, and a deep-enough chain pass."""
    assert create(queue("q", capability={"cpu": "4", "memory": "8Gi"}, deserved={"cpu": "2"})) == ""
    assert (
        create(
            queue(
                "team-b",
                parent="team",
                deserved={"cpu": "5"},
                guarantee=Guarantee(resource={"cpu": "2"}),
            )
        )
        == ""
    )


def _chain(depth: int) -> StaticView:
    qs = [queue("root"), queue("l1")]
    qs += [queue(f"l{i}", parent=f"l{i - 1}") for i in range(2, depth + 1)]
    return StaticView(qs)


CREATE_RULES: list[tuple[str, Queue, str]] = [
    (
        "bad capability",
        queue("q", capability={"cpu": "lots"}),
        "spec.capability.cpu: Invalid value: \"lots\": invalid quantity 'lots'",
    ),
    ("bad deserved", queue("q", deserved={"memory": "1GB"}), "spec.deserved.memory: Invalid value"),
    (
        "bad guarantee",
        queue("q", guarantee=Guarantee(resource={"cpu": "-"})),
        "spec.guarantee.resource.cpu: Invalid value",
    ),
    (
        "guarantee above deserved",
        queue("q", deserved={"cpu": "1"}, guarantee=Guarantee(resource={"cpu": "2"})),
        'spec.guarantee.resource.cpu: Invalid value: "2": guarantee should less equal than '
        "deserved",
    ),
    (
        "guarantee not in deserved",
        queue("q", deserved={"cpu": "1"}, guarantee=Guarantee(resource={"memory": "1Gi"})),
        'spec.guarantee.resource.memory: Invalid value: "1Gi": guarantee should less equal than '
        "deserved",
    ),
    (
        "deserved above capability",
        queue("q", capability={"cpu": "1"}, deserved={"cpu": "2"}),
        'spec.deserved.cpu: Invalid value: "2": deserved should less equal than capability',
    ),
    (
        "guarantee above capability",
        queue("q", capability={"cpu": "1"}, guarantee=Guarantee(resource={"cpu": "2"})),
        'spec.guarantee.resource.cpu: Invalid value: "2": guarantee should less equal than '
        "capability",
    ),
    (
        "hierarchy weight not a number",
        queue(
            "q",
            annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/x"},
        ),
        'x in the 1/x is invalid number: strconv.ParseFloat: parsing "x": invalid syntax',
    ),
    (
        "bad state",
        queue("q", state="Closing"),
        'status.state: Invalid value: "Closing": queue state must be in [Open Closed]',
    ),
    (
        "weight 0",
        queue("q", weight=0),
        "spec.weight: Invalid value: 0: queue weight must be a positive integer",
    ),
    (
        "hierarchy lengths",
        queue(
            "q", annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1"}
        ),
        "volcano.sh/hierarchy must have the same length with volcano.sh/hierarchy-weights",
    ),
    (
        "hierarchy weight",
        queue(
            "q",
            annotations={"volcano.sh/hierarchy": "root/a", "volcano.sh/hierarchy-weights": "1/-2"},
        ),
        "metadata.annotations[volcano.sh/hierarchy-weights]: Invalid value: "
        '"1/-2": -2 in the 1/-2 must be larger than 0',
    ),
    (
        "hierarchy sub path",
        queue(
            "q",
            annotations={"volcano.sh/hierarchy": "root/eng", "volcano.sh/hierarchy-weights": "1/1"},
        ),
        "root/eng is not allowed to be in the sub path of root/eng/ml of queue legacy",
    ),
    (
        "parent itself",
        queue("q", parent="q"),
        "spec.parent: queue q cannot use itself as parent",
    ),
    (
        "parent missing",
        queue("q", parent="ghost"),
        "spec.parent: failed to get parent queue of queue q: "
        'queue.scheduling.volcano.sh "ghost" not found',
    ),
    (
        "parent with allocations",
        queue("q", parent="busy"),
        "spec.parent: queue busy cannot be the parent queue of queue q because it has allocated "
        "Pods: 0 (allocated resources ['cpu']; only leaf queues run jobs)",
    ),
    (
        "capability above ancestor",
        queue("q", parent="team-a", capability={"cpu": "60"}),
        "spec.capability.cpu: queue q capability[cpu]=60 exceeds its ancestor's capability=50",
    ),
    (
        "sibling guarantee sum",
        queue(
            "q", parent="team", guarantee=Guarantee(resource={"cpu": "3"}), deserved={"cpu": "3"}
        ),
        "spec.guarantee.resource: parent queue team validation failed: sum of children's "
        "guarantee (cpu 11) exceeds parent's guarantee limit (cpu 10)",
    ),
    (
        "sibling deserved sum",
        queue("q", parent="team", deserved={"cpu": "6"}),
        "spec.deserved: parent queue team validation failed: sum of children's deserved "
        "(cpu 21) exceeds parent's deserved limit (cpu 20)",
    ),
    (
        "guarantee under a parent without one",
        queue(
            "q", parent="plain", guarantee=Guarantee(resource={"cpu": "1"}), deserved={"cpu": "1"}
        ),
        "spec.guarantee.resource: parent queue plain validation failed: sum of children's "
        "guarantee (cpu 1) exceeds parent's guarantee limit (none)",
    ),
]


@pytest.mark.parametrize(("q", "message"), [pytest.param(q, m, id=n) for n, q, m in CREATE_RULES])
def test_create_rules(q: Queue, message: str) -> None:
    """Each queue rule refuses its bad queue with a message naming the field."""
    assert message in create(q)


def test_depth_limit() -> None:
    """A queue may sit 5 levels below root, not 6."""
    assert create(queue("q", parent="l4"), _chain(4)) == ""
    assert "exceeds the maximum allowed depth of 5 (it would be at depth 6)" in create(
        queue("q", parent="l5"), _chain(5)
    )


def _update(old: Queue, new: Queue, cluster: StaticView = CLUSTER, **rules: Any) -> str:
    return validate_queue("UPDATE", new, old, cluster=cluster, rules=QueueRules(**rules))


def test_root_protection() -> None:
    """root's capability, deserved and guarantee cannot change, unless protection is off."""
    old = queue("root", capability={"cpu": "100"})
    new = queue("root", capability={"cpu": "200"})
    assert (
        "spec.capability: root queue's resource attributes (capability, deserved, guarantee) "
        "cannot be modified"
    ) in _update(old, new)
    assert _update(old, new, root_protection=False) == ""
    assert (
        _update(old, msgspec.structs.replace(old, spec=msgspec.structs.replace(old.spec, weight=5)))
        == ""
    )


def test_parent_capability_must_cover_subtree() -> None:
    """Lowering a parent's capability below a descendant's is refused."""
    cluster = StaticView(
        [
            queue("root"),
            queue("p", capability={"cpu": "10"}),
            queue("c", parent="p", capability={"cpu": "8"}),
        ]
    )
    refusal = _update(
        queue("p", capability={"cpu": "10"}), queue("p", capability={"cpu": "4"}), cluster
    )
    assert (
        "spec.capability.cpu: queue p capability[cpu]=4 is smaller than its descendants' max "
        "capability=8"
    ) in refusal


def test_parent_guarantee_and_deserved_must_cover_children() -> None:
    """Lowering a parent's guarantee or deserved below its children's sum is refused; root's
    children are not held to root's (root has none)."""
    old = CLUSTER.queue("team")
    assert old is not None
    lower = msgspec.structs.replace(
        old.spec, guarantee=Guarantee(resource={"cpu": "5"}), deserved={"cpu": "14"}
    )
    refusal = _update(old, msgspec.structs.replace(old, spec=lower))
    assert (
        "spec.guarantee.resource: queue team validation failed: sum of children's guarantee "
        "(cpu 8) exceeds parent's guarantee limit (cpu 5)"
    ) in refusal
    assert "spec.deserved: queue team validation failed: sum of children's deserved (cpu 15)" in (
        refusal
    )
    assert create(queue("top", guarantee=Guarantee(resource={"cpu": "1"}))) == ""


def test_parent_cycle() -> None:
    """Re-parenting a queue under its own descendant is refused."""
    cluster = StaticView([queue("root"), queue("a"), queue("b", parent="a")])
    assert "would form a cycle" in _update(queue("a"), queue("a", parent="b"), cluster)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("default", "`default` queue can not be deleted"),
        ("root", "`root` queue can not be deleted"),
        (
            "team",
            "queue team can not be deleted because it has 1 child queues: team-a",
        ),
        ("team-a", ""),
    ],
)
def test_delete(name: str, message: str) -> None:
    """default and root, and queues with children, cannot be deleted."""
    old = CLUSTER.queue(name)
    assert validate_queue("DELETE", None, old, cluster=CLUSTER, rules=RULES) == message
