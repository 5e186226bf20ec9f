"""HyperNode sums carried from session to session on the live snapshot
(scheduler.framework.hypernodes, scheduler.plugins.network_topology_aware).

The live snapshot's random sequences (``unit/test_sched_live_snapshot.py``: nodes added,
changed, made not ready and removed, pods bound, ended and deleted, whole sessions placing
jobs) over a cluster with racks and a spine, some PodGroups in hard or soft networkTopology:
whenever a session opens with the sums the last one kept, and after each session, every
HyperNode's resources equal a fresh sum over its nodes, and every tier ranks as from scratch
(the groups of equal sums and their kept scores carried too).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random

import msgspec

from caldera.api.topology import HyperNode
from caldera.api.volcano import NetworkTopologySpec
from scheduler.api.types import ClusterInfo
from scheduler.conf import parse_conf
from scheduler.framework.hypernodes import HyperNodeState, island_resources
from scheduler.framework.plugin import Arguments
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.live_snapshot import CachedObjects, KeyedObjects
from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from scheduler.registry import ACTIONS, PLUGINS, REGISTRY
from unit.test_sched_live_snapshot import T0, Cache
from unit.test_sched_topology import assert_ranked
from unit.topology_fixtures import exact, hypernode

RUNS = 40
STEPS = 30
CONF = parse_conf(
    """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}, {name: network-topology-aware}]
""",
    actions=ACTIONS.keys(),
    plugins=PLUGINS.keys(),
)
# What the PodGroups ask, by name (the others are topology-blind).
RULES = {
    "g1": NetworkTopologySpec(mode="hard", highest_tier_allowed=1),
    "g2": NetworkTopologySpec(mode="hard", highest_tier_allowed=2),
    "g3": NetworkTopologySpec(mode="soft", highest_tier_allowed=1),
}


def _hypernodes() -> KeyedObjects[HyperNode]:
    """Racks r0 (n0, n1) and r1 (n2, n3, n4) under spine s0; n9 (where pods may be bound)
    in no HyperNode."""
    store: KeyedObjects[HyperNode] = KeyedObjects()
    for hn in (
        hypernode("r0", 1, [exact("Node", "n0"), exact("Node", "n1")]),
        hypernode("r1", 1, [exact("Node", n) for n in ("n2", "n3", "n4")]),
        hypernode("s0", 2, [exact("HyperNode", "r0"), exact("HyperNode", "r1")]),
    ):
        store.items[hn.metadata.name] = hn
    return store


class TopologyCache(Cache):
    """The live snapshot test's cache, with HyperNodes and networkTopology PodGroups."""

    def __init__(self, rng: random.Random) -> None:
        self.hypernodes = _hypernodes()
        super().__init__(rng)
        for hn in self.hypernodes.list():
            self.live.hypernode_changed(hn)

    def put_group(self, name: str, *, queue: str, min_member: int, phase: str, cls: str) -> None:
        super().put_group(name, queue=queue, min_member=min_member, phase=phase, cls=cls)
        rule = RULES.get(name)
        if rule is not None:
            pg = self.podgroups.items[f"ns/{name}"]
            spec = msgspec.structs.replace(pg.spec, network_topology=rule)
            pg = self.podgroups.items[f"ns/{name}"] = msgspec.structs.replace(pg, spec=spec)
            self.live.podgroup_changed(pg)

    def cached_objects(self) -> CachedObjects:
        return dataclasses.replace(super().cached_objects(), hypernodes=self.hypernodes)


def assert_as_fresh(state: HyperNodeState, cluster: ClusterInfo) -> None:
    tree = cluster.hypernodes
    for name, island in tree.islands.items():
        assert state.resources(name) == island_resources(cluster.nodes, island.nodes), name
    assert_ranked(state, tree, cluster.nodes, [0, 1, 2, 3])


def test_carried_sums_and_rankings_equal_fresh_ones() -> None:
    carried = placed = 0
    plugin = NetworkTopologyAwarePlugin(Arguments("network-topology-aware", {}))
    for seed in range(RUNS):
        cache = TopologyCache(random.Random(seed))  # noqa: S311 - seeded test data
        for step in range(STEPS):
            for _ in range(cache.rng.randint(0, 4)):
                cache.change()
            cluster = cache.live_cluster(T0 + dt.timedelta(seconds=step))
            if not cluster.hypernodes:
                continue
            # A session opened only to look at what it was given: the sums carried over.
            kept = cluster.plugin_memory.get(plugin.name)
            looking = Session(cluster, CONF.tiers)
            plugin.on_session_open(looking)
            assert looking.topology is not None
            carried += kept is not None and looking.topology is kept.state
            assert_as_fresh(looking.topology, cluster)
            plugin.on_session_close(looking)
            # A whole session, which places jobs (some in one HyperNode) as it goes.
            session = Session(cluster, CONF.tiers)
            try:
                result = run_session(session, CONF, REGISTRY)
                assert session.topology is not None
                assert_as_fresh(session.topology, cluster)
            finally:
                cache.live.after_session(session)
            placed += sum(1 for b in result.binds if b.task.job.endswith(("g1", "g2")))
            for bind in result.binds:
                cache.assumed[bind.task.uid] = bind.node
            cache.write_back(result)
    assert carried > 0  # sessions that began from the last one's sums
    assert placed > 0  # hard-mode pods placed: sums kept by difference within sessions too
