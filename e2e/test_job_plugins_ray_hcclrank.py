"""The ray and hcclrank job plugins on the real API server: what a Job with them gets (Volcano's
commands, ports, Service and annotations), that the Service goes with the Job, and that a
namesake Service is never the Job's. Refusals at admission are rows of
unit/test_webhook_jobs.py's CREATE_RULES, which e2e/test_webhook.py sends through the webhook."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from caldera.api.kinds import EVENT, JOB, POD, PODGROUP, SERVICE, KindInfo
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from caldera.kube.requests import PropagationPolicy
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    RUN_FOR,
    in_phase,
    job,
    job_controller,
    pods_of,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("job_controller", "scheduled")]

# The garbage collector of a freshly started control plane acts on objects owned by a custom
# resource only after its next discovery resync (every 30 s) has found the CRD.
GC_WAIT = 90


async def _raw(kube: KubeClient, path: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(await kube.request("GET", path))
    return raw


async def _absent(kube: KubeClient, ns: str, objects: list[tuple[KindInfo[Any], str]]) -> bool:
    for kind, name in objects:
        try:
            await kube.get(kind, name, namespace=ns)
        except NotFound:
            continue
        return False
    return True


def _ray_job(name: str) -> dict[str, Any]:
    """Volcano's Ray example: one head, two workers, `ray: []` (the svc plugin comes with it)."""
    body = job(name, [task("head", 1, run_for="1h"), task("worker", 2, run_for="1h")])
    body["spec"]["plugins"] = {"ray": []}
    return body


async def test_ray_job_gets_volcanos_commands_ports_and_service(
    kube: KubeClient, namespace: str
) -> None:
    """The head runs `ray start --head ...` with ports gcs/dashboard/client-server, the workers
    `ray start --block --address=<head>:6379`; Service `<job>-head-svc` selects the head by
    task and carries the three ports, owned by the Job (its uid, as controller); deleting the
    Job (Foreground) removes it with the pods and the PodGroup."""
    name = "rc"
    await kube.create(JOB, _ray_job(name), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, name, 3), timeout=60, what="3 pods")
    running = await eventually(lambda: in_phase(kube, namespace, name, "Running"), timeout=60)
    assert running.status.controlled_resources.get("plugin-ray") == "ray"

    pods = f"/api/v1/namespaces/{namespace}/pods"
    head = (await _raw(kube, f"{pods}/{name}-head-0"))["spec"]["containers"][0]
    assert head["command"] == [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 "
        "--ray-client-server-port=10001",
    ]
    assert [(p["name"], p["containerPort"]) for p in head["ports"]] == [
        ("gcs", 6379),
        ("dashboard", 8265),
        ("client-server", 10001),
    ]
    for i in range(2):
        worker = (await _raw(kube, f"{pods}/{name}-worker-{i}"))["spec"]["containers"][0]
        assert worker["command"] == [
            "sh",
            "-c",
            f"ray start --block --address={name}-head-0.{name}:6379",
        ]

    service = await _raw(kube, f"/api/v1/namespaces/{namespace}/services/{name}-head-svc")
    spec = service["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["clusterIP"] not in ("", "None")
    assert spec["selector"] == {
        "volcano.sh/job-name": name,
        "volcano.sh/job-namespace": namespace,
        "volcano.sh/task-spec": "head",
    }
    assert [(p["name"], p["port"], p["targetPort"], p["protocol"]) for p in spec["ports"]] == [
        ("gcs", 6379, "gcs", "TCP"),
        ("dashboard", 8265, "dashboard", "TCP"),
        ("client-server", 10001, "client-server", "TCP"),
    ]
    (owner,) = service["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", running.metadata.uid, True)
    await kube.get(SERVICE, name, namespace=namespace)  # svc's headless Service, brought by ray

    await kube.delete(
        JOB, name, namespace=namespace, propagation_policy=PropagationPolicy.FOREGROUND
    )
    gone: list[tuple[KindInfo[Any], str]] = [
        (JOB, name),
        (SERVICE, f"{name}-head-svc"),
        (SERVICE, name),
        (PODGROUP, f"{name}-{running.metadata.uid}"),
        (POD, f"{name}-head-0"),
    ]
    await eventually(lambda: _absent(kube, namespace, gone), timeout=GC_WAIT, what="all gone")


async def test_a_namesake_head_service_is_left_alone(kube: KubeClient, namespace: str) -> None:
    """A Service `<job>-head-svc` someone else made is not the Job's: a Warning PluginError
    names it, no pod is made, and the Service is neither changed nor deleted."""
    name = "rn"
    theirs = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-head-svc"},
        "spec": {"selector": {"app": "mine"}, "ports": [{"name": "web", "port": 80}]},
    }
    await kube.create(SERVICE, theirs, namespace=namespace)
    path = f"/api/v1/namespaces/{namespace}/services/{name}-head-svc"
    before = (await _raw(kube, path))["metadata"]["resourceVersion"]
    await kube.create(JOB, _ray_job(name), namespace=namespace)

    async def clash() -> list[str] | None:
        events = await kube.list(EVENT, namespace=namespace)
        found = [
            e.message
            for e in events.items
            if e.involved_object.name == name and e.reason == "PluginError"
        ]
        return [
            m for m in found if f"Service/{name}-head-svc exists and is not controlled" in m
        ] or None

    await eventually(clash, timeout=30, what="a PluginError naming the Service")
    await asyncio.sleep(2)  # a few syncs
    assert await pods_of(kube, namespace, name) == {}
    await kube.delete(
        JOB, name, namespace=namespace, propagation_policy=PropagationPolicy.FOREGROUND
    )
    await eventually(
        lambda: _absent(kube, namespace, [(JOB, name)]), timeout=GC_WAIT, what="job gone"
    )
    after = await _raw(kube, path)
    assert after["metadata"]["resourceVersion"] == before
    assert "ownerReferences" not in after["metadata"]


async def test_hcclrank_annotates_every_rank(kube: KubeClient, namespace: str) -> None:
    """Masters get `hccl/rankIndex` = their index, workers the master replicas plus theirs;
    a pod of another task gets none; the Job records no plugin-hcclrank resource."""
    name = "hc"
    body = job(
        name,
        [
            task("master", 2, run_for="1h"),
            task("worker", 2, run_for="1h"),
            task("mon", 1, run_for="1h"),
        ],
    )
    body["spec"]["plugins"] = {"hcclrank": []}
    await kube.create(JOB, body, namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, name, 5), timeout=60, what="5 pods")
    pods = await pods_of(kube, namespace, name)
    ranks = {n: p.metadata.annotations.get("hccl/rankIndex") for n, p in pods.items()}
    assert ranks == {
        f"{name}-master-0": "0",
        f"{name}-master-1": "1",
        f"{name}-worker-0": "2",
        f"{name}-worker-1": "3",
        f"{name}-mon-0": None,
    }
    running = await eventually(lambda: in_phase(kube, namespace, name, "Running"), timeout=60)
    assert "plugin-hcclrank" not in running.status.controlled_resources
