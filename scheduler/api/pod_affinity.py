"""Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity plugin judges them
(``pkg/scheduler/framework/plugins/interpodaffinity``): pure data and arithmetic.

A pod's terms name other pods (a label selector, in some namespaces) and a node label, the
topology key: the nodes sharing that label's value are one topology domain.

Filter, for a pod on a node, in kube-scheduler's order and words:

1. its required affinity: the node has every term's topology key, and in the node's domain of
   each term there is a pod matching *all* the terms (kube-scheduler counts per topology pair,
   so terms sharing a key share their counts); else, when no pod anywhere matches them all
   and the pod matches all its own terms, it may go anywhere with the keys (the first pod of
   a group with affinity to itself): "node(s) didn't match pod affinity rules";
2. its required anti-affinity: no pod matching a term in the node's domain of that term:
   "node(s) didn't match pod anti-affinity rules";
3. the placed pods' required anti-affinity: no placed pod with a term matching this pod in
   that term's domain of the node: "node(s) didn't satisfy existing pods anti-affinity rules".

Score, over the nodes that passed the filters: for each placed pod on a node with labels, the
node's domain gains the weight of each of this pod's preferred affinity terms the placed pod
matches (anti-affinity: loses it), the weight of each of the placed pod's preferred terms this
pod matches (likewise), and ``HARD_AFFINITY_WEIGHT`` for each of the placed pod's required
affinity terms this pod matches (kube-scheduler's hardPodAffinityWeight). A node's score is the
sum over the domains it is in, normalised to 0-100 over the nodes scored (``normalise``).

Namespaces: a term's ``namespaces``, else the pod's own namespace; ``namespaceSelector: {}``
adds every namespace, and a non-empty one the namespaces whose labels it matches, resolved
against the session's ``NamespaceLabels`` (``scheduler.api.namespace_labels``, kube-scheduler's
``mergeAffinityTermNamespacesIfNotEmpty``). Without them (a snapshot built without the
Namespaces, as the simulator's), a non-empty ``namespaceSelector`` cannot be resolved: a pod
asking for one is not scheduled (``problem`` says why), and a placed pod's term with one is
taken to cover every namespace (a placed pod's required anti-affinity then keeps pods out of
its domain that kube-scheduler might let in: never the other way). ``matchLabelKeys`` and
``mismatchLabelKeys`` are merged into the label selector by the API server when the pod is
created (Kubernetes 1.31 and later).

What a hostile spec can make the scheduler do is bounded: a pod with more than
``MAX_REQUIRED_TERMS`` required or ``MAX_PREFERRED_TERMS`` preferred terms, or selectors
larger than ``MAX_SELECTOR_ITEMS`` in all (namespace selectors included), is not scheduled
(``problem`` names the field); the placed pods' terms are read up to the same bounds.

``AffinityIndex`` keeps, for one session, what kube-scheduler's PreFilter computes per pod
(topology key -> value -> count of matching placed pods), built once per distinct set of
terms and per distinct labelled pod, and kept current as the session places and evicts pods
(``add``/``remove``), so that judging a node costs O(terms), not O(pods).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from caldera.api.core import (
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    WeightedPodAffinityTerm,
)
from caldera.api.meta import LabelSelector
from caldera.api.selectors import is_empty, matches
from scheduler.api.namespace_labels import NamespaceLabels

__all__ = [
    "AFFINITY_MISMATCH",
    "ANTI_AFFINITY_MISMATCH",
    "EXISTING_ANTI_AFFINITY_MISMATCH",
    "HARD_AFFINITY_WEIGHT",
    "MAX_PREFERRED_TERMS",
    "MAX_REQUIRED_TERMS",
    "MAX_SELECTOR_ITEMS",
    "AffinityIndex",
    "Judge",
    "Member",
    "PodTerms",
    "Term",
    "has_pod_affinity",
    "normalise",
    "pod_terms",
    "project",
]

AFFINITY_MISMATCH = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_MISMATCH = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_MISMATCH = "node(s) didn't satisfy existing pods anti-affinity rules"

# kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default (Volcano passes none).
HARD_AFFINITY_WEIGHT = 1
MAX_NODE_SCORE = 100

# Bounds on what one pod's spec makes the scheduler do per node and per placed pod.
MAX_REQUIRED_TERMS = 32  # per list: required affinity, required anti-affinity
MAX_PREFERRED_TERMS = 32  # per list: preferred affinity, preferred anti-affinity
MAX_SELECTOR_ITEMS = 1024  # labels, expressions and their values over all the pod's terms

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

# topology key -> topology value -> count (or score); no zero entries.
Counts = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Term:
    """A term made ready to match pods: ``selector`` None matches no pod, ``namespaces`` None
    covers every namespace."""

    selector: LabelSelector | None
    namespaces: frozenset[str] | None
    topology_key: str
    weight: int = 1

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` is one the term names."""
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return self.selector is not None and matches(self.selector, labels)


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's inter-pod terms, and why the pod may not be scheduled ("" when it may)."""

    affinity: tuple[Term, ...] = ()
    anti_affinity: tuple[Term, ...] = ()
    preferred_affinity: tuple[Term, ...] = ()
    preferred_anti_affinity: tuple[Term, ...] = ()
    problem: str = ""
    # Identifies equal term sets (namespaces resolved), for the index's per-set counts.
    key: bytes = b""

    @property
    def required(self) -> bool:
        return bool(self.affinity or self.anti_affinity)

    @property
    def preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti_affinity)

    def all_terms(self) -> Iterable[Term]:
        yield from self.affinity
        yield from self.anti_affinity
        yield from self.preferred_affinity
        yield from self.preferred_anti_affinity

    def label_keys(self) -> set[str]:
        """The pod label keys the terms read: pods equal on these are named alike."""
        keys: set[str] = set()
        for term in self.all_terms():
            if term.selector is not None:
                keys.update(term.selector.match_labels)
                keys.update(req.key for req in term.selector.match_expressions)
        return keys


def project(labels: Mapping[str, str], keys: Iterable[str]) -> frozenset[tuple[str, str]]:
    """The labels of ``keys`` a pod has: what terms reading only those keys see of it (pods
    with a label of their own, a StatefulSet pod's name, fall into one class)."""
    return frozenset((key, labels[key]) for key in keys if key in labels)


def has_pod_affinity(pod: Pod | None) -> bool:
    """Whether the pod has any inter-pod term (cheap: asked of every pod in some sessions)."""
    if pod is None:
        return False
    affinity = pod.spec.affinity
    if affinity is None:
        return False
    a, anti = affinity.pod_affinity, affinity.pod_anti_affinity
    return (
        a is not None
        and bool(
            a.required_during_scheduling_ignored_during_execution
            or a.preferred_during_scheduling_ignored_during_execution
        )
    ) or (
        anti is not None
        and bool(
            anti.required_during_scheduling_ignored_during_execution
            or anti.preferred_during_scheduling_ignored_during_execution
        )
    )


def _selector_items(selector: LabelSelector | None) -> int:
    if selector is None:
        return 0
    return len(selector.match_labels) + sum(1 + len(r.values) for r in selector.match_expressions)


def _term_namespaces(
    raw: PodAffinityTerm, namespace: str, namespaces: NamespaceLabels | None
) -> tuple[frozenset[str] | None, bool]:
    """The namespaces a term covers (None: every namespace), and whether its
    namespaceSelector could not be resolved (``namespaces`` None: the labels are not known)."""
    names = frozenset(raw.namespaces or ())
    ns_selector = raw.namespace_selector
    if ns_selector is None:
        return names or frozenset((namespace,)), False
    if is_empty(ns_selector):
        return None, False  # {}: every namespace
    if namespaces is None:
        return names or None, True
    # kube-scheduler's mergeAffinityTermNamespacesIfNotEmpty: the names, and the namespaces
    # the selector matches (none at all is a term naming no pod).
    return names | namespaces.select(ns_selector), False


def _term(
    raw: PodAffinityTerm,
    namespace: str,
    weight: int,
    placed: bool,
    namespaces: NamespaceLabels | None = None,
) -> tuple[Term, bool]:
    """The term ready to match, and whether its namespaceSelector could not be resolved."""
    names, unresolved = _term_namespaces(raw, namespace, namespaces)
    if unresolved and placed:
        names = None  # see the module docstring: every namespace
    return Term(raw.label_selector, names, raw.topology_key, weight), unresolved


def pod_terms(
    pod: Pod, *, placed: bool = False, namespaces: NamespaceLabels | None = None
) -> PodTerms | None:
    """The pod's terms, None when it has none. ``placed``: the pod is on a node already (its
    terms are read within the bounds; a pod to place over the bounds gets a ``problem``).
    ``namespaces``: the namespaces' labels, which resolve non-empty namespaceSelectors (None:
    not known, see the module docstring)."""
    if not has_pod_affinity(pod):
        return None
    affinity = pod.spec.affinity
    assert affinity is not None
    namespace = pod.metadata.namespace
    a = affinity.pod_affinity or PodAffinity()
    anti = affinity.pod_anti_affinity or PodAntiAffinity()
    lists: list[tuple[str, Sequence[PodAffinityTerm | WeightedPodAffinityTerm], bool]] = [
        (f"podAffinity.{_REQUIRED}", a.required_during_scheduling_ignored_during_execution, False),
        (
            f"podAntiAffinity.{_REQUIRED}",
            anti.required_during_scheduling_ignored_during_execution,
            False,
        ),
        (f"podAffinity.{_PREFERRED}", a.preferred_during_scheduling_ignored_during_execution, True),
        (
            f"podAntiAffinity.{_PREFERRED}",
            anti.preferred_during_scheduling_ignored_during_execution,
            True,
        ),
    ]
    problem = ""
    compiled: list[tuple[Term, ...]] = []
    items = 0
    for name, raw_terms, preferred in lists:
        cap = MAX_PREFERRED_TERMS if preferred else MAX_REQUIRED_TERMS
        if len(raw_terms) > cap and not problem:
            problem = f"spec.affinity.{name} has {len(raw_terms)} terms, more than {cap}"
        terms = []
        for raw in raw_terms[:cap]:
            if isinstance(raw, WeightedPodAffinityTerm):
                raw_term, weight = raw.pod_affinity_term, raw.weight
            else:
                raw_term, weight = raw, 1
            term, unresolved = _term(raw_term, namespace, weight, placed, namespaces)
            items += _selector_items(raw_term.label_selector)
            items += _selector_items(raw_term.namespace_selector)
            if unresolved and not problem and not placed:
                problem = (
                    f"spec.affinity.{name}[].namespaceSelector selects namespaces by their "
                    "labels, and this scheduler's snapshot has no namespaces' labels"
                )
            terms.append(term)
        compiled.append(tuple(terms))
    if items > MAX_SELECTOR_ITEMS and not problem:
        problem = (
            f"spec.affinity pod (anti-)affinity selectors have {items} labels and values, "
            f"more than {MAX_SELECTOR_ITEMS}"
        )
    key = msgspec.json.encode(
        [
            [
                (
                    t.selector,
                    sorted(t.namespaces) if t.namespaces is not None else None,
                    t.topology_key,
                    t.weight,
                )
                for t in terms
            ]
            for terms in compiled
        ]
    )
    return PodTerms(compiled[0], compiled[1], compiled[2], compiled[3], problem, key)


def _add(counts: Counts, key: str, value: str, delta: int) -> None:
    by_value = counts.get(key)
    if by_value is None:
        by_value = counts[key] = {}
    total = by_value.get(value, 0) + delta
    if total:
        by_value[value] = total
    else:
        by_value.pop(value, None)
        if not by_value:
            del counts[key]


def _count(
    counts: Counts,
    terms: Iterable[Term],
    node: Mapping[str, str],
    namespace: str,
    labels: Mapping[str, str],
    delta: int,
    *,
    weighted: bool = False,
) -> None:
    """Add ``delta`` (times each term's weight when ``weighted``) to the domain of ``node``
    for each of ``terms`` that has its topology key there and matches the pod."""
    for t in terms:
        value = node.get(t.topology_key)
        if value is not None and t.matches(namespace, labels):
            _add(counts, t.topology_key, value, delta * t.weight if weighted else delta)


def _in_domain(counts: Counts, labels: Mapping[str, str]) -> bool:
    """Whether the node with ``labels`` is in a domain with a positive count."""
    for key, by_value in counts.items():
        value = labels.get(key)
        if value is not None and by_value.get(value, 0) > 0:
            return True
    return False


def normalise(raw: Mapping[str, int]) -> dict[str, int]:
    """kube-scheduler's InterPodAffinity NormalizeScore: 0-100 by (score - min) / (max - min),
    truncated; every score 0 when they are all equal."""
    if not raw:
        return {}
    low, high = min(raw.values()), max(raw.values())
    spread = high - low
    if spread <= 0:
        return dict.fromkeys(raw, 0)
    return {name: int(MAX_NODE_SCORE * ((score - low) / spread)) for name, score in raw.items()}


@dataclass(slots=True)
class Member:
    """A placed pod as the index counts it: where it is, what it is, what it asks."""

    namespace: str
    labels: Mapping[str, str]
    node_labels: Mapping[str, str]
    terms: PodTerms | None


@dataclass(slots=True)
class _Incoming:
    """For one set of terms (a pod to place): kube-scheduler's PreFilter and PreScore counts
    over the placed pods."""

    terms: PodTerms
    affinity: Counts = field(default_factory=dict)  # pods matching all affinity terms
    anti: Counts = field(default_factory=dict)  # pods matching each anti-affinity term
    score: Counts = field(default_factory=dict)  # preferred terms, weighted

    def apply(self, m: Member, sign: int) -> None:
        terms, node = self.terms, m.node_labels
        if not node:
            return
        ns, labels = m.namespace, m.labels
        if terms.affinity and all(t.matches(ns, labels) for t in terms.affinity):
            for t in terms.affinity:
                value = node.get(t.topology_key)
                if value is not None:
                    _add(self.affinity, t.topology_key, value, sign)
        _count(self.anti, terms.anti_affinity, node, ns, labels, sign)
        _count(self.score, terms.preferred_affinity, node, ns, labels, sign, weighted=True)
        _count(self.score, terms.preferred_anti_affinity, node, ns, labels, -sign, weighted=True)


@dataclass(slots=True)
class _Targeted:
    """For one pod to place (its namespace and labels): the placed pods' terms naming it."""

    namespace: str
    labels: Mapping[str, str]
    anti: Counts = field(default_factory=dict)  # placed pods' required anti-affinity
    score: Counts = field(default_factory=dict)  # their required affinity and preferred terms

    def apply(self, m: Member, sign: int) -> None:
        terms, node = m.terms, m.node_labels
        if terms is None or not node:
            return
        ns, labels = self.namespace, self.labels
        _count(self.anti, terms.anti_affinity, node, ns, labels, sign)
        _count(self.score, terms.affinity, node, ns, labels, sign * HARD_AFFINITY_WEIGHT)
        _count(self.score, terms.preferred_affinity, node, ns, labels, sign, weighted=True)
        _count(self.score, terms.preferred_anti_affinity, node, ns, labels, -sign, weighted=True)


class AffinityIndex:
    """The placed pods of a session, counted per topology domain for the pods to place.

    ``add`` and ``remove`` take a pod's key and its ``Member``; the counts each pod to place
    needs are derived on first use and kept current by them. Memory is proportional to the
    placed pods (each kept once) plus, per distinct term set or labelled pod asked about, one
    count per topology domain holding a matching pod."""

    def __init__(self, members: Iterable[tuple[str, Member]] = ()) -> None:
        self.members: dict[str, Member] = {}
        self.with_terms: dict[str, Member] = {}
        self._incoming: dict[bytes, _Incoming] = {}
        # By namespace and the labels of ``label_keys`` (the keys the placed pods' terms
        # read): one per class of pods those terms tell apart.
        self._targeted: dict[tuple[str, frozenset[tuple[str, str]]], _Targeted] = {}
        self.label_keys: set[str] = set()
        self.epoch = 0  # counts the times ``_targeted`` was dropped (``Judge`` asks)
        for key, member in members:
            self.add(key, member)

    def add(self, key: str, member: Member) -> None:
        if key in self.members:
            self.remove(key)
        self.members[key] = member
        if member.terms is not None:
            self.with_terms[key] = member
            keys = member.terms.label_keys()
            if not keys <= self.label_keys:
                self.label_keys |= keys
                self._targeted.clear()  # the classes were too coarse: derived again
                self.epoch += 1
            for targeted in self._targeted.values():
                targeted.apply(member, 1)
        for incoming in self._incoming.values():
            incoming.apply(member, 1)

    def remove(self, key: str) -> None:
        member = self.members.pop(key, None)
        if member is None:
            return
        if self.with_terms.pop(key, None) is not None:
            for targeted in self._targeted.values():
                targeted.apply(member, -1)
        for incoming in self._incoming.values():
            incoming.apply(member, -1)

    def incoming(self, terms: PodTerms) -> _Incoming:
        kept = self._incoming.get(terms.key)
        if kept is None:
            kept = self._incoming[terms.key] = _Incoming(terms)
            for member in self.members.values():
                kept.apply(member, 1)
        return kept

    def targeted(self, namespace: str, labels: Mapping[str, str]) -> _Targeted:
        seen = project(labels, self.label_keys)
        key = (namespace, seen)
        kept = self._targeted.get(key)
        if kept is None:
            kept = self._targeted[key] = _Targeted(namespace, dict(seen))
            for member in self.with_terms.values():
                kept.apply(member, 1)
        return kept

    def judge(self, namespace: str, labels: Mapping[str, str], terms: PodTerms | None) -> Judge:
        """What judges a pod (``namespace``, ``labels``, its ``terms``) on node after node,
        kept current by the index as pods come and go."""
        return Judge(self, namespace, labels, terms)

    def reason(
        self,
        namespace: str,
        labels: Mapping[str, str],
        terms: PodTerms | None,
        node_labels: Mapping[str, str],
    ) -> str | None:
        """Why a pod may not go to a node with ``node_labels``, or None (``Judge.reason``)."""
        return self.judge(namespace, labels, terms).reason(node_labels)

    def raw_scores(
        self,
        namespace: str,
        labels: Mapping[str, str],
        terms: PodTerms | None,
        nodes: Iterable[tuple[str, Mapping[str, str]]],
    ) -> dict[str, int] | None:
        """Each node's score before normalisation, or None (``Judge.raw_scores``)."""
        return self.judge(namespace, labels, terms).raw_scores(nodes)


class Judge:
    """One pod's view of an ``AffinityIndex``: its counts looked up once, not per node."""

    __slots__ = ("_epoch", "_incoming", "_index", "_targeted", "labels", "namespace", "terms")

    def __init__(
        self,
        index: AffinityIndex,
        namespace: str,
        labels: Mapping[str, str],
        terms: PodTerms | None,
    ) -> None:
        self._index = index
        self.namespace = namespace
        self.labels = labels
        self.terms = terms
        needs_counts = (
            terms is not None and not terms.problem and (terms.required or terms.preferred)
        )
        self._incoming = index.incoming(terms) if needs_counts and terms is not None else None
        self._targeted: _Targeted | None = None
        self._epoch = -1

    def _placed_terms(self) -> _Targeted | None:
        """The placed pods' terms naming this pod, None while no placed pod has terms."""
        index = self._index
        if not index.with_terms:
            return None
        if self._targeted is None or self._epoch != index.epoch:
            self._targeted = index.targeted(self.namespace, self.labels)
            self._epoch = index.epoch
        return self._targeted

    def reason(self, node_labels: Mapping[str, str]) -> str | None:
        """Why the pod may not go to a node with ``node_labels``, or None (see the module
        docstring)."""
        terms, incoming = self.terms, self._incoming
        if terms is not None:
            if terms.problem:
                return terms.problem
            if incoming is not None:
                if terms.affinity and not _affinity_holds(
                    terms, incoming.affinity, self.namespace, self.labels, node_labels
                ):
                    return AFFINITY_MISMATCH
                anti = incoming.anti
                if anti:
                    for t in terms.anti_affinity:
                        by_value = anti.get(t.topology_key)
                        value = node_labels.get(t.topology_key)
                        if by_value and value is not None and by_value.get(value, 0) > 0:
                            return ANTI_AFFINITY_MISMATCH
        placed = self._placed_terms()
        if placed is not None and placed.anti and _in_domain(placed.anti, node_labels):
            return EXISTING_ANTI_AFFINITY_MISMATCH
        return None

    def raw_scores(self, nodes: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, int] | None:
        """Each node's score before normalisation, None when every node scores 0 for want
        of any term counting (kube-scheduler's PreScore skip)."""
        pairs: list[tuple[str, dict[str, int]]] = []
        terms, incoming = self.terms, self._incoming
        if terms is not None and terms.preferred and incoming is not None:
            pairs.extend(incoming.score.items())
        placed = self._placed_terms()
        if placed is not None:
            pairs.extend(placed.score.items())
        if not pairs:
            return None
        raw: dict[str, int] = {}
        for name, node_labels in nodes:
            total = 0
            for key, by_value in pairs:
                value = node_labels.get(key)
                if value is not None:
                    total += by_value.get(value, 0)
            raw[name] = total
        return raw


def _affinity_holds(
    terms: PodTerms,
    counts: Counts,
    namespace: str,
    labels: Mapping[str, str],
    node_labels: Mapping[str, str],
) -> bool:
    """kube-scheduler's satisfyPodAffinity."""
    pods_exist = True
    for t in terms.affinity:
        value = node_labels.get(t.topology_key)
        if value is None:
            return False  # the node must have every topology key
        by_value = counts.get(t.topology_key)
        if not by_value or by_value.get(value, 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    # The first pod of a group with affinity to itself: no pod anywhere matches the terms,
    # and the pod matches them all.
    return not counts and all(t.matches(namespace, labels) for t in terms.affinity)
