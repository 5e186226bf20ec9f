"""The objects Kubeflow's training-operator, spark-operator, KubeRay and Argo Workflows create
when they use Volcano, created here as their source writes them, gang-scheduled by
``caldera scheduler`` and counted in their queue (``caldera queue get``).

One scheduler and one controllers process serve the module; each test has its own queue and its
pods select the module's own kwok node, so the tests do not compete with other modules' pods.
The operators' owners (PyTorchJob, SparkApplication, RayCluster, Workflow) are custom resources
this cluster does not serve, so their ownerReferences are left out; every field the scheduler
reads is as the operator writes it. docs/integrations.md describes each integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import JOB, POD, PODGROUP, QUEUE
from caldera.api.volcano import PodGroup
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.test_cli import caldera, ok, rows_by_name
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

GROUP_NAME = "scheduling.k8s.io/group-name"  # Volcano's KubeGroupNameAnnotationKey
TASK_SPEC = "volcano.sh/task-spec"  # Volcano's TaskSpecKey
QUEUE_LABEL = "volcano.sh/queue-name"
NODE_LABEL = "integrations"


def _ready(proc: CalderaProcess) -> Any:
    async def probe() -> bool | None:
        return True if proc.get("/readyz")[0] == 200 else None

    return probe


@pytest.fixture(scope="module")
def processes(
    cluster: Cluster, crds: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[CalderaProcess, CalderaProcess]]:
    """One scheduler and one controllers process (job, queue) for every test of the module,
    and a kwok node of 8 cpu only this module's pods select."""
    if cluster.plane is None:
        pytest.skip("creates a fake node")
    from e2e.cluster.control_plane import NodeSpec

    cluster.plane.create_nodes(
        1, NodeSpec(cpu="8", memory="64Gi", labels={"e2e-gang": NODE_LABEL}), prefix="integ-"
    )
    logs = tmp_path_factory.mktemp("integrations")
    scheduler = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=0.5"],
        kubeconfig=cluster.kubeconfig,
        log_dir=logs,
    )
    controllers = CalderaProcess(
        "controllers",
        ["--controllers=job,queue", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=logs,
    )
    yield scheduler, controllers
    for proc in (controllers, scheduler):
        assert proc.stop() == 0, proc.log()[-3000:]


@pytest.fixture
async def queue(
    kube: KubeClient, namespace: str, processes: tuple[CalderaProcess, CalderaProcess]
) -> AsyncIterator[str]:
    """An open queue of the test's own (its name is the namespace's), the processes ready."""
    for proc in processes:
        await eventually(_ready(proc), timeout=60, what=f"{proc.log_path.name} ready")
    body = {"apiVersion": QUEUE.api_version, "kind": QUEUE.kind, "metadata": {"name": namespace}}
    await kube.create(QUEUE, body | {"spec": {"weight": 1}})
    await kube.patch_status(QUEUE, namespace, {"status": {"state": "Open"}})
    yield namespace
    for pg in (await kube.list(PODGROUP, namespace=namespace)).items:
        await kube.delete(PODGROUP, pg.metadata.name, namespace=namespace)
    await kube.delete(QUEUE, namespace)


def pod(
    name: str,
    *,
    cpu: str,
    annotations: dict[str, str],
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod as the operators make them: Volcano's scheduler name, their annotations."""
    meta: dict[str, Any] = {"name": name, "annotations": annotations, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": {"e2e-gang": NODE_LABEL},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def podgroup(
    name: str,
    queue: str,
    min_member: int,
    min_resources: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A PodGroup as the operators create it: phase Pending written with the object."""
    return {
        "apiVersion": PODGROUP.api_version,
        "kind": PODGROUP.kind,
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"minMember": min_member, "minResources": min_resources, "queue": queue},
        "status": {"phase": "Pending"},
    }


async def bound(kube: KubeClient, namespace: str, count: int) -> list[str]:
    async def probe() -> list[str] | None:
        pods = (await kube.list(POD, namespace=namespace)).items
        names = sorted(p.metadata.name for p in pods if p.spec.node_name)
        return names if len(names) == count else None

    return await eventually(probe, timeout=60, what=f"{count} pods bound")


async def phase(kube: KubeClient, namespace: str, name: str, wanted: str) -> PodGroup:
    async def probe() -> PodGroup | None:
        pg = await kube.get(PODGROUP, name, namespace=namespace)
        return pg if pg.status.phase == wanted else None

    return await eventually(probe, timeout=60, what=f"PodGroup {name} {wanted}")


def queue_row(cluster: Cluster, queue: str) -> dict[str, str]:
    """``caldera queue get``'s row by column name."""
    text = ok(caldera(cluster, "queue", "get", queue))
    header, *_ = text.splitlines()
    return dict(zip(header.split(), rows_by_name(text)[queue], strict=True))


async def test_training_operator_pytorchjob(
    cluster: Cluster, kube: KubeClient, namespace: str, queue: str
) -> None:
    """training-operator: a PodGroup named as the job (its annotations copied), minMember the
    replicas, queue and minResources from runPolicy.schedulingPolicy; pods are created only
    once the PodGroup leaves Pending, annotated with the group and their replica type."""
    job = "mnist"
    await kube.create(
        PODGROUP,
        podgroup(job, queue, 3, {"cpu": "3"}, annotations={"team": "vision"}),
        namespace=namespace,
    )
    await phase(kube, namespace, job, "Inqueue")
    replicas = [("master", 0), ("worker", 0), ("worker", 1)]
    for rtype, index in replicas[:2]:
        annotations = {GROUP_NAME: job, TASK_SPEC: rtype}
        await kube.create(
            POD,
            pod(f"{job}-{rtype}-{index}", cpu="1", annotations=annotations),
            namespace=namespace,
        )
    await asyncio.sleep(2)  # several sessions: a gang of 3 with 2 pods binds nothing
    assert await bound(kube, namespace, 0) == []
    await kube.create(
        POD,
        pod(f"{job}-worker-1", cpu="1", annotations={GROUP_NAME: job, TASK_SPEC: "worker"}),
        namespace=namespace,
    )
    assert await bound(kube, namespace, 3) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    await phase(kube, namespace, job, "Running")
    assert queue_row(cluster, queue)["Running"] == "1"


async def test_spark_operator_cluster_mode(
    cluster: Cluster, kube: KubeClient, namespace: str, queue: str
) -> None:
    """spark-operator in cluster mode: ``spark-<app>-pg`` with minMember 1 (the driver first)
    and minResources the driver's and the executors'; the driver and, later, the executors it
    starts carry the group annotation."""
    group = "spark-pi-pg"
    await kube.create(PODGROUP, podgroup(group, queue, 1, {"cpu": "3"}), namespace=namespace)
    driver = await kube.create(
        POD, pod("spark-pi-driver", cpu="1", annotations={GROUP_NAME: group}), namespace=namespace
    )
    assert await bound(kube, namespace, 1) == ["spark-pi-driver"]
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": driver.metadata.name,
        "uid": driver.metadata.uid,
        "controller": True,
    }
    for i in (1, 2):
        executor = pod(f"spark-pi-exec-{i}", cpu="1", annotations={GROUP_NAME: group}, owner=owner)
        await kube.create(POD, executor, namespace=namespace)
    assert len(await bound(kube, namespace, 3)) == 3
    await phase(kube, namespace, group, "Running")
    assert queue_row(cluster, queue)["Running"] == "1"


async def test_kuberay_raycluster(
    cluster: Cluster, kube: KubeClient, namespace: str, queue: str
) -> None:
    """KubeRay: ``ray-<cluster>-pg`` with minMember head + workers and their resources, the queue
    from the RayCluster's ``volcano.sh/queue-name`` label; each pod annotated with the group and
    its group name (task spec) and labelled with the queue."""
    group = "ray-demo-pg"
    await kube.create(PODGROUP, podgroup(group, queue, 3, {"cpu": "3"}), namespace=namespace)
    for name, task in (
        ("demo-head-x1", "headgroup"),
        ("demo-worker-small-a", "small"),
        ("demo-worker-small-b", "small"),
    ):
        annotations = {GROUP_NAME: group, TASK_SPEC: task}
        labels = {QUEUE_LABEL: queue, "ray.io/cluster": "demo"}
        await kube.create(
            POD, pod(name, cpu="1", annotations=annotations, labels=labels), namespace=namespace
        )
    assert len(await bound(kube, namespace, 3)) == 3
    await phase(kube, namespace, group, "Running")
    assert queue_row(cluster, queue)["Running"] == "1"


async def test_argo_workflow_submits_a_vcjob(
    cluster: Cluster, kube: KubeClient, namespace: str, queue: str
) -> None:
    """Argo Workflows' resource template creates the vcjob of its manifest as written and
    watches ``status.state.phase`` (successCondition); the job controller makes the PodGroup
    and pods, the scheduler binds the gang."""
    template = pod("worker", cpu="1", annotations={})
    template["spec"]["restartPolicy"] = "Never"
    manifest = {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"generateName": "wf-step-"},
        "spec": {
            "minAvailable": 2,
            "schedulerName": "volcano",
            "queue": queue,
            "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": template["spec"]}}],
        },
    }
    job = await kube.create(JOB, manifest, namespace=namespace)
    assert len(await bound(kube, namespace, 2)) == 2
    [pg] = (await kube.list(PODGROUP, namespace=namespace)).items
    await phase(kube, namespace, pg.metadata.name, "Running")
    assert queue_row(cluster, queue)["Running"] == "1"
    name = job.metadata.name
    ok(caldera(cluster, "job", "wait", name, "-n", namespace, "--for=Running", "--timeout=60s"))
