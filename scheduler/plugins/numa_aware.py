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
across sessions. Within a session each placement is worked out once per pod facts, node shape
(its policy, CPUs and reserved CPUs) and free CPUs; across sessions the nodes' layouts are kept
while their Numatopology objects stay the same, and a pod's facts are worked out once per task
template (``scheduler.plugins.numa_memo``).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.numa_memo import NumaMemo, PodFacts
from scheduler.plugins.numa_policy import NONE, node_refusal, numa_nodes_used, place, spread_score

NAME: Final = "numa-aware"
MEMO: Final = "numa-aware"  # the name its NumaMemo is kept under with the snapshot


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
        memo = ssn.incremental.memo_for_cluster(MEMO, None, NumaMemo)
        # Nodes of one shape (a homogeneous fleet) share their placements, pods of equal facts
        # too: each as a small number, so that a placement's key hashes cheaply.
        layouts = memo.refresh_layouts(ssn.cluster.numa_topologies)
        free = {name: kept.layout.free for name, kept in layouts.items()}
        most = max((len(kept.layout.numa_nodes) for kept in layouts.values()), default=0)
        taken: dict[str, tuple[str, frozenset[int]]] = {}  # task uid -> (node, cpus)
        pods: dict[str, PodFacts] = {}  # by task uid: a pod's spec is fixed
        # (pod, node shape, the node's free CPUs) -> the placement: the predicate, the score
        # and the allocate event ask the same question, for nodes alike
        placements: dict[tuple[int, int, frozenset[int]], Placement] = {}

        def facts(task: TaskInfo) -> PodFacts | None:
            found = pods.get(task.uid)
            if found is None and task.pod is not None:
                found = pods[task.uid] = memo.pod_facts(task.pod)
            return found

        def placement(task: TaskInfo, node_name: str) -> Placement:
            """The CPUs the pod takes on the node; (None, None) when the check does not apply."""
            pod = facts(task)
            if pod is None or not pod.facts.guaranteed:
                return None, None
            kept = layouts.get(node_name)
            layout = kept.layout if kept is not None else None
            applies, refusal = node_refusal(pod.facts.policy, layout)
            if not applies or kept is None:
                return None, refusal
            key = (pod.number, kept.shape, free[node_name])
            found = placements.get(key)
            if found is None:
                found = placements[key] = place(pod.facts, kept.layout, free[node_name])
            return found

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            return placement(task, node.name)[1]

        def score(task: TaskInfo, node: NodeInfo) -> float:
            pod = facts(task)
            if pod is None or pod.facts.policy in ("", NONE):
                return 0.0
            cpus, _ = placement(task, node.name)
            kept = layouts.get(node.name)
            if cpus is None or kept is None:
                return 0.0
            return spread_score(numa_nodes_used(kept.layout, cpus), most, self.weight)

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
            return (token, pod) if pod is not None and pod.facts.guaranteed else None

        ssn.add_speedups(self.name, Speedups(node_class=node_class))

    def on_session_close(self, ssn: Session) -> None:
        return None
