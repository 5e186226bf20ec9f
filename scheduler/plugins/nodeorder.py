"""The nodeorder plugin: kube-scheduler's node scores, each 0-100, times its weight.

- ``leastrequested.weight`` (default 1): NodeResourcesLeastAllocated, the mean over cpu and
  memory of (allocatable - requested) * 100 / allocatable (0 when it does not fit);
- ``mostrequested.weight`` (default 0): NodeResourcesMostAllocated, requested * 100 /
  allocatable;
- ``balancedresource.weight`` (default 1): NodeResourcesBalancedAllocation, (1 - standard
  deviation of the requested fractions) * 100;
- ``nodeaffinity.weight`` (default 1): the sum of the weights of the pod's preferred node
  affinity terms the node matches (as Volcano, not normalised across nodes);
- ``podaffinity.weight`` (default 2, Volcano's): InterPodAffinity, scored over all the nodes
  that passed the predicates at once and normalised across them to 0-100 (a batch node order
  function; ``scheduler.api.pod_affinity``), registered only when some pod of the session has
  an inter-pod term;
- ``podtopologyspread.weight`` (default 2, Volcano's): PodTopologySpread's score for the pod's
  ScheduleAnyway topology spread constraints, normalised across the nodes that passed the
  predicates (a batch node order function; ``scheduler.api.topology_spread``). Only pods with
  such constraints get it, and they are cross-node: the placer judges them afresh (layered:
  their node-local verdicts come from their class). Pods without any score 0 from it, with no
  per-node cost.

"requested" is what the node's tasks use plus the pod's request; integer arithmetic as in
kube-scheduler. The other weights Volcano accepts (tainttoleration, imagelocality) are read
and checked but score nothing yet.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.plugins.interpod_affinity import claim_cross_node, open_state
from scheduler.plugins.predicates import node_labels, term_matches
from scheduler.plugins.topology_spread import (
    SpreadState,
    has_constraints,
    session_has_constraints,
)

if TYPE_CHECKING:
    from scheduler.framework.session import Session

MAX_NODE_SCORE = 100
SCORED_RESOURCES = ("cpu", "memory")
_IGNORED = ("tainttoleration", "imagelocality")


def _pairs(request: Resources, node: NodeInfo) -> list[tuple[int, int]]:
    """(requested, allocatable) per scored resource the node has."""
    used, alloc, req = (
        dict(node.used.items()),
        dict(node.allocatable.items()),
        dict(request.items()),
    )
    pairs = []
    for name in SCORED_RESOURCES:
        capacity = alloc.get(name, 0)
        if capacity > 0:
            pairs.append((used.get(name, 0) + req.get(name, 0), capacity))
    return pairs


def least_requested_score(pairs: list[tuple[int, int]]) -> int:
    if not pairs:
        return 0
    total = sum(0 if req > cap else (cap - req) * MAX_NODE_SCORE // cap for req, cap in pairs)
    return total // len(pairs)


def most_requested_score(pairs: list[tuple[int, int]]) -> int:
    if not pairs:
        return 0
    total = sum(min(req, cap) * MAX_NODE_SCORE // cap for req, cap in pairs)
    return total // len(pairs)


def balanced_allocation_score(pairs: list[tuple[int, int]]) -> int:
    fractions = [min(req / cap, 1.0) for req, cap in pairs]
    std = 0.0
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def least_requested(request: Resources, node: NodeInfo) -> int:
    """NodeResourcesLeastAllocated, 0-100."""
    return least_requested_score(_pairs(request, node))


def most_requested(request: Resources, node: NodeInfo) -> int:
    """NodeResourcesMostAllocated, 0-100."""
    return most_requested_score(_pairs(request, node))


def balanced_allocation(request: Resources, node: NodeInfo) -> int:
    """NodeResourcesBalancedAllocation, 0-100."""
    return balanced_allocation_score(_pairs(request, node))


def preferred_affinity(task: TaskInfo, node: NodeInfo) -> int:
    """Sum of the weights of the preferred node affinity terms ``node`` matches."""
    pod = task.pod
    if pod is None or pod.spec.affinity is None or pod.spec.affinity.node_affinity is None:
        return 0
    terms = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    labels = node_labels(node)
    return sum(t.weight for t in terms if term_matches(t.preference, labels, node.name))


class NodeOrderPlugin:
    """Scores nodes with kube-scheduler's resource and node affinity scorers."""

    name = "nodeorder"

    def __init__(self, args: Arguments) -> None:
        self.least = args.number("leastrequested.weight", 1)
        self.most = args.number("mostrequested.weight", 0)
        self.balanced = args.number("balancedresource.weight", 1)
        self.affinity = args.number("nodeaffinity.weight", 1)
        self.pod_affinity = args.number("podaffinity.weight", 2)
        for name in _IGNORED:
            args.number(f"{name}.weight", 1)
        self.spread_weight = args.number("podtopologyspread.weight", 2)
        self.spread: SpreadState | None = None

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_node_order_fn(self.name, self.score)
        if self.pod_affinity:
            inter_pod = open_state(ssn, self.name)
            if inter_pod is not None:
                weight = self.pod_affinity
                ssn.add_batch_node_order_fn(
                    self.name, lambda task, nodes: inter_pod.scores(task, nodes, weight)
                )
                claim_cross_node(ssn, self.name, inter_pod)
        self.spread = None
        if self.spread_weight and session_has_constraints(ssn):
            self.spread = SpreadState(ssn, hard=False)
            ssn.add_batch_node_order_fn(self.name, self.spread_scores)
            ssn.add_layered_cross_node_fn(self.name, has_constraints)

    def on_session_close(self, ssn: Session) -> None:
        self.spread = None

    def spread_scores(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> dict[str, float]:
        """PodTopologySpread's scores of ``task`` on ``nodes``, times the weight."""
        if self.spread is None:
            return {}
        weight = self.spread_weight
        return {name: s * weight for name, s in self.spread.scores(task, nodes).items()}

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
        pairs = _pairs(task.resreq, node)
        total = 0.0
        if self.least:
            total += least_requested_score(pairs) * self.least
        if self.most:
            total += most_requested_score(pairs) * self.most
        if self.balanced:
            total += balanced_allocation_score(pairs) * self.balanced
        if self.affinity:
            total += preferred_affinity(task, node) * self.affinity
        return total
