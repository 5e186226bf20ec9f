"""Tests of e2e.audit.usage: audit log lines to requests (one per audit ID, watches counted
once, open watches too) and to the rights each process used."""

from __future__ import annotations

import json
from typing import Any

from e2e.audit.usage import Request, Right, parse_audit, usage

CONTROLLERS = "system:serviceaccount:caldera-system:caldera-controllers"


def event(
    audit_id: str,
    stage: str = "ResponseComplete",
    *,
    verb: str = "get",
    user: str = CONTROLLERS,
    code: int = 200,
    uri: str = "/api/v1/namespaces/ns/pods/p",
    ref: dict[str, str] | None = None,
) -> str:
    body: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": audit_id,
        "stage": stage,
        "requestURI": uri,
        "verb": verb,
        "user": {"username": user, "groups": ["system:serviceaccounts"]},
        "responseStatus": {"metadata": {}, "code": code},
    }
    if ref:
        body["objectRef"] = ref
    return json.dumps(body)


def test_a_resource_request_becomes_a_request() -> None:
    """objectRef's group, resource, subresource, namespace and name, the verb, the user and
    the code are kept; the core group is ""."""
    line = event(
        "a",
        verb="create",
        code=201,
        uri="/api/v1/namespaces/ns/pods/p/binding",
        ref={
            "resource": "pods",
            "subresource": "binding",
            "namespace": "ns",
            "name": "p",
            "apiVersion": "v1",
        },
    )
    (request,) = parse_audit([line])
    assert request == Request(
        user=CONTROLLERS,
        verb="create",
        group="",
        resource="pods",
        subresource="binding",
        namespace="ns",
        name="p",
        code=201,
        path="/api/v1/namespaces/ns/pods/p/binding",
    )
    assert request.right == Right("", "pods/binding", "create")


def test_a_non_resource_request_is_its_path() -> None:
    """Without objectRef the right is the URL path (query left out)."""
    (request,) = parse_audit([event("v", uri="/version?timeout=32s")])
    assert request.right == Right("", "/version", "get")
    assert request.right.non_resource


def test_a_watch_counts_once_and_an_open_one_counts_too() -> None:
    """ResponseStarted then ResponseComplete of one audit ID is one request; a watch only
    started when the lines end is one request as well; other kinds and broken lines are
    skipped."""
    ref = {"apiGroup": "scheduling.volcano.sh", "resource": "queues"}
    lines = [
        event("w1", "ResponseStarted", verb="watch", ref=ref),
        event("w2", "ResponseStarted", verb="watch", ref=ref),
        event("w1", "ResponseComplete", verb="watch", ref=ref),
        '{"kind": "Event", "auditID": "cut',
        json.dumps({"kind": "Status"}),
        "[]",
    ]
    requests = list(parse_audit(lines))
    assert len(requests) == 2
    assert {r.right for r in requests} == {Right("scheduling.volcano.sh", "queues", "watch")}
    # A rotated file read after the newer one: the watch's start comes after its end.
    assert len(list(parse_audit([lines[2], lines[0]]))) == 1


def test_usage_per_process_with_counts_refusals_and_targets() -> None:
    """Requests of the given users are counted per right, 403s as refused, with the
    (namespace, name) each aimed at; other users are left out; a silent process is there,
    empty."""

    def pod(name: str) -> dict[str, str]:
        return {"resource": "pods", "namespace": "ns", "name": name}

    lines = [
        event("1", verb="delete", ref=pod("a")),
        event("2", verb="delete", ref=pod("b")),
        event("3", verb="delete", code=403, ref=pod("b")),
        event("4", verb="delete", user="system:serviceaccount:other:sa", ref=pod("x")),
    ]
    used = usage(
        parse_audit(lines),
        {CONTROLLERS: "controllers", "system:serviceaccount:caldera-system:w": "webhook"},
    )
    assert used["webhook"] == {}
    (right,) = used["controllers"]
    use = used["controllers"][right]
    assert right == Right("", "pods", "delete")
    assert (use.count, use.refused) == (3, 1)
    assert use.targets == {("ns", "a"): 1, ("ns", "b"): 2}
