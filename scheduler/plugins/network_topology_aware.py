"""The network-topology-aware plugin (Volcano v1.12+): HyperNode-aware placement of jobs that
set ``networkTopology``.

Arguments, Volcano's names and defaults: ``weight`` (1), ``hypernode.binpack.cpu`` (1),
``hypernode.binpack.memory`` (1), ``hypernode.binpack.resources`` (a comma-separated list of
other resources, e.g. ``nvidia.com/gpu``) with ``hypernode.binpack.resources.<name>`` (1 each),
``hypernode.binpack.normal-pod.enable`` (true), ``hypernode.binpack.normal-pod.fading`` (0.8) and
``hypernode.gradient.evict.max-hypernodes`` (8). A negative weight falls back to its default,
as in Volcano.

The plugin only sets ``Session.topology`` (``scheduler.framework.hypernodes``, which keeps
the HyperNodes' resources current as tasks move, from the session's log of changed nodes; on
the live snapshot the last session's sums are carried over, kept in ``ClusterInfo.plugin_memory``
and brought up to date from the verdict memory's log of the nodes changed since): the
allocate action walks the HyperNodes tier by tier for jobs with networkTopology
(``scheduler.actions.topology``), and preempt and reclaim keep a hard-mode job's victims in
one HyperNode. It registers no node predicate or score, so pods without networkTopology are
placed exactly as without it (the normal-pod arguments are accepted and not used: see
docs/compatibility.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.api.verdicts import VerdictMemory
from scheduler.framework.hypernodes import HyperNodeScorer, HyperNodeState
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session

PREFIX = "hypernode.binpack.resources"


def _non_negative(args: Arguments, key: str, default: int) -> int:
    value = args.integer(key, default)
    return default if value < 0 else value


def scorer_from(args: Arguments) -> HyperNodeScorer:
    """The plugin's arguments, checked (a bad value names the plugin and the key)."""
    weights = {
        "cpu": _non_negative(args, "hypernode.binpack.cpu", 1),
        "memory": _non_negative(args, "hypernode.binpack.memory", 1),
    }
    for name in args.string(PREFIX, "").split(","):
        name = name.strip()
        if name:
            weights[name] = _non_negative(args, f"{PREFIX}.{name}", 1)
    fading = args.number("hypernode.binpack.normal-pod.fading", 0.8)
    evict_max = args.integer("hypernode.gradient.evict.max-hypernodes", 8)
    return HyperNodeScorer(
        weight=_non_negative(args, "weight", 1),
        resource_weights=weights,
        normal_pod_enable=args.boolean("hypernode.binpack.normal-pod.enable", True),
        normal_pod_fading=0.8 if fading < 0 else fading,
        evict_max_hypernodes=8 if evict_max <= 0 else evict_max,
    )


class NetworkTopologyAwarePlugin:
    name = "network-topology-aware"

    def __init__(self, args: Arguments) -> None:
        self.scorer = scorer_from(args)

    def on_session_open(self, ssn: Session) -> None:
        ssn.topology = self._carried(ssn) or HyperNodeState(
            self.scorer, ssn.cluster.hypernodes, ssn.nodes, ssn.node_changes
        )

    def _carried(self, ssn: Session) -> HyperNodeState | None:
        """The last session's HyperNode sums, carried into this one, when the live snapshot
        logged every node changed since (its verdict memory's log, from where that session
        ended) and the tree, the nodes and the scorer are the ones they were summed for."""
        cluster = ssn.cluster
        kept = cluster.plugin_memory.get(self.name)
        verdicts = cluster.verdicts
        if not isinstance(kept, _Kept) or verdicts is None:
            return None
        state = kept.state
        if (
            kept.verdicts is not verdicts
            or verdicts.base > kept.position
            or state.tree is not cluster.hypernodes
            or state.nodes is not ssn.nodes
            or state.scorer != self.scorer
        ):
            return None
        state.resume(ssn.nodes, ssn.node_changes, verdicts.log[kept.position - verdicts.base :])
        return state

    def on_session_close(self, ssn: Session) -> None:
        cluster, state = ssn.cluster, ssn.topology
        if cluster.verdicts is None or state is None:
            cluster.plugin_memory.pop(self.name, None)
            return
        # Every node changed from here on (this session's, and the snapshot's before the next
        # one) is appended to the verdict memory's log after this position.
        cluster.plugin_memory[self.name] = _Kept(state, cluster.verdicts, cluster.verdicts.end)


@dataclass(frozen=True)
class _Kept:
    """A session's HyperNode sums, and where the log of nodes changed after it begins."""

    state: HyperNodeState
    verdicts: VerdictMemory
    position: int
