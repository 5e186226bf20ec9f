"""The inter-pod affinity core (``scheduler.api.pod_affinity``): kube-scheduler's
InterPodAffinity filter and score cases, and the index kept current as pods come and go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import (
    Affinity,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodAntiAffinity,
    PodSpec,
    WeightedPodAffinityTerm,
)
from caldera.api.meta import LabelSelector, LabelSelectorRequirement, ObjectMeta
from scheduler.api.pod_affinity import (
    AFFINITY_MISMATCH,
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
    MAX_REQUIRED_TERMS,
    AffinityIndex,
    Member,
    PodTerms,
    has_pod_affinity,
    normalise,
    pod_terms,
)

HOST = "kubernetes.io/hostname"
ZONE = "zone"


def term(
    key: str = ZONE,
    *,
    namespaces: Sequence[str] = (),
    namespace_selector: LabelSelector | None = None,
    selector: LabelSelector | None = None,
    **match: str,
) -> PodAffinityTerm:
    return PodAffinityTerm(
        label_selector=selector if selector is not None else LabelSelector(match_labels=match),
        namespaces=tuple(namespaces),
        namespace_selector=namespace_selector,
        topology_key=key,
    )


def weighted(weight: int, t: PodAffinityTerm) -> WeightedPodAffinityTerm:
    return WeightedPodAffinityTerm(weight=weight, pod_affinity_term=t)


def pod(
    labels: Mapping[str, str] | None = None,
    *,
    namespace: str = "ns",
    required: Sequence[PodAffinityTerm] = (),
    anti: Sequence[PodAffinityTerm] = (),
    preferred: Sequence[WeightedPodAffinityTerm] = (),
    preferred_anti: Sequence[WeightedPodAffinityTerm] = (),
) -> Pod:
    affinity = Affinity(
        pod_affinity=PodAffinity(
            required_during_scheduling_ignored_during_execution=tuple(required),
            preferred_during_scheduling_ignored_during_execution=tuple(preferred),
        ),
        pod_anti_affinity=PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=tuple(anti),
            preferred_during_scheduling_ignored_during_execution=tuple(preferred_anti),
        ),
    )
    return Pod(
        metadata=ObjectMeta(name="p", namespace=namespace, labels=dict(labels or {})),
        spec=PodSpec(affinity=affinity),
    )


NODES: dict[str, dict[str, str]] = {
    "a1": {HOST: "a1", ZONE: "a"},
    "a2": {HOST: "a2", ZONE: "a"},
    "b1": {HOST: "b1", ZONE: "b"},
    "bare": {HOST: "bare"},  # no zone label
}


def placed(node: str, p: Pod) -> Member:
    return Member(p.metadata.namespace, p.metadata.labels, NODES[node], pod_terms(p, placed=True))


def index(*members: tuple[str, Pod]) -> AffinityIndex:
    return AffinityIndex((f"m{i}", placed(node, p)) for i, (node, p) in enumerate(members))


def reasons(idx: AffinityIndex, p: Pod) -> dict[str, str | None]:
    terms = pod_terms(p)
    ns, labels = p.metadata.namespace, p.metadata.labels
    return {name: idx.reason(ns, labels, terms, labels_) for name, labels_ in NODES.items()}


# ---- filter ----------------------------------------------------------------------------------


def test_existing_pods_anti_affinity_keeps_matching_pods_out_of_their_domain() -> None:
    idx = index(("a1", pod({"app": "web"}, anti=[term(ZONE, app="web")])))
    assert reasons(idx, pod({"app": "web"})) == {
        "a1": EXISTING_ANTI_AFFINITY_MISMATCH,
        "a2": EXISTING_ANTI_AFFINITY_MISMATCH,
        "b1": None,
        "bare": None,
    }
    assert set(reasons(idx, pod({"app": "db"})).values()) == {None}


def test_required_affinity_needs_a_matching_pod_in_the_domain_and_the_key() -> None:
    idx = index(("b1", pod({"app": "cache"})))
    assert reasons(idx, pod({"app": "web"}, required=[term(ZONE, app="cache")])) == {
        "a1": AFFINITY_MISMATCH,
        "a2": AFFINITY_MISMATCH,
        "b1": None,
        "bare": AFFINITY_MISMATCH,
    }


def test_affinity_counts_pods_matching_all_the_terms() -> None:
    # One pod matches each term, none both: no domain satisfies the pod.
    idx = index(("a1", pod({"app": "cache"})), ("a1", pod({"tier": "db"})))
    wants = pod({}, required=[term(ZONE, app="cache"), term(HOST, tier="db")])
    assert set(reasons(idx, wants).values()) == {AFFINITY_MISMATCH}
    both = index(("a1", pod({"app": "cache", "tier": "db"})))
    assert reasons(both, wants)["a1"] is None
    assert reasons(both, wants)["a2"] == AFFINITY_MISMATCH  # not on a2's host


def test_first_pod_with_affinity_to_its_own_group_may_go_anywhere_with_the_key() -> None:
    first = pod({"app": "web"}, required=[term(ZONE, app="web")])
    assert reasons(AffinityIndex(), first) == {
        "a1": None,
        "a2": None,
        "b1": None,
        "bare": AFFINITY_MISMATCH,
    }
    # Not when it does not match its own terms, nor once some pod matches them.
    stranger = pod({"app": "db"}, required=[term(ZONE, app="web")])
    assert set(reasons(AffinityIndex(), stranger).values()) == {AFFINITY_MISMATCH}
    idx = index(("b1", pod({"app": "web"})))
    assert reasons(idx, first)["a1"] == AFFINITY_MISMATCH


def test_required_anti_affinity_of_the_pod() -> None:
    idx = index(("a1", pod({"app": "web"})))
    assert reasons(idx, pod({"app": "web"}, anti=[term(HOST, app="web")])) == {
        "a1": ANTI_AFFINITY_MISMATCH,
        "a2": None,
        "b1": None,
        "bare": None,
    }


def test_affinity_is_judged_before_anti_affinity_before_existing_pods() -> None:
    idx = index(("a1", pod({"app": "web"}, anti=[term(HOST, app="x")])))
    both = pod({"app": "x"}, required=[term(ZONE, app="nothing")], anti=[term(HOST, app="web")])
    assert reasons(idx, both)["a1"] == AFFINITY_MISMATCH
    anti = pod({"app": "x"}, anti=[term(HOST, app="web")])
    assert reasons(idx, anti)["a1"] == ANTI_AFFINITY_MISMATCH
    assert reasons(idx, pod({"app": "x"}))["a1"] == EXISTING_ANTI_AFFINITY_MISMATCH


def test_namespaces_default_to_the_pods_own() -> None:
    idx = index(("a1", pod({"app": "web"}, namespace="other")))
    assert reasons(idx, pod({}, anti=[term(HOST, app="web")]))["a1"] is None
    named = pod({}, anti=[term(HOST, namespaces=["other"], app="web")])
    assert reasons(idx, named)["a1"] == ANTI_AFFINITY_MISMATCH
    everywhere = pod({}, anti=[term(HOST, namespace_selector=LabelSelector(), app="web")])
    assert reasons(idx, everywhere)["a1"] == ANTI_AFFINITY_MISMATCH


def test_a_namespace_selector_by_labels_is_refused_by_name() -> None:
    selector = LabelSelector(match_labels={"team": "a"})
    terms = pod_terms(pod({}, anti=[term(HOST, namespace_selector=selector, app="web")]))
    assert terms is not None
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution" in terms.problem
    assert "namespaceSelector" in terms.problem
    # A placed pod's such term covers every namespace: it keeps every matching pod out.
    idx = index(("a1", pod({}, anti=[term(HOST, namespace_selector=selector, app="web")])))
    assert reasons(idx, pod({"app": "web"}, namespace="elsewhere"))["a1"] == (
        EXISTING_ANTI_AFFINITY_MISMATCH
    )


def test_selectors_none_matches_nothing_empty_matches_everything() -> None:
    idx = index(("a1", pod({"app": "web"})))
    no_selector = PodAffinityTerm(topology_key=HOST)
    assert reasons(idx, pod({}, anti=[no_selector]))["a1"] is None
    empty = term(HOST, selector=LabelSelector())
    assert reasons(idx, pod({}, anti=[empty]))["a1"] == ANTI_AFFINITY_MISMATCH
    expr = LabelSelector(
        match_expressions=(LabelSelectorRequirement(key="app", operator="In", values=("web",)),)
    )
    assert reasons(idx, pod({}, anti=[term(HOST, selector=expr)]))["a1"] == ANTI_AFFINITY_MISMATCH


def test_a_pod_over_the_term_bounds_is_refused_naming_the_field() -> None:
    many = [term(HOST, app=str(i)) for i in range(MAX_REQUIRED_TERMS + 1)]
    terms = pod_terms(pod({}, required=many))
    assert terms is not None
    assert terms.problem.startswith(
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution has 33 terms"
    )
    assert len(terms.affinity) == MAX_REQUIRED_TERMS
    assert reasons(AffinityIndex(), pod({}, required=many))["a1"] == terms.problem
    huge = LabelSelector(
        match_expressions=(
            LabelSelectorRequirement(key="k", operator="In", values=tuple(map(str, range(2000)))),
        )
    )
    big = pod_terms(pod({}, anti=[term(HOST, selector=huge)]))
    assert big is not None
    assert "more than 1024" in big.problem
    placed_terms = pod_terms(pod({}, required=many), placed=True)
    assert placed_terms is not None
    assert len(placed_terms.affinity) == MAX_REQUIRED_TERMS


def test_pods_without_terms_have_none() -> None:
    assert not has_pod_affinity(Pod())
    assert pod_terms(pod({"app": "web"})) is None
    assert pod_terms(Pod(spec=PodSpec(affinity=Affinity()))) is None


# ---- score -------------------------------------------------------------------------------------


def raw(idx: AffinityIndex, p: Pod) -> dict[str, int] | None:
    return idx.raw_scores(
        p.metadata.namespace, p.metadata.labels, pod_terms(p), list(NODES.items())
    )


def test_normalise_is_kube_schedulers() -> None:
    assert normalise({"x": 10, "y": 0, "z": 5}) == {"x": 100, "y": 0, "z": 50}
    assert normalise({"x": -5, "y": 0, "z": 5}) == {"x": 0, "y": 50, "z": 100}
    assert normalise({"x": 1, "y": 2, "z": 3, "w": 0}) == {"x": 33, "y": 66, "z": 100, "w": 0}
    assert normalise({"x": 7, "y": 7}) == {"x": 0, "y": 0}
    assert normalise({}) == {}


def test_preferred_terms_weigh_their_domains() -> None:
    idx = index(("a1", pod({"app": "cache"})), ("b1", pod({"app": "noisy"})))
    p = pod(
        {},
        preferred=[weighted(10, term(ZONE, app="cache"))],
        preferred_anti=[weighted(4, term(HOST, app="noisy"))],
    )
    assert raw(idx, p) == {"a1": 10, "a2": 10, "b1": -4, "bare": 0}


def test_placed_pods_terms_score_symmetrically() -> None:
    idx = index(
        ("a1", pod({}, required=[term(ZONE, app="web")])),  # hardPodAffinityWeight 1
        ("b1", pod({}, preferred=[weighted(5, term(HOST, app="web"))])),
        ("bare", pod({}, preferred_anti=[weighted(3, term(HOST, app="web"))])),
    )
    assert raw(idx, pod({"app": "web"})) == {"a1": 1, "a2": 1, "b1": 5, "bare": -3}
    assert raw(idx, pod({"app": "db"})) is None  # no term names it


def test_nothing_to_score_is_none() -> None:
    assert raw(index(("a1", pod({"app": "web"}))), pod({"app": "web"})) is None


# ---- the index kept current ---------------------------------------------------------------------

LABELS = st.sampled_from([{}, {"app": "web"}, {"app": "db"}, {"app": "web", "tier": "x"}])
TERMS = st.builds(
    term,
    st.sampled_from([HOST, ZONE]),
    namespaces=st.sampled_from([(), ("ns", "other")]),
    app=st.sampled_from(["web", "db"]),
)
PODS = st.builds(
    pod,
    LABELS,
    namespace=st.sampled_from(["ns", "other"]),
    required=st.lists(TERMS, max_size=2),
    anti=st.lists(TERMS, max_size=2),
    preferred=st.lists(st.builds(weighted, st.integers(1, 100), TERMS), max_size=2),
)


def everything(idx: AffinityIndex, probes: Sequence[Pod]) -> list[object]:
    out: list[object] = []
    for p in probes:
        out.append(reasons(idx, p))
        out.append(raw(idx, p))
    return out


@given(
    st.lists(st.tuples(st.sampled_from(sorted(NODES)), PODS), max_size=8),
    st.lists(st.integers(0, 7), max_size=5),
    st.lists(PODS, min_size=1, max_size=3),
)
def test_counts_kept_current_equal_counts_built_afresh(
    members: list[tuple[str, Pod]], gone: list[int], probes: list[Pod]
) -> None:
    kept = AffinityIndex()
    everything(kept, probes)  # derive the counts before the pods come and go
    for i, (node, p) in enumerate(members):
        kept.add(f"m{i}", placed(node, p))
    for i in gone:
        kept.remove(f"m{i}")
    fresh = AffinityIndex(
        (f"m{i}", placed(node, p)) for i, (node, p) in enumerate(members) if i not in gone
    )
    assert everything(kept, probes) == everything(fresh, probes)


def test_terms_are_keyed_by_what_they_match() -> None:
    one = pod_terms(pod({}, anti=[term(HOST, app="web")]))
    same = pod_terms(pod({"other": "labels"}, anti=[term(HOST, app="web")]))
    elsewhere = pod_terms(pod({}, namespace="x", anti=[term(HOST, app="web")]))
    assert isinstance(one, PodTerms)
    assert same is not None
    assert elsewhere is not None
    assert one.key == same.key != elsewhere.key


@pytest.mark.parametrize("weight", [0, 1, 100])
def test_preferred_weights_are_read(weight: int) -> None:
    terms = pod_terms(pod({}, preferred=[weighted(weight, term(HOST, app="web"))]))
    assert terms is not None
    assert [t.weight for t in terms.preferred_affinity] == [weight]
