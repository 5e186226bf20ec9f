"""JobFlow admission (webhooks.jobflows, /jobflows/validate): one row per refusal, warnings."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from caldera.api.flow import JobFlow
from webhooks.jobflows import review_jobflow
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView


def jobflow(
    name: str = "pipe", flows: list[dict[str, Any]] | None = None, **spec: Any
) -> dict[str, Any]:
    if flows is None:
        flows = [
            {"name": "preprocess"},
            {"name": "train", "dependsOn": {"targets": ["preprocess"]}},
            {"name": "evaluate", "dependsOn": {"targets": ["train"]}},
        ]
    return {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"flows": flows, **spec},
    }


def waits(name: str, *targets: str) -> dict[str, Any]:
    return {"name": name, "dependsOn": {"targets": list(targets)}}


def check(data: dict[str, Any]) -> str:
    return review_jobflow(msgspec.convert(data, JobFlow)).message


def test_good_flows_are_admitted() -> None:
    """A chain, a diamond, repeated names, no flows at all, a target listed by several flows:
    all admitted, as Volcano admits them."""
    assert check(jobflow()) == ""
    diamond = [{"name": "a"}, waits("b", "a"), waits("c", "a"), waits("d", "b", "c")]
    assert check(jobflow(flows=diamond)) == ""
    assert check(jobflow(flows=[{"name": "a"}, {"name": "a"}, waits("b", "a")])) == ""
    assert check(jobflow(flows=[])) == ""
    assert check(jobflow(jobRetainPolicy="delete")) == ""


# (flows or spec, the message); e2e/test_webhook.py sends each through the API server.
JOBFLOW_RULES: list[tuple[dict[str, Any], str]] = [
    (
        {"flows": [{"name": "a"}, waits("b", "a", "x")]},
        "jobflow Flow is not DAG: vertex is not defined: x (spec.flows[1].dependsOn.targets[1])",
    ),
    (
        {"flows": [waits("a", "a")]},
        "jobflow Flow is not DAG: the dependencies form a cycle: a -> a "
        "(spec.flows[].dependsOn.targets, where a -> b means a waits for b)",
    ),
    (
        {"flows": [{"name": "s"}, waits("a", "s", "c"), waits("b", "a"), waits("c", "b")]},
        "jobflow Flow is not DAG: the dependencies form a cycle: a -> c -> b -> a "
        "(spec.flows[].dependsOn.targets, where a -> b means a waits for b)",
    ),
    (
        {"flows": [{"name": "a"}], "jobRetainPolicy": "keep"},
        'spec.jobRetainPolicy: Unsupported value: "keep": supported values: "retain", "delete"',
    ),
    (
        {"flows": [{"name": ""}]},
        "spec.flows[0].name: Required value: the name of a JobTemplate",
    ),
    (
        {"flows": [{"name": "Train"}]},
        'spec.flows[0].name: Invalid value: "Train": a JobTemplate name: [a lowercase RFC 1123 '
        "subdomain must consist of",
    ),
    (
        {"flows": [{"name": "t" * 61}]},
        f'spec.flows[0].name: Invalid value: "{"t" * 61}": its Jobs\' label '
        "volcano.sh/createdByJobTemplate=",  # then <namespace>.<name>, its length, the limit
    ),
]


@pytest.mark.parametrize(
    ("changes", "message"), [pytest.param(c, m, id=m[:60]) for c, m in JOBFLOW_RULES]
)
def test_each_rule_refuses_with_its_message(changes: dict[str, Any], message: str) -> None:
    """Each bad JobFlow is refused with a message that starts by naming the problem."""
    body = jobflow()
    body["spec"] = copy.deepcopy(changes)
    assert check(body).startswith(message)


def test_a_long_flow_name_would_make_the_template_label_too_long() -> None:
    """``<namespace>.<flow name>`` must fit a label value: the message gives both lengths."""
    assert check(jobflow(flows=[{"name": "t" * 60}])) == ""
    assert check(jobflow(flows=[{"name": "t" * 61}])) == (
        f'spec.flows[0].name: Invalid value: "{"t" * 61}": its Jobs\' label '
        f"volcano.sh/createdByJobTemplate=ns.{'t' * 61} would be 64 characters, more than the 63 "
        "a label value may have"
    )


def test_a_long_jobflow_name_would_make_a_label_too_long() -> None:
    """``<namespace>.<name>`` of the JobFlow must fit a label value."""
    assert check(jobflow("p" * 60)) == ""
    got = check(jobflow("p" * 61))
    assert got.startswith(f'metadata.name: Invalid value: "{"p" * 61}": its Jobs\' label ')
    assert "volcano.sh/createdByJobFlow" in got


def test_every_undefined_target_and_the_cycle_are_reported_together() -> None:
    """Volcano stops at its first finding; Caldera lists each, joined with "; "."""
    flows = [waits("a", "b", "x"), waits("b", "a", "y")]
    got = check(jobflow(flows=flows)).split("; ")
    assert got[0].endswith("vertex is not defined: x (spec.flows[0].dependsOn.targets[1])")
    assert got[1].endswith("vertex is not defined: y (spec.flows[1].dependsOn.targets[1])")
    assert "the dependencies form a cycle: a -> b -> a" in got[2]
    assert all(part.startswith("jobflow Flow is not DAG") for part in got)


def test_probes_and_patches_are_admitted_with_warnings() -> None:
    """Nothing acts on them, so the user is told, not refused."""
    flows: list[dict[str, Any]] = [
        {"name": "a"},
        {
            "name": "b",
            "dependsOn": {"targets": ["a"], "probe": {"tcpSocketList": [{"port": 22}]}},
            "patch": {"jobSpec": {"queue": "q"}},
        },
    ]
    review = review_jobflow(msgspec.convert(jobflow(flows=flows), JobFlow))
    assert review.message == ""
    assert len(review.warnings) == 2
    assert review.warnings[0].startswith("spec.flows[1].dependsOn.probe: not acted on")
    assert review.warnings[1].startswith("spec.flows[1].patch: not applied")
    assert review_jobflow(msgspec.convert(jobflow(), JobFlow)).warnings == ()


def _review(operation: str, obj: dict[str, Any]) -> dict[str, Any]:
    admission = Admission(StaticView(), AdmissionOptions())
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "flow.volcano.sh", "version": "v1alpha1", "kind": "JobFlow"},
            "operation": operation,
            "namespace": "ns",
            "object": obj,
        },
    }
    answer = admission.review("/jobflows/validate", "application/json", msgspec.json.encode(body))
    return decode_response(answer.body)


def test_route_serves_create_and_update_with_warnings() -> None:
    """/jobflows/validate refuses a cycle on UPDATE, admits a good flow on CREATE with the
    warnings in the response, and lets DELETE pass."""
    cyclic = jobflow(flows=[waits("a", "b"), waits("b", "a")])
    refused = _review("UPDATE", cyclic)
    assert not refused["allowed"]
    assert refused["status"]["message"].startswith("jobflow Flow is not DAG: ")
    assert refused["status"]["code"] == 403
    assert "warnings" not in refused
    probed = jobflow(flows=[{"name": "a", "dependsOn": {"probe": {}}}])
    admitted = _review("CREATE", probed)
    assert admitted["allowed"]
    assert admitted["warnings"] == [
        "spec.flows[0].dependsOn.probe: not acted on (nor by Volcano): the flow waits for its "
        "targets only"
    ]
    assert "warnings" not in _review("CREATE", jobflow())
    assert _review("DELETE", cyclic)["allowed"]


def test_the_namespace_of_the_request_fills_a_missing_one() -> None:
    """A body without metadata.namespace is checked in the request's namespace (the label
    value counts its length)."""
    body = jobflow("p" * 61)
    del body["metadata"]["namespace"]
    refused = _review("CREATE", body)
    assert f"ns.{'p' * 61}" in refused["status"]["message"]
