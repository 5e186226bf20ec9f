"""The predicates plugin: which nodes a pod may run on, with Kubernetes' reasons.

Filters, in kube-scheduler's order: node not ready, NodeUnschedulable, TaintToleration
(NoSchedule and NoExecute taints), NodeAffinity (nodeSelector and required node affinity), pod
count, NodePorts. A failing node answers the first reason, in Kubernetes' words, so that a fit
error reads like kube-scheduler's ("2 node(s) had untolerated taint {gpu: true}").

Resources are not checked here: as in Volcano, the actions check them (allocate against the
node's idle and future idle resources, preempt after taking victims away), so that preempt can
ask this plugin about a node that is full. Those resource checks, with Kubernetes'
"Insufficient <resource>" reasons, are in scheduler.api.fit.

Arguments (Volcano's): ``predicate.NodeAffinityEnable``, ``predicate.NodePortsEnable`` and
``predicate.TaintTolerationEnable`` (true) switch those filters off when false.

Inter-pod affinity and anti-affinity (``predicate.PodAffinityEnable``, true): kube-scheduler's
InterPodAffinity filter, with its reasons ("node(s) didn't match pod affinity rules", ...;
``scheduler.api.pod_affinity``, tied to the session by ``scheduler.plugins.interpod_affinity``).
It is registered only when some pod of the session has an inter-pod term, and it reads other
nodes' pods for the pods it claims cross-node (``Session.cross_node``).

Dynamic Resource Allocation (``predicate.DynamicResourceAllocationEnable``, true as in Volcano
on Kubernetes 1.34 and later): a pod with ``resourceClaims`` goes only where its claims' devices
can be allocated, and gets them (``scheduler.plugins.dynamic_resources``). Switched off, such a
pod waits with a reason saying so rather than be bound without its devices.

Pod topology spread (``predicate.PodTopologySpreadEnable``, true as in Volcano): a pod's
DoNotSchedule ``topologySpreadConstraints``, after the ports, with kube-scheduler's
PodTopologySpread reasons (``scheduler.plugins.topology_spread``). Such a pod's verdict on a
node reads the pods of the node's whole domain, so the plugin names it cross-node and the
placer judges every node afresh for it; a pod without constraints is not looked at.

What does not depend on the node's current tasks (readiness, taints, affinity) is cached per
session by the pod's scheduling constraints, so pods of one task template are filtered once
per node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from caldera.api.core import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
)
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.plugins.interpod_affinity import claim_cross_node, open_state
from scheduler.plugins.topology_spread import (
    SpreadState,
    has_constraints,
    session_has_constraints,
)

if TYPE_CHECKING:
    from scheduler.framework.session import Session
    from scheduler.plugins.dynamic_resources import DynamicResources

NOT_READY = "node(s) were not ready"
UNSCHEDULABLE = "node(s) were unschedulable"
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
PORTS_CONFLICT = "node(s) didn't have free ports for the requested pod ports"
TOO_MANY_PODS = "Too many pods"
DRA_DISABLED = "pod has resourceClaims and predicate.DynamicResourceAllocationEnable is false"
DRA_NOT_WATCHED = "pod has resourceClaims; the scheduler starts watching DRA objects"
UNSCHEDULABLE_TAINT_KEY = "node.kubernetes.io/unschedulable"

_Port = tuple[str, str, int]  # (host IP, protocol, host port)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: an empty effect matches every effect, an empty key with
    Exists matches every key, Equal (the default) compares values."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("", "Equal"):
        return bool(toleration.key) and toleration.value == taint.value
    return False


def untolerated_taint(taints: Iterable[Taint], tolerations: Iterable[Toleration]) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates, if any."""
    tols = tuple(tolerations)
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in tols):
            return taint
    return None


def _requirement_matches(req: NodeSelectorRequirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str) -> bool:
    """A node selector term: all its expressions and fields hold; an empty term matches
    nothing (Kubernetes' rule)."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _requirement_matches(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
            return False
        if not _requirement_matches(req, node_name):
            return False
    return True


def node_labels(node: NodeInfo) -> Mapping[str, str]:
    return node.node.metadata.labels if node.node is not None else {}


def node_taints(node: NodeInfo) -> tuple[Taint, ...]:
    return node.node.spec.taints if node.node is not None else ()


def matches_node_selector_and_affinity(pod: Pod, node: NodeInfo) -> bool:
    """nodeSelector labels all present, and one of the required node affinity terms holds."""
    labels = node_labels(node)
    for key, value in pod.spec.node_selector.items():
        if labels.get(key) != value:
            return False
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    required = (
        node_affinity.required_during_scheduling_ignored_during_execution
        if node_affinity is not None
        else None
    )
    if required is None:
        return True
    return any(term_matches(t, labels, node.name) for t in required.node_selector_terms)


def host_ports(pod: Pod | None) -> list[_Port]:
    """The host ports a pod asks for, as (host IP, protocol, port)."""
    if pod is None:
        return []
    return [
        (p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port)  # noqa: S104 - a wildcard
        for c in (*pod.spec.init_containers, *pod.spec.containers)
        for p in c.ports
        if p.host_port > 0
    ]


def ports_conflict(wanted: Iterable[_Port], used: Iterable[_Port]) -> bool:
    """Same protocol and port, and the same IP or either bound to every address."""
    used_list = list(used)
    for ip, proto, port in wanted:
        for uip, uproto, uport in used_list:
            if port == uport and proto == uproto and ("0.0.0.0" in (ip, uip) or ip == uip):  # noqa: S104
                return True
    return False


class PredicatesPlugin:
    """Registers one predicate: readiness, unschedulable, taints, affinity, pod count, ports."""

    name = "predicates"

    def __init__(self, args: Arguments) -> None:
        self.args = args
        # Volcano's switches for the filters it wraps (all on by default).
        self.affinity = args.boolean("predicate.NodeAffinityEnable", True)
        self.ports = args.boolean("predicate.NodePortsEnable", True)
        self.taints = args.boolean("predicate.TaintTolerationEnable", True)
        self.dra_enabled = args.boolean("predicate.DynamicResourceAllocationEnable", True)
        self.pod_affinity = args.boolean("predicate.PodAffinityEnable", True)
        self.dra: DynamicResources | None = None
        self.spread_enabled = args.boolean("predicate.PodTopologySpreadEnable", True)
        self.spread: SpreadState | None = None
        self._static: dict[tuple[bytes, str], str | None] = {}
        self._ports: dict[bytes, list[_Port]] = {}  # signature -> host ports

    def on_session_open(self, ssn: Session) -> None:
        self._static.clear()
        self._ports.clear()
        ssn.add_predicate_fn(self.name, self.predicate)
        self.dra = None
        if self.dra_enabled and ssn.cluster.dra is not None:
            from scheduler.plugins.dynamic_resources import DynamicResources

            self.dra = DynamicResources(ssn, ssn.cluster.dra)
            ssn.add_allocate_handler(self.name, self.dra.allocated, self.dra.deallocated)
        if self.pod_affinity:
            inter_pod = open_state(ssn, self.name)
            if inter_pod is not None:
                ssn.add_predicate_fn(self.name, inter_pod.predicate)
                claim_cross_node(ssn, self.name, inter_pod)
        self.spread = None
        if self.spread_enabled and session_has_constraints(ssn):
            self.spread = SpreadState(ssn, hard=True)
            ssn.add_layered_cross_node_fn(self.name, has_constraints)

    def on_session_close(self, ssn: Session) -> None:
        self._static.clear()
        self._ports.clear()
        self.spread = None
        if self.dra is not None:
            ssn.result.claim_plans.update(self.dra.plans())
            self.dra = None

    def predicate(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """None when ``task`` may run on ``node``, else the first reason it may not."""
        sig = task.signature
        key = (sig, node.name)
        try:
            reason = self._static[key]
        except KeyError:
            reason = self._static[key] = static_reason(
                task.pod, node, taints=self.taints, affinity=self.affinity
            )
        if reason:
            return reason
        if node.pod_count() >= node.max_pods:
            return TOO_MANY_PODS
        wanted = self._ports.get(sig)
        if wanted is None:
            wanted = self._ports[sig] = host_ports(task.pod) if self.ports else []
        if wanted:
            used = (p for t in node.tasks.values() if t.uid != task.uid for p in host_ports(t.pod))
            if ports_conflict(wanted, used):
                return PORTS_CONFLICT
        spread = self.spread  # None: no pod of the session has constraints
        if (
            spread is not None
            and task.pod is not None
            and task.pod.spec.topology_spread_constraints
        ):
            reason = spread.filter(task, node)
            if reason:
                return reason
        if task.pod is not None and task.pod.spec.resource_claims:
            return self._dra_reason(task, node)
        return None

    def _dra_reason(self, task: TaskInfo, node: NodeInfo) -> str | None:
        if not self.dra_enabled:
            return DRA_DISABLED
        if self.dra is None:
            return DRA_NOT_WATCHED
        return self.dra.predicate(task, node)


def static_reason(
    pod: Pod | None, node: NodeInfo, *, taints: bool = True, affinity: bool = True
) -> str | None:
    """The filters that do not depend on the node's current tasks."""
    if not node.ready:
        return NOT_READY
    tolerations = pod.spec.tolerations if pod is not None else ()
    if node.unschedulable and not any(
        tolerates(t, Taint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule")) for t in tolerations
    ):
        return UNSCHEDULABLE
    if taints:
        taint = untolerated_taint(node_taints(node), tolerations)
        if taint is not None:
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
    if affinity and pod is not None and not matches_node_selector_and_affinity(pod, node):
        return AFFINITY_MISMATCH
    return None
