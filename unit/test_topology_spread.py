"""Pod topology spread's pure core (``scheduler.api.topology_spread``): parsing and checking the
constraints, the filter's skew with minDomains, the node inclusion policies, missing labels and
matchLabelKeys, and the normalised scores, on kube-scheduler's own cases (its
podtopologyspread filtering and scoring tests) and a few more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
import pytest

from caldera.api.core import Pod, PodSpec, Taint, Toleration, TopologySpreadConstraint
from caldera.api.meta import LabelSelector, LabelSelectorRequirement, ObjectMeta
from caldera.api.resources import Resources
from scheduler.api.topology_spread import (
    CONSTRAINTS_NOT_MATCH,
    MAX_CONSTRAINTS,
    MISSING_LABEL,
    Constraint,
    DomainCounts,
    SpreadSpec,
    parse,
    score,
)
from scheduler.api.types import NodeInfo, TaskInfo, TaskStatus
from scheduler.plugins.topology_spread import _included
from unit.sched_fixtures import make_node

HOST = "kubernetes.io/hostname"
FOO = LabelSelector(match_expressions=(LabelSelectorRequirement(key="foo", operator="Exists"),))
BAR = LabelSelector(match_expressions=(LabelSelectorRequirement(key="bar", operator="Exists"),))


def spread(
    max_skew: int,
    key: str,
    selector: LabelSelector | None = FOO,
    *,
    hard: bool = True,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: tuple[str, ...] = (),
) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable="DoNotSchedule" if hard else "ScheduleAnyway",
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=affinity_policy,
        node_taints_policy=taints_policy,
        match_label_keys=match_label_keys,
    )


def incoming(
    *constraints: TopologySpreadConstraint,
    labels: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    namespace: str = "ns",
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace=namespace, labels=dict(labels or {"foo": ""})),
        spec=PodSpec(
            node_selector=dict(node_selector or {}), topology_spread_constraints=constraints
        ),
    )


def nodes(spec: Mapping[str, Mapping[str, str]], taints: Sequence[str] = ()) -> dict[str, NodeInfo]:
    """Nodes by name with these labels (the hostname label added); ``taints``: nodes with a
    NoSchedule taint."""
    return {
        name: make_node(
            name,
            labels={HOST: name, **labels},
            taints=[Taint(key="t", value="v", effect="NoSchedule")] if name in taints else [],
        )
        for name, labels in spec.items()
    }


def place(
    node: NodeInfo,
    name: str,
    labels: Mapping[str, str],
    *,
    namespace: str = "ns",
    status: TaskStatus = TaskStatus.RUNNING,
) -> None:
    pod = Pod(
        metadata=ObjectMeta(name=name, namespace=namespace, labels=dict(labels)),
        spec=PodSpec(node_name=node.name),
    )
    node.add_task(
        TaskInfo(
            uid=name,
            namespace=namespace,
            name=name,
            job="",
            role="",
            resreq=Resources(),
            init_resreq=Resources(),
            priority=0,
            status=status,
            node_name=node.name,
            pod=pod,
        )
    )


def counts_for(pod: Pod, all_nodes: Mapping[str, NodeInfo], *, hard: bool) -> DomainCounts:
    spec = parse(pod)
    assert isinstance(spec, SpreadSpec)
    counts = DomainCounts(pod.metadata.namespace, spec.hard if hard else spec.soft, _included(pod))
    counts.build(all_nodes, 0)
    return counts


def verdicts(pod: Pod, all_nodes: Mapping[str, NodeInfo]) -> dict[str, str | None]:
    """The filter's verdict on every node."""
    counts = counts_for(pod, all_nodes, hard=True)
    self_match = tuple(c.selector.matches(pod.metadata.labels) for c in counts.constraints)
    return {name: counts.filter(node, self_match) for name, node in all_nodes.items()}


# --- parsing ------------------------------------------------------------------------------------


def test_defaults_and_the_two_kinds() -> None:
    """minDomains 1, node affinity honoured and taints ignored unless told; each constraint
    goes to the filter or the score by whenUnsatisfiable."""
    spec = parse(incoming(spread(1, "zone"), spread(2, HOST, hard=False, taints_policy="Honor")))
    assert isinstance(spec, SpreadSpec)
    (hard,) = spec.hard
    (soft,) = spec.soft
    assert (hard.min_domains, hard.honor_affinity, hard.honor_taints) == (1, True, False)
    assert (soft.max_skew, soft.topology_key, soft.honor_taints) == (2, HOST, True)


@pytest.mark.parametrize(
    ("constraint", "field"),
    [
        (spread(0, "zone"), "spec.topologySpreadConstraints[0].maxSkew"),
        (spread(-3, "zone"), "spec.topologySpreadConstraints[0].maxSkew"),
        (spread(1, ""), "spec.topologySpreadConstraints[0].topologyKey"),
        (spread(1, "zone", min_domains=0), "spec.topologySpreadConstraints[0].minDomains"),
        (spread(1, "zone", affinity_policy="Maybe"), "[0].nodeAffinityPolicy"),
        (spread(1, "zone", taints_policy="honor"), "[0].nodeTaintsPolicy"),
        (
            msgspec.structs.replace(spread(1, "zone"), when_unsatisfiable="Sometimes"),
            "[0].whenUnsatisfiable",
        ),
        (
            spread(
                1,
                "zone",
                LabelSelector(
                    match_expressions=(LabelSelectorRequirement(key="a", operator="Gt"),)
                ),
            ),
            "[0].labelSelector.matchExpressions[0]",
        ),
        (
            spread(
                1,
                "zone",
                LabelSelector(
                    match_expressions=(LabelSelectorRequirement(key="a", operator="In"),)
                ),
            ),
            "[0].labelSelector.matchExpressions[0]",
        ),
    ],
)
def test_bad_values_give_a_reason_naming_the_field(
    constraint: TopologySpreadConstraint, field: str
) -> None:
    """Values the API server refuses are never evaluated (no skew against 0, no selector that
    cannot be converted): the pod waits with the field's name."""
    reason = parse(incoming(constraint))
    assert isinstance(reason, str)
    assert field in reason


def test_too_many_constraints() -> None:
    """Past the bound, the pod waits, whatever the constraints are."""
    many = tuple(spread(1, f"k{i}") for i in range(MAX_CONSTRAINTS + 1))
    reason = parse(incoming(*many))
    assert reason == (
        f"spec.topologySpreadConstraints: Too many: {MAX_CONSTRAINTS + 1}: "
        f"must have at most {MAX_CONSTRAINTS} items"
    )
    assert isinstance(parse(incoming(*many[:MAX_CONSTRAINTS])), SpreadSpec)


def test_match_label_keys_add_the_pods_values() -> None:
    """matchLabelKeys require the incoming pod's values of those keys (keys it lacks are
    skipped); a missing selector matches nothing even with them."""
    pod = incoming(
        spread(1, "zone", FOO, match_label_keys=("rev", "absent")),
        spread(1, HOST, None, match_label_keys=("rev",)),
        labels={"foo": "", "rev": "2"},
    )
    spec = parse(pod)
    assert isinstance(spec, SpreadSpec)
    merged, nothing = spec.hard
    assert merged.selector.matches({"foo": "x", "rev": "2"})
    assert not merged.selector.matches({"foo": "x", "rev": "1"})
    assert not merged.selector.matches({"rev": "2"})
    assert not nothing.selector.matches({"foo": "", "rev": "2"})


# --- filter -------------------------------------------------------------------------------------


def zones() -> dict[str, NodeInfo]:
    """kube-scheduler's usual four nodes: a, b in zone1; x, y in zone2."""
    return nodes(
        {
            "node-a": {"zone": "zone1"},
            "node-b": {"zone": "zone1"},
            "node-x": {"zone": "zone2"},
            "node-y": {"zone": "zone2"},
        }
    )


def test_no_existing_pods_every_node_fits() -> None:
    assert set(verdicts(incoming(spread(1, "zone")), zones()).values()) == {None}


def test_normal_case_with_one_constraint() -> None:
    """Pods spread 2/1/0/3 over a, b | x, y: zone1 has 3, zone2 3; the pod fits anywhere; with
    a third pod on b, zone1 (4) is over the skew."""
    all_nodes = zones()
    for node, n in (("node-a", 2), ("node-b", 1), ("node-y", 3)):
        for i in range(n):
            place(all_nodes[node], f"{node}-{i}", {"foo": ""})
    pod = incoming(spread(1, "zone"))
    assert set(verdicts(pod, all_nodes).values()) == {None}
    place(all_nodes["node-b"], "extra", {"foo": ""})
    assert verdicts(pod, all_nodes) == {
        "node-a": CONSTRAINTS_NOT_MATCH,
        "node-b": CONSTRAINTS_NOT_MATCH,
        "node-x": None,
        "node-y": None,
    }


def test_nodes_without_the_key_are_refused_and_do_not_count() -> None:
    """A node lacking the key gives the "missing required label" reason; its pods count in
    no domain."""
    all_nodes = nodes({"node-a": {"zone": "zone1"}, "node-b": {}, "node-x": {"zone": "zone2"}})
    place(all_nodes["node-b"], "p-b", {"foo": ""})
    place(all_nodes["node-a"], "p-a", {"foo": ""})
    assert verdicts(incoming(spread(1, "zone")), all_nodes) == {
        "node-a": CONSTRAINTS_NOT_MATCH,
        "node-b": MISSING_LABEL,
        "node-x": None,
    }


def test_two_constraints_every_one_must_hold() -> None:
    """zone (maxSkew 1) and node (maxSkew 1): 3/0 | 1/1. zone1 has 3, zone2 2: zone1 nodes
    fail the zone constraint; node-y fails the node one (1 + 1 - 0 > 1), node-x too."""
    all_nodes = zones()
    for name, n in (("node-a", 3), ("node-x", 1), ("node-y", 1)):
        for i in range(n):
            place(all_nodes[name], f"{name}-{i}", {"foo": ""})
    got = verdicts(incoming(spread(1, "zone"), spread(1, HOST)), all_nodes)
    assert got == dict.fromkeys(all_nodes, CONSTRAINTS_NOT_MATCH)
    place(all_nodes["node-b"], "b", {"foo": ""})  # node min is now 1
    got = verdicts(incoming(spread(1, "zone"), spread(1, HOST)), all_nodes)
    assert got["node-x"] is None
    assert got["node-y"] is None


def test_min_domains_above_the_domains_makes_the_minimum_zero() -> None:
    """1/1 over two zones: with minDomains 3 the global minimum is 0, so a zone holding one
    pod is already at the skew (1 + 1 - 0 > 1); with minDomains 2 it is 1 and both fit."""
    all_nodes = zones()
    place(all_nodes["node-a"], "a", {"foo": ""})
    place(all_nodes["node-x"], "x", {"foo": ""})
    assert set(verdicts(incoming(spread(1, "zone", min_domains=3)), all_nodes).values()) == {
        CONSTRAINTS_NOT_MATCH
    }
    assert set(verdicts(incoming(spread(1, "zone", min_domains=2)), all_nodes).values()) == {None}
    assert set(verdicts(incoming(spread(2, "zone", min_domains=3)), all_nodes).values()) == {None}


def test_node_affinity_policy() -> None:
    """A pod whose nodeSelector keeps it in zone1: with Honor (the default) zone2 is no
    domain, so zone1's one pod is the minimum; with Ignore, zone2 (0) is, and zone1 is over."""
    all_nodes = nodes(
        {"node-a": {"zone": "zone1", "ok": "y"}, "node-x": {"zone": "zone2"}},
    )
    place(all_nodes["node-a"], "a", {"foo": ""})
    honour = incoming(spread(1, "zone"), node_selector={"ok": "y"})
    ignore = incoming(spread(1, "zone", affinity_policy="Ignore"), node_selector={"ok": "y"})
    assert verdicts(honour, all_nodes)["node-a"] is None
    assert verdicts(ignore, all_nodes)["node-a"] == CONSTRAINTS_NOT_MATCH


def test_node_taints_policy() -> None:
    """A tainted zone2 node: ignored by default (it counts, 0 pods: zone1 is over); with
    Honor it does not count unless the pod tolerates the taint."""
    all_nodes = nodes({"node-a": {"zone": "zone1"}, "node-x": {"zone": "zone2"}}, ["node-x"])
    place(all_nodes["node-a"], "a", {"foo": ""})
    assert verdicts(incoming(spread(1, "zone")), all_nodes)["node-a"] == CONSTRAINTS_NOT_MATCH
    honour = incoming(spread(1, "zone", taints_policy="Honor"))
    assert verdicts(honour, all_nodes)["node-a"] is None
    tolerating = msgspec.structs.replace(
        honour,
        spec=msgspec.structs.replace(
            honour.spec, tolerations=(Toleration(key="t", operator="Exists"),)
        ),
    )
    assert verdicts(tolerating, all_nodes)["node-a"] == CONSTRAINTS_NOT_MATCH


def test_what_counts() -> None:
    """Pods of other namespaces, pods being deleted (Releasing) and pods the selector does not
    match do not count; a pod the selector does not match itself adds no skew."""
    all_nodes = zones()
    place(all_nodes["node-a"], "other-ns", {"foo": ""}, namespace="elsewhere")
    place(all_nodes["node-a"], "leaving", {"foo": ""}, status=TaskStatus.RELEASING)
    place(all_nodes["node-a"], "unmatched", {"bar": ""})
    assert set(verdicts(incoming(spread(1, "zone")), all_nodes).values()) == {None}
    place(all_nodes["node-a"], "counted", {"foo": ""}, status=TaskStatus.ALLOCATED)
    assert verdicts(incoming(spread(1, "zone")), all_nodes)["node-a"] == CONSTRAINTS_NOT_MATCH
    # Not matching itself: 1 + 0 - 0 <= 1.
    assert verdicts(incoming(spread(1, "zone"), labels={"bar": ""}), all_nodes)["node-a"] is None


def test_match_label_keys_count_only_the_same_revision() -> None:
    """Two pods of revision 1 in zone1: a revision-2 pod spreading by app and rev sees none."""
    all_nodes = zones()
    for i in range(2):
        place(all_nodes["node-a"], f"old-{i}", {"foo": "", "rev": "1"})
    by_rev = incoming(spread(1, "zone", match_label_keys=("rev",)), labels={"foo": "", "rev": "2"})
    plain = incoming(spread(1, "zone"), labels={"foo": "", "rev": "2"})
    assert verdicts(by_rev, all_nodes)["node-a"] is None
    assert verdicts(plain, all_nodes)["node-a"] == CONSTRAINTS_NOT_MATCH


def test_empty_and_missing_selectors() -> None:
    """An empty selector counts no existing pod and matches the incoming one (skew 1); a
    missing one matches nothing (skew 0): both fit with maxSkew 1."""
    all_nodes = zones()
    for i in range(3):
        place(all_nodes["node-a"], f"a-{i}", {"foo": ""})
    assert set(verdicts(incoming(spread(1, "zone", LabelSelector())), all_nodes).values()) == {None}
    assert set(verdicts(incoming(spread(1, "zone", None)), all_nodes).values()) == {None}


def test_refresh_follows_the_change_log() -> None:
    """Counts brought up to date from the log of changed nodes: a pod placed, then evicted
    (Releasing), moves the node's verdict and back; unlogged changes are not looked at."""
    all_nodes = zones()
    pod = incoming(spread(1, "zone"))
    counts = counts_for(pod, all_nodes, hard=True)
    log: list[str] = []
    place(all_nodes["node-a"], "a", {"foo": ""})
    counts.refresh(all_nodes, log)
    assert counts.filter(all_nodes["node-b"], (True,)) is None  # not logged yet
    log.append("node-a")
    counts.refresh(all_nodes, log)
    assert counts.filter(all_nodes["node-b"], (True,)) == CONSTRAINTS_NOT_MATCH
    node = all_nodes["node-a"]
    task = node.tasks["ns/a"]
    node.remove_task(task)
    task.status = TaskStatus.RELEASING
    node.add_task(task)
    log.append("node-a")
    counts.refresh(all_nodes, log)
    assert counts.filter(all_nodes["node-b"], (True,)) is None


def test_a_node_copy_without_pods_is_judged_as_such() -> None:
    """Preempt asks about a copy of a node without its victims: the domain's count and the
    minimum are taken as they would be."""
    all_nodes = nodes({"node-a": {"zone": "zone1"}, "node-x": {"zone": "zone2"}})
    place(all_nodes["node-a"], "victim", {"foo": ""})
    counts = counts_for(incoming(spread(1, "zone")), all_nodes, hard=True)
    assert counts.filter(all_nodes["node-a"], (True,)) == CONSTRAINTS_NOT_MATCH
    copy = make_node("node-a", labels={HOST: "node-a", "zone": "zone1"})
    adjusted, mins = counts.without(copy)
    assert counts.filter(copy, (True,), adjusted, mins) is None
    assert counts.counts[0] == {"zone1": 1, "zone2": 0}  # the session's counts unchanged


# --- score --------------------------------------------------------------------------------------


def scores(
    pod: Pod,
    spec: Mapping[str, Mapping[str, str]],
    pods: Mapping[str, Sequence[Mapping[str, str]]],
    candidates: Sequence[str] | None = None,
) -> dict[str, int]:
    all_nodes = nodes(spec)
    for name, labels_list in pods.items():
        for i, labels in enumerate(labels_list):
            place(all_nodes[name], f"{name}-{i}", labels)
    counts = counts_for(pod, all_nodes, hard=False)
    chosen = [all_nodes[n] for n in (candidates or list(spec))]
    return score(counts, chosen)


FOO_POD: Mapping[str, str] = {"foo": ""}
HOSTS: dict[str, dict[str, str]] = {n: {} for n in ("node-a", "node-b", "node-c", "node-d")}


@pytest.mark.parametrize(
    ("max_skew", "spread_as", "want"),
    [
        (1, (0, 0, 0, 0), (100, 100, 100, 100)),
        (1, (1, 1, 0, 0), (0, 0, 100, 100)),
        (1, (2, 1, 0, 3), (20, 60, 100, 0)),
        (2, (2, 1, 0, 3), (33, 66, 100, 16)),
        (3, (4, 3, 2, 1), (44, 66, 77, 100)),
    ],
)
def test_scores_on_hostname(
    max_skew: int, spread_as: tuple[int, ...], want: tuple[int, ...]
) -> None:
    """kube-scheduler's "one constraint on node" cases: matching pods spread as given."""
    pod = incoming(spread(max_skew, HOST, hard=False))
    pods = {name: [FOO_POD] * n for name, n in zip(HOSTS, spread_as, strict=True)}
    assert scores(pod, HOSTS, pods) == dict(zip(HOSTS, want, strict=True))


def test_scores_with_a_node_not_a_candidate_and_one_without_the_key() -> None:
    """4/2/1/~3~: 33/83/100; and with node-b lacking the key (4/?2?/1/~3~): 16/0/100."""
    pod = incoming(spread(1, HOST, hard=False))
    pods = {
        "node-a": [FOO_POD] * 4,
        "node-b": [FOO_POD] * 2,
        "node-x": [FOO_POD],
        "node-y": [FOO_POD] * 3,
    }
    spec: dict[str, dict[str, str]] = {n: {} for n in ("node-a", "node-b", "node-x", "node-y")}
    assert scores(pod, spec, pods, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33,
        "node-b": 83,
        "node-x": 100,
    }
    all_nodes = nodes(spec)
    all_nodes["node-b"] = make_node("node-b", labels={"n": "node-b"})
    for name, labels_list in pods.items():
        for i, labels in enumerate(labels_list):
            place(all_nodes[name], f"{name}-{i}", labels)
    counts = counts_for(pod, all_nodes, hard=False)
    got = score(counts, [all_nodes[n] for n in ("node-a", "node-b", "node-x")])
    assert got == {"node-a": 16, "node-b": 0, "node-x": 100}


def test_scores_on_zones() -> None:
    """4/2/1/~3~ on zone1 (a, b) and zone2 (x, y): 75/75/100; two constraints with different
    selectors (zone: foo, node: bar) over P{foo} | P{foo,bar} || - | P{foo} P{bar}: 60/20/100/60."""
    spec = {
        "node-a": {"zone": "zone1"},
        "node-b": {"zone": "zone1"},
        "node-x": {"zone": "zone2"},
        "node-y": {"zone": "zone2"},
    }
    pod = incoming(spread(1, "zone", hard=False))
    pods = {
        "node-a": [FOO_POD] * 4,
        "node-b": [FOO_POD] * 2,
        "node-x": [FOO_POD],
        "node-y": [FOO_POD] * 3,
    }
    assert scores(pod, spec, pods, ["node-a", "node-b", "node-x"]) == {
        "node-a": 75,
        "node-b": 75,
        "node-x": 100,
    }
    pod = incoming(
        spread(1, "zone", FOO, hard=False),
        spread(1, HOST, BAR, hard=False),
        labels={"foo": "", "bar": ""},
    )
    pods = {
        "node-a": [FOO_POD],
        "node-b": [{"foo": "", "bar": ""}],
        "node-y": [FOO_POD, {"bar": ""}],
    }
    assert scores(pod, spec, pods) == {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}


def test_scores_ignore_other_namespaces_and_a_missing_selector() -> None:
    """kube-scheduler's "existing pods in a different namespace do not count" (100/33) and
    "null selector" (all 100)."""
    spec: dict[str, dict[str, str]] = {"node-a": {}, "node-b": {}}
    all_nodes = nodes(spec)
    place(all_nodes["node-a"], "p-a1", FOO_POD, namespace="ns1")
    place(all_nodes["node-a"], "p-a2", FOO_POD)
    place(all_nodes["node-b"], "p-b1", FOO_POD)
    place(all_nodes["node-b"], "p-b2", FOO_POD)
    pod = incoming(spread(1, HOST, hard=False))
    counts = counts_for(pod, all_nodes, hard=False)
    assert score(counts, list(all_nodes.values())) == {"node-a": 100, "node-b": 33}
    pod = incoming(spread(1, HOST, None, hard=False))
    counts = counts_for(pod, all_nodes, hard=False)
    assert score(counts, list(all_nodes.values())) == {"node-a": 100, "node-b": 100}


def test_constraint_is_hashable() -> None:
    """Constraints key the session's counts: equal constraints are one key."""
    one = parse(incoming(spread(1, "zone")))
    two = parse(incoming(spread(1, "zone")))
    assert isinstance(one, SpreadSpec)
    assert isinstance(two, SpreadSpec)
    assert {one.hard: 1}[two.hard] == 1
    assert isinstance(one.hard[0], Constraint)
