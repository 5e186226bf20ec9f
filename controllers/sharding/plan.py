"""The NodeShard writes that bring the cluster to an assignment, pure.

A NodeShard the sharding controller owns carries the label ``MANAGED_BY``; one of a configured
name without it (an administrator's, another controller's) is reported and left alone. A
configured shard that is missing is created; one whose ``spec.nodesDesired`` differs is
replaced (the status is the scheduler's). A shard no longer configured is drained before it is
deleted: its ``nodesDesired`` is emptied first, so its scheduler stops placing pods there and
publishes an empty ``status.nodesInUse``, and only then (or ``DRAIN_TIMEOUT`` seconds after it
was emptied, for a scheduler that is gone) is it deleted. Until then the other schedulers do
not use its nodes: a scheduler places pods only on its desired nodes that no other shard has in
use. Volcano deletes the NodeShard at once, which lets another scheduler take the nodes while
the first may still be binding to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from caldera.api.meta import ObjectMeta
from caldera.api.shard import NodeShard, NodeShardSpec

MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "caldera-sharding-controller")
DRAIN_TIMEOUT: Final = 60.0


def owned(shard: NodeShard) -> bool:
    key, value = MANAGED_BY
    return shard.metadata.labels.get(key) == value


@dataclass(frozen=True, slots=True)
class ShardPlan:
    create: list[NodeShard] = field(default_factory=list)
    update: list[NodeShard] = field(default_factory=list)
    drain: list[NodeShard] = field(default_factory=list)  # emptied now (spec.nodesDesired [])
    delete: list[NodeShard] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # configured names taken by others
    waiting: list[str] = field(default_factory=list)  # draining, not yet released


def plan(
    desired: Mapping[str, Sequence[str]],
    existing: Sequence[NodeShard],
    *,
    emptied_for: Mapping[str, float],
) -> ShardPlan:
    """The writes from ``existing`` NodeShards to ``desired`` (shard name -> nodes);
    ``emptied_for``: seconds since each draining shard was seen emptied (absent: unknown)."""
    out = ShardPlan()
    by_name = {s.metadata.name: s for s in existing}
    for name, nodes in desired.items():
        shard = by_name.get(name)
        if shard is None:
            key, value = MANAGED_BY
            out.create.append(
                NodeShard(
                    metadata=ObjectMeta(name=name, labels={key: value}),
                    spec=NodeShardSpec(nodes_desired=tuple(nodes)),
                )
            )
        elif not owned(shard):
            out.skipped.append(name)
        elif shard.metadata.deletion_timestamp:
            continue  # recreated once it is gone
        elif tuple(sorted(shard.spec.nodes_desired)) != tuple(nodes):
            spec = NodeShardSpec(nodes_desired=tuple(nodes))
            out.update.append(msgspec.structs.replace(shard, spec=spec))
    for shard in existing:
        name = shard.metadata.name
        if name in desired or not owned(shard) or shard.metadata.deletion_timestamp:
            continue
        if shard.spec.nodes_desired:
            out.drain.append(msgspec.structs.replace(shard, spec=NodeShardSpec()))
        elif not shard.status.nodes_in_use or emptied_for.get(name, 0.0) >= DRAIN_TIMEOUT:
            out.delete.append(shard)
        else:
            out.waiting.append(name)
    return out
