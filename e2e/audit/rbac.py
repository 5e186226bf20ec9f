"""What the chart's roles grant a ServiceAccount, and the comparison with what it used.

RBAC's matching, as the API server's authorizer does it
(https://kubernetes.io/docs/reference/access-authn-authz/rbac/): a rule allows a request when
its ``verbs`` hold the verb or "*", its ``apiGroups`` the group or "*", its ``resources`` the
resource, "resource/subresource", "*" or "*/subresource" (a rule for "pods" does not cover
"pods/status"), and, when it has ``resourceNames``, the request names one of them (a list,
watch or create without a name never matches). A ClusterRoleBinding grants its ClusterRole
everywhere; a RoleBinding grants its Role, or a ClusterRole, only in the binding's namespace,
and never non-resource URLs. Every authenticated user also holds Kubernetes' default
``system:basic-user`` and ``system:discovery`` rules (``BUILTIN``), which the chart does not
grant and the comparison does not report as unused. Aggregated ClusterRoles are not expanded:
the chart has none.

Purely computational: the rendered objects come in as dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from e2e.audit.usage import Request, Right, Use, usage

__all__ = [
    "BUILTIN",
    "Comparison",
    "Row",
    "Rule",
    "Unused",
    "compare",
    "compare_processes",
    "granted_rules",
    "service_accounts",
]

COMPONENT_LABEL = "app.kubernetes.io/component"


@dataclass(frozen=True, slots=True)
class Rule:
    """One PolicyRule of a role as bound to a subject: where it comes from and where it holds."""

    source: str
    """"ClusterRole <name>" or "Role <namespace>/<name>"."""
    index: int
    """Position of the rule in the role's ``rules``."""
    namespace: str | None
    """None: every namespace and the cluster scope (a ClusterRoleBinding); else only the
    RoleBinding's namespace."""
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    builtin: bool = False
    """One of Kubernetes' defaults for every authenticated user, not the chart's."""

    def covers(self, right: Right) -> bool:
        """Whether the rule allows ``right`` for some namespace and name."""
        if "*" not in self.verbs and right.verb not in self.verbs:
            return False
        if right.non_resource:
            return self.namespace is None and any(
                url == "*"
                or url == right.resource
                or (url.endswith("*") and right.resource.startswith(url[:-1]))
                for url in self.non_resource_urls
            )
        if "*" not in self.api_groups and right.group not in self.api_groups:
            return False
        _, slash, sub = right.resource.partition("/")
        return any(
            r in ("*", right.resource) or (slash and r == f"*/{sub}") for r in self.resources
        )

    def allows(self, right: Right, namespace: str, name: str) -> bool:
        """Whether the rule allows ``right`` on the object ``name`` in ``namespace`` ("" for
        the cluster scope; ``name`` "" for a request without one)."""
        if not self.covers(right):
            return False
        if right.non_resource:
            return True
        if self.namespace is not None and namespace != self.namespace:
            return False
        return not self.resource_names or name in self.resource_names

    @property
    def unconditional(self) -> bool:
        """Whether ``allows`` equals ``covers`` for every target."""
        return self.namespace is None and not self.resource_names


def _rules(source: str, role: Mapping[str, Any], namespace: str | None) -> Iterator[Rule]:
    for index, rule in enumerate(role.get("rules") or ()):
        yield Rule(
            source=source,
            index=index,
            namespace=namespace,
            api_groups=tuple(rule.get("apiGroups") or ()),
            resources=tuple(rule.get("resources") or ()),
            verbs=tuple(rule.get("verbs") or ()),
            resource_names=tuple(rule.get("resourceNames") or ()),
            non_resource_urls=tuple(rule.get("nonResourceURLs") or ()),
        )


# Kubernetes' default ClusterRoles bound to every authenticated user (system:authenticated).
_DEFAULT_ROLES: dict[str, list[dict[str, list[str]]]] = {
    "system:basic-user": [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"],
            "verbs": ["create"],
        },
    ],
    "system:discovery": [
        {
            "nonResourceURLs": [
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ],
            "verbs": ["get"],
        }
    ],
}
BUILTIN: tuple[Rule, ...] = tuple(
    replace(rule, builtin=True)
    for name, rules in _DEFAULT_ROLES.items()
    for rule in _rules(f"ClusterRole {name}", {"rules": rules}, None)
)


def _is_subject(subject: Mapping[str, Any], binding_namespace: str, username: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == username
    parts = username.split(":")
    if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
        return False
    sa_namespace, sa_name = parts[2], parts[3]
    if kind == "ServiceAccount":
        return (subject.get("namespace") or binding_namespace) == sa_namespace and name == sa_name
    if kind == "Group":
        groups = ("system:authenticated", "system:serviceaccounts")
        return name in groups or name == f"system:serviceaccounts:{sa_namespace}"
    return False


def granted_rules(
    rbac: Iterable[Mapping[str, Any]], username: str, *, builtin: bool = True
) -> list[Rule]:
    """The rules ``rbac`` (rendered ClusterRoles, Roles and their bindings; other kinds are
    ignored) grants ``username``, plus ``BUILTIN`` when ``builtin``."""
    objects = list(rbac)
    cluster_roles = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "ClusterRole"}
    roles = {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") == "Role"
    }
    granted: list[Rule] = list(BUILTIN) if builtin else []
    for binding in objects:
        kind = binding.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace", "") if kind == "RoleBinding" else None
        subjects = binding.get("subjects") or ()
        if not any(_is_subject(s, namespace or "", username) for s in subjects):
            continue
        ref = binding.get("roleRef") or {}
        if ref.get("kind") == "ClusterRole" and ref.get("name") in cluster_roles:
            role = cluster_roles[ref["name"]]
            rules = _rules(f"ClusterRole {ref['name']}", role, namespace)
            # A RoleBinding to a ClusterRole grants no non-resource URL.
            granted.extend(r for r in rules if namespace is None or not r.non_resource_urls)
        elif ref.get("kind") == "Role" and namespace is not None:
            own = roles.get((namespace, ref.get("name", "")))
            if own is not None:
                granted.extend(_rules(f"Role {namespace}/{ref['name']}", own, namespace))
    return granted


def service_accounts(rbac: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Username (``system:serviceaccount:<namespace>:<name>``) to process, from the chart's
    rendered ServiceAccounts and their ``app.kubernetes.io/component`` label."""
    users: dict[str, str] = {}
    for obj in rbac:
        if obj.get("kind") != "ServiceAccount":
            continue
        meta = obj["metadata"]
        process = (meta.get("labels") or {}).get(COMPONENT_LABEL, meta["name"])
        users[f"system:serviceaccount:{meta.get('namespace', '')}:{meta['name']}"] = process
    return users


@dataclass(frozen=True, slots=True)
class Row:
    """One right a process used: how often, how often refused (403), and how many of those
    requests no granted rule allows."""

    process: str
    right: Right
    used: int
    refused: int
    ungranted: int

    @property
    def granted(self) -> bool:
        return self.ungranted == 0


@dataclass(frozen=True, slots=True)
class Unused:
    """One right a rule grants (one group, resource and verb of it, "*" kept as is) that no
    request of the process used: a candidate for removal."""

    process: str
    rule: Rule
    right: Right


@dataclass(frozen=True, slots=True)
class Comparison:
    """A process's used rights against its granted rules."""

    process: str
    rows: tuple[Row, ...]
    unused: tuple[Unused, ...]

    @property
    def ungranted(self) -> tuple[Row, ...]:
        return tuple(row for row in self.rows if not row.granted)

    @property
    def refused(self) -> int:
        return sum(row.refused for row in self.rows)


def _allowed(rules: Sequence[Rule], right: Right, use: Use) -> int:
    """How many of ``use``'s requests ``rules`` allow."""
    matching = [rule for rule in rules if rule.covers(right)]
    if any(rule.unconditional for rule in matching):
        return use.count
    return sum(
        n
        for (namespace, name), n in use.targets.items()
        if any(rule.allows(right, namespace, name) for rule in matching)
    )


def _narrowed(rule: Rule) -> Iterator[tuple[Right, Rule]]:
    """Each (group, resource, verb) a rule grants, with the rule narrowed to just that."""
    for verb in rule.verbs:
        for url in rule.non_resource_urls:
            yield Right("", url, verb), replace(rule, verbs=(verb,), non_resource_urls=(url,))
        for group in rule.api_groups:
            for resource in rule.resources:
                narrow = replace(rule, api_groups=(group,), resources=(resource,), verbs=(verb,))
                yield Right(group, resource, verb), narrow


def compare(process: str, used: Mapping[Right, Use], granted: Sequence[Rule]) -> Comparison:
    """Each used right with whether ``granted`` allows all of its requests, and each right the
    non-builtin rules grant that no request used. A purely computational function."""
    rows = tuple(
        Row(
            process=process,
            right=right,
            used=use.count,
            refused=use.refused,
            ungranted=use.count - _allowed(granted, right, use),
        )
        for right, use in sorted(used.items())
    )
    unused = tuple(
        Unused(process=process, rule=rule, right=right)
        for rule in granted
        if not rule.builtin
        for right, narrow in _narrowed(rule)
        if not any(_allowed((narrow,), r, use) for r, use in used.items())
    )
    return Comparison(process=process, rows=rows, unused=unused)


def compare_processes(
    requests: Iterable[Request], rbac: Sequence[Mapping[str, Any]]
) -> dict[str, Comparison]:
    """The comparison for every process whose ServiceAccount ``rbac`` renders: its requests
    among ``requests`` (other users' are ignored) against the rules bound to it."""
    users = service_accounts(rbac)
    used = usage(requests, users)
    return {
        process: compare(process, used[process], granted_rules(rbac, user))
        for user, process in sorted(users.items(), key=lambda item: item[1])
    }
