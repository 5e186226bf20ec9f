"""Who may open or close a Queue: the SubjectAccessReview model and the requester's stamp.

A Command that opens or closes a Queue changes a cluster-scoped object; only those who may
`update` that Queue may have it run (docs/reliability.md, "Queue Commands"). Two processes ask the
API server the same question, "may this user update queue q?", with a SubjectAccessReview
(authorization.k8s.io/v1; the API server answers it without storing anything and without calling
admission webhooks, so a webhook may ask it):

- the webhook, at admission, for the requester of the AdmissionReview, and it stamps that requester
  on the Command as the annotation ``caldera.io/requested-by`` (JSON ``{"user", "groups"}``);
- the queue controller, before it runs the Command, for the stamped requester (or not at all for
  a Command in one of its trusted namespaces).

This module is the shared, pure part: the models, the question, the stamp's encoding and its
checked decoding (a stamp is written by clients too, so every way it can be malformed gives a
message naming it, never an exception), and the message of a refusal.
"""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.kinds import QUEUE, KindInfo
from caldera.api.meta import Model, ObjectMeta, type_meta
from caldera.api.volcano import Command

__all__ = [
    "AUTHORIZATION_API_VERSION",
    "REQUESTED_BY_KEY",
    "SUBJECT_ACCESS_REVIEW",
    "Requester",
    "ResourceAttributes",
    "SubjectAccessReview",
    "SubjectAccessReviewSpec",
    "SubjectAccessReviewStatus",
    "command_queue",
    "decode_requester",
    "encode_requester",
    "forbidden_message",
    "queue_update_review",
]

AUTHORIZATION_API_VERSION: Final = "authorization.k8s.io/v1"
REQUESTED_BY_KEY: Final = "caldera.io/requested-by"
"""Annotation holding the requester the webhook admitted a Command for (JSON user and groups)."""
QUEUE_GROUP: Final = QUEUE.group
MAX_STAMP: Final = 16 * 1024
"""Longest stamp decoded, in characters: a user with more groups than that is not a real one."""


class ResourceAttributes(Model, frozen=True):
    """SubjectAccessReview spec.resourceAttributes: the request being asked about."""

    namespace: str = ""
    verb: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


class SubjectAccessReviewSpec(Model, frozen=True):
    """Who asks to do what."""

    resource_attributes: ResourceAttributes | None = None
    user: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


class SubjectAccessReviewStatus(Model, frozen=True):
    """The API server's answer: allowed, or not (with the authorizer's reason, if any)."""

    allowed: bool = False
    denied: bool = False
    reason: str = ""
    evaluation_error: str = ""


class SubjectAccessReview(Model, frozen=True):
    """authorization.k8s.io/v1 SubjectAccessReview (create-only, never stored)."""

    api_version: str = type_meta(AUTHORIZATION_API_VERSION)
    kind: str = type_meta("SubjectAccessReview")
    metadata: ObjectMeta = ObjectMeta()
    spec: SubjectAccessReviewSpec = SubjectAccessReviewSpec()
    status: SubjectAccessReviewStatus = SubjectAccessReviewStatus()


SUBJECT_ACCESS_REVIEW: Final = KindInfo(
    "SubjectAccessReview",
    "authorization.k8s.io",
    "v1",
    "subjectaccessreviews",
    False,
    SubjectAccessReview,
)


class Requester(Model, frozen=True):
    """The stamp: the user and groups the webhook admitted a Command for."""

    user: str = ""
    groups: tuple[str, ...] = ()


_REQUESTER_DECODER: Final = msgspec.json.Decoder(Requester)
_ENCODER: Final = msgspec.json.Encoder()


def encode_requester(requester: Requester) -> str:
    """The annotation's value: ``{"user":"...","groups":[...]}`` (empty groups left out)."""
    return _ENCODER.encode(requester).decode()


def decode_requester(value: str) -> Requester | str:
    """The stamped requester, or a message saying why the value is not one (pure, never
    raises: the annotation may have been written by anyone who could write the Command)."""
    where = f"metadata.annotations[{REQUESTED_BY_KEY}]"
    if len(value) > MAX_STAMP:
        return f"{where}: Invalid value: longer than {MAX_STAMP} characters"
    try:
        requester = _REQUESTER_DECODER.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        return f'{where}: Invalid value: not {{"user": ..., "groups": [...]}}: {exc}'
    if not requester.user:
        return f"{where}: Required value: the stamp names no user"
    return requester


def command_queue(command: Command) -> str | None:
    """The name of the Queue a Command opens or closes: its target is a scheduling.volcano.sh
    Queue (any version: the question is the same); None for every other target."""
    target = command.target
    if target is None or target.kind != QUEUE.kind:
        return None
    group = target.api_version.rpartition("/")[0]
    return target.name if group == QUEUE_GROUP else None


def queue_update_review(
    queue: str,
    *,
    user: str,
    groups: tuple[str, ...] = (),
    uid: str = "",
    extra: dict[str, tuple[str, ...]] | None = None,
) -> SubjectAccessReview:
    """The question "may this user `update` queue ``queue``?" (an empty name asks about every
    queue, which is stricter)."""
    attributes = ResourceAttributes(verb="update", group=QUEUE_GROUP, resource="queues", name=queue)
    spec = SubjectAccessReviewSpec(
        resource_attributes=attributes, user=user, groups=groups, uid=uid, extra=extra or {}
    )
    return SubjectAccessReview(spec=spec)


def forbidden_message(user: str, queue: str, status: SubjectAccessReviewStatus) -> str:
    """The refusal, in the API server's field-error form, naming the user, the queue, the rule
    and the authorizer's reason when it gave one."""
    why = f" ({status.reason})" if status.reason else ""
    if status.evaluation_error:
        why += f" (evaluation error: {status.evaluation_error})"
    return (
        f'target.name: Forbidden: user "{user}" may not update queue "{queue}"{why}: only those '
        "who may update a Queue may open or close it"
    )
