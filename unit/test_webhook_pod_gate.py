"""/pods/mutate: with SchedulingGatesQueueAdmission on, a new pod of Caldera's scheduler that
opts in with scheduling.volcano.sh/queue-allocation-gate: "true" gets the gate of that name
(Volcano v1.15's mutate_pod.go); otherwise the pod is admitted unchanged."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from caldera.api.volcano import QUEUE_ALLOCATION_GATE
from unit.webhook_fixtures import review
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView


def pod(scheduler: str = "volcano", opted_in: bool = True, **spec: Any) -> dict[str, Any]:
    annotations = {QUEUE_ALLOCATION_GATE: "true"} if opted_in else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c"}], **spec},
    }


def mutate(obj: dict[str, Any], *, feature: bool = True, operation: str = "CREATE") -> Any:
    admission = Admission(StaticView(), AdmissionOptions(queue_admission_gates=feature))
    body = review(obj, group="", version="v1", kind="Pod", operation=operation)
    answer = admission.review("/pods/mutate", "application/json", json.dumps(body).encode())
    response = decode_response(answer.body)
    assert response["allowed"] is True
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else None


def test_an_opted_in_pod_gets_the_gate() -> None:
    assert mutate(pod()) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": QUEUE_ALLOCATION_GATE}]}
    ]


def test_the_gate_is_appended_to_other_gates() -> None:
    patch = mutate(pod(schedulingGates=[{"name": "example.com/x"}]))
    assert patch == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": QUEUE_ALLOCATION_GATE}}
    ]


@pytest.mark.parametrize(
    ("obj", "feature", "operation"),
    [
        pytest.param(pod(), False, "CREATE", id="feature-off"),
        pytest.param(pod(opted_in=False), True, "CREATE", id="not-opted-in"),
        pytest.param(pod(scheduler="default-scheduler"), True, "CREATE", id="other-scheduler"),
        pytest.param(
            pod(schedulingGates=[{"name": QUEUE_ALLOCATION_GATE}]), True, "CREATE", id="has-it"
        ),
        pytest.param(pod(), True, "UPDATE", id="not-a-create"),
    ],
)
def test_pods_left_unchanged(obj: dict[str, Any], feature: bool, operation: str) -> None:
    assert mutate(obj, feature=feature, operation=operation) in (None, [])
