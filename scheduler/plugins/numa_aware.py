"""numa-aware: places Guaranteed pods only where the node's kubelet can align their CPUs with
its topology manager policy, preferring the nodes where they span the fewest NUMA nodes
(Volcano's plugin, pkg/scheduler/plugins/numaaware, and docs/design/numa-aware.md there).

Each node's layout comes from its nodeinfo.volcano.sh Numatopology (named after the node),
written by a node agent Caldera does not ship (Volcano's resource exporter); the process
watches the kind only while a configuration names this plugin (``ClusterInfo.numa_topologies``).
The policy logic is ``scheduler.plugins.numa_policy``.

Predicate, for Guaranteed pods only (others pass). A pod with a
``volcano.sh/numa-topology-policy`` annotation other than ``none`` needs a node with a
Numatopology ("numa info is empty"), the static CPU manager ("cpu manager policy isn't
static"), the same topology manager policy ("task topology policy[p] is different with
node[q]") and free CPUs ("cpu allocatable map is empty"); a pod without one is checked only on
nodes with the static CPU manager and a topology manager policy other than none. Checked, each
container in turn must be admitted by the node's policy over the free CPUs ("container c
cannot be assigned by numa"), taking its CPUs from them.

Score (``weight``, 1), for pods with a policy other than none: ``weight * (100 - 100 * n /
most)``, n the NUMA nodes the pod's CPUs would span on the node.

Within a session the CPUs a placed pod takes are no longer free for the next (the allocate
and deallocate events, as in Volcano).

Differences from Volcano, on purpose: Volcano normalises the score over the nodes that fit
(``most`` is their largest n); Caldera scores each node alone, ``most`` being the most NUMA
nodes of any node with a Numatopology: the order of the nodes is the same, the figures may be
lower. Between sessions the free CPUs are the agent's last report: Volcano also keeps, per
node, the CPUs of the pods it placed that the agent has not reported yet; Caldera does not, so
two sessions before the agent's next report can count the same free CPUs twice (the kubelet
then refuses the second pod with a TopologyAffinityError).

Speed: for a Guaranteed pod the verdicts read its containers and annotation beyond its
requests, and the session's free CPUs, which move between sessions without the node's
generation: with any Numatopology, such a pod's node class is the session's own
(``Speedups.node_class``); other pods' verdicts read nothing of the plugin and stay shared
across sessions. Within a session each placement is worked out once per pod, node shape (its
policy, CPUs and reserved CPUs) and free CPUs.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.numa_policy import (
    NONE,
    NodeNuma,
    PodNuma,
    node_numa,
    node_refusal,
    numa_nodes_used,
    place,
    pod_numa,
    spread_score,
)

NAME: Final = "numa-aware"


Placement = tuple[frozenset[int] | None, str | None]


class _SessionToken:
    """Equal only to itself: one session's node class."""

    __slots__ = ()


class NumaAwarePlugin:
    """Admits Guaranteed pods where their CPUs align; scores the narrowest NUMA spread."""

    name = NAME

    def __init__(self, arguments: Arguments) -> None:
        self.weight = arguments.integer("weight", 1)

    def on_session_open(self, ssn: Session) -> None:
        layouts: dict[str, NodeNuma] = {}
        for name, topology in ssn.cluster.numa_topologies.items():
            layout = node_numa(topology)
            if layout is not None:
                layouts[name] = layout
        free = {name: layout.free for name, layout in layouts.items()}
        # Nodes of one shape (a homogeneous fleet) share their placements: each node's shape
        # as a small number, so that a placement's key hashes cheaply.
        shapes: dict[Hashable, int] = {}
        shape_of = {
            name: shapes.setdefault(layout.shape(), len(shapes)) for name, layout in layouts.items()
        }
        most = max((len(layout.numa_nodes) for layout in layouts.values()), default=0)
        taken: dict[str, tuple[str, frozenset[int]]] = {}  # task uid -> (node, cpus)
        pods: dict[str, PodNuma | None] = {}  # by task uid: a pod's spec is fixed
        # (pod, node shape, the node's free CPUs) -> the placement: the predicate, the score
        # and the allocate event ask the same question, for nodes alike
        placements: dict[tuple[PodNuma, int, frozenset[int]], Placement] = {}

        def facts(task: TaskInfo) -> PodNuma | None:
            if task.uid not in pods:
                pods[task.uid] = None if task.pod is None else pod_numa(task.pod)
            return pods[task.uid]

        def placement(task: TaskInfo, node_name: str) -> Placement:
            """The CPUs the pod takes on the node; (None, None) when the check does not apply."""
            pod = facts(task)
            if pod is None or not pod.guaranteed:
                return None, None
            layout = layouts.get(node_name)
            applies, refusal = node_refusal(pod.policy, layout)
            if not applies or layout is None:
                return None, refusal
            key = (pod, shape_of[node_name], free[node_name])
            found = placements.get(key)
            if found is None:
                found = placements[key] = place(pod, layout, free[node_name])
            return found

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            return placement(task, node.name)[1]

        def score(task: TaskInfo, node: NodeInfo) -> float:
            pod = facts(task)
            if pod is None or pod.policy in ("", NONE):
                return 0.0
            cpus, _ = placement(task, node.name)
            layout = layouts.get(node.name)
            if cpus is None or layout is None:
                return 0.0
            return spread_score(numa_nodes_used(layout, cpus), most, self.weight)

        def allocated(task: TaskInfo) -> None:
            cpus, _ = placement(task, task.node_name)
            if cpus:
                free[task.node_name] = free[task.node_name] - cpus
                taken[task.uid] = (task.node_name, cpus)

        def deallocated(task: TaskInfo) -> None:
            held = taken.pop(task.uid, None)
            if held is not None:
                node_name, cpus = held
                free[node_name] = free[node_name] | cpus

        ssn.add_predicate_fn(self.name, predicate)
        ssn.add_node_order_fn(self.name, score)
        if layouts:
            ssn.add_allocate_handler(self.name, allocated, deallocated)
        # Across sessions the free CPUs move without the nodes' generations: with any
        # Numatopology, a Guaranteed pod's class is the session's own (a token no other
        # session has); the others' verdicts do not read the CPUs and stay shared.
        token = _SessionToken() if layouts else None

        def node_class(task: TaskInfo) -> Hashable:
            pod = facts(task)
            return (token, pod) if pod is not None and pod.guaranteed else None

        ssn.add_speedups(self.name, Speedups(node_class=node_class))

    def on_session_close(self, ssn: Session) -> None:
        return None
