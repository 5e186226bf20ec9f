"""The rights a process used, read from the API server's audit log.

The local control plane logs every request made with a ServiceAccount token at the Metadata
level (``e2e/cluster/audit-policy.yaml``): one JSON object a line, ``audit.k8s.io/v1`` Event,
with the user, the verb, ``objectRef`` (apiGroup, resource, subresource, namespace, name) or the
URL of a non-resource request, and the response code. Stages: a plain request is logged once,
at ``ResponseComplete``; a long-running one (a watch) at ``ResponseStarted`` and again at
``ResponseComplete`` when it ends. ``parse_audit`` yields one ``Request`` per audit ID, so a
watch counts once, and a watch still open when the log is read counts too.

See https://kubernetes.io/docs/tasks/debug/debug-cluster/audit/ for the format.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Request", "Right", "Use", "parse_audit", "usage"]

FORBIDDEN = 403


@dataclass(frozen=True, slots=True)
class Request:
    """One request to the API server, as the audit log tells it."""

    user: str
    verb: str
    group: str
    """API group; "" for the core group (and for non-resource requests)."""
    resource: str
    """Plural resource name; "" for a non-resource request (``path`` then says what)."""
    subresource: str = ""
    namespace: str = ""
    """"" for a cluster-scoped request (or one across all namespaces)."""
    name: str = ""
    code: int = 0
    path: str = ""
    """The URL path; what RBAC matches for a non-resource request."""

    @property
    def right(self) -> Right:
        if not self.resource:
            return Right("", self.path, self.verb)
        combined = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return Right(self.group, combined, self.verb)


@dataclass(frozen=True, slots=True, order=True)
class Right:
    """What RBAC is asked for: verb on a resource of a group.

    ``resource`` is RBAC's combined form ("pods", "pods/binding"), or, for a non-resource
    request, the URL path ("/version"), which always begins with "/".
    """

    group: str
    resource: str
    verb: str

    @property
    def non_resource(self) -> bool:
        return self.resource.startswith("/")


@dataclass(slots=True)
class Use:
    """How often a right was used, how often the API server refused it (403), and on what:
    (namespace, name) pairs with their counts, which RBAC's Role scope and resourceNames
    need."""

    count: int = 0
    refused: int = 0
    targets: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, request: Request) -> None:
        self.count += 1
        self.refused += request.code == FORBIDDEN
        self.targets[(request.namespace, request.name)] += 1


def _request(event: Mapping[str, Any]) -> Request:
    ref = event.get("objectRef") or {}
    status = event.get("responseStatus") or {}
    return Request(
        user=str((event.get("user") or {}).get("username", "")),
        verb=str(event.get("verb", "")),
        group=str(ref.get("apiGroup", "")),
        resource=str(ref.get("resource", "")),
        subresource=str(ref.get("subresource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        code=int(status.get("code", 0)),
        path=urlsplit(str(event.get("requestURI", ""))).path,
    )


def parse_audit(lines: Iterable[str]) -> Iterator[Request]:
    """The requests of audit log lines, one per audit ID: at ``ResponseComplete`` (or
    ``Panic``), or at ``ResponseStarted`` for a request still running when the lines end.

    The lines of rotated files may come in any order. Lines that are not JSON audit events
    (a line cut short while the API server writes it) are skipped. A purely computational
    function: it reads only what it is given.
    """
    started: dict[str, Request] = {}
    # Watches already complete: a rotated file read after a newer one may still hold their
    # ResponseStarted. Only long-running requests have that stage, so the set stays small.
    finished: set[str] = set()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("kind") != "Event":
            continue
        stage = event.get("stage")
        audit_id = str(event.get("auditID", ""))
        if stage == "ResponseStarted":
            if audit_id not in finished:
                started[audit_id] = _request(event)
        elif stage in ("ResponseComplete", "Panic"):
            if started.pop(audit_id, None) is None and event.get("verb") == "watch":
                finished.add(audit_id)
            yield _request(event)
    yield from started.values()


def usage(requests: Iterable[Request], processes: Mapping[str, str]) -> dict[str, dict[Right, Use]]:
    """The rights each process used: ``processes`` maps a username
    (``system:serviceaccount:<namespace>:<name>``) to its process; other users' requests are
    left out. Every process of ``processes`` has an entry, empty if it made no request."""
    used: dict[str, dict[Right, Use]] = {process: {} for process in processes.values()}
    for request in requests:
        process = processes.get(request.user)
        if process is None:
            continue
        rights = used[process]
        right = request.right
        if right not in rights:
            rights[right] = Use()
        rights[right].add(request)
    return used
