"""Tests of e2e.audit.rbac: RBAC's matching rules (groups, resources with subresources and
wildcards, verbs, resourceNames, Role scope), the rules bound to a ServiceAccount, and the
comparison of used rights with granted rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from e2e.audit.rbac import BUILTIN, Rule, compare, compare_processes, granted_rules
from e2e.audit.report import rights_table, unused_table
from e2e.audit.usage import Request, Right, Use

NS = "caldera-system"
USER = f"system:serviceaccount:{NS}:rel-caldera-scheduler"


def rule(
    groups: tuple[str, ...],
    resources: tuple[str, ...],
    verbs: tuple[str, ...],
    *,
    names: tuple[str, ...] = (),
    namespace: str | None = None,
) -> Rule:
    return Rule(
        source="ClusterRole r",
        index=0,
        namespace=namespace,
        api_groups=groups,
        resources=resources,
        verbs=verbs,
        resource_names=names,
    )


@pytest.mark.parametrize(
    ("granted", "right", "allowed"),
    [
        (rule(("",), ("pods",), ("list",)), Right("", "pods", "list"), True),
        (rule(("",), ("pods",), ("list",)), Right("", "pods", "watch"), False),
        (rule(("",), ("pods",), ("*",)), Right("", "pods", "watch"), True),
        (rule(("",), ("pods",), ("create",)), Right("", "pods/binding", "create"), False),
        (rule(("",), ("pods/binding",), ("create",)), Right("", "pods/binding", "create"), True),
        (rule(("",), ("*",), ("create",)), Right("", "pods/binding", "create"), True),
        (rule(("",), ("*/status",), ("patch",)), Right("", "pods/status", "patch"), True),
        (rule(("",), ("*/status",), ("patch",)), Right("", "pods", "patch"), False),
        (rule(("apps",), ("pods",), ("list",)), Right("", "pods", "list"), False),
        (rule(("*",), ("pods",), ("list",)), Right("apps", "pods", "list"), True),
    ],
)
def test_rule_matching(granted: Rule, right: Right, allowed: bool) -> None:
    """Verbs, groups and resources match exactly or by "*"; a resource rule does not cover
    its subresources; "*/sub" covers a subresource of every resource."""
    assert granted.allows(right, "ns", "x") is allowed


def test_resource_names_and_role_scope() -> None:
    """A rule with resourceNames allows only those names (never a request without a name);
    a Role's rule holds only in its namespace, never at cluster scope."""
    lease = rule(("coordination.k8s.io",), ("leases",), ("get",), names=("l",), namespace=NS)
    right = Right("coordination.k8s.io", "leases", "get")
    assert lease.allows(right, NS, "l")
    assert not lease.allows(right, NS, "other")
    assert not lease.allows(right, NS, "")
    assert not lease.allows(right, "elsewhere", "l")
    assert not lease.allows(right, "", "l")


def test_non_resource_urls() -> None:
    """Kubernetes' discovery rule allows /version and /apis/* but not /metrics."""
    discovery = next(r for r in BUILTIN if r.non_resource_urls)
    assert discovery.allows(Right("", "/version", "get"), "", "")
    assert discovery.allows(Right("", "/apis/batch.volcano.sh", "get"), "", "")
    assert not discovery.allows(Right("", "/metrics", "get"), "", "")
    assert not discovery.allows(Right("", "/version", "post"), "", "")


def rbac() -> list[dict[str, Any]]:
    """A chart-like render: one ClusterRole bound by a ClusterRoleBinding, a lease Role bound
    in the release namespace, and another account's role."""
    sa = {"kind": "ServiceAccount", "name": "rel-caldera-scheduler", "namespace": NS}
    return [
        {
            "kind": "ServiceAccount",
            "metadata": {
                "name": "rel-caldera-scheduler",
                "namespace": NS,
                "labels": {"app.kubernetes.io/component": "scheduler"},
            },
        },
        {
            "kind": "ClusterRole",
            "metadata": {"name": "sched"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
            ],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "sched"},
            "roleRef": {"kind": "ClusterRole", "name": "sched"},
            "subjects": [sa],
        },
        {
            "kind": "Role",
            "metadata": {"name": "lease", "namespace": NS},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": ["caldera-scheduler"],
                    "verbs": ["get", "update"],
                }
            ],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "lease", "namespace": NS},
            "roleRef": {"kind": "Role", "name": "lease"},
            "subjects": [sa],
        },
        {
            "kind": "ClusterRole",
            "metadata": {"name": "other"},
            "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        },
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "other"},
            "roleRef": {"kind": "ClusterRole", "name": "other"},
            "subjects": [{"kind": "ServiceAccount", "name": "admin", "namespace": NS}],
        },
    ]


def test_granted_rules_follow_the_bindings() -> None:
    """The ClusterRole's rules hold everywhere, the Role's only in its namespace; the other
    account's binding gives nothing; the builtin rules come along unless asked not to."""
    rules = granted_rules(rbac(), USER, builtin=False)
    assert [(r.source, r.index, r.namespace) for r in rules] == [
        ("ClusterRole sched", 0, None),
        ("ClusterRole sched", 1, None),
        (f"Role {NS}/lease", 0, NS),
    ]
    assert len(granted_rules(rbac(), USER)) == len(rules) + len(BUILTIN)
    assert granted_rules(rbac(), "system:serviceaccount:other:x", builtin=False) == []


def request(verb: str, resource: str, **kw: Any) -> Request:
    return Request(user=USER, verb=verb, group=kw.pop("group", ""), resource=resource, **kw)


def test_compare_processes_end_to_end() -> None:
    """Used and granted rights are yes; an unlisted one is no, with its count; a lease other
    than the named one is not granted; unused grants are listed per resource and verb; the
    builtin discovery use is granted and never reported unused; the tables show all of it."""
    lease = {"group": "coordination.k8s.io", "namespace": NS}
    requests = [
        request("list", "pods"),
        request("watch", "pods"),
        request("watch", "pods"),
        request("get", "leases", name="caldera-scheduler", **lease),
        request("get", "leases", name="someone-else", code=403, **lease),
        request("delete", "pods", namespace="ns", name="p", code=403),
        request("get", "", path="/version"),
        Request(user="system:serviceaccount:x:y", verb="delete", group="", resource="nodes"),
    ]
    (comparison,) = compare_processes(requests, rbac()).values()
    rows = {(r.right.resource, r.right.verb): r for r in comparison.rows}
    assert rows["pods", "watch"].used == 2
    assert rows["pods", "watch"].granted
    assert rows["/version", "get"].granted
    assert (rows["pods", "delete"].ungranted, rows["pods", "delete"].refused) == (1, 1)
    assert (rows["leases", "get"].used, rows["leases", "get"].ungranted) == (2, 1)
    assert [r.right.resource for r in comparison.ungranted] == ["pods", "leases"]
    assert comparison.refused == 2
    unused = {(u.right.resource, u.right.verb) for u in comparison.unused}
    assert unused == {("pods/binding", "create"), ("leases", "update")}

    table = rights_table({"scheduler": comparison})
    assert "| scheduler | core | pods | delete | 1 | 1 | **no** (1) |" in table
    assert "| scheduler | (non-resource URL) | /version | get | 1 | 0 | yes |" in table
    unused_text = unused_table({"scheduler": comparison})
    assert (
        "| scheduler | coordination.k8s.io | leases [caldera-scheduler] | update | "
        f"Role {NS}/lease rule 0 (in {NS}) |" in unused_text
    )


# ---- invariants -------------------------------------------------------------------------------

GROUPS = st.sampled_from(["", "apps", "batch.volcano.sh"])
RESOURCES = st.sampled_from(["pods", "pods/status", "jobs", "leases", "queues/status"])
VERBS = st.sampled_from(["get", "list", "watch", "create", "patch", "delete"])
NAMESPACES = st.sampled_from(["", "ns", NS])
NAMES = st.sampled_from(["", "a", "b"])
RIGHTS = st.builds(Right, GROUPS, RESOURCES, VERBS)


@st.composite
def used_rights(draw: st.DrawFn) -> dict[Right, Use]:
    used: dict[Right, Use] = {}
    for right in draw(st.lists(RIGHTS, max_size=8)):
        use = used.setdefault(right, Use())
        for namespace, name in draw(st.lists(st.tuples(NAMESPACES, NAMES), min_size=1)):
            use.add(
                Request(
                    user=USER,
                    verb=right.verb,
                    group=right.group,
                    resource=right.resource,
                    namespace=namespace,
                    name=name,
                )
            )
    return used


RULES = st.builds(
    Rule,
    source=st.just("ClusterRole r"),
    index=st.integers(0, 3),
    namespace=st.sampled_from([None, "ns"]),
    api_groups=st.lists(st.one_of(GROUPS, st.just("*")), min_size=1, max_size=2).map(tuple),
    resources=st.lists(
        st.one_of(RESOURCES, st.sampled_from(["*", "*/status"])), min_size=1, max_size=2
    ).map(tuple),
    verbs=st.lists(st.one_of(VERBS, st.just("*")), min_size=1, max_size=2).map(tuple),
    resource_names=st.lists(st.sampled_from(["a", "b"]), max_size=1).map(tuple),
)


@given(used_rights())
def test_a_wildcard_rule_grants_every_used_right(used: dict[Right, Use]) -> None:
    """A ClusterRole rule of "*" groups, resources and verbs allows every request."""
    everything = rule(("*",), ("*",), ("*",))
    comparison = compare("p", used, [everything])
    assert all(row.granted for row in comparison.rows)
    # Unused only when nothing at all was used: then the one wildcard grant is.
    assert len(comparison.unused) == (0 if used else 1)


@given(used_rights(), st.lists(RULES, max_size=4))
def test_compare_is_consistent(used: dict[Right, Use], rules: list[Rule]) -> None:
    """Every used right has one row with its count; no right is reported unused while a
    request the same narrowed grant allows was made; a right granted by an unconditional rule
    is granted; ungranted never exceeds used."""
    comparison = compare("p", used, rules)
    assert {row.right: row.used for row in comparison.rows} == {r: u.count for r, u in used.items()}
    for row in comparison.rows:
        assert 0 <= row.ungranted <= row.used
        if any(r.unconditional and r.covers(row.right) for r in rules):
            assert row.granted
    for unused in comparison.unused:
        narrow = replace(
            unused.rule,
            api_groups=(unused.right.group,),
            resources=(unused.right.resource,),
            verbs=(unused.right.verb,),
        )
        narrowed = compare("p", used, [narrow])
        assert all(row.ungranted == row.used for row in narrowed.rows)
