"""Pod topology spread (``spec.topologySpreadConstraints``) as kube-scheduler's PodTopologySpread
plugin decides it: the filter for DoNotSchedule constraints, the score for ScheduleAnyway ones.

Semantics (kubernetes ``pkg/scheduler/framework/plugins/podtopologyspread``):

- A constraint counts the pods of the incoming pod's namespace that its label selector
  matches, merged with ``matchLabelKeys`` (each key's value in the incoming pod's labels, when
  it has the key, is required too); no selector matches no pod, an empty selector counts no
  existing pod but matches the incoming one. Pods being deleted (and, here, evicted in the
  session) do not count; pods on a node do, whether bound, binding or placed in the session.
- The nodes that count are those holding every constraint's topology key (of the set being
  evaluated: the DoNotSchedule ones for the filter, the ScheduleAnyway ones for the score) and,
  per constraint, matching the pod's nodeSelector and required node affinity
  (``nodeAffinityPolicy`` Honor, the default) and tolerating the node's NoSchedule and NoExecute
  taints when ``nodeTaintsPolicy`` is Honor (Ignore by default). Each counting node's value of
  the key is a domain; a domain's count is the matching pods on its counting nodes.
- Filter: a node without a constraint's key is refused ("... (missing required label)"); else
  skew = count(node's domain) + (1 if the selector matches the incoming pod) - global minimum,
  the minimum being 0 while there are fewer domains than ``minDomains``; skew > maxSkew refuses.
- Score, over the nodes that passed the filters: nodes without every key score 0; each other
  node scores, summed over constraints, count x log(domains + 2) + (maxSkew - 1), rounded; the
  count is the node's own for ``kubernetes.io/hostname`` (domains: the nodes scored). Scores are
  then normalised so the least crowded node gets 100: 100 x (max + min - score) / max.

kube-scheduler's system default constraints (for pods without any, matched by a Service,
ReplicaSet or StatefulSet) are not applied: see docs/compatibility.md.

The counts are kube-scheduler's PreFilter state, kept per set of constraints for a session
(``DomainCounts``): built once from every node, then brought up to date from the session's
log of changed nodes (``refresh``), so that filtering a node costs O(constraints). The global
minimum is exact (kube-scheduler's two "critical paths" are too, at PreFilter).

A purely computational module with no I/O; which nodes count for a constraint (node affinity
and taints) is given by the caller (``Included``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from caldera.api.core import Pod, TopologySpreadConstraint
from scheduler.api.types import NodeInfo, TaskStatus

__all__ = [
    "CONSTRAINTS_NOT_MATCH",
    "MAX_CONSTRAINTS",
    "MISSING_LABEL",
    "Constraint",
    "DomainCounts",
    "Included",
    "Selector",
    "SpreadSpec",
    "parse",
    "score",
]

CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = CONSTRAINTS_NOT_MATCH + " (missing required label)"
HOSTNAME_KEY = "kubernetes.io/hostname"
MAX_NODE_SCORE = 100
# Kubernetes sets no bound (the API server validates each constraint); a pod with more than
# this many waits with a reason naming the field, so that no spec can make every filter call
# do unbounded work.
MAX_CONSTRAINTS = 16
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
_POLICIES = ("Honor", "Ignore")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_FIELD = "spec.topologySpreadConstraints"
_NO_LABELS: Mapping[str, str] = {}

# (key, operator, values): a label selector requirement, hashable.
Requirement = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Selector:
    """A constraint's label selector merged with its ``matchLabelKeys``, hashable.
    ``nothing``: the constraint has no selector (Kubernetes' ``labels.Nothing()``)."""

    labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """Selects everything (``{}``); kube-scheduler counts no existing pod for it."""
        return not self.nothing and not self.labels and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.requirements:
            have = labels.get(key)
            if op == "In":
                if have is None or have not in values:
                    return False
            elif op == "NotIn":
                if have is not None and have in values:
                    return False
            elif op == "Exists":
                if have is None:
                    return False
            elif have is not None:  # DoesNotExist
                return False
        return True


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint as kube-scheduler evaluates it (defaults applied, selector merged)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy Honor
    honor_taints: bool = False  # nodeTaintsPolicy Honor


@dataclass(frozen=True, slots=True)
class SpreadSpec:
    """A pod's constraints: DoNotSchedule (``hard``) and ScheduleAnyway (``soft``)."""

    hard: tuple[Constraint, ...] = ()
    soft: tuple[Constraint, ...] = ()


# Whether a node counts for a constraint beyond holding the keys (the pod's node affinity,
# and the node's taints, as the constraint's policies say).
Included = Callable[[Constraint, NodeInfo], bool]


def _selector(raw: TopologySpreadConstraint, labels: Mapping[str, str], where: str) -> Selector:
    chosen = raw.label_selector
    if chosen is None:
        return Selector(nothing=True)
    requirements: list[Requirement] = []
    for j, req in enumerate(chosen.match_expressions):
        bad = (req.operator in ("In", "NotIn") and not req.values) or (
            req.operator in ("Exists", "DoesNotExist") and bool(req.values)
        )
        if req.operator not in _OPERATORS or bad:
            raise ValueError(
                f"{where}.labelSelector.matchExpressions[{j}]: Invalid value: "
                f"{req.operator!r}: not a valid selector operator with these values"
            )
        requirements.append((req.key, req.operator, tuple(req.values)))
    for key in raw.match_label_keys:
        value = labels.get(key)
        if value is not None:
            requirements.append((key, "In", (value,)))
    return Selector(tuple(sorted(chosen.match_labels.items())), tuple(requirements))


def _constraint(raw: TopologySpreadConstraint, labels: Mapping[str, str], i: int) -> Constraint:
    where = f"{_FIELD}[{i}]"
    if raw.max_skew < 1:
        raise ValueError(f"{where}.maxSkew: Invalid value: {raw.max_skew}: must be greater than 0")
    if not raw.topology_key:
        raise ValueError(f"{where}.topologyKey: Required value: can not be empty")
    if raw.min_domains is not None and raw.min_domains < 1:
        raise ValueError(
            f"{where}.minDomains: Invalid value: {raw.min_domains}: must be greater than 0"
        )
    for name, policy in (
        ("nodeAffinityPolicy", raw.node_affinity_policy),
        ("nodeTaintsPolicy", raw.node_taints_policy),
    ):
        if policy is not None and policy not in _POLICIES:
            raise ValueError(
                f'{where}.{name}: Unsupported value: "{policy}": supported values: '
                '"Honor", "Ignore"'
            )
    return Constraint(
        max_skew=raw.max_skew,
        topology_key=raw.topology_key,
        selector=_selector(raw, labels, where),
        min_domains=1 if raw.min_domains is None else raw.min_domains,
        honor_affinity=raw.node_affinity_policy != "Ignore",
        honor_taints=raw.node_taints_policy == "Honor",
    )


def parse(pod: Pod) -> SpreadSpec | str:
    """The pod's constraints as evaluated, or why they cannot be (a message naming the field,
    in the API server's words: the pod then waits)."""
    raws = pod.spec.topology_spread_constraints
    if len(raws) > MAX_CONSTRAINTS:
        return f"{_FIELD}: Too many: {len(raws)}: must have at most {MAX_CONSTRAINTS} items"
    labels = pod.metadata.labels
    hard: list[Constraint] = []
    soft: list[Constraint] = []
    for i, raw in enumerate(raws):
        if raw.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            return (
                f'{_FIELD}[{i}].whenUnsatisfiable: Unsupported value: "{raw.when_unsatisfiable}"'
                ': supported values: "DoNotSchedule", "ScheduleAnyway"'
            )
        try:
            constraint = _constraint(raw, labels, i)
        except ValueError as e:
            return str(e)
        (hard if raw.when_unsatisfiable == DO_NOT_SCHEDULE else soft).append(constraint)
    return SpreadSpec(tuple(hard), tuple(soft))


def node_labels(node: NodeInfo) -> Mapping[str, str]:
    return node.node.metadata.labels if node.node is not None else _NO_LABELS


def matching_pods(
    node: NodeInfo,
    namespace: str,
    constraints: Sequence[Constraint],
    counted: Sequence[bool],
) -> tuple[int, ...]:
    """Per constraint, the pods on ``node`` it counts (0 where ``counted`` is False): in
    ``namespace``, matched by its selector (not empty), not being deleted or evicted."""
    totals = [0] * len(constraints)
    selectors = [
        c.selector if wanted and not c.selector.empty else None
        for c, wanted in zip(constraints, counted, strict=True)
    ]
    if not any(selectors):
        return tuple(totals)
    releasing = TaskStatus.RELEASING
    for task in node.tasks.values():
        pod = task.pod
        if pod is None or task.status is releasing or pod.metadata.namespace != namespace:
            continue
        labels = pod.metadata.labels
        for i, selector in enumerate(selectors):
            if selector is not None and selector.matches(labels):
                totals[i] += 1
    return tuple(totals)


class DomainCounts:
    """Matching pods per domain of each constraint of one set, for pods of one namespace and
    one node affinity (kube-scheduler's PreFilter state), kept current through ``refresh``."""

    __slots__ = ("_mins", "constraints", "counts", "included", "namespace", "nodes", "position")

    def __init__(
        self, namespace: str, constraints: tuple[Constraint, ...], included: Included
    ) -> None:
        self.namespace = namespace
        self.constraints = constraints
        self.included = included
        # Per constraint: domain (the key's value) -> matching pods on its counting nodes.
        self.counts: tuple[dict[str, int], ...] = tuple({} for _ in constraints)
        # The counting nodes: name -> (generation counted at, domain per constraint or None
        # where the node does not count for it, matching pods per constraint).
        self.nodes: dict[str, tuple[int, tuple[str | None, ...], tuple[int, ...]]] = {}
        self.position = 0  # how much of the change log has been read
        self._mins: tuple[int, ...] | None = None

    def _domains(self, node: NodeInfo) -> tuple[str | None, ...] | None:
        """The node's domain per constraint (None where it does not count), or None when it
        lacks one of the keys (then it counts for none)."""
        labels = node_labels(node)
        constraints = self.constraints
        for c in constraints:
            if c.topology_key not in labels:
                return None
        included = self.included
        return tuple(labels[c.topology_key] if included(c, node) else None for c in constraints)

    def build(self, nodes: Mapping[str, NodeInfo], position: int) -> None:
        """Count every node; ``position``: the change log's length now."""
        for node in nodes.values():
            domains = self._domains(node)
            if domains is None:
                continue
            found = self._count(node, domains)
            self.nodes[node.name] = (node.generation, domains, found)
            for counts, domain, n in zip(self.counts, domains, found, strict=True):
                if domain is not None:
                    counts[domain] = counts.get(domain, 0) + n
        self.position = position
        self._mins = None

    def _count(self, node: NodeInfo, domains: tuple[str | None, ...]) -> tuple[int, ...]:
        counted = [d is not None for d in domains]
        return matching_pods(node, self.namespace, self.constraints, counted)

    def refresh(self, nodes: Mapping[str, NodeInfo], log: Sequence[str]) -> None:
        """Count again the nodes changed since the last look (``log``: every node changed in
        the session, in order). Which nodes count does not change within a session."""
        end = len(log)
        if self.position == end:
            return
        kept_nodes = self.nodes
        for name in set(log[self.position : end]):
            kept = kept_nodes.get(name)
            node = nodes.get(name)
            if kept is None or node is None or node.generation == kept[0]:
                continue
            _, domains, before = kept
            after = self._count(node, domains)
            kept_nodes[name] = (node.generation, domains, after)
            if after == before:
                continue
            for counts, domain, old, new in zip(self.counts, domains, before, after, strict=True):
                if domain is not None and old != new:
                    counts[domain] += new - old
            self._mins = None
        self.position = end

    def mins(self) -> tuple[int, ...]:
        """The global minimum per constraint (0 with fewer domains than minDomains)."""
        mins = self._mins
        if mins is None:
            mins = self._mins = tuple(
                _minimum(counts, c.min_domains)
                for counts, c in zip(self.counts, self.constraints, strict=True)
            )
        return mins

    def without(self, node: NodeInfo) -> tuple[tuple[dict[str, int], ...], tuple[int, ...]]:
        """Counts and minima as they would be were the session's node of that name as
        ``node`` (a copy without some pods: preempt asks about it)."""
        kept = self.nodes.get(node.name)
        if kept is None:
            return self.counts, self.mins()
        _, domains, before = kept
        after = self._count(node, domains)
        counts = list(self.counts)
        for i, (domain, old, new) in enumerate(zip(domains, before, after, strict=True)):
            if domain is not None and old != new:
                counts[i] = {**counts[i], domain: counts[i][domain] + new - old}
        adjusted = tuple(counts)
        mins = tuple(
            _minimum(c, k.min_domains) for c, k in zip(adjusted, self.constraints, strict=True)
        )
        return adjusted, mins

    def filter(
        self,
        node: NodeInfo,
        self_match: tuple[bool, ...],
        counts: tuple[dict[str, int], ...] | None = None,
        mins: tuple[int, ...] | None = None,
    ) -> str | None:
        """None when the pod (``self_match``: whether each selector matches it) may go to
        ``node``, else kube-scheduler's reason; ``counts`` and ``mins`` from ``without``."""
        labels = node_labels(node)
        if counts is None or mins is None:
            counts, mins = self.counts, self.mins()
        for c, domain_counts, matched, low in zip(
            self.constraints, counts, self_match, mins, strict=True
        ):
            domain = labels.get(c.topology_key)
            if domain is None:
                return MISSING_LABEL
            if domain_counts.get(domain, 0) + matched - low > c.max_skew:
                return CONSTRAINTS_NOT_MATCH
        return None


def _minimum(counts: Mapping[str, int], min_domains: int) -> int:
    if len(counts) < min_domains:
        return 0
    return min(counts.values())


def _round(x: float) -> int:
    """Go's math.Round for x >= 0: halves away from zero."""
    whole = math.floor(x)
    return whole + 1 if x - whole >= 0.5 else whole


def score(counts: DomainCounts, nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """kube-scheduler's normalised scores (0-100) of ``nodes`` (those that passed the filters)
    for ScheduleAnyway constraints whose counts are ``counts``: see the module docstring."""
    constraints = counts.constraints
    keys = [c.topology_key for c in constraints]
    hostname = [k == HOSTNAME_KEY for k in keys]
    scored: list[tuple[NodeInfo, Mapping[str, str]]] = []
    domains: list[set[str]] = [set() for _ in constraints]
    result: dict[str, int] = {}
    for node in nodes:
        labels = node_labels(node)
        if any(k not in labels for k in keys):
            result[node.name] = 0  # ignored: scored 0 after normalising
            continue
        scored.append((node, labels))
        for i, key in enumerate(keys):
            if not hostname[i]:
                domains[i].add(labels[key])
    weights = [
        math.log((len(scored) if hostname[i] else len(domains[i])) + 2)
        for i in range(len(constraints))
    ]
    raw: dict[str, int] = {}
    for node, labels in scored:
        total = 0.0
        for i, c in enumerate(constraints):
            if hostname[i]:
                n = matching_pods(node, counts.namespace, (c,), (True,))[0]
            else:
                n = counts.counts[i].get(labels[c.topology_key], 0)
            total += n * weights[i] + (c.max_skew - 1)
        raw[node.name] = _round(total)
    if not raw:
        return result
    low, high = min(raw.values()), max(raw.values())
    for name, value in raw.items():
        if high == 0:
            result[name] = MAX_NODE_SCORE
        else:
            result[name] = MAX_NODE_SCORE * (high + low - value) // high
    return result
