"""Caldera's pod-template checks against the real API server's: each template of the shared
table, sent as a PodTemplate with dryRun (Kubernetes' ValidatePodTemplate, the rule Volcano's
webhook applies), is refused with exactly the field errors caldera.api.podtemplate gives."""

from __future__ import annotations

import json

import pytest

from caldera.api.podtemplate import template_errors
from caldera.kube.client import KubeClient
from caldera.kube.errors import Invalid
from unit.podtemplate_cases import CASES, Case

pytestmark = pytest.mark.e2e


async def _server_errors(kube: KubeClient, namespace: str, case: Case) -> list[str]:
    body = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "probe"},
        "template": {"spec": case.spec},
    }
    details = None
    try:
        await kube.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/podtemplates",
            params={"dryRun": "All"},
            body=json.dumps(body).encode(),
            content_type="application/json",
        )
    except Invalid as exc:
        details = exc.details
        assert details is not None, exc.message  # noqa: PT017 - a 422 must list its causes
    return sorted(f"{c.field}: {c.message}" for c in details.causes) if details else []


@pytest.mark.parametrize("case", [pytest.param(k, id=k.id) for k in CASES if k.server])
async def test_same_errors_as_the_api_server(kube: KubeClient, namespace: str, case: Case) -> None:
    """The API server refuses the template with the table's errors, and so does Caldera."""
    server = await _server_errors(kube, namespace, case)
    ours = template_errors("template", {"spec": case.spec}, numa=False, task_index=0)
    assert server == sorted(case.errors)
    assert sorted(ours) == server
