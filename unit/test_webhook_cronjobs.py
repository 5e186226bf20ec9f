"""CronJob admission (webhooks.cronjobs, /cronjobs/validate): one row per refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.api.volcano import CronJob
from unit.webhook_fixtures import task
from webhooks.cronjobs import validate_cronjob
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": "0 2 * * *",
        "jobTemplate": {"spec": {"tasks": [task("train", 2)]}},
    }
    body.update(spec)
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": body,
    }


def check(data: dict[str, Any]) -> str:
    return validate_cronjob(msgspec.convert(data, CronJob), scheduler_name="volcano")


def test_a_good_cronjob_is_admitted() -> None:
    """A valid schedule, zone and template: no message; the template's missing task names and
    defaults are filled in as the Job webhook would before the job rules run."""
    assert check(cronjob(timeZone="Europe/Paris", concurrencyPolicy="Forbid")) == ""
    unnamed = cronjob(jobTemplate={"spec": {"tasks": [task("", 1)]}})
    assert check(unnamed) == ""
    assert check(cronjob(schedule="@weekly")) == ""


# (spec changes, the message); e2e/test_webhook.py sends each through the API server.
CRONJOB_RULES: list[tuple[dict[str, Any], str]] = [
    ({"schedule": ""}, "spec.schedule: schedule is required, but got empty"),
    (
        {"schedule": "TZ=UTC 0 * * * *"},
        "spec.schedule: schedule should not contain TZ or CRON_TZ, TZ should only be set "
        "in the timeZone field",
    ),
    (
        {"schedule": "61 * * * *"},
        "spec.schedule: schedule is not a valid cron expression: minute: end of range (61) "
        "above 59",
    ),
    ({"schedule": "0 0 30 2 *"}, "spec.schedule: '0 0 30 2 *' never fires"),
    ({"timeZone": ""}, "spec.timeZone: timeZone must be nil or non-empty string"),
    ({"timeZone": "Local"}, "spec.timeZone: timeZone can't be Local"),
    ({"timeZone": "Mars/Olympus"}, "spec.timeZone: invalid timeZone 'Mars/Olympus'"),
    (
        {"startingDeadlineSeconds": -1},
        "spec.startingDeadlineSeconds: must be greater than or equal to 0",
    ),
    (
        {"successfulJobsHistoryLimit": -1},
        "spec.successfulJobsHistoryLimit: must be greater than or equal to 0",
    ),
    (
        {"failedJobsHistoryLimit": -2},
        "spec.failedJobsHistoryLimit: must be greater than or equal to 0",
    ),
    (
        {"concurrencyPolicy": "Sometimes"},
        'spec.concurrencyPolicy: Unsupported value: "Sometimes"',
    ),
    (
        {"jobTemplate": {"spec": {"tasks": [task("t", 1, minAvailable=3)]}}},
        "spec.jobTemplate: spec.tasks[0].minAvailable: 'minAvailable' is greater than "
        "'replicas' in task: t",
    ),
    (
        {"jobTemplate": {"spec": {"tasks": []}}},
        "spec.jobTemplate: spec.tasks: No task specified in job spec",
    ),
    (
        {"jobTemplate": {"spec": {"tasks": [task("t", 1)], "plugins": {"nope": []}}}},
        "spec.jobTemplate: spec.plugins: unable to find job plugin: nope",
    ),
]


@pytest.mark.parametrize(("changes", "message"), CRONJOB_RULES)
def test_refusals(changes: dict[str, Any], message: str) -> None:
    """Each rule refuses with a message that starts with its field."""
    got = check(cronjob(**changes))
    assert message in got, got


def test_name_length_and_form() -> None:
    """The name leaves room for `-<Unix minutes>` and is a qualified name."""
    assert "cronJob name must be" not in check(cronjob("n" * 52))
    assert check(cronjob("n" * 53)) == (
        "metadata.name: cronJob name must be no more than 52 characters to accommodate job "
        "name suffix (max 63 total)"
    )
    assert check(cronjob("bad_name!")).startswith('metadata.name: invalid cronJob name "bad_name!"')


def test_pod_names_of_the_template_are_checked_under_the_jobs_name() -> None:
    """A task name that makes `<cronjob>-<minutes>-<task>-<index>` too long is refused."""
    long_task = cronjob("n" * 40, jobTemplate={"spec": {"tasks": [task("t" * 20, 1)]}})
    assert "create pod with name" in check(long_task)


def test_several_problems_are_joined() -> None:
    """Messages are joined with "; "."""
    got = check(cronjob(schedule="", timeZone="Local"))
    assert got.count("; ") == 1


def test_queue_of_the_template_is_not_looked_up() -> None:
    """The queue is checked per Job at creation, not when the CronJob is written."""
    body = cronjob(jobTemplate={"spec": {"queue": "later", "tasks": [task("t", 1)]}})
    assert check(body) == ""


def test_route_serves_create_and_update() -> None:
    """/cronjobs/validate answers a CREATE review with the refusal and lets DELETE pass."""
    admission = Admission(StaticView(), AdmissionOptions())

    def review(operation: str, obj: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "CronJob"},
                "operation": operation,
                "namespace": "ns",
                "object": obj,
            },
        }
        answer = admission.review(
            "/cronjobs/validate", "application/json", msgspec.json.encode(body)
        )
        return decode_response(answer.body)

    refused = review("UPDATE", cronjob(schedule="nope"))
    assert not refused["allowed"]
    assert refused["status"]["message"].startswith("spec.schedule:")
    assert review("CREATE", cronjob())["allowed"]
    assert review("DELETE", cronjob(schedule="nope"))["allowed"]
