"""Job plugins and PVC templates on the real API server: Volcano's MPI example with its ssh, svc
(and mpi) plugins, and Caldera's ``tasks[].volumeClaimTemplates`` (docs/compatibility.md,
"What Caldera adds"): what they create, what pods see, and that it all goes with the Job."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from caldera.api.kinds import (
    CONFIGMAP,
    EVENT,
    JOB,
    NETWORK_POLICY,
    POD,
    PODGROUP,
    PVC,
    SECRET,
    SERVICE,
    KindInfo,
)
from caldera.api.meta import parse_time
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from caldera.kube.requests import PropagationPolicy
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    RUN_FOR,
    get_pod,
    in_phase,
    job,
    job_controller,
    pods_of,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually
from unit.examples import EXAMPLES

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("job_controller", "scheduled")]

MPI = "lm-mpi-job"
# The garbage collector of a freshly started control plane acts on objects owned by a custom
# resource only after its next discovery resync (every 30 s) has found the CRD.
GC_WAIT = 90


def _mpi_job() -> dict[str, Any]:
    """Volcano's MPI example (ssh and svc plugins, a master with TaskCompleted → CompleteJob and
    two workers), plus the mpi plugin with the example's task names; kwok pods run until
    deleted."""
    text = (EXAMPLES / "integrations_mpi_mpi-example.yaml").read_text()
    raw: dict[str, Any] = next(d for d in yaml.safe_load_all(text) if d)
    raw["spec"]["plugins"]["mpi"] = ["--master=mpimaster", "--worker=mpiworker"]
    for t in raw["spec"]["tasks"]:
        t["template"].setdefault("metadata", {})["annotations"] = {RUN_FOR: "1s"}
    return raw


async def _raw_pod(kube: KubeClient, ns: str, name: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(
        await kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    )
    return raw


async def _absent(kube: KubeClient, ns: str, kind: KindInfo[Any], name: str) -> bool:
    try:
        await kube.get(kind, name, namespace=ns)
    except NotFound:
        return True
    return False


async def _all_absent(kube: KubeClient, ns: str, objects: list[tuple[KindInfo[Any], str]]) -> bool:
    for kind, name in objects:
        if not await _absent(kube, ns, kind, name):
            return False
    return True


async def test_mpi_job_plugins_and_cleanup(kube: KubeClient, namespace: str) -> None:
    """The MPI example runs: the master gets MPI_HOST (the workers' host names) and the svc
    ConfigMap mounted at /etc/volcano (mpiworker.host lists the workers), the ssh Secret mounted
    at /root/.ssh; the Secret, Service, ConfigMap and NetworkPolicy exist; deleting the Job
    (Foreground) removes all of them with the pods and the PodGroup."""
    await kube.create(JOB, _mpi_job(), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, MPI, 3), timeout=60, what="3 pods")
    running = await eventually(lambda: in_phase(kube, namespace, MPI, "Running"), timeout=60)

    master = await _raw_pod(kube, namespace, f"{MPI}-mpimaster-0")
    container = master["spec"]["containers"][0]
    env = {e["name"]: e for e in container.get("env", [])}
    workers = [f"{MPI}-mpiworker-{i}.{MPI}" for i in range(2)]
    assert env["MPI_HOST"]["value"] == ",".join(workers)
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in master["spec"]["volumes"]}
    assert volumes[mounts["/etc/volcano"]]["configMap"]["name"] == f"{MPI}-svc"
    assert volumes[mounts["/root/.ssh"]]["secret"]["secretName"] == f"{MPI}-ssh"
    assert master["spec"]["hostname"] == f"{MPI}-mpimaster-0"
    assert master["spec"]["subdomain"] == MPI

    cm = await kube.get(CONFIGMAP, f"{MPI}-svc", namespace=namespace)
    assert cm.data["mpiworker.host"].split("\n") == workers
    secret = await kube.get(SECRET, f"{MPI}-ssh", namespace=namespace)
    assert {"id_rsa", "id_rsa.pub", "authorized_keys", "config"} <= set(secret.data)
    svc = await kube.get(SERVICE, MPI, namespace=namespace)
    assert svc.spec.cluster_ip == "None"
    await kube.get(NETWORK_POLICY, MPI, namespace=namespace)
    plugin_objects: list[tuple[KindInfo[Any], str]] = [
        (CONFIGMAP, f"{MPI}-svc"),
        (SECRET, f"{MPI}-ssh"),
        (SERVICE, MPI),
    ]
    for kind, name in plugin_objects:
        owned: Any = await kube.get(kind, name, namespace=namespace)
        assert [o.uid for o in owned.metadata.owner_references] == [running.metadata.uid], name

    await kube.delete(
        JOB, MPI, namespace=namespace, propagation_policy=PropagationPolicy.FOREGROUND
    )
    owned_objects: list[tuple[KindInfo[Any], str]] = [
        (JOB, MPI),
        (CONFIGMAP, f"{MPI}-svc"),
        (SECRET, f"{MPI}-ssh"),
        (SERVICE, MPI),
        (NETWORK_POLICY, MPI),
        (PODGROUP, f"{MPI}-{running.metadata.uid}"),
        *[(POD, name) for name in [f"{MPI}-mpimaster-0", f"{MPI}-mpiworker-0"]],
    ]
    await eventually(
        lambda: _all_absent(kube, namespace, owned_objects), timeout=GC_WAIT, what="all gone"
    )


def _pvc_job(name: str) -> dict[str, Any]:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    return job(name, [task("w", 2, volumeClaimTemplates=[claim])])


@contextlib.asynccontextmanager
async def _first_seen(
    kube: KubeClient, ns: str, kind: KindInfo[Any], into: dict[str, int]
) -> AsyncIterator[None]:
    """Record, for each object of ``kind`` added while the block runs, the resourceVersion of its
    ADDED event (the etcd revision of its creation: one etcd, one global order)."""
    async with kube.watch(kind, namespace=ns, allow_watch_bookmarks=False) as events:

        async def pump() -> None:
            async for event in events:
                obj: Any = event.object
                if event.type == "ADDED":
                    meta = obj.metadata
                    into.setdefault(meta.name, int(meta.resource_version))

        runner = asyncio.create_task(pump())
        try:
            yield
        finally:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner


async def test_pvc_templates_created_before_pods(kube: KubeClient, namespace: str) -> None:
    """Each pod's PVC ``data-<pod>`` is created before the pod (creation revisions), is owned by
    the Job, and the pod mounts it as volume ``data``."""
    pvcs: dict[str, int] = {}
    pods: dict[str, int] = {}
    async with (
        _first_seen(kube, namespace, PVC, pvcs),
        _first_seen(kube, namespace, POD, pods),
    ):
        await kube.create(JOB, _pvc_job("pv"), namespace=namespace)
        await eventually(lambda: running_pods(kube, namespace, "pv", 2), timeout=60, what="pods")
        await asyncio.sleep(0.5)
    created = await kube.get(JOB, "pv", namespace=namespace)
    for i in range(2):
        pod = f"pv-w-{i}"
        claim = f"data-{pod}"
        assert pvcs[claim] < pods[pod], (claim, pvcs, pods)
        pvc = await kube.get(PVC, claim, namespace=namespace)
        assert [o.uid for o in pvc.metadata.owner_references] == [created.metadata.uid]
        raw = await _raw_pod(kube, namespace, pod)
        volumes = {v["name"]: v for v in raw["spec"]["volumes"]}
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim


async def test_pvc_kept_when_pod_is_recreated(kube: KubeClient, namespace: str) -> None:
    """A deleted pod comes back under its name with the same PVC (same uid), not a new one."""
    await kube.create(JOB, _pvc_job("pk"), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, "pk", 2), timeout=60, what="pods")
    pvc = await kube.get(PVC, "data-pk-w-1", namespace=namespace)
    old = await kube.get(POD, "pk-w-1", namespace=namespace)
    await kube.delete(POD, "pk-w-1", namespace=namespace)

    async def replaced() -> bool:
        pod = await get_pod(kube, namespace, "pk-w-1")
        return pod is not None and pod.metadata.uid != old.metadata.uid

    await eventually(replaced, timeout=60, what="a new pk-w-1")
    raw = await _raw_pod(kube, namespace, "pk-w-1")
    volumes = {v["name"]: v for v in raw["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == "data-pk-w-1"
    again = await kube.get(PVC, "data-pk-w-1", namespace=namespace)
    assert again.metadata.uid == pvc.metadata.uid
    listed = await kube.list(PVC, namespace=namespace)
    assert sorted(p.metadata.name for p in listed.items) == ["data-pk-w-0", "data-pk-w-1"]


async def test_pvcs_deleted_with_job(kube: KubeClient, namespace: str) -> None:
    """Deleting the Job (Background) lets the garbage collector remove its pods and PVCs."""
    await kube.create(JOB, _pvc_job("pg"), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, "pg", 2), timeout=60, what="pods")
    listed = await kube.list(PVC, namespace=namespace)
    assert len(listed.items) == 2
    await kube.delete(
        JOB, "pg", namespace=namespace, propagation_policy=PropagationPolicy.BACKGROUND
    )

    async def none_left() -> bool:
        left = await kube.list(PVC, namespace=namespace)
        return not left.items and not await pods_of(kube, namespace, "pg")

    await eventually(none_left, timeout=GC_WAIT, what="PVCs and pods gone")


async def test_job_volume_claim_generated_and_mounted(kube: KubeClient, namespace: str) -> None:
    """spec.volumes with a volumeClaim and no name (Volcano's syncJob): the controller creates PVC
    ``<job>-pvc-<suffix>`` owned by the Job, writes its name back into the spec, records it in
    controlledResources and mounts it at mountPath in every pod."""
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    body = job("jv", [task("w", 2)], volumes=[{"mountPath": "/data", "volumeClaim": claim}])
    await kube.create(JOB, body, namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, "jv", 2), timeout=60, what="pods")
    current = await eventually(lambda: in_phase(kube, namespace, "jv", "Running"), timeout=30)
    name = current.spec.volumes[0].volume_claim_name
    assert name.startswith("jv-pvc-"), current.spec.volumes
    pvc = await kube.get(PVC, name, namespace=namespace)
    assert [o.uid for o in pvc.metadata.owner_references] == [current.metadata.uid]
    assert current.status.controlled_resources.get(f"volume-pvc-{name}") == name
    for i in range(2):
        raw = await _raw_pod(kube, namespace, f"jv-w-{i}")
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in raw["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        }
        assert list(claims.values()) == [name]
        mounts = {m["mountPath"]: m["name"] for m in raw["spec"]["containers"][0]["volumeMounts"]}
        assert claims[mounts["/data"]] == name
    listed = await kube.list(PVC, namespace=namespace)
    assert [p.metadata.name for p in listed.items] == [name]


async def test_missing_named_claim_holds_job_pending(kube: KubeClient, namespace: str) -> None:
    """spec.volumes naming a PVC that does not exist: event PVCError, the Job stays Pending
    without pods; once the PVC is created, the pods are created and mount it."""
    body = job("nc", [task("w", 1)], volumes=[{"mountPath": "/data", "volumeClaimName": "later"}])
    await kube.create(JOB, body, namespace=namespace)

    async def pvc_error() -> bool:
        events = await kube.list(EVENT, namespace=namespace)
        # Volcano's wording (createJobIOIfNotExist's error under initiateJob's prefix).
        want = (
            "Failed to create PVC, err: pvc later is not found, the job will be in the Pending "
            "state until the PVC is created"
        )
        return any(e.reason == "PVCError" and e.message == want for e in events.items)

    await eventually(pvc_error, timeout=30, what="a PVCError event")
    await asyncio.sleep(2)
    assert await pods_of(kube, namespace, "nc") == {}
    held = await kube.get(JOB, "nc", namespace=namespace)
    assert held.status.state.phase in ("", "Pending")

    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "later", "namespace": namespace},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await kube.create(PVC, pvc, namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, "nc", 1), timeout=60, what="the pod")
    raw = await _raw_pod(kube, namespace, "nc-w-0")
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in raw["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == ["later"]


async def test_mpi_job_restart_recreates_plugin_resources(kube: KubeClient, namespace: str) -> None:
    """RestartJob kills the whole MPI job, and the kill runs the plugins' OnJobDelete (Secret,
    ConfigMap, Service, NetworkPolicy deleted); the restarted job gets them back before its new
    pods, whose mounts and MPI_HOST work as before."""
    body = _mpi_job()
    body["spec"]["policies"] = [{"event": "PodFailed", "action": "RestartJob"}]
    await kube.create(JOB, body, namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, MPI, 3), timeout=60, what="3 pods")
    old_secret = await kube.get(SECRET, f"{MPI}-ssh", namespace=namespace)
    await kube.patch(
        POD,
        f"{MPI}-mpiworker-1",
        {"metadata": {"annotations": {"kwok.caldera.io/exit-code": "1"}}},
        namespace=namespace,
    )

    async def restarted() -> bool:
        j = await kube.get(JOB, MPI, namespace=namespace)
        return j.status.retry_count == 1 and j.status.state.phase == "Running"

    await eventually(restarted, timeout=60, what="restarted and Running")
    pods = await eventually(lambda: running_pods(kube, namespace, MPI, 3), timeout=60)
    assert {p.metadata.annotations["volcano.sh/job-version"] for p in pods.values()} == {"1"}
    secret = await kube.get(SECRET, f"{MPI}-ssh", namespace=namespace)
    assert secret.metadata.uid != old_secret.metadata.uid  # deleted by the kill, made anew
    cm = await kube.get(CONFIGMAP, f"{MPI}-svc", namespace=namespace)
    assert cm.data["mpiworker.host"].split("\n") == [f"{MPI}-mpiworker-{i}.{MPI}" for i in range(2)]
    await kube.get(SERVICE, MPI, namespace=namespace)
    await kube.get(NETWORK_POLICY, MPI, namespace=namespace)
    master = await _raw_pod(kube, namespace, f"{MPI}-mpimaster-0")
    env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0].get("env", [])}
    assert env["MPI_HOST"] == f"{MPI}-mpiworker-0.{MPI},{MPI}-mpiworker-1.{MPI}"
    for pod in pods.values():
        created = parse_time(pod.metadata.creation_timestamp or "").timestamp()
        made = parse_time(secret.metadata.creation_timestamp or "").timestamp()
        assert made <= created, "the Secret must exist before the pods mounting it"
