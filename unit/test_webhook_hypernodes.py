"""HyperNode admission (webhooks.hypernodes, /hypernodes/validate): one row per refusal."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.api.topology import HyperNode
from unit.topology_fixtures import exact, hypernode
from webhooks.hypernodes import validate_hypernode
from webhooks.review import Admission, AdmissionOptions, decode_response
from webhooks.view import StaticView

EXISTING = [
    hypernode("r0", 1, [exact("Node", "n0")]),
    hypernode("s0", 2, [exact("HyperNode", "r0")]),
]


def hn(members: list[dict[str, Any]], name: str = "r9", tier: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


def check(body: dict[str, Any]) -> str:
    return validate_hypernode(
        msgspec.convert(body, HyperNode, strict=False), StaticView(hypernodes=EXISTING)
    )


@pytest.mark.parametrize(
    ("members", "name", "expected"),
    [
        ([], "r9", "spec.members: Invalid value: []: member must have at least one member"),
        (
            [{"type": "Node", "selector": {}}],
            "r9",
            "spec.members[0].selector: Invalid value: {}: member selector must have one of "
            "exactMatch, regexMatch, or labelMatch",
        ),
        (
            [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n.*"}},
                }
            ],
            "r9",
            "cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)",
        ),
        (
            [{"type": "Node", "selector": {"exactMatch": {"name": ""}}}],
            "r9",
            'spec.members[0].selector.exactMatch.name: Invalid value: "": '
            "member exactMatch name is required",
        ),
        (
            [{"type": "Node", "selector": {"regexMatch": {"pattern": "node-["}}}],
            "r9",
            'spec.members[0].selector.regexMatch.pattern: Invalid value: "node-[": '
            "member regexMatch pattern is invalid:",
        ),
        (
            [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}}],
            "r0",
            'spec.members: Invalid value: "r0": hypernode member cycle: r0 -> s0 -> r0',
        ),
    ],
)
def test_refusals_name_the_field(members: list[dict[str, Any]], name: str, expected: str) -> None:
    """Each rule's message names the field and says what to fix."""
    assert expected in check(hn(members, name))


@pytest.mark.parametrize(
    "members",
    [
        [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}],
        [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}}],
        [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "a"}}}}],
        [{"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}}],
    ],
)
def test_valid_hypernodes_pass(members: list[dict[str, Any]]) -> None:
    """A new tier-3 HyperNode over s0 closes no cycle."""
    assert check(hn(members, "z0", 3)) == ""


def test_route_serves_create_and_update() -> None:
    """/hypernodes/validate refuses a bad UPDATE, admits a good CREATE, lets DELETE pass."""
    admission = Admission(StaticView(hypernodes=EXISTING), AdmissionOptions())

    def review(operation: str, obj: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {
                    "group": "topology.volcano.sh",
                    "version": "v1alpha1",
                    "kind": "HyperNode",
                },
                "operation": operation,
                "object": obj,
            },
        }
        answer = admission.review(
            "/hypernodes/validate", "application/json", msgspec.json.encode(body)
        )
        return decode_response(answer.body)

    bad = hn([{"type": "Node", "selector": {}}])
    refused = review("UPDATE", bad)
    assert not refused["allowed"]
    assert refused["status"]["message"].startswith("spec.members[0].selector:")
    assert review("CREATE", hn([{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}]))[
        "allowed"
    ]
    assert review("DELETE", bad)["allowed"]
