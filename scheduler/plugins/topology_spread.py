"""Pod topology spread in a session: the filter the predicates plugin asks for DoNotSchedule
constraints, the batch score nodeorder adds for ScheduleAnyway ones (Volcano embeds
kube-scheduler's PodTopologySpread in both; the decisions are in
``scheduler.api.topology_spread``).

A pod with constraints is cross-node: its verdict on a node reads the pods of the node's whole
domain. Both plugins claim it with a layered function (``Session.add_layered_cross_node_fn``):
the filter passes while the session asks for node-local verdicts (``Session.node_local``), so
the placer takes the pod's node-local verdicts from its class, reused as any pod's, and judges
only the nodes that fit with the filter and the batch score. A pod without constraints gets no
verdict from here at all: its verdicts stay per node and are reused. A session none of whose
pods has constraints (``session_has_constraints``) registers nothing from here, so a cluster
without them pays one look per job per session.

Per session, each pod's constraints are parsed once (by uid), and the domain counts are kept per
namespace, set of constraints and node affinity (pods of one task share them), built at the
first pod that needs them and brought up to date from the session's log of changed nodes before
each use: whatever changed a node's pods (an allocation, a pipelined pod, an eviction, a
discarded statement) is counted, and an evicted pod (Releasing) no longer counts.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from caldera.api.core import Pod
from scheduler.api.topology_spread import (
    Constraint,
    DomainCounts,
    Included,
    SpreadSpec,
    parse,
    score,
)
from scheduler.api.types import NodeInfo, TaskInfo

if TYPE_CHECKING:
    from scheduler.framework.session import Session

# A pod's prepared state: its domain counts and whether each selector matches the pod itself;
# a string when its constraints cannot be evaluated (the reason it waits); None: none to apply.
Prepared = tuple[DomainCounts, tuple[bool, ...]] | str | None
_SPREAD_TASKS = operator.attrgetter("spread_tasks")


def session_has_constraints(ssn: Session) -> bool:
    """Whether a pod of the session's jobs has topology spread constraints: when none has,
    the plugins register nothing, so that no pod is asked (``JobInfo.spread_tasks``)."""
    return any(map(_SPREAD_TASKS, ssn.jobs.values()))


def has_constraints(task: TaskInfo) -> bool:
    """Whether the pod has topology spread constraints (of either kind)."""
    pod = task.pod
    return pod is not None and bool(pod.spec.topology_spread_constraints)


def _included(pod: Pod) -> Included:
    """Whether a node counts for a constraint of ``pod`` beyond holding its keys."""
    # Here, not at the top: the predicates plugin imports this module.
    from scheduler.plugins.predicates import (
        matches_node_selector_and_affinity,
        node_taints,
        untolerated_taint,
    )

    def included(constraint: Constraint, node: NodeInfo) -> bool:
        if constraint.honor_affinity and not matches_node_selector_and_affinity(pod, node):
            return False
        return not (
            constraint.honor_taints
            and untolerated_taint(node_taints(node), pod.spec.tolerations) is not None
        )

    return included


class SpreadState:
    """One plugin's topology spread bookkeeping for one session: ``hard`` for the filter
    (DoNotSchedule constraints), else for the score (ScheduleAnyway)."""

    def __init__(self, ssn: Session, *, hard: bool) -> None:
        self.ssn = ssn
        self.nodes: Mapping[str, NodeInfo] = ssn.nodes
        self.log = ssn.node_changes
        self.hard = hard
        self._prepared: dict[str, Prepared] = {}  # by task uid
        self._counts: dict[tuple[object, ...], DomainCounts] = {}

    def prepared(self, task: TaskInfo) -> Prepared:
        """The pod's counts, brought up to date, and its self-matches (or why it waits)."""
        try:
            found = self._prepared[task.uid]
        except KeyError:
            found = self._prepared[task.uid] = self._prepare(task)
        if found is not None and not isinstance(found, str):
            counts = found[0]
            if counts.position != len(self.log):
                counts.refresh(self.nodes, self.log)
        return found

    def _prepare(self, task: TaskInfo) -> Prepared:
        pod = task.pod
        if pod is None or not pod.spec.topology_spread_constraints:
            return None
        spec = parse(pod)
        if isinstance(spec, str):
            return spec
        constraints = self._chosen(spec)
        if not constraints:
            return None
        key = (pod.metadata.namespace, constraints, task.signature)
        counts = self._counts.get(key)
        if counts is None:
            counts = self._counts[key] = DomainCounts(
                pod.metadata.namespace, constraints, _included(pod)
            )
            counts.build(self.nodes, len(self.log))
        labels = pod.metadata.labels
        return counts, tuple(c.selector.matches(labels) for c in constraints)

    def _chosen(self, spec: SpreadSpec) -> tuple[Constraint, ...]:
        return spec.hard if self.hard else spec.soft

    def filter(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """None when the DoNotSchedule constraints let ``task`` go to ``node``, else why not.
        ``node`` may be a copy of a session's node without some pods (preempt's question).
        Passes while the session asks for node-local verdicts (``Session.node_local``)."""
        if self.ssn.node_local:
            return None
        found = self.prepared(task)
        if found is None or isinstance(found, str):
            return found
        counts, self_match = found
        if self.nodes.get(node.name) is node:
            return counts.filter(node, self_match)
        adjusted, mins = counts.without(node)
        return counts.filter(node, self_match, adjusted, mins)

    def scores(self, task: TaskInfo, nodes: Sequence[NodeInfo]) -> dict[str, int]:
        """The ScheduleAnyway constraints' normalised scores (0-100) of ``nodes``; empty when
        the pod has none (or constraints that cannot be evaluated)."""
        found = self.prepared(task)
        if found is None or isinstance(found, str):
            return {}
        return score(found[0], nodes)
