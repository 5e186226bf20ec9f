"""/commands/mutate and /commands/validate: a Command opens or closes a Queue only for those who
may update that Queue, and a Command does not change once created.

Queues are cluster-scoped and belong to whoever may `update` them (cluster administrators); a
Command is namespaced, so RBAC lets any namespace editor create one. Volcano runs every queue
Command; Caldera admits one whose target is a scheduling.volcano.sh Queue only when the API server
says, through a SubjectAccessReview for the request's user, groups, uid and extra, that the
requester may `update` that queue (docs/reliability.md, "Queue Commands").

The rules are pure. The one answer they need from outside is the SubjectAccessReview's, so
``validate_command_create`` returns a `Question`: the review to send and a pure function from the
API server's answer to the verdict; ``webhooks.review`` sends it (the only admission path with
I/O: a SubjectAccessReview is never sent to admission webhooks, so asking cannot deadlock).

- mutate (CREATE): stamp the requester on the Command (``caldera.io/requested-by``, JSON user and
  groups), overwriting whatever the client wrote; the queue controller checks that requester
  again before it runs the Command.
- validate (CREATE): a stamp, when present, names the requester (a mutating webhook running
  after this one cannot change it unseen); a queue Command names its queue and its requester may
  update it.
- validate (UPDATE): action, target and the stamp cannot change (a Command runs once; retargeting
  a Job Command at a Queue must not slip past the check above).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from caldera.api.authz import (
    REQUESTED_BY_KEY,
    Requester,
    SubjectAccessReview,
    SubjectAccessReviewStatus,
    command_queue,
    decode_requester,
    encode_requester,
    forbidden_message,
    queue_update_review,
)
from caldera.api.fielderrors import required, show
from caldera.api.volcano import Command
from webhooks.admission import PatchOp, UserInfo, Verdict, add

__all__ = [
    "Question",
    "mutate_command",
    "requester_of",
    "validate_command_create",
    "validate_command_update",
]

STAMP_FIELD = f"metadata.annotations[{REQUESTED_BY_KEY}]"


@dataclass(frozen=True, slots=True)
class Question:
    """A verdict that waits for one SubjectAccessReview: the review to send, and the verdict
    for each answer."""

    review: SubjectAccessReview
    decide: Callable[[SubjectAccessReviewStatus], Verdict]
    about: str
    """What is asked, for the message when no answer comes (`user "u" may update queue "q"`)."""


def requester_of(user: UserInfo) -> Requester:
    """The stamp of a request's user."""
    return Requester(user=user.username, groups=user.groups)


def mutate_command(command: Command, user: UserInfo) -> list[PatchOp]:
    """The patch stamping the requester on a new Command (the whole annotations map, so it works
    whether or not the Command had any)."""
    annotations = {
        **command.metadata.annotations,
        REQUESTED_BY_KEY: encode_requester(requester_of(user)),
    }
    return [add("/metadata/annotations", annotations)]


def _stamp_error(command: Command, user: UserInfo) -> str:
    stamp = command.metadata.annotations.get(REQUESTED_BY_KEY)
    if stamp is None:
        return ""
    if decode_requester(stamp) != requester_of(user):
        want = encode_requester(requester_of(user))
        return (
            f"{STAMP_FIELD}: Forbidden: names another requester than the one creating the "
            f"Command (expected {show(want)}); the webhook stamps it, leave it out"
        )
    return ""


def validate_command_create(command: Command, user: UserInfo) -> Verdict | Question:
    """Admit a new Command, or ask whether its requester may update the Queue it targets."""
    if message := _stamp_error(command, user):
        return Verdict.deny(message)
    queue = command_queue(command)
    if queue is None:
        return Verdict.allow()
    if not queue:
        return Verdict.deny(required("target.name", "the Queue to open or close"))

    def decide(status: SubjectAccessReviewStatus) -> Verdict:
        if status.allowed:
            return Verdict.allow()
        return Verdict.deny(forbidden_message(user.username, queue, status))

    review = queue_update_review(
        queue, user=user.username, groups=user.groups, uid=user.uid, extra=user.extra
    )
    return Question(review, decide, f'user "{user.username}" may update queue "{queue}"')


def validate_command_update(old: Command, new: Command) -> str:
    """Refuse a change of action, target or stamp (empty: admitted)."""
    errors = []
    if new.action != old.action:
        errors.append(
            f"action: Invalid value: {show(new.action)}: cannot change once the Command is "
            f"created (was {show(old.action)}); create a new Command"
        )
    if new.target != old.target:
        errors.append(
            "target: Invalid value: cannot change once the Command is created; create a new Command"
        )
    if new.metadata.annotations.get(REQUESTED_BY_KEY) != old.metadata.annotations.get(
        REQUESTED_BY_KEY
    ):
        errors.append(f"{STAMP_FIELD}: Forbidden: the requester stamped at creation cannot change")
    return "; ".join(errors)
