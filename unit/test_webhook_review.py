"""The AdmissionReview protocol: routing, malformed requests, type errors, patches."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from unit.webhook_fixtures import job_dict, queue, review, task, three_task_job
from webhooks.admission import escape_pointer
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView

ADMISSION = Admission(StaticView([queue("default")]), AdmissionOptions())


def call(
    path: str, body: dict[str, Any] | bytes, content_type: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = ADMISSION.review(path, content_type, raw)
    return answer.status, decode_response(answer.body)


def test_mutation_is_a_base64_json_patch() -> None:
    """/jobs/mutate answers allowed with patchType JSONPatch and the uid of the request."""
    body = review(job_dict(tasks=[task("")]))
    status, response = call("/jobs/mutate", body)
    assert status == 200
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/tasks/0/name", "value": "default0"} in patch


def test_refusal_carries_message_and_403() -> None:
    """A refused job gets allowed false and the message in status, code 403."""
    status, response = call("/jobs/validate", review(job_dict(queue="nope")))
    assert status == 200
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert (
        'unable to find job queue: queue.scheduling.volcano.sh "nope" not found'
        in response["status"]["message"]
    )


def test_valid_job_is_allowed_without_patch() -> None:
    """A valid job passes /jobs/validate with no patch."""
    _, response = call("/jobs/validate", review(three_task_job()))
    assert response == {"uid": response["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b"{not json", "application/json", "the body is not an AdmissionReview"),
        (b"", "application/json", "the request body is empty"),
        (b"{}", "text/plain", "expected Content-Type application/json, got 'text/plain'"),
        (b'{"apiVersion": "admission.k8s.io/v1"}', "application/json", "has no request"),
        (b'{"request": {"uid": 7}}', "application/json", "request.uid: Expected `str`, got `int`"),
        (b"[1, 2]", "application/json", "the body is not an AdmissionReview"),
    ],
)
def test_malformed_requests_get_400(body: bytes, content_type: str, message: str) -> None:
    """A body that is not an AdmissionReview gets HTTP 400 with an errored review, no crash."""
    status, response = call("/jobs/validate", body, content_type)
    assert status == 400
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert message in response["status"]["message"]


def test_wrong_kind_is_an_error() -> None:
    """A Pod sent to /jobs/validate is refused with code 400, naming both kinds."""
    status, response = call(
        "/jobs/validate", review({"metadata": {"name": "p"}}, group="", kind="Pod")
    )
    assert status == 200
    assert response["status"]["code"] == 400
    assert (
        "/jobs/validate admits batch.volcano.sh/Job objects, not Pod"
        in response["status"]["message"]
    )


def test_unknown_path() -> None:
    """A path no rule serves is an errored review."""
    _, response = call("/nodes/mutate", review(job_dict()))
    assert "no admission rules are served at /nodes/mutate" in response["status"]["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"spec": {"tasks": [{"replicas": "three"}]}}, "spec.tasks[0].replicas: Expected `int`"),
        ({"spec": {"plugins": {"svc": "yes"}}}, "spec.plugins[...]: Expected `array`"),
        ({"spec": "nope"}, "spec: Expected `object`"),
        ({"metadata": {"labels": {"a": 1}}}, "metadata.labels[...]: Expected `str`"),
    ],
)
def test_type_errors_name_the_field(change: dict[str, Any], field: str) -> None:
    """An object whose fields have the wrong type is refused with the field's path."""
    obj = {**job_dict(), **change}
    for path in ("/jobs/mutate", "/jobs/validate"):
        _, response = call(path, review(obj))
        assert response["allowed"] is False
        assert field in response["status"]["message"]


def test_update_and_delete_routing() -> None:
    """UPDATE checks the whitelist against oldObject; DELETE of a job is not validated."""
    old = job_dict(minAvailable=2)
    new = job_dict(minAvailable=2, queue="other")
    _, response = call("/jobs/validate", review(new, operation="UPDATE", old=old))
    assert "job updates may not change fields" in response["status"]["message"]
    _, response = call("/jobs/validate", review(None, operation="DELETE", old=old))
    assert response["allowed"] is True


def test_missing_object_is_named() -> None:
    """A CREATE without object is refused naming `object`."""
    _, response = call("/jobs/validate", review(None))
    assert response["status"]["message"].startswith("object: Required value")


def test_queue_delete_without_old_object_reads_the_cache() -> None:
    """A DELETE review without oldObject (old API servers) still protects the default queue."""
    body = review(
        None, operation="DELETE", group="scheduling.volcano.sh", version="v1beta1", kind="Queue"
    )
    body["request"]["name"] = "default"
    _, response = call("/queues/validate", body)
    assert response["status"]["message"] == "`default` queue can not be deleted"


def test_bug_in_a_rule_is_contained(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception inside a rule becomes a code-500 refusal, not a raised error; the client
    sees an error id, not the exception (the log has it under that id)."""
    admission = Admission(StaticView(), AdmissionOptions())

    def broken(*_: object) -> str:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("webhooks.review.validate_job_create", broken)
    answer = admission.review(
        "/jobs/validate", "application/json", msgspec.json.encode(review(job_dict()))
    )
    response = decode_response(answer.body)
    assert answer.status == 200
    assert response["status"]["code"] == 500
    assert "ZeroDivisionError" not in response["status"]["message"]
    assert "boom" not in response["status"]["message"]
    assert "error id" in response["status"]["message"]


def test_paths_can_be_disabled() -> None:
    """Only the enabled paths are routed."""
    admission = Admission(StaticView(), AdmissionOptions(), paths=("/pods/validate",))
    assert list(admission.routes) == ["/pods/validate"]


def test_escape_pointer() -> None:
    """JSON-pointer tokens escape ~ and / (RFC 6901)."""
    assert escape_pointer("volcano.sh/a~b") == "volcano.sh~1a~0b"
