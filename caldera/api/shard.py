"""Volcano's shard.volcano.sh/v1alpha1 NodeShard as msgspec models (Volcano v1.14+).

A NodeShard is the set of nodes one scheduler may place pods on when it runs with
``--scheduler-sharding-mode=hard``; its name is the scheduler's shard name
(``--scheduler-sharding-name``). The sharding controller owns ``spec.nodesDesired``; the
scheduler owns ``status``: ``nodesInUse`` is what it places on now (its desired nodes less those
another shard still has in use), ``nodesToAdd``/``nodesToRemove`` the difference still to go.
Cluster-scoped, short name ``nsh``; the CRD in the chart is generated from these models
(``caldera.api.crdgen``), with the node lists bounded (``caldera.api.limits``).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from caldera.api.meta import Model, ObjectMeta, Time, crd, type_meta

SHARD_API_VERSION: Final = "shard.volcano.sh/v1alpha1"


class NodeShardSpec(Model, frozen=True, omit_defaults=False):
    # Encoded even when empty: the CRD requires the key (an emptied shard is a valid spec).
    nodes_desired: Annotated[tuple[str, ...], crd(required=True)] = ()


class NodeShardStatus(Model, frozen=True):
    last_update_time: Time | None = None
    nodes_in_use: tuple[str, ...] = ()
    nodes_to_remove: tuple[str, ...] = ()
    nodes_to_add: tuple[str, ...] = ()


class NodeShard(Model, frozen=True):
    """shard.volcano.sh/v1alpha1 NodeShard (nsh), cluster-scoped."""

    api_version: str = type_meta(SHARD_API_VERSION)
    kind: str = type_meta("NodeShard")
    metadata: ObjectMeta = ObjectMeta()
    spec: Annotated[NodeShardSpec, crd(required=True)] = NodeShardSpec()
    status: NodeShardStatus = NodeShardStatus()


NODESHARD_DECODER: Final = msgspec.json.Decoder(NodeShard)
