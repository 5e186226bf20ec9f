"""A node's heartbeat is no news to the scheduler: ``scheduler.snapshot.node_moved`` and the
live snapshot's ``node_updated`` ignore updates that change only what no plugin reads (the
resourceVersion, the conditions' times), and still see every real change."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from caldera.api.core import Node, NodeSpec, NodeStatus, Taint
from caldera.api.meta import Condition, ObjectMeta
from informers.store import ResourceEventHandler
from scheduler.api.types import ClusterInfo
from scheduler.live_snapshot import CachedObjects, KeyedObjects, LiveSnapshot
from scheduler.process import _note
from scheduler.snapshot import node_moved

replace = msgspec.structs.replace


def _node(
    beat: str = "2026-01-01T00:00:00Z",
    version: str = "1",
    transition: str = "2026-01-01T00:00:00Z",
) -> Node:
    return Node(
        metadata=ObjectMeta(name="n0", resource_version=version, labels={"zone": "a"}),
        status=NodeStatus(
            capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
            allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
            conditions=(
                Condition(
                    type="Ready",
                    status="True",
                    reason="KubeletReady",
                    last_transition_time=transition,
                    last_heartbeat_time=beat,
                ),
                Condition(type="MemoryPressure", status="False", last_heartbeat_time=beat),
            ),
        ),
    )


def _beat(node: Node) -> Node:
    """The next heartbeat: newer heartbeat times and resourceVersion, nothing else."""
    return _node(beat="2026-01-01T00:00:20Z", version=str(int(node.metadata.resource_version) + 1))


def _ready(node: Node, status: str) -> Node:
    ready, *others = node.status.conditions
    conditions = (replace(ready, status=status), *others)
    return replace(node, status=replace(node.status, conditions=conditions))


REAL_CHANGES: dict[str, Callable[[Node], Node]] = {
    "allocatable": lambda n: replace(
        n, status=replace(n.status, allocatable={**n.status.allocatable, "cpu": "3"})
    ),
    "labels": lambda n: replace(n, metadata=replace(n.metadata, labels={"zone": "b"})),
    "annotations": lambda n: replace(n, metadata=replace(n.metadata, annotations={"a": "1"})),
    "taints": lambda n: replace(
        n, spec=NodeSpec(taints=(Taint(key="k", value="v", effect="NoSchedule"),))
    ),
    "unschedulable": lambda n: replace(n, spec=NodeSpec(unschedulable=True)),
    "a condition's status": lambda n: _ready(n, "Unknown"),
}


def test_a_heartbeat_does_not_move_a_node() -> None:
    """New heartbeat times and a new resourceVersion alone: not moved; nor with a new
    transition time beside them (kwok's heartbeat stage writes both)."""
    node = _node()
    assert not node_moved(node, _beat(node))
    kwok = _node(beat="2026-01-01T00:05:00Z", version="7", transition="2026-01-01T00:05:00Z")
    assert not node_moved(node, kwok)
    assert not node_moved(
        node, replace(node, metadata=replace(node.metadata, resource_version="9"))
    )
    assert not node_moved(node, node)


@pytest.mark.parametrize("change", sorted(REAL_CHANGES))
def test_what_the_scheduler_reads_moves_a_node(change: str) -> None:
    """A change the scheduler reads moves the node, with or without a heartbeat beside it."""
    node = _node()
    changed = REAL_CHANGES[change](node)
    assert node_moved(node, changed)
    assert node_moved(node, REAL_CHANGES[change](_beat(node)))
    assert node_moved(changed, node)


class _Cluster:
    """A node store and a live snapshot that is told of the store's updates as the
    scheduler's informer handler tells it."""

    def __init__(self) -> None:
        self.nodes: KeyedObjects[Node] = KeyedObjects()
        self.live = LiveSnapshot()
        node = _node()
        self.nodes.items["n0"] = node
        self.live.node_changed(node)

    def update(self, new: Node) -> None:
        old = self.nodes.items["n0"]
        self.nodes.items["n0"] = new
        self.live.node_updated(old, new)

    def snapshot(self) -> ClusterInfo:
        objects = CachedObjects(
            pods=KeyedObjects(),
            nodes=self.nodes,
            podgroups=KeyedObjects(),
            queues=KeyedObjects(),
            priority_classes=KeyedObjects(),
        )
        cluster, _ = self.live.update(objects, assumed={})
        return cluster


def test_a_heartbeat_leaves_the_snapshots_change_log_empty() -> None:
    """After heartbeats alone the snapshot has no news, logs no node as changed for the
    classes' verdicts, and keeps the node's NodeInfo."""
    world = _Cluster()
    cluster = world.snapshot()
    assert cluster.verdicts is not None
    end, info = cluster.verdicts.end, cluster.nodes["n0"]
    for _ in range(3):
        world.update(_beat(world.nodes.items["n0"]))
    assert not world.live.has_news({})
    again = world.snapshot()
    assert again is cluster
    assert cluster.verdicts.end == end
    assert cluster.nodes["n0"] is info


@pytest.mark.parametrize("change", sorted(REAL_CHANGES))
def test_a_real_change_still_shows(change: str) -> None:
    """A change the scheduler reads is news: the node is derived again and logged."""
    world = _Cluster()
    cluster = world.snapshot()
    assert cluster.verdicts is not None
    end = cluster.verdicts.end
    world.update(REAL_CHANGES[change](_beat(world.nodes.items["n0"])))
    assert world.live.has_news({})
    again = world.snapshot()
    assert again.verdicts is not None
    assert again.verdicts.log[end - again.verdicts.base :] == ["n0"]
    assert again.nodes["n0"].node == world.nodes.items["n0"]


class _Informer:
    """The handler side of a node informer: what the scheduler process registers."""

    def __init__(self) -> None:
        self.handlers: list[ResourceEventHandler[Node]] = []

    def add_handler(self, handler: ResourceEventHandler[Node]) -> None:
        self.handlers.append(handler)


def test_the_process_wakes_on_real_node_changes_only() -> None:
    """The scheduler process's node handler (``_note`` with ``node_moved``) is told of adds,
    deletes and real changes, not of heartbeats."""
    informer = _Informer()
    told: list[str] = []
    _note(informer, lambda n: told.append(n.metadata.resource_version), moved=node_moved)  # type: ignore[arg-type]
    (handler,) = informer.handlers
    node = _node()
    handler.on_add(node)
    beat = _beat(node)
    handler.on_update(node, beat)
    changed = REAL_CHANGES["taints"](_beat(beat))
    handler.on_update(beat, changed)
    handler.on_delete(changed)
    assert told == ["1", "3", "3"]
