"""Hard node sharding in the scheduler (scheduler.sharding) and the sharding controller's
NodeShard writes (controllers.sharding.plan): pure, no API server."""

from __future__ import annotations

from caldera.api.core import Node, NodeStatus
from caldera.api.meta import Condition, ObjectMeta
from caldera.api.resources import Resources
from caldera.api.shard import NodeShard, NodeShardSpec, NodeShardStatus
from controllers.sharding.plan import DRAIN_TIMEOUT, MANAGED_BY, plan
from scheduler.api.types import ClusterInfo, TaskInfo, TaskStatus
from scheduler.live_snapshot import KeyedObjects
from scheduler.sharding import HardShard, shard_status, usable_nodes


def _shard(
    name: str, desired: tuple[str, ...] = (), in_use: tuple[str, ...] = (), *, ours: bool = True
) -> NodeShard:
    labels = dict([MANAGED_BY]) if ours else {}
    return NodeShard(
        metadata=ObjectMeta(name=name, labels=labels, uid=f"uid-{name}"),
        spec=NodeShardSpec(nodes_desired=desired),
        status=NodeShardStatus(nodes_in_use=in_use),
    )


def test_usable_nodes_leave_out_nodes_another_shard_uses() -> None:
    """A node moved from a to b is b's only once a no longer has it in use; no shard: none."""
    a = _shard("a", ("n1",), ("n1", "n2"))
    b = _shard("b", ("n2", "n3"), ("n3",))
    assert usable_nodes("b", [a, b]) == {"n3"}
    assert usable_nodes("a", [a, b]) == {"n1"}
    released = _shard("a", ("n1",), ("n1",))
    assert usable_nodes("b", [released, b]) == {"n2", "n3"}
    assert usable_nodes("c", [a, b]) == frozenset()


def test_status_lists_and_no_write_when_unchanged() -> None:
    """The status says what is in use and what is still to add; unchanged: nothing to write."""
    shard = _shard("a", ("n1", "n2"))
    status = shard_status(shard, {"n1"}, "2026-01-01T00:00:00Z")
    assert status is not None
    assert (status.nodes_in_use, status.nodes_to_add, status.nodes_to_remove) == (
        ("n1",),
        ("n2",),
        (),
    )
    written = NodeShard(metadata=shard.metadata, spec=shard.spec, status=status)
    assert shard_status(written, {"n1"}, "2026-01-01T00:00:01Z") is None


def test_view_and_release_waits_for_binds_in_flight() -> None:
    """The snapshot's node view holds only usable nodes; a node given up is published as
    released only when no bind to it is in flight."""
    nodes: KeyedObjects[Node] = KeyedObjects()
    for name in ("n1", "n2", "n3"):
        nodes.items[name] = Node(metadata=ObjectMeta(name=name))
    shards: KeyedObjects[NodeShard] = KeyedObjects()
    shards.items["a"] = _shard("a", ("n1", "n2"), ("n1", "n2"))
    hard = HardShard("a", nodes, shards)
    assert hard.refresh() == {"n1", "n2"}
    assert [n.metadata.name for n in hard.view.list()] == ["n1", "n2"]
    assert hard.view.get("n3") is None
    shards.items["a"] = _shard("a", ("n1",), ("n1", "n2"))
    assert hard.refresh() == {"n2"}
    assert hard.status_update(["n2"], "t") is None  # a bind to n2 still in flight
    update = hard.status_update(["n1"], "t")
    assert update is not None
    assert update.status.nodes_in_use == ("n1",)


def test_plan_creates_updates_and_drains_before_deleting() -> None:
    """Missing shards are created, changed ones replaced, others' left alone; a shard no
    longer configured is emptied first and deleted once released (or after the timeout)."""
    existing = [
        _shard("a", ("n1",)),
        _shard("b", ("n2",), ("n2",)),
        _shard("taken", (), ours=False),
    ]
    todo = plan({"a": ("n1", "n2"), "c": ("n3",), "taken": ()}, existing, emptied_for={})
    assert [s.spec.nodes_desired for s in todo.update] == [("n1", "n2")]
    assert [s.metadata.name for s in todo.create] == ["c"]
    assert todo.skipped == ["taken"]
    assert [s.metadata.name for s in todo.drain] == ["b"]
    assert todo.drain[0].spec.nodes_desired == ()
    emptied = [_shard("b", (), ("n2",))]
    assert plan({}, emptied, emptied_for={"b": 1.0}).waiting == ["b"]
    assert plan({}, emptied, emptied_for={"b": DRAIN_TIMEOUT}).delete == emptied
    assert plan({}, [_shard("b")], emptied_for={}).delete == [_shard("b")]


def test_totals_count_the_nodes_outside_the_shard() -> None:
    """The nodes outside the shard are not in the snapshot, but the cluster's totals count
    their allocatable (ready ones) and what runs there, as Volcano's do."""
    ready = (Condition(type="Ready", status="True"),)

    def node(name: str, cpu: str, *, up: bool = True) -> Node:
        status = NodeStatus(allocatable={"cpu": cpu}, conditions=ready if up else ())
        return Node(metadata=ObjectMeta(name=name), status=status)

    nodes: KeyedObjects[Node] = KeyedObjects()
    for n in (node("in", "4"), node("out", "8"), node("down", "16", up=False)):
        nodes.items[n.metadata.name] = n
    shards: KeyedObjects[NodeShard] = KeyedObjects()
    shards.items["a"] = _shard("a", ("in",))
    hard = HardShard("a", nodes, shards)
    hard.refresh()
    task = TaskInfo(
        uid="u",
        namespace="ns",
        name="p",
        job="ns/j",
        role="",
        resreq=Resources({"cpu": 3000}),
        init_resreq=Resources({"cpu": 3000}),
        priority=0,
        status=TaskStatus.RUNNING,
        node_name="out",
    )
    on = {"out": [task], "in": [task]}
    allocatable, used = hard.outside_totals(nodes.list(), lambda n: on.get(n, []))
    assert (allocatable, used) == (Resources({"cpu": 8000}), Resources({"cpu": 3000}))
    cluster = ClusterInfo(ready_allocatable=Resources({"cpu": 4000}), nodes_used=Resources())
    assert cluster.total_allocatable() == Resources({"cpu": 4000})
    cluster.outside_allocatable, cluster.outside_used = allocatable, used
    assert cluster.total_allocatable() == Resources({"cpu": 12000})
    assert cluster.total_used() == Resources({"cpu": 3000})
