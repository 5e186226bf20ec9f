"""Queue admission gates (Volcano v1.15 SchedulingGatesQueueAdmission) on the real API server
with kwok nodes: ``caldera webhook`` (``/pods/mutate``) gives pods annotated
``scheduling.volcano.sh/queue-allocation-gate: "true"`` the gate of that name, and ``caldera
scheduler`` removes it once their queue takes them. A queue at its capability keeps its other
pods gated, with the API server's ``SchedulingGated`` condition and never ``Unschedulable`` (so
a cluster autoscaler does not scale up for them), and the PodGroup's wait record names the
queue; raising the capability lets them through, ungated and bound.

The webhook configuration matches only the experiment's namespace, so no other test's pod goes
through this webhook.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import POD, PODGROUP, QUEUE
from caldera.api.volcano import QUEUE_ALLOCATION_GATE, PodGroup
from caldera.api.why import WHY_ANNOTATION, decode_record
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import free_port
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.test_scheduler_experiments import Experiment, _ready
from e2e.test_scheduler_experiments import exp as exp  # fixture
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
FEATURE = "--feature-gates=SchedulingGatesQueueAdmission=true"
CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
"""


@pytest.fixture
async def gating_webhook(
    cluster: Cluster,
    exp: Experiment,
    tmp_path: Path,
) -> AsyncIterator[CalderaProcess]:
    """``caldera webhook`` serving only /pods/mutate with the feature on, registered for the
    experiment's namespace."""
    assert cluster.plane is not None  # exp skips otherwise
    crt, key = write_serving_pair(cluster.plane.pki, tmp_path / "tls", ["127.0.0.1"])
    port = free_port()
    proc = CalderaProcess(
        "webhook",
        [
            f"--port={port}",
            f"--tls-cert-file={crt}",
            f"--tls-key-file={key}",
            "--enabled-admission=/pods/mutate",
            FEATURE,
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    name = f"caldera-e2e-gate-{exp.namespace}"
    ca = base64.b64encode(cluster.plane.pki.ca_crt.read_bytes()).decode()
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "mutatepod.volcano.sh",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": f"https://127.0.0.1:{port}/pods/mutate", "caBundle": ca},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": exp.namespace}
                },
            }
        ],
    }
    try:
        await eventually(lambda: _ready(proc), timeout=30, what="webhook readiness")
        await exp.kube.request("POST", CONFIGS, body=json.dumps(config).encode())

        async def effective() -> bool:
            body = opted_in(exp.pod_body("probe", None))
            made = await exp.kube.request(
                "POST",
                f"/api/v1/namespaces/{exp.namespace}/pods",
                params={"dryRun": "All"},
                body=json.dumps(body).encode(),
            )
            return QUEUE_ALLOCATION_GATE in json.loads(made)["spec"].get("schedulingGates", [{}])[
                0
            ].get("name", "")

        await eventually(effective, timeout=30, what="the API server to call the webhook")
        yield proc
    finally:
        with contextlib.suppress(NotFound):
            await exp.kube.request("DELETE", f"{CONFIGS}/{name}")
        code = proc.stop()
        assert code == 0, f"webhook exited with {code}:\n{proc.log()[-3000:]}"


def opted_in(body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["annotations"][QUEUE_ALLOCATION_GATE] = "true"
    return body


async def _scheduled_reasons(exp: Experiment) -> dict[str, str]:
    """Each pod's PodScheduled condition reason ("" without one), read raw: the slim pod model
    keeps no condition reasons."""
    raw = await exp.kube.request("GET", f"/api/v1/namespaces/{exp.namespace}/pods")
    reasons = {}
    for item in json.loads(raw)["items"]:
        found = [
            c.get("reason", "")
            for c in item.get("status", {}).get("conditions", [])
            if c.get("type") == "PodScheduled"
        ]
        reasons[item["metadata"]["name"]] = found[0] if found else ""
    return reasons


async def _pods(exp: Experiment) -> dict[str, Pod]:
    return {p.metadata.name: p for p in (await exp.kube.list(POD, namespace=exp.namespace)).items}


async def test_a_full_queue_keeps_its_pods_gated_until_it_has_room(
    exp: Experiment,
    gating_webhook: CalderaProcess,
) -> None:
    """Queue capability 2 cpu, four opted-in 1-cpu pods in two groups: the webhook gates all
    four; the scheduler ungates and binds the first two; the other two keep the gate, with the
    API server's SchedulingGated condition and no Unschedulable one, and their PodGroup says
    "queue admission gate: queue ... at capability"; with capability 4 they are ungated and
    bound."""
    exp.make_nodes(1, 8)
    queue = await exp.make_queue("gated", capability={"cpu": "2"}, deserved={"cpu": "2"})
    for group in ("first", "second"):
        await exp.podgroup(group, 1, queue=queue)
    for name, group in (("first-0", "first"), ("first-1", "first")):
        await exp.kube.create(POD, opted_in(exp.pod_body(name, group)), namespace=exp.namespace)
    created = await _pods(exp)
    assert all(
        [g.name for g in pod.spec.scheduling_gates] == [QUEUE_ALLOCATION_GATE]
        for pod in created.values()
    )
    scheduler = exp.scheduler(CONF, FEATURE)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def first_bound() -> bool:
        return set(await exp.placed()) == {"first-0", "first-1"}

    await eventually(first_bound, timeout=60, what="the first group ungated and bound")
    for name, group in (("second-0", "second"), ("second-1", "second")):
        await exp.kube.create(POD, opted_in(exp.pod_body(name, group)), namespace=exp.namespace)

    async def explained() -> bool:
        pg: PodGroup = await exp.kube.get(PODGROUP, "second", namespace=exp.namespace)
        record = decode_record(pg.metadata.annotations.get(WHY_ANNOTATION))
        return record is not None and record.summary == (
            f"queue admission gate: queue {queue} at capability"
        )

    await eventually(explained, timeout=60, what="the wait record naming the queue")
    await exp.settle(lambda: _scheduled_reasons(exp), 2)  # sessions go on: nothing changes
    pods, reasons = await _pods(exp), await _scheduled_reasons(exp)
    for name in ("second-0", "second-1"):
        assert [g.name for g in pods[name].spec.scheduling_gates] == [QUEUE_ALLOCATION_GATE]
        assert not pods[name].spec.node_name
        assert reasons[name] == "SchedulingGated"

    await exp.kube.patch(QUEUE, queue, {"spec": {"capability": {"cpu": "4"}}})

    async def all_bound() -> bool:
        return set(await exp.placed()) == {"first-0", "first-1", "second-0", "second-1"}

    await eventually(all_bound, timeout=60, what="the second group ungated and bound")
    pods = await _pods(exp)
    assert all(not pod.spec.scheduling_gates for pod in pods.values())
    assert "Unschedulable" not in (await _scheduled_reasons(exp)).values()
