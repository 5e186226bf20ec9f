"""The sharding controller: divides the nodes between schedulers as Volcano's NodeShards
(shard.volcano.sh/v1alpha1), one per configured scheduler, from Volcano's sharding ConfigMap.

Off by default, as in Volcano (``--controllers '*'`` or naming ``sharding`` turns it on). One
key, ``SYNC``: each run reads the ConfigMap (``--sharding-configmap`` in
``--sharding-configmap-namespace``, key ``sharding.yaml``), derives the nodes' facts from the
cache (CPU requested over capacity from the pods on each node, only when a policy reads it;
labels), asks ``controllers.sharding.assign`` for each shard's nodes, and writes the
NodeShards ``controllers.sharding.plan`` lists (PUTs carry the cached resourceVersion, so a
stale read answers 409 and is retried; deletes carry the UID). The ConfigMap is read with a GET
each run rather than watched (a ConfigMap informer would hold every ConfigMap of the cluster);
each run queues the next within ``min(shardSyncPeriod, CONFIG_POLL)`` seconds, so an edit is
seen within ``CONFIG_POLL`` seconds. A ConfigMap that is gone or invalid keeps the last good
configuration (Volcano's behaviour); with none ever read, nothing is written.

Node changes (added, removed, labels) and every NodeShard event queue ``SYNC``; pod changes
queue it ``POD_DELAY`` seconds later (a flood of binds costs one run) when
``enableNodeEventTrigger`` is on and a policy reads utilization.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Final

from caldera.api.core import ConfigMap, Node, Pod
from caldera.api.kinds import CONFIGMAP, NODE, NODESHARD, POD
from caldera.kube.errors import AlreadyExists, Conflict, NotFound
from controllers.runtime import Controller, Result
from controllers.sharding.assign import NodeFacts, assign, node_facts
from controllers.sharding.config import (
    CONFIGMAP_KEY,
    AllocationRate,
    ShardingConfig,
    ShardingConfigError,
    parse_config_text,
)
from controllers.sharding.plan import plan
from informers.store import HandlerFuncs

SYNC: Final = "~shards"  # not a DNS name: no object is called this
CONFIG_POLL: Final = 10.0
POD_DELAY: Final = 1.0
BY_NODE: Final = "sharding-pods-by-node"


class ShardingController(Controller):
    """Keeps one NodeShard per configured scheduler."""

    name = "sharding"

    def setup(self) -> None:
        settings = self.ctx.settings
        self.configmap = settings.sharding_configmap
        self.namespace = (
            settings.sharding_configmap_namespace or os.environ.get("POD_NAMESPACE") or "default"
        )
        self.config: ShardingConfig | None = None
        self._emptied: dict[str, float] = {}  # draining shard -> monotonic time seen emptied
        self.nodes = self.ctx.informers.informer(NODE)
        self.pods = self.ctx.informers.informer(POD)
        self.shards = self.ctx.informers.informer(NODESHARD)
        self.pods.add_indexer(BY_NODE, lambda p: [p.spec.node_name] if p.spec.node_name else [])
        self.nodes.add_handler(
            HandlerFuncs(add=self._sync, update=self._node_updated, delete=self._sync)
        )
        self.shards.add_handler(
            HandlerFuncs(
                add=self._sync, update=lambda _o, _n: self.queue.add(SYNC), delete=self._sync
            )
        )
        self.pods.add_handler(
            HandlerFuncs(add=self._pod_changed, update=self._pod_updated, delete=self._pod_changed)
        )
        self.queue.add(SYNC)

    def _sync(self, _obj: object) -> None:
        self.queue.add(SYNC)

    def _node_updated(self, old: Node, new: Node) -> None:
        if old.metadata.labels != new.metadata.labels or old.status.capacity != new.status.capacity:
            self.queue.add(SYNC)

    def _reads_utilization(self) -> bool:
        config = self.config
        return (
            config is not None
            and config.node_event_trigger
            and any(isinstance(p, AllocationRate) for s in config.shards for p in s.policies)
        )

    def _pod_changed(self, pod: Pod) -> None:
        if pod.spec.node_name and self._reads_utilization():
            self.queue.add_after(SYNC, POD_DELAY)

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        if old.spec.node_name != new.spec.node_name or old.status.phase != new.status.phase:
            self._pod_changed(new)

    async def _read_config(self) -> None:
        try:
            cm: ConfigMap = await self.ctx.client.get(
                CONFIGMAP, self.configmap, namespace=self.namespace
            )
        except NotFound:
            if self.config is not None:
                self.log.warning("sharding configmap is gone; keeping the last configuration")
            return
        text = cm.data.get(CONFIGMAP_KEY)
        if text is None:
            self.log.error("sharding configmap has no key", key=CONFIGMAP_KEY)
            return
        try:
            config = parse_config_text(text)
        except ShardingConfigError as exc:
            self.log.error("invalid sharding configuration; keeping the last one", error=str(exc))
            return
        if config != self.config:
            self.log.info("sharding configuration loaded", shards=[s.name for s in config.shards])
        self.config = config

    def _facts(self, config: ShardingConfig) -> list[NodeFacts]:
        nodes = self.nodes.store.list()
        if not any(isinstance(p, AllocationRate) for s in config.shards for p in s.policies):
            return [NodeFacts(n.metadata.name, 0.0, n.metadata.labels) for n in nodes]
        store = self.pods.store
        return [node_facts(n, store.by_index(BY_NODE, n.metadata.name)) for n in nodes]

    async def reconcile(self, key: str) -> Result | None:
        if key != SYNC:
            return None
        await self._read_config()
        config = self.config
        if config is None:
            return Result(requeue_after=CONFIG_POLL)
        existing = self.shards.store.list()
        current = {s.metadata.name: s.spec.nodes_desired for s in existing}
        desired = assign(config.shards, self._facts(config), current)
        now = time.monotonic()
        emptied = {
            s.metadata.name: now - self._emptied.setdefault(s.metadata.name, now)
            for s in existing
            if s.metadata.name not in desired and not s.spec.nodes_desired
        }
        todo = plan(desired, existing, emptied_for=emptied)
        client = self.ctx.client
        for name in todo.skipped:
            self.log.warning("a nodeshard of a configured name is not ours; left alone", name=name)
        for shard in todo.create:
            with contextlib.suppress(AlreadyExists):  # the cache has not seen it yet
                await client.create(NODESHARD, shard)
        for shard in todo.update + todo.drain:
            await client.replace(NODESHARD, shard)  # 409 on a stale read: retried
        for name in list(self._emptied):
            if name in desired:
                self._emptied.pop(name)  # configured again: no longer draining
        for shard in todo.delete:
            with contextlib.suppress(NotFound, Conflict):
                await client.delete(NODESHARD, shard.metadata.name, uid=shard.metadata.uid)
            self._emptied.pop(shard.metadata.name, None)
        if todo.create or todo.update or todo.drain or todo.delete:
            self.log.info(
                "nodeshards written",
                sizes={name: len(nodes) for name, nodes in desired.items()},
                created=len(todo.create),
                updated=len(todo.update),
                drained=[s.metadata.name for s in todo.drain],
                deleted=[s.metadata.name for s in todo.delete],
            )
        return Result(requeue_after=min(config.sync_period, CONFIG_POLL))
