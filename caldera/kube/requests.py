"""Sans-I/O request building: what `KubeClient` sends, computed without sending it.

Each function turns a caller's intent into the pieces of an HTTP request: query parameters
(`list_query`, `watch_query`, `write_query`), bodies (`encode_body`, `delete_options`, `binding`,
`eviction`) and, for a PATCH, the body, content type and query together (`patch_request`). Paths
come from `caldera.api.kinds.resource_path`. `caldera.kube.client` only sends what these return,
as lightkube's `prepare_request` separates building a request from performing it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

from caldera.api.codec import ENCODER

__all__ = [
    "ParamValue",
    "PatchType",
    "PropagationPolicy",
    "Query",
    "binding",
    "body_identity",
    "delete_options",
    "encode_body",
    "encode_query",
    "eviction",
    "list_query",
    "patch_request",
    "watch_query",
    "write_query",
]

Query: TypeAlias = list[tuple[str, str]]
ParamValue: TypeAlias = str | int | bool | None


class PatchType(enum.StrEnum):
    """The patch formats the API server accepts, as their content types."""

    JSON = "application/json-patch+json"
    """RFC 6902 operations: a list of {"op", "path", "value"}."""
    MERGE = "application/merge-patch+json"
    """RFC 7386: objects merge, lists are replaced, null deletes a key."""
    STRATEGIC = "application/strategic-merge-patch+json"
    """Kubernetes' merge that merges lists by key (built-in kinds only, not CRDs)."""
    APPLY = "application/apply-patch+yaml"
    """Server-side apply: the full intent of one field manager (JSON is valid YAML)."""


class PropagationPolicy(enum.StrEnum):
    """What a delete does to the object's dependents."""

    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


def encode_query(params: Mapping[str, ParamValue]) -> Query:
    """Query parameters as strings, without the unset ones; booleans as true/false."""
    out: Query = []
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out.append((key, "true" if value else "false"))
        else:
            out.append((key, str(value)))
    return out


def list_query(
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    limit: int | None = None,
    continue_: str | None = None,
    resource_version: str | None = None,
    resource_version_match: str | None = None,
) -> Query:
    """Query of one LIST page. A continue token carries the snapshot, so it excludes RV options."""
    if continue_:
        resource_version = resource_version_match = None
    return encode_query(
        {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "continue": continue_ or None,
            "resourceVersion": resource_version,
            "resourceVersionMatch": resource_version_match,
        }
    )


def watch_query(
    *,
    resource_version: str | None = None,
    allow_watch_bookmarks: bool = True,
    timeout_seconds: int | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    send_initial_events: bool | None = None,
    resource_version_match: str | None = None,
) -> Query:
    """Query of a WATCH request."""
    return encode_query(
        {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": allow_watch_bookmarks or None,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "sendInitialEvents": send_initial_events,
            "resourceVersionMatch": resource_version_match,
        }
    )


def write_query(
    *, field_manager: str | None = None, force: bool | None = None, dry_run: bool = False
) -> Query:
    """Query of a write (POST, PUT, PATCH): the field manager, apply's `force`, and dry run."""
    return encode_query(
        {"fieldManager": field_manager, "force": force, "dryRun": "All" if dry_run else None}
    )


def encode_body(body: object) -> bytes:
    """JSON of a request body: a msgspec Struct (unset and default fields omitted, as the model
    configures), plain dicts and lists, or bytes sent as they are."""
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body)
    return ENCODER.encode(body)


def delete_options(
    *,
    uid: str | None = None,
    resource_version: str | None = None,
    propagation_policy: PropagationPolicy | str | None = None,
    grace_period_seconds: int | None = None,
    dry_run: bool = False,
) -> dict[str, Any] | None:
    """A DeleteOptions object, or None when every option is the server's default."""
    options: dict[str, Any] = {}
    preconditions = {
        k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None
    }
    if preconditions:
        options["preconditions"] = preconditions
    if propagation_policy is not None:
        options["propagationPolicy"] = str(propagation_policy)
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    if dry_run:
        options["dryRun"] = ["All"]
    if not options:
        return None
    return {"apiVersion": "v1", "kind": "DeleteOptions", **options}


def patch_request(
    patch: object,
    patch_type: PatchType,
    *,
    field_manager: str | None = None,
    force: bool | None = None,
    dry_run: bool = False,
) -> tuple[bytes, str, Query]:
    """Body, content type and query of a PATCH. Server-side apply needs a field manager, and only
    apply takes `force` (take over fields other managers own)."""
    if patch_type is PatchType.APPLY and not field_manager:
        raise ValueError("server-side apply needs a field_manager")
    if force is not None and patch_type is not PatchType.APPLY:
        raise ValueError("force is only valid with server-side apply (PatchType.APPLY)")
    params = write_query(field_manager=field_manager, force=force, dry_run=dry_run)
    return encode_body(patch), str(patch_type), params


def binding(
    namespace: str,
    pod: str,
    node: str,
    *,
    uid: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A v1 Binding of `pod` to `node`; with `uid`, only that incarnation of the pod is bound.
    The API server merges the Binding's `annotations` into the pod's with the node, in one
    write (what a device plugin reads at the pod's start is there when it is bound)."""
    meta: dict[str, Any] = {"name": pod, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def eviction(
    namespace: str,
    pod: str,
    *,
    uid: str | None = None,
    grace_period_seconds: int | None = None,
) -> dict[str, Any]:
    """A policy/v1 Eviction of `pod`."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": namespace},
    }
    options = delete_options(uid=uid, grace_period_seconds=grace_period_seconds)
    if options:
        body["deleteOptions"] = options
    return body


def body_identity(body: object) -> tuple[str, str]:
    """(name, namespace) from a body's metadata: a model's attributes or a dict's keys."""
    if isinstance(body, Mapping):
        meta = body.get("metadata") or {}
        return str(meta.get("name") or ""), str(meta.get("namespace") or "")
    meta = getattr(body, "metadata", None)
    return str(getattr(meta, "name", "") or ""), str(getattr(meta, "namespace", "") or "")
