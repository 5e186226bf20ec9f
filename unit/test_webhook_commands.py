"""/commands/mutate and /commands/validate: a queue Command is admitted only when the API
server's SubjectAccessReview allows its requester to update the queue; the requester is stamped;
a Command's action, target and stamp never change."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.authz import (
    REQUESTED_BY_KEY,
    Requester,
    SubjectAccessReview,
    SubjectAccessReviewStatus,
    command_queue,
    encode_requester,
)
from caldera.api.volcano import Command
from controllers.queue.controller import targets_queue
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView

QUEUE_TARGET = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "name": "q1",
    "uid": "u-1",
}
JOB_TARGET = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "u-2"}
EDITOR = {
    "username": "system:serviceaccount:team-a:dev",
    "uid": "uid-dev",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"],
    "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
}


def command(
    target: dict[str, Any] | None = QUEUE_TARGET,
    action: str = "CloseQueue",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "c", "namespace": "team-a"},
        "action": action,
    }
    if target is not None:
        body["target"] = target
    if annotations is not None:
        body["metadata"]["annotations"] = annotations
    return body


def review(
    obj: dict[str, Any],
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    user: dict[str, Any] = EDITOR,
) -> bytes:
    request = {
        "uid": "req-1",
        "kind": {"group": "bus.volcano.sh", "version": "v1alpha1", "kind": "Command"},
        "operation": operation,
        "namespace": "team-a",
        "name": "c",
        "userInfo": user,
        "object": obj,
        "oldObject": old,
    }
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "request": request}).encode()


class Asker:
    """The AccessCheck seam: answers every review with ``allowed`` and keeps what was asked."""

    def __init__(self, allowed: bool, reason: str = "") -> None:
        self.status = SubjectAccessReviewStatus(allowed=allowed, reason=reason)
        self.asked: list[SubjectAccessReview] = []

    async def __call__(self, review: SubjectAccessReview) -> SubjectAccessReviewStatus:
        self.asked.append(review)
        return self.status


ADMISSION = Admission(StaticView(), AdmissionOptions())


async def validate(body: bytes, ask: Asker) -> dict[str, Any]:
    answer = await ADMISSION.review_async("/commands/validate", "application/json", body, ask)
    assert answer.status == 200
    return decode_response(answer.body)


def stamp_of(user: dict[str, Any]) -> str:
    return encode_requester(Requester(user=user["username"], groups=tuple(user.get("groups", []))))


async def test_editor_without_update_right_is_refused_naming_the_field() -> None:
    """The SubjectAccessReview says no: refused (403), the message names target.name, the user,
    the queue and the rule."""
    ask = Asker(allowed=False, reason="no RBAC policy matched")
    response = await validate(review(command()), ask)
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith("target.name: Forbidden: ")
    assert '"system:serviceaccount:team-a:dev" may not update queue "q1"' in message
    assert "only those who may update a Queue may open or close it" in message
    assert "no RBAC policy matched" in message


async def test_the_review_asks_about_the_requester_and_the_queue() -> None:
    """The question carries the request's user, groups, uid and extra, and asks `update` on
    queues.scheduling.volcano.sh named by the target; allowed, the Command is admitted."""
    ask = Asker(allowed=True)
    response = await validate(review(command(action="OpenQueue")), ask)
    assert response["allowed"] is True
    (asked,) = ask.asked
    spec = json.loads(msgspec.json.encode(asked.spec))
    assert spec == {
        "resourceAttributes": {
            "verb": "update",
            "group": "scheduling.volcano.sh",
            "resource": "queues",
            "name": "q1",
        },
        "user": EDITOR["username"],
        "groups": EDITOR["groups"],
        "uid": EDITOR["uid"],
        "extra": EDITOR["extra"],
    }


async def test_job_commands_need_no_question() -> None:
    """A Command aimed at a Job is admitted without asking anything."""
    ask = Asker(allowed=False)
    response = await validate(review(command(JOB_TARGET, action="RestartJob")), ask)
    assert response["allowed"] is True
    assert ask.asked == []


async def test_a_failed_question_refuses() -> None:
    """No answer from the API server: refused with code 500 and a message saying what could not
    be checked (never the exception's text)."""

    async def broken(review: SubjectAccessReview) -> SubjectAccessReviewStatus:
        raise ConnectionError("secret detail")

    answer = await ADMISSION.review_async(
        "/commands/validate", "application/json", review(command()), broken
    )
    response = decode_response(answer.body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert (
        'user "system:serviceaccount:team-a:dev" may update queue "q1"'
        in (response["status"]["message"])
    )
    assert "secret detail" not in response["status"]["message"]


def test_synchronous_review_cannot_admit_a_queue_command() -> None:
    """`review` (no API server to ask) refuses a queue Command instead of admitting it."""
    answer = ADMISSION.review("/commands/validate", "application/json", review(command()))
    response = decode_response(answer.body)
    assert (response["allowed"], response["status"]["code"]) == (False, 500)


async def test_a_queue_command_must_name_its_queue() -> None:
    """An empty target.name is refused as a required value before anything is asked."""
    ask = Asker(allowed=True)
    response = await validate(review(command({**QUEUE_TARGET, "name": ""})), ask)
    assert response["status"]["message"].startswith("target.name: Required value")
    assert ask.asked == []


def test_mutate_stamps_the_requester_over_what_the_client_wrote() -> None:
    """The stamp is the request's user and groups, whatever the client put there; the Command's
    other annotations are kept."""
    forged = {REQUESTED_BY_KEY: '{"user":"admin","groups":["system:masters"]}', "team": "a"}
    answer = ADMISSION.review(
        "/commands/mutate", "application/json", review(command(annotations=forged))
    )
    response = decode_response(answer.body)
    assert response["allowed"] is True
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {REQUESTED_BY_KEY: stamp_of(EDITOR), "team": "a"},
        }
    ]
    assert json.loads(stamp_of(EDITOR)) == {"user": EDITOR["username"], "groups": EDITOR["groups"]}


async def test_a_stamp_naming_someone_else_is_refused_at_validation() -> None:
    """A stamp changed after the mutating webhook (another webhook, or no mutation) is refused,
    even on a Job Command."""
    forged = {REQUESTED_BY_KEY: '{"user":"admin","groups":["system:masters"]}'}
    ask = Asker(allowed=True)
    response = await validate(review(command(JOB_TARGET, "AbortJob", forged)), ask)
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        f"metadata.annotations[{REQUESTED_BY_KEY}]: Forbidden"
    )
    honest = {REQUESTED_BY_KEY: stamp_of(EDITOR)}
    assert (await validate(review(command(JOB_TARGET, "AbortJob", honest)), ask))["allowed"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"action": "OpenQueue"}, "action: Invalid value"),
        ({"target": QUEUE_TARGET}, "target: Invalid value"),
        ({"metadata": {"name": "c", "annotations": {REQUESTED_BY_KEY: "{}"}}}, "Forbidden"),
    ],
    ids=["action", "target", "stamp"],
)
async def test_update_cannot_change_action_target_or_stamp(
    change: dict[str, Any], field: str
) -> None:
    """A Job Command retargeted at a Queue, a new action, a new stamp: each refused, naming the
    field; a changed message is admitted."""
    old = command(JOB_TARGET, "CloseQueue")
    new = {**old, **change}
    ask = Asker(allowed=True)
    response = await validate(review(new, operation="UPDATE", old=old), ask)
    assert response["allowed"] is False
    assert field in response["status"]["message"]
    same = {**old, "message": "why"}
    assert (await validate(review(same, operation="UPDATE", old=old), ask))["allowed"]


API_VERSIONS = st.sampled_from(
    [
        "scheduling.volcano.sh/v1beta1",
        "scheduling.volcano.sh/v1alpha1",
        "scheduling.volcano.sh/",
        "batch.volcano.sh/v1alpha1",
        "v1",
        "",
    ]
)
TEXT = st.text(max_size=12)
USERS = st.fixed_dictionaries(
    {
        "username": TEXT,
        "uid": TEXT,
        "groups": st.lists(st.sampled_from(["system:masters", "system:authenticated", "x"])),
        "extra": st.dictionaries(TEXT, st.lists(TEXT, max_size=2), max_size=2),
    }
)
TARGETS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "apiVersion": API_VERSIONS,
            "kind": st.sampled_from(["Queue", "Job", "queue", ""]),
            "name": st.sampled_from(["q1", "root", ""]),
            "uid": TEXT,
        }
    ),
)
ANNOTATIONS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from([REQUESTED_BY_KEY, "other"]), TEXT, max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    user=USERS,
    target=TARGETS,
    action=st.sampled_from(["OpenQueue", "CloseQueue", "AbortJob", ""]),
    annotations=ANNOTATIONS,
)
async def test_no_queue_command_is_admitted_without_an_allowing_review(
    user: dict[str, Any],
    target: dict[str, Any] | None,
    action: str,
    annotations: dict[str, str] | None,
) -> None:
    """Whatever the user, target, action and annotations: a Command the queue controller would
    run is a queue Command to the webhook, and no queue Command is admitted when the
    SubjectAccessReview says no; when it says yes, it was asked for exactly this user."""
    body = command(target, action, annotations)
    decoded = msgspec.json.decode(json.dumps(body), type=Command)
    if targets_queue(decoded):
        assert command_queue(decoded) is not None
    denied = Asker(allowed=False)
    response = await validate(review(body, user=user), denied)
    if command_queue(decoded) is not None:
        assert response["allowed"] is False
    allowed = Asker(allowed=True)
    await validate(review(body, user=user), allowed)
    for asked in allowed.asked:
        assert asked.spec.user == user["username"]
        assert list(asked.spec.groups) == user["groups"]
        assert asked.spec.resource_attributes is not None
        assert asked.spec.resource_attributes.name == (target or {}).get("name")
