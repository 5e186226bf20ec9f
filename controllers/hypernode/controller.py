"""The hypernode controller: builds and keeps HyperNodes from node labels (Volcano's label
discovery) and keeps every HyperNode's ``status.nodeCount``.

Two keys: ``DISCOVERY`` for the label discovery (each run derives every discovered HyperNode
from every node, as Volcano's discoverer does), and ``COUNTS`` for every HyperNode's
``status.nodeCount`` (one run resolves the whole tree once: a rack's count changes its
spine's). A node that comes, goes or changes a configured label queues the discovery; a node
that comes, goes or changes labels, and any HyperNode event, queue the counts; a deleted
HyperNode also queues the discovery (an owned HyperNode deleted by hand comes back, as in
Volcano). The work queue holds each key once, so a burst of events costs one run.

The discovery reconcile reads the cache, asks ``controllers.hypernode.discovery.plan`` and
writes creates, PUTs (with the cached resourceVersion, so a stale read answers 409 and is
retried) and deletes (with the UID as a precondition). Only HyperNodes the discovery made
are written (``discovery.owned``: the ``volcano.sh/network-topology-source: label`` label and a
name derived from their labels); the others, an administrator's included, are only counted.
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

# Not DNS names: no HyperNode can be called this.
DISCOVERY: Final = "~label-discovery"
COUNTS: Final = "~node-counts"


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
                add=self._hypernode_changed,
                update=lambda _old, new: self._hypernode_changed(new),
                delete=self._hypernode_gone,
            )
        )

    def _all_statuses(self) -> None:
        self.queue.add(COUNTS)

    def _hypernode_changed(self, _hn: HyperNode) -> None:
        self.queue.add(COUNTS)

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
        elif key == COUNTS:
            await self._count()
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

    async def _count(self) -> None:
        """Write every HyperNode's nodeCount that changed."""
        labels = {n.metadata.name: n.metadata.labels for n in self.nodes.store.list()}
        hypernodes = self.hypernodes.store.list()
        tree = build_tree(hypernodes, labels)
        for hn in hypernodes:
            if hn.metadata.deletion_timestamp:
                continue
            island = tree.islands.get(hn.metadata.name)
            count = len(island.nodes) if island is not None else 0
            if hn.status.node_count == count:
                continue
            body = msgspec.structs.replace(
                hn, status=msgspec.structs.replace(hn.status, node_count=count)
            )
            # Gone meanwhile: nothing to count. A 409 (a newer version in flight) is retried.
            with contextlib.suppress(NotFound):
                await self.ctx.client.update_status(HYPERNODE, body)
