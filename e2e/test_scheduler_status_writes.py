"""The scheduler's status writes on the real API server (scheduler.status_writer): a Volcano
Job's PodGroup goes Inqueue (the job controller waits for it) and Running through merge patches,
never a PUT, and reads as Volcano writes it; a PodGroup whose status writes the API server
refuses holds back neither its own pod's bind nor anyone else's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import JOB, POD, PODGROUP
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError
from e2e.apiserver_metrics import request_counts
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import run_kubectl
from e2e.conftest import Cluster
from e2e.job_fixtures import in_phase, job, job_controller, task  # noqa: F401 - fixture
from e2e.kwok_tasks import gang_pod
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]
NODES = {"caldera.io/e2e": "true"}  # every kwok node of the worker's cluster


@pytest.fixture
async def scheduler(cluster: Cluster, crds: Path, tmp_path: Path) -> AsyncIterator[CalderaProcess]:
    proc = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=0.5"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )

    async def ready() -> bool:
        return proc.get("/readyz")[0] == 200

    await eventually(ready, timeout=READY_TIMEOUT, what="readiness")
    yield proc
    assert proc.stop() == 0, proc.log()[-3000:]


async def _raw(kube: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    """The PodGroup as the API server stores it (what kubectl and Volcano read)."""
    path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups/{name}"
    body: dict[str, Any] = json.loads(await kube.request("GET", path))
    return body


@pytest.mark.usefixtures("job_controller")
async def test_a_volcano_jobs_podgroup_runs_through_merge_patches(
    kube: KubeClient, namespace: str, scheduler: CalderaProcess
) -> None:
    """A Job of 2 pods: its PodGroup is enqueued (the job controller makes the pods only then)
    and runs; its status reads as Volcano writes it (phase, running, a Scheduled condition, zero
    counts absent); the scheduler wrote it with PATCH, and nothing PUT a PodGroup."""
    before = await request_counts(kube)
    await kube.create(JOB, job("merge", [task("w", 2)]), namespace=namespace)
    await eventually(
        lambda: in_phase(kube, namespace, "merge", "Running"), timeout=60, what="Job Running"
    )

    async def running_group() -> dict[str, Any] | None:
        for pg in (await kube.list(PODGROUP, namespace=namespace)).items:
            raw = await _raw(kube, namespace, pg.metadata.name)
            if raw.get("status", {}).get("running") == 2:
                return raw
        return None

    raw = await eventually(running_group, timeout=60, what="the PodGroup with 2 running")
    status = raw["status"]
    assert status["phase"] == "Running", status
    assert "succeeded" not in status, status  # omitempty, as Volcano's
    assert "failed" not in status, status
    scheduled = [c for c in status.get("conditions", []) if c["type"] == "Scheduled"]
    assert scheduled, status
    assert scheduled[-1]["status"] == "True", status
    after = await request_counts(kube)
    assert after["PATCH podgroups"] > before["PATCH podgroups"]
    assert after["PUT podgroups"] == before["PUT podgroups"], "a PodGroup was PUT"
    written = scheduler.metric(
        "caldera_status_writes_total", {"kind": "PodGroup", "result": "written"}
    )
    assert written is not None
    assert written >= 2  # Inqueue, then Running


def _refusing_policy(namespace: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy refusing every update of the PodGroup named ``refused`` in
    ``namespace`` (as the API server refuses a write to a PodGroup deleted and made again)."""
    name = f"refuse-podgroup-{namespace}"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["scheduling.volcano.sh"],
                            "apiVersions": ["*"],
                            "operations": ["UPDATE"],
                            "resources": ["podgroups"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "object.metadata.name != 'refused'",
                        "message": "podgroup refused is frozen",
                        "reason": "Invalid",
                    }
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"caldera.io/e2e": namespace}}
                },
            },
        },
    ]


def _podgroup(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": "default"},
    }


async def test_a_refused_status_write_holds_back_no_bind(
    cluster: Cluster, kube: KubeClient, namespace: str, scheduler: CalderaProcess
) -> None:
    """The API server refuses every status write of PodGroup ``refused``: its pod is bound all
    the same, and so is the pod of PodGroup ``fine``, whose status reaches Running; the refusals
    are counted, and the scheduler keeps running."""
    policy = _refusing_policy(namespace)
    items = {"apiVersion": "v1", "kind": "List", "items": policy}
    run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(items))
    try:
        await kube.create(PODGROUP, _podgroup("refused"), namespace=namespace)

        async def in_force() -> bool:
            try:
                await kube.patch(
                    PODGROUP, "refused", {"metadata": {"labels": {"probe": "1"}}},
                    namespace=namespace,
                )  # fmt: skip
            except ApiError as exc:
                return "podgroup refused is frozen" in exc.message
            return False

        await eventually(in_force, timeout=30, what="the ValidatingAdmissionPolicy")
        await kube.create(PODGROUP, _podgroup("fine"), namespace=namespace)
        for name, group in (("r-0", "refused"), ("f-0", "fine")):
            await kube.create(POD, gang_pod(name, group, "100m", NODES), namespace=namespace)

        async def both_bound() -> list[str] | None:
            pods = (await kube.list(POD, namespace=namespace)).items
            bound = sorted(p.metadata.name for p in pods if p.spec.node_name)
            return bound if bound == ["f-0", "r-0"] else None

        await eventually(both_bound, timeout=30, what="both pods bound")

        async def fine_running() -> bool:
            pg = await kube.get(PODGROUP, "fine", namespace=namespace)
            return pg.status.phase == "Running"

        await eventually(fine_running, timeout=30, what="PodGroup fine Running")

        async def refusals() -> float | None:
            labels = {"kind": "PodGroup", "result": "refused"}
            return scheduler.metric("caldera_status_writes_total", labels) or None

        assert await eventually(refusals, timeout=30, what="a refused write counted") >= 1
        # (It may have been enqueued before the policy was in force, but never runs.)
        refused = await kube.get(PODGROUP, "refused", namespace=namespace)
        assert refused.status.phase != "Running", "the refused status was written"
        assert scheduler.proc.poll() is None, scheduler.log()[-3000:]
    finally:
        for obj in reversed(policy):
            run_kubectl(
                cluster.kubeconfig, "delete", obj["kind"].lower(), obj["metadata"]["name"],
                "--ignore-not-found",
            )  # fmt: skip
