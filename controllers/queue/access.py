"""Whether the queue controller runs a queue Command: the re-check behind the webhook's.

A Command that opens or closes a Queue runs when either
- it sits in one of the trusted namespaces (``--queue-command-namespaces``; by default the
  controllers' own), where only queue administrators should be able to create Commands; or
- it carries the requester the webhook stamped at admission (``caldera.io/requested-by``) and
  a SubjectAccessReview, asked now, says that user and groups may `update` the queue.

Anything else is refused: a Command stored while the webhook was not registered, a forged or
malformed stamp, a requester who lost the right since. The controller then records a Warning
Event ``CommandForbidden`` on the Command, deletes it, and leaves the queue alone.

Pure: `command_access` says what to do, or which question to ask; `access_answer` decides from
the API server's answer. The controller sends the question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from caldera.api.authz import (
    REQUESTED_BY_KEY,
    Requester,
    SubjectAccessReview,
    SubjectAccessReviewStatus,
    command_queue,
    decode_requester,
    forbidden_message,
    queue_update_review,
)
from caldera.api.volcano import Command

__all__ = ["FORBIDDEN", "Ask", "Refuse", "Run", "access_answer", "command_access"]

FORBIDDEN: Final = "CommandForbidden"
"""Reason of the Warning Event on a refused queue Command."""


@dataclass(frozen=True, slots=True)
class Run:
    """Run the Command."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the API server ``review`` first (for the stamped ``requester``)."""

    requester: Requester
    review: SubjectAccessReview


@dataclass(frozen=True, slots=True)
class Refuse:
    """Delete the Command without running it; ``reason`` says why."""

    reason: str


def _trusted_list(trusted: frozenset[str]) -> str:
    return ", ".join(sorted(trusted)) if trusted else "none"


def command_access(command: Command, trusted: frozenset[str]) -> Run | Ask | Refuse:
    """What to do with a queue Command before running it (see the module docstring)."""
    namespace = command.metadata.namespace
    if namespace in trusted:
        return Run()
    stamp = command.metadata.annotations.get(REQUESTED_BY_KEY)
    if stamp is None:
        return Refuse(
            f"namespace {namespace} is not trusted with queue Commands (trusted: "
            f"{_trusted_list(trusted)}) and the Command carries no {REQUESTED_BY_KEY} stamp "
            "(the webhook's /commands/mutate writes it): only those who may update a Queue "
            "may open or close it"
        )
    requester = decode_requester(stamp)
    if isinstance(requester, str):
        return Refuse(f"{requester}; namespace {namespace} is not trusted with queue Commands")
    queue = command_queue(command) or ""
    review = queue_update_review(queue, user=requester.user, groups=requester.groups)
    return Ask(requester, review)


def access_answer(
    command: Command, requester: Requester, status: SubjectAccessReviewStatus
) -> Run | Refuse:
    """The decision once the API server answered the `Ask`."""
    if status.allowed:
        return Run()
    return Refuse(forbidden_message(requester.user, command_queue(command) or "", status))
