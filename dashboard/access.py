"""Who may see what on the in-cluster dashboard: the pure part (no I/O).

In-cluster, the dashboard reads the cluster with its own ServiceAccount and shows each user only
what the user's own RBAC lets them list. The I/O (`dashboard.auth`) asks the API server two
questions, a TokenReview for the token and SubjectAccessReviews for what its user may list;
this module takes the token from a request, builds the questions and turns their answers into a
`Scope`: the namespaces whose jobs the user sees (all, or a set) and the cluster-scoped kinds
they may read. A user sees a namespace's jobs only if they may list Volcano jobs and pods there
(the pages show both).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from caldera.api.authn import UserInfo
from caldera.api.authz import ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec
from caldera.api.kinds import HYPERNODE, JOB, NODE, POD, QUEUE, KindInfo

__all__ = [
    "CLUSTER_KINDS",
    "COOKIE",
    "MAX_TOKEN",
    "NAMESPACE_KINDS",
    "Scope",
    "UnauthenticatedError",
    "bearer_token",
    "list_review",
    "scope_of",
    "token_key",
    "user_key",
]

COOKIE: Final = "caldera-dashboard-token"
MAX_TOKEN: Final = 8192
"""Longest token taken, in characters: a ServiceAccount token is about 1 KiB, an OIDC one a few."""
# RFC 6750's b64token: what a bearer token may be made of.
_TOKEN: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
NAMESPACE_KINDS: Final[tuple[KindInfo[Any], ...]] = (JOB, POD)
"""What a user must be allowed to list in a namespace to see its jobs there."""
CLUSTER_KINDS: Final[tuple[KindInfo[Any], ...]] = (QUEUE, NODE, HYPERNODE)


class UnauthenticatedError(Exception):
    """No usable token; the message says what was wrong (never the token)."""


def bearer_token(authorization: str | None, cookie: str | None) -> str:
    """The request's token: the ``Authorization: Bearer`` header (an auth proxy's) first, else
    the login cookie. Raises `UnauthenticatedError` when there is none or it is malformed."""
    if authorization is not None:
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise UnauthenticatedError("the Authorization header is not 'Bearer TOKEN'")
        where = "the Authorization header's token"
    elif cookie:
        token, where = cookie, "the login cookie"
    else:
        raise UnauthenticatedError("no token: sign in, or send an 'Authorization: Bearer' header")
    token = token.strip()
    if not token:
        raise UnauthenticatedError(f"{where} is empty")
    if len(token) > MAX_TOKEN:
        raise UnauthenticatedError(f"{where} is longer than {MAX_TOKEN} characters")
    if not _TOKEN.fullmatch(token):
        raise UnauthenticatedError(f"{where} has characters a bearer token cannot have")
    return token


def token_key(token: str) -> str:
    """What a token's review is cached by: its SHA-256, so the cache holds no token."""
    return hashlib.sha256(token.encode()).hexdigest()


def user_key(user: UserInfo) -> tuple[Any, ...]:
    """Everything an authorizer may decide on: two users differing in any of it are two keys."""
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
    return (user.username, user.uid, tuple(sorted(user.groups)), extra)


def list_review(user: UserInfo, kind: KindInfo[Any], namespace: str = "") -> SubjectAccessReview:
    """ "May `user` list `kind` in `namespace`?" ("" for cluster-wide, or a cluster-scoped kind)."""
    attributes = ResourceAttributes(
        namespace=namespace if kind.namespaced else "",
        verb="list",
        group=kind.group,
        version=kind.version,
        resource=kind.plural,
    )
    spec = SubjectAccessReviewSpec(
        resource_attributes=attributes,
        user=user.username,
        groups=user.groups,
        uid=user.uid,
        extra=dict(user.extra),
    )
    return SubjectAccessReview(spec=spec)


@dataclass(frozen=True, slots=True)
class Scope:
    """What one request may show."""

    namespaces: frozenset[str] | None = None
    """The namespaces whose jobs are shown; None: every namespace."""
    hidden: tuple[str, ...] = ()
    """Cluster-scoped kinds (plural) not shown."""
    user: str = ""
    """Who the page is for ("" locally: the kubeconfig's user)."""
    watching: str | None = None
    """Locally, the one namespace the cache watches (-n), else None."""

    def sees(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def shows(self, plural: str) -> bool:
        return plural not in self.hidden


def scope_of(
    user: UserInfo,
    *,
    everywhere: bool,
    namespaces: Mapping[str, bool],
    cluster: Mapping[str, bool],
    hidden: Iterable[str] = (),
) -> Scope:
    """The scope of `user` from the review answers: `everywhere` (may list jobs and pods in
    every namespace), per namespace (may list both there), per cluster-scoped kind (plural);
    kinds the dashboard itself could not list (`hidden`) stay hidden whatever the user may."""
    allowed = None if everywhere else frozenset(ns for ns, ok in namespaces.items() if ok)
    hide = set(hidden) | {plural for plural, ok in cluster.items() if not ok}
    return Scope(
        namespaces=allowed,
        hidden=tuple(sorted(hide)),
        user=user.username,
    )
