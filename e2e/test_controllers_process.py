"""``caldera controllers`` as real processes: leader election with failover, readiness before and
after sync, metrics, a clean SIGTERM, and the gc controller deleting finished Jobs."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from caldera.api.kinds import JOB
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

FAST_LEASE = ["--lease-duration=4", "--renew-deadline=3", "--retry-period=1"]


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[CalderaProcess]]:
    started: list[CalderaProcess] = []
    yield started
    for proc in started:
        proc.stop()


def _finished_job(name: str, ttl: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "ttlSecondsAfterFinished": ttl,
            "tasks": [
                {
                    "name": "t",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                }
            ],
        },
    }


async def _create_finished_job(kube: KubeClient, namespace: str, name: str, ttl: int) -> None:
    await kube.create(JOB, _finished_job(name, ttl), namespace=namespace)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {"state": {"phase": "Completed", "lastTransitionTime": now}}}
    await kube.patch_status(JOB, name, status, namespace=namespace)


async def _job_gone(api: client.ApiClient, namespace: str, name: str) -> bool:
    try:
        await client.CustomObjectsApi(api).get_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", name
        )
    except client.ApiException as exc:
        return exc.status == 404
    return False


async def _value(v: Any) -> Any:
    return v


def _leader(procs: list[CalderaProcess], lease: str) -> CalderaProcess | None:
    leaders = [
        p
        for p in procs
        if p.proc.poll() is None
        and p.metric("caldera_leader_election_master_status", {"name": lease}) == 1.0
    ]
    assert len(leaders) <= 1, "never two leaders at once"
    return leaders[0] if leaders else None


async def test_only_the_leader_reconciles_and_a_standby_takes_over(
    api: client.ApiClient,
    kube: KubeClient,
    namespace: str,
    cluster: Cluster,
    crds: Path,
    processes: list[CalderaProcess],
    tmp_path: Path,
) -> None:
    """Two processes share a Lease: one leads and deletes expired Jobs, the other only waits;
    after kill -9 of the leader the standby leads within the lease duration."""
    lease = f"caldera-e2e-{secrets.token_hex(3)}"
    args = [
        "--controllers=gc",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-id={lease}",
        *FAST_LEASE,
    ]
    for _ in range(2):
        processes.append(
            CalderaProcess("controllers", args, kubeconfig=cluster.kubeconfig, log_dir=tmp_path)
        )
    for proc in processes:
        await eventually(
            lambda: _value(proc.get("/readyz")[0] == 200),  # noqa: B023 - awaited at once
            timeout=READY_TIMEOUT,
            what="readiness",
        )
    leader = await eventually(lambda: _value(_leader(processes, lease)), what="a leader")
    standby = next(p for p in processes if p is not leader)

    await _create_finished_job(kube, namespace, "first", ttl=0)
    await eventually(lambda: _job_gone(api, namespace, "first"), what="the leader's delete")
    labels = {"controller": "gc", "result": "success"}
    assert (leader.metric("caldera_controller_reconcile_total", labels) or 0) >= 1
    assert standby.metric("caldera_controller_reconcile_total", labels) is None, (
        "the standby never reconciles"
    )
    assert (
        standby.metric("caldera_informer_objects", {"resource": "jobs.batch.volcano.sh"})
    ) is not None, "the standby keeps a warm cache"

    status, text = leader.get("/metrics")
    assert status == 200
    for family in (
        'caldera_workqueue_adds_total{name="gc"}',
        'caldera_workqueue_depth{name="gc"}',
        "caldera_workqueue_work_duration_seconds_bucket",
        'caldera_informer_events_total{resource="jobs.batch.volcano.sh"',
        'caldera_rest_client_requests_total{code="200",verb="GET"}',
        "caldera_rest_client_request_duration_seconds_bucket",
    ):
        assert family in text, f"{family} missing from /metrics"

    killed_at = time.monotonic()
    leader.kill()
    await eventually(
        lambda: _value(_leader([standby], lease)), timeout=15, interval=0.1, what="failover"
    )
    takeover = time.monotonic() - killed_at
    assert takeover <= 4 + 2, f"took over in {takeover:.1f}s, lease duration 4s (+2s polling)"
    await _create_finished_job(kube, namespace, "second", ttl=1)
    await eventually(lambda: _job_gone(api, namespace, "second"), what="the new leader's delete")
    assert (standby.metric("caldera_controller_reconcile_total", labels) or 0) >= 1

    assert standby.stop() == 0, "SIGTERM ends the process cleanly"
    log = [json.loads(line) for line in standby.log().splitlines() if line.startswith("{")]
    events = [entry["event"] for entry in log]
    assert "leadership acquired" in events
    assert events[-1] == "stopped"
    holder = (
        await client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
    ).spec.holder_identity
    assert not holder, "the Lease was released on shutdown"


async def test_not_ready_until_synced_and_missing_rights_say_why(
    api: client.ApiClient,
    namespace: str,
    cluster: Cluster,
    crds: Path,
    processes: list[CalderaProcess],
    tmp_path: Path,
) -> None:
    """With credentials that may not list Jobs, the informers never sync: /healthz is 200,
    /readyz stays 503 and names the informers; with rights it turns 200."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="ctl"))
    )
    token = (
        await core.create_namespaced_service_account_token(
            "ctl",
            namespace,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
        )
    ).status.token
    admin = json.loads(cluster.kubeconfig.read_text())
    kubeconfig = tmp_path / "sa-kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                **admin,
                "users": [{"name": "caldera-admin", "user": {"token": token}}],
            }
        )
    )
    proc = CalderaProcess(
        "controllers",
        ["--controllers=gc", "--leader-elect=false"],
        kubeconfig=kubeconfig,
        log_dir=tmp_path,
    )
    processes.append(proc)
    await eventually(lambda: _value(proc.get("/healthz")[0] == 200), what="liveness")
    await asyncio.sleep(2)
    status, body = proc.get("/readyz")
    assert status == 503
    assert "informers-synced" in body

    rbac = client.RbacAuthorizationV1Api(api)
    role_name = f"caldera-e2e-{namespace}"
    await rbac.create_cluster_role(
        client.V1ClusterRole(
            metadata=client.V1ObjectMeta(name=role_name),
            rules=[
                client.V1PolicyRule(
                    api_groups=["batch.volcano.sh"],
                    resources=["jobs"],
                    verbs=["get", "list", "watch"],
                )
            ],
        )
    )
    try:
        await rbac.create_cluster_role_binding(
            client.V1ClusterRoleBinding(
                metadata=client.V1ObjectMeta(name=role_name),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role_name
                ),
                subjects=[
                    client.RbacV1Subject(kind="ServiceAccount", name="ctl", namespace=namespace)
                ],
            )
        )
        await eventually(
            lambda: _value(proc.get("/readyz")[0] == 200), timeout=60, what="readiness after RBAC"
        )
    finally:
        await rbac.delete_cluster_role_binding(role_name)
        await rbac.delete_cluster_role(role_name)
