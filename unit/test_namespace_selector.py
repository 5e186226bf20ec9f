"""Inter-pod affinity terms' ``namespaceSelector`` resolved by the namespaces' labels
(``scheduler.api.namespace_labels``): the pure resolution against kube-scheduler's definition,
its use by the affinity core and in sessions, and the labels the process keeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import Affinity, PodAffinityTerm, PodAntiAffinity
from caldera.api.meta import LabelSelector, LabelSelectorRequirement
from caldera.api.selectors import matches
from scheduler.api.namespace_labels import MAX_KEPT, LabelsByNamespace, NamespaceLabels
from scheduler.api.pod_affinity import (
    ANTI_AFFINITY_MISMATCH,
    EXISTING_ANTI_AFFINITY_MISMATCH,
    MAX_SELECTOR_ITEMS,
    AffinityIndex,
    Member,
    pod_terms,
)
from scheduler.api.types import ClusterInfo, NodeInfo, TaskInfo, TaskStatus
from unit.sched_fixtures import binds, make_cluster, make_job, make_node, make_task
from unit.test_plugin_pod_affinity import session
from unit.test_pod_affinity import HOST, NODES, index, pod, reasons, term

TEAMS = NamespaceLabels({"ns-a": {"team": "a"}, "ns-b": {"team": "b"}, "ns": {}})
TEAM_A = LabelSelector(match_labels={"team": "a"})


# ---- the resolution ---------------------------------------------------------------------------


def test_a_selector_selects_the_namespaces_whose_labels_match() -> None:
    """matchLabels and matchExpressions are read as for any label selector."""
    assert TEAMS.select(TEAM_A) == {"ns-a"}
    has_team = LabelSelector(
        match_expressions=(LabelSelectorRequirement(key="team", operator="Exists"),)
    )
    assert TEAMS.select(has_team) == {"ns-a", "ns-b"}
    not_a = LabelSelector(
        match_expressions=(LabelSelectorRequirement(key="team", operator="NotIn", values=("a",)),)
    )
    assert TEAMS.select(not_a) == {"ns-b", "ns"}
    assert TEAMS.select(LabelSelector(match_labels={"team": "c"})) == frozenset()


def test_answers_are_kept_and_bounded() -> None:
    """A selector is matched once while the labels stand; past MAX_KEPT selectors the kept
    answers are dropped, and the answers stay right."""
    labels = NamespaceLabels({"ns-a": {"team": "a"}})
    first = labels.select(TEAM_A)
    assert labels.select(LabelSelector(match_labels={"team": "a"})) is first
    for i in range(MAX_KEPT + 5):
        assert labels.select(LabelSelector(match_labels={"team": str(i)})) == frozenset()
    assert len(labels._kept) <= MAX_KEPT
    assert labels.select(TEAM_A) == {"ns-a"}


def test_a_term_covers_its_names_and_the_selected_namespaces() -> None:
    """kube-scheduler's mergeAffinityTermNamespacesIfNotEmpty: the union; ``{}`` every
    namespace; a selector matching nothing names no namespace (and so no pod)."""
    both = pod({}, anti=[term(HOST, namespaces=["other"], namespace_selector=TEAM_A, app="w")])
    terms = pod_terms(both, namespaces=TEAMS)
    assert terms is not None
    assert not terms.problem
    assert terms.anti_affinity[0].namespaces == frozenset({"other", "ns-a"})
    everywhere = pod({}, anti=[term(HOST, namespace_selector=LabelSelector(), app="w")])
    terms = pod_terms(everywhere, namespaces=TEAMS)
    assert terms is not None
    assert terms.anti_affinity[0].namespaces is None
    nowhere = pod({}, anti=[term(HOST, namespace_selector=LabelSelector(match_labels={"x": "y"}))])
    terms = pod_terms(nowhere, namespaces=TEAMS)
    assert terms is not None
    assert terms.anti_affinity[0].namespaces == frozenset()
    own = pod({}, anti=[term(HOST, app="w")])
    terms = pod_terms(own, namespaces=TEAMS)
    assert terms is not None
    assert terms.anti_affinity[0].namespaces == frozenset({"ns"})


def test_without_the_labels_a_pod_with_a_selector_waits_naming_the_field() -> None:
    """A snapshot without the namespaces' labels (the simulator's) keeps the earlier rule."""
    terms = pod_terms(pod({}, anti=[term(HOST, namespace_selector=TEAM_A, app="w")]))
    assert terms is not None
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution" in terms.problem
    assert "namespaceSelector" in terms.problem


def test_namespace_selectors_count_toward_the_selector_bound() -> None:
    """A namespaceSelector of more values than the bound makes the pod wait, naming it."""
    values = tuple(str(i) for i in range(MAX_SELECTOR_ITEMS))
    huge = LabelSelector(
        match_expressions=(LabelSelectorRequirement(key="team", operator="In", values=values),)
    )
    terms = pod_terms(pod({}, anti=[term(HOST, namespace_selector=huge)]), namespaces=TEAMS)
    assert terms is not None
    assert f"more than {MAX_SELECTOR_ITEMS}" in terms.problem


labels_st = st.dictionaries(st.sampled_from(["team", "tier", "env"]), st.sampled_from("abc"))
names_st = st.sampled_from(["n0", "n1", "n2", "n3", "ns"])
requirement_st = st.one_of(
    st.builds(
        LabelSelectorRequirement,
        key=st.sampled_from(["team", "tier"]),
        operator=st.sampled_from(["In", "NotIn"]),
        values=st.lists(st.sampled_from("abc"), min_size=1, max_size=2).map(tuple),
    ),
    st.builds(
        LabelSelectorRequirement,
        key=st.sampled_from(["team", "env"]),
        operator=st.sampled_from(["Exists", "DoesNotExist"]),
    ),
)
selector_st = st.builds(
    LabelSelector,
    match_labels=st.dictionaries(
        st.sampled_from(["team", "env"]), st.sampled_from("abc"), max_size=1
    ),
    match_expressions=st.lists(requirement_st, max_size=2).map(tuple),
)


@given(
    by_name=st.dictionaries(names_st, labels_st),
    listed=st.lists(names_st, max_size=2),
    ns_selector=st.none() | selector_st,
    candidate=names_st,
    pod_labels=st.dictionaries(st.just("app"), st.sampled_from("wx")),
)
def test_a_resolved_term_matches_as_kube_schedulers_affinity_term(
    by_name: dict[str, dict[str, str]],
    listed: list[str],
    ns_selector: LabelSelector | None,
    candidate: str,
    pod_labels: dict[str, str],
) -> None:
    """For any namespaces' labels and term: the resolved term names a pod of an existing
    namespace exactly when kube-scheduler's AffinityTerm.Matches does (the namespace listed,
    or the pod's own when nothing is; else its labels match the selector), and its labels
    match the term's selector."""
    raw = term(HOST, namespaces=listed, namespace_selector=ns_selector, app="w")
    terms = pod_terms(pod({}, anti=[raw]), namespaces=NamespaceLabels(by_name))
    assert terms is not None
    assert not terms.problem
    resolved = terms.anti_affinity[0]
    in_namespace = (
        candidate in listed
        or (not listed and ns_selector is None and candidate == "ns")
        or (
            ns_selector is not None
            and (
                candidate in by_name
                or not (ns_selector.match_labels or ns_selector.match_expressions)
            )
            and matches(ns_selector, by_name.get(candidate, {}))
        )
    )
    expected = in_namespace and pod_labels.get("app") == "w"
    assert resolved.matches(candidate, pod_labels) == expected


# ---- the affinity core with the labels ----------------------------------------------------


def test_placed_pods_terms_are_resolved_too() -> None:
    """A placed pod refusing web pods of team=a namespaces keeps them out of its node, and
    lets a web pod of a team=b namespace in."""
    guard = pod({}, anti=[term(HOST, namespace_selector=TEAM_A, app="web")])
    idx = AffinityIndex(
        [("m0", Member("ns", {}, NODES["a1"], pod_terms(guard, placed=True, namespaces=TEAMS)))]
    )
    for namespace, expected in (("ns-a", EXISTING_ANTI_AFFINITY_MISMATCH), ("ns-b", None)):
        incoming = pod({"app": "web"}, namespace=namespace)
        verdict = idx.reason(namespace, incoming.metadata.labels, None, NODES["a1"])
        assert verdict == expected, namespace


def test_an_incoming_pods_selector_names_the_selected_namespaces_pods() -> None:
    """Web pods in ns-a on a1 and in ns-b on b1: a pod refusing team=a's web pods is kept off
    a1 only."""
    idx = index(
        ("a1", pod({"app": "web"}, namespace="ns-a")), ("b1", pod({"app": "web"}, namespace="ns-b"))
    )
    incoming = pod({}, anti=[term(HOST, namespace_selector=TEAM_A, app="web")])
    terms = pod_terms(incoming, namespaces=TEAMS)
    got = {
        name: idx.reason("ns", {}, terms, labels)
        for name, labels in NODES.items()
        if name in ("a1", "b1")
    }
    assert got == {"a1": ANTI_AFFINITY_MISMATCH, "b1": None}
    assert reasons(idx, pod({}))["a1"] is None  # no terms: nothing to refuse


# ---- in sessions -----------------------------------------------------------------------------


def _web(namespace: str, node: str, index_: int) -> TaskInfo:
    task = make_task(
        f"web-{namespace}", index_, namespace=namespace, status=TaskStatus.RUNNING, node=node
    )
    assert task.pod is not None
    task.pod = msgspec.structs.replace(
        task.pod, metadata=msgspec.structs.replace(task.pod.metadata, labels={"app": "web"})
    )
    return task


def _guarded(selector: LabelSelector) -> TaskInfo:
    task = make_task("guard", 0)
    assert task.pod is not None
    affinity = Affinity(
        pod_anti_affinity=PodAntiAffinity(
            required_during_scheduling_ignored_during_execution=(
                PodAffinityTerm(
                    label_selector=LabelSelector(match_labels={"app": "web"}),
                    namespace_selector=selector,
                    topology_key=HOST,
                ),
            )
        )
    )
    task.pod = msgspec.structs.replace(
        task.pod, spec=msgspec.structs.replace(task.pod.spec, affinity=affinity)
    )
    return task


def _cluster(namespace_labels: Mapping[str, Mapping[str, str]] | None) -> ClusterInfo:
    nodes: Sequence[NodeInfo] = [
        make_node(name, "8", "16Gi", labels={HOST: name}) for name in ("n-a", "n-b")
    ]
    jobs = [
        make_job("web-ns-a", [_web("ns-a", "n-a", 0)], namespace="ns-a", phase="Running"),
        make_job("web-ns-b", [_web("ns-b", "n-b", 0)], namespace="ns-b", phase="Running"),
        make_job("guard", [_guarded(TEAM_A)], min_available=1),
    ]
    cluster = make_cluster(nodes, jobs)
    if namespace_labels is not None:
        cluster.namespace_labels = NamespaceLabels(namespace_labels)
    return cluster


def test_a_session_places_by_the_namespaces_labels() -> None:
    """The guard refuses web pods of team=a namespaces: it goes beside ns-b's web pod; with
    the labels swapped, beside ns-a's."""
    labels = {"ns-a": {"team": "a"}, "ns-b": {"team": "b"}, "ns": {}}
    assert binds(session(_cluster(labels))) == {"guard-0": "n-b"}
    swapped = {"ns-a": {"team": "b"}, "ns-b": {"team": "a"}, "ns": {}}
    assert binds(session(_cluster(swapped))) == {"guard-0": "n-a"}


def test_a_session_without_the_labels_leaves_the_pod_waiting() -> None:
    """No namespaces' labels in the snapshot: the pod waits with the field named."""
    ssn = session(_cluster(None))
    assert binds(ssn) == {}
    assert any("namespaceSelector" in e for e in ssn.jobs["ns/guard"].fit_errors.values())


# ---- the labels the process keeps ---------------------------------------------------------


def test_the_kept_labels_tell_news_and_keep_one_snapshot_until_a_change() -> None:
    """Only a change is news (a resync's equal labels are not); the snapshot is the same
    object until one, then a new one with the new labels."""
    kept = LabelsByNamespace()
    assert kept.seen("ns-a", {"team": "a"})
    first = kept.snapshot()
    assert not kept.seen("ns-a", {"team": "a"})
    assert kept.snapshot() is first
    assert kept.seen("ns-a", {"team": "b"})
    second = kept.snapshot()
    assert second is not first
    assert second.version > first.version
    assert second.select(TEAM_A) == frozenset()
    assert first.select(TEAM_A) == {"ns-a"}
    assert kept.gone("ns-a")
    assert not kept.gone("ns-a")
    assert kept.snapshot().labels("ns-a") is None
