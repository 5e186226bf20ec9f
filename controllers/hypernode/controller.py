"""The hypernode controller: builds and keeps HyperNodes from node labels (Volcano's label
discovery) and keeps every HyperNode's ``status.nodeCount``.

Keys: ``DISCOVERY`` for the label discovery (one key: each run derives every discovered
HyperNode from every node, as Volcano's discoverer does), and a HyperNode's name for its
status. A node that comes, goes or changes a configured label queues the discovery; any node
change that may alter what a HyperNode selects queues every HyperNode's status; a HyperNode's
own events queue its status, and a deleted one the discovery (an owned HyperNode deleted by
hand comes back, as in Volcano).

The discovery reconcile reads the cache, asks ``controllers.hypernode.discovery.plan`` and
writes creates, PUTs (with the cached resourceVersion, so a stale read answers 409 and is
retried) and deletes (with the UID as a precondition). HyperNodes without the
``volcano.sh/network-topology-source: label`` label are never written, only counted.
``status.nodeCount`` is the number of nodes under the HyperNode, nested HyperNodes included.
"""

from __future__ import annotations

import contextlib
from typing import Final

import msgspec
import yaml

from caldera.api.core import Node
from caldera.api.kinds import HYPERNODE, NODE
from caldera.api.topology import HyperNode
from caldera.api.topology_tree import build_tree
from caldera.kube.errors import AlreadyExists, Conflict, NotFound
from caldera.settings import SettingsError
from controllers.hypernode.discovery import (
    DiscoveryConfigError,
    LabelTopology,
    discovered,
    parse_discovery,
    plan,
)
from controllers.runtime import Controller, Result
from informers.store import HandlerFuncs

DISCOVERY: Final = "~label-discovery"  # no HyperNode can be called this (not a DNS name)


def load_discovery(path: str) -> list[LabelTopology]:
    """The label topologies of the configuration file at ``path`` ("" -> none)."""
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        return parse_discovery(doc)
    except (OSError, yaml.YAMLError, DiscoveryConfigError) as exc:
        raise SettingsError(f"network_topology_discovery {path}: {exc}") from None


class HyperNodeController(Controller):
    """Discovers HyperNodes from node labels and counts every HyperNode's nodes."""

    name = "hypernode"

    def setup(self) -> None:
        self.topologies = load_discovery(self.ctx.settings.network_topology_discovery)
        self.keys = {key for t in self.topologies for key in t.keys}
        self.nodes = self.ctx.informers.informer(NODE)
        self.hypernodes = self.ctx.informers.informer(HYPERNODE)
        self.nodes.add_handler(
            HandlerFuncs(add=self._node_came, update=self._node_updated, delete=self._node_came)
        )
        self.hypernodes.add_handler(
            HandlerFuncs(
                add=self.enqueue,
                update=lambda _old, new: self.enqueue(new),
                delete=self._hypernode_gone,
            )
        )

    def _all_statuses(self) -> None:
        for hn in self.hypernodes.store.list():
            self.enqueue(hn)

    def _node_came(self, _node: Node) -> None:
        if self.topologies:
            self.queue.add(DISCOVERY)
        self._all_statuses()

    def _node_updated(self, old: Node, new: Node) -> None:
        if old.metadata.labels == new.metadata.labels:
            return
        if self.topologies and any(
            old.metadata.labels.get(k) != new.metadata.labels.get(k) for k in self.keys
        ):
            self.queue.add(DISCOVERY)
        self._all_statuses()

    def _hypernode_gone(self, _hn: HyperNode) -> None:
        if self.topologies:
            self.queue.add(DISCOVERY)
        self._all_statuses()

    async def reconcile(self, key: str) -> Result | None:
        if key == DISCOVERY:
            await self._discover()
        else:
            await self._count(key)
        return None

    async def _discover(self) -> None:
        labels = {n.metadata.name: n.metadata.labels for n in self.nodes.store.list()}
        todo = plan(discovered(self.topologies, labels), self.hypernodes.store.list())
        for name in todo.skipped:
            self.log.warning(
                "discovered hypernode name is taken by a hypernode not ours", name=name
            )
        for hn in todo.create:
            try:
                await self.ctx.client.create(HYPERNODE, hn)
            except AlreadyExists:
                self.queue.add(DISCOVERY)  # the cache has not seen it yet: look again
        for hn in todo.update:
            await self.ctx.client.replace(HYPERNODE, hn)  # 409 on a stale read: retried
        for hn in todo.delete:
            # gone, or replaced by a new one of that name: not this one to delete
            with contextlib.suppress(NotFound, Conflict):
                await self.ctx.client.delete(HYPERNODE, hn.metadata.name, uid=hn.metadata.uid)
        if todo.create or todo.update or todo.delete:
            self.log.info(
                "hypernodes discovered",
                created=len(todo.create),
                updated=len(todo.update),
                deleted=len(todo.delete),
            )

    async def _count(self, name: str) -> None:
        hn = self.hypernodes.store.get(name)
        if hn is None or hn.metadata.deletion_timestamp:
            return
        labels = {n.metadata.name: n.metadata.labels for n in self.nodes.store.list()}
        tree = build_tree(self.hypernodes.store.list(), labels)
        island = tree.islands.get(name)
        count = len(island.nodes) if island is not None else 0
        if hn.status.node_count == count:
            return
        body = msgspec.structs.replace(
            hn, status=msgspec.structs.replace(hn.status, node_count=count)
        )
        try:
            await self.ctx.client.update_status(HYPERNODE, body)
        except NotFound:
            return
