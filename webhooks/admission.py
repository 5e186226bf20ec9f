"""The AdmissionReview v1 protocol: wire models, verdicts, and JSON-patch operations.

The API server POSTs an `AdmissionReview` whose `request` carries the object (`object`, and
`oldObject` for UPDATE and DELETE); the webhook answers with the same review carrying a `response`:
`allowed`, a `status` whose `message` the user sees when refused, for a mutating webhook a base64
JSON patch, and `warnings` the API server hands to the client (kubectl prints them). Objects are
kept as `msgspec.Raw` here and decoded by the handler with the model of the expected kind, so a
review is parsed once and a malformed object becomes a refusal that names the field, not an
exception.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

__all__ = [
    "ADMISSION_API_VERSION",
    "PRESENCE_DECODER",
    "REVIEW_DECODER",
    "AdmissionRequest",
    "AdmissionReview",
    "GroupVersionKind",
    "Operation",
    "PatchOp",
    "Presence",
    "UserInfo",
    "Verdict",
    "add",
    "apply_patch",
    "encode_response",
    "escape_pointer",
]

ADMISSION_API_VERSION: Final = "admission.k8s.io/v1"


class Operation:
    """Values of request.operation."""

    CREATE: Final = "CREATE"
    UPDATE: Final = "UPDATE"
    DELETE: Final = "DELETE"
    CONNECT: Final = "CONNECT"


class GroupVersionKind(msgspec.Struct, frozen=True, kw_only=True):
    """request.kind."""

    group: str = ""
    version: str = ""
    kind: str = ""


class UserInfo(msgspec.Struct, frozen=True, kw_only=True):
    """request.userInfo: who sent the request, as the API server authenticated them."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class AdmissionRequest(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The fields of request Caldera reads; the objects stay raw JSON until a handler decodes
    them with the model of its kind."""

    uid: str
    kind: GroupVersionKind = GroupVersionKind()
    name: str = ""
    namespace: str = ""
    operation: str = ""
    # msgspec.Raw cannot sit in a union: an absent object is an empty Raw, a null one b"null";
    # `raw_object` and `raw_old_object` turn both into None.
    object: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    old_object: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    dry_run: bool = False
    user_info: UserInfo = UserInfo()

    @property
    def raw_object(self) -> msgspec.Raw | None:
        """The object's raw JSON, or None when the review has none."""
        return _present(self.object)

    @property
    def raw_old_object(self) -> msgspec.Raw | None:
        """The old object's raw JSON, or None when the review has none."""
        return _present(self.old_object)


def _present(raw: msgspec.Raw) -> msgspec.Raw | None:
    return None if len(raw) == 0 or bytes(raw).strip() == b"null" else raw


class AdmissionReview(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """An AdmissionReview as the API server sends it."""

    api_version: str = ""
    kind: str = ""
    request: AdmissionRequest | None = None


REVIEW_DECODER: Final = msgspec.json.Decoder(AdmissionReview)


class Presence(msgspec.Struct, frozen=True):
    """Whether an object has a `spec` key at all: a JSON patch may only add under an existing
    parent, and the models cannot tell an absent spec from an empty one."""

    spec: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


PRESENCE_DECODER: Final = msgspec.json.Decoder(Presence)

PatchOp = dict[str, Any]


def escape_pointer(token: str) -> str:
    """Escape one JSON-pointer reference token (RFC 6901): `~` -> `~0`, `/` -> `~1`."""
    return token.replace("~", "~0").replace("/", "~1")


def add(path: str, value: Any) -> PatchOp:
    """A JSON-patch `add`: sets the member whether or not it exists (its parent must exist)."""
    return {"op": "add", "path": path, "value": value}


def apply_patch(doc: dict[str, Any], patch: Sequence[PatchOp]) -> dict[str, Any]:
    """``doc`` after a JSON patch of `add` operations (all the mutating rules emit), as the API
    server applies it; ``doc`` itself is left alone."""
    out = copy.deepcopy(doc)
    for op in patch:
        if op["op"] != "add":
            raise ValueError(f"only add operations are applied here, not {op['op']!r}")
        *parents, last = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"][1:].split("/")
        ]
        target: Any = out
        for token in parents:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if isinstance(target, list):
            target.insert(int(last), copy.deepcopy(op["value"]))
        else:
            target[last] = copy.deepcopy(op["value"])
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to one admission request.

    `code` is the HTTP-like status code the API server reports with a refusal: 403 for a
    policy refusal, 400 for a request the webhook could not read.
    """

    allowed: bool
    message: str = ""
    patch: Sequence[PatchOp] = ()
    code: int = 200
    # Shown to the user by kubectl ("Warning: ...") on an admitted request.
    warnings: Sequence[str] = ()

    @classmethod
    def allow(cls, patch: Sequence[PatchOp] = (), warnings: Sequence[str] = ()) -> Verdict:
        """Admit, maybe with a patch and warnings."""
        return cls(True, patch=patch, warnings=warnings)

    @classmethod
    def deny(cls, message: str) -> Verdict:
        """Refuse with a message telling the user what to fix."""
        return cls(False, message=message, code=403)

    @classmethod
    def errored(cls, message: str) -> Verdict:
        """Refuse a request that could not be read (a malformed body, an unexpected kind)."""
        return cls(False, message=message, code=400)

    @property
    def result(self) -> str:
        """The metric label: allowed, patched, denied or error."""
        if self.allowed:
            return "patched" if self.patch else "allowed"
        return "denied" if self.code == 403 else "error"


_ENCODER: Final = msgspec.json.Encoder()


def encode_response(uid: str, verdict: Verdict) -> bytes:
    """The AdmissionReview the webhook answers with, as JSON bytes."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {
            "code": verdict.code,
            "message": verdict.message,
            "reason": "Forbidden" if verdict.code == 403 else "BadRequest",
            "status": "Failure",
        }
    elif verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(_ENCODER.encode(list(verdict.patch))).decode()
    if verdict.allowed and verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    return _ENCODER.encode(
        {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}
    )
