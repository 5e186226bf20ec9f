"""Hard node sharding (Volcano's ``--scheduler-sharding-mode=hard``): the scheduler places pods
only on the nodes of its NodeShard (``--scheduler-sharding-name``) that no other shard has in
use, and publishes what it uses in the NodeShard's status.

The nodes it may use are ``spec.nodesDesired`` of its own NodeShard less every other NodeShard's
``status.nodesInUse`` (Volcano's ``getAvailableNodesFromShard``): a node the sharding controller
moves from shard A to shard B is used by B only once A's scheduler has published that it no
longer uses it. A's scheduler publishes the release only when none of its binds to that node is
still in flight (the pod is assumed there until its cache sees it bound), so two schedulers
never give out the same room. Without its NodeShard the scheduler places nothing (Volcano keeps
the last set it had).

The filter is a view of the node store (``ShardNodes``) handed to the snapshot in place of the
store: a node outside the set is not in the session's snapshot at all, while the pods on it
still count for their jobs (a gang with pods there stays whole) and, for every scheduler whose
shard holds it, on that node. The cluster's totals (a queue's deserved share, overcommit's
room) still count the nodes outside the shard and what runs there, as Volcano's do
(``ClusterInfo.outside_allocatable``, ``outside_used``). ``HardShard.refresh`` runs before each
session and names the nodes that came or went, which the snapshot derives again. With sharding
off none of this exists: the snapshot reads the store itself and no NodeShard is watched.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Iterable, Sequence

import msgspec

from caldera.api.core import Node
from caldera.api.resources import Resources
from caldera.api.shard import NodeShard, NodeShardStatus
from scheduler.api.types import TaskInfo
from scheduler.live_snapshot import Objects
from scheduler.snapshot import node_info


def usable_nodes(name: str, shards: Sequence[NodeShard]) -> frozenset[str]:
    """The nodes the scheduler of shard ``name`` may place on: its desired nodes that no other
    shard has in use; none without its shard."""
    own = next((s for s in shards if s.metadata.name == name), None)
    if own is None:
        return frozenset()
    taken: set[str] = set()
    for shard in shards:
        if shard.metadata.name != name:
            taken.update(shard.status.nodes_in_use)
    return frozenset(own.spec.nodes_desired).difference(taken)


def shard_status(shard: NodeShard, in_use: Collection[str], now: str) -> NodeShardStatus | None:
    """``shard``'s status with ``in_use`` as the nodes in use (Volcano's lists, sorted); None
    when that is what it says already."""
    desired = set(shard.spec.nodes_desired)
    used = set(in_use)
    status = NodeShardStatus(
        last_update_time=now,
        nodes_in_use=tuple(sorted(used)),
        nodes_to_remove=tuple(sorted(used - desired)),
        nodes_to_add=tuple(sorted(desired - used)),
    )
    old = shard.status
    if (old.nodes_in_use, old.nodes_to_remove, old.nodes_to_add) == (
        status.nodes_in_use,
        status.nodes_to_remove,
        status.nodes_to_add,
    ):
        return None
    return status


class ShardNodes:
    """The node store as the snapshot sees it in hard mode: only the shard's usable nodes."""

    def __init__(self, nodes: Objects[Node], shard: HardShard) -> None:
        self._nodes, self._shard = nodes, shard

    def get(self, key: str) -> Node | None:
        return self._nodes.get(key) if key in self._shard.allowed else None

    def list(self) -> builtins.list[Node]:
        allowed = self._shard.allowed
        return [n for n in self._nodes.list() if n.metadata.name in allowed]


class HardShard:
    """The usable node set of one scheduler's shard, kept between sessions."""

    def __init__(self, name: str, nodes: Objects[Node], shards: Objects[NodeShard]) -> None:
        self.name = name
        self.shards = shards
        self.allowed: frozenset[str] = frozenset()  # what the snapshot uses
        self.view = ShardNodes(nodes, self)

    def refresh(self) -> frozenset[str]:
        """Take the usable set from the NodeShards now; the nodes that came or went."""
        usable = usable_nodes(self.name, self.shards.list())
        changed = usable.symmetric_difference(self.allowed)
        self.allowed = usable
        return changed

    def outside_totals(
        self, nodes: Iterable[Node], tasks_on: Callable[[str], Iterable[TaskInfo]]
    ) -> tuple[Resources, Resources]:
        """The ready allocatable and the tasks' use of the nodes outside the shard: the
        snapshot leaves them out, the cluster's totals do not (O(nodes outside) a session)."""
        allocatable, used = Resources(), Resources()
        for node in nodes:
            name = node.metadata.name
            if name in self.allowed:
                continue
            info = node_info(node)
            if info.ready:
                allocatable = allocatable + info.allocatable
            for task in tasks_on(name):
                used = used + task.resreq
        return allocatable, used

    def status_update(self, binding_to: Collection[str], now: str) -> NodeShard | None:
        """The own NodeShard with the status to publish, or None: nothing changed, no shard,
        or a node being given up still has binds in flight (``binding_to``: their nodes)."""
        own = self.shards.get(self.name)
        if own is None:
            return None
        released = set(own.status.nodes_in_use) - self.allowed
        if released and not released.isdisjoint(binding_to):
            return None
        status = shard_status(own, self.allowed, now)
        return None if status is None else msgspec.structs.replace(own, status=status)
