"""The job controller on the real API server: a TensorFlow job runs to completion through kwok,
with Volcano's pods, PodGroup, plugins and status; a deleted pod comes back under its name."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from caldera.api.kinds import CONFIGMAP, JOB, POD, PODGROUP, SERVICE
from caldera.api.volcano import Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.job_fixtures import job_controller, scheduled  # noqa: F401 - fixtures
from e2e.waiting import eventually
from unit.examples import EXAMPLES

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("job_controller", "scheduled")]


def _tf_job(run_for: str = "3s") -> dict[str, Any]:
    """Volcano's TensorFlow example, scaled to 2 ps + 4 workers, with the tensorflow plugin, and
    pods that finish after ``run_for`` through kwok."""
    raw: dict[str, Any] = yaml.safe_load(
        (EXAMPLES / "integrations_tensorflow_dist-mnist_tf-dist-mnist-example.yaml").read_text()
    )
    raw["spec"]["plugins"] = {"tensorflow": ["--ps=ps", "--worker=worker"]}
    raw["spec"]["minAvailable"] = 6
    for task in raw["spec"]["tasks"]:
        task["replicas"] = 2 if task["name"] == "ps" else 4
        meta = task["template"].setdefault("metadata", {})
        annotations = {"kwok.caldera.io/run-for": run_for}
        annotations["kwok.caldera.io/exit-code"] = "0"
        meta["annotations"] = annotations
    return raw


async def _job(kube: KubeClient, namespace: str, name: str) -> Job:
    return await kube.get(JOB, name, namespace=namespace)


async def _phase(kube: KubeClient, namespace: str, name: str, phase: str) -> Job | None:
    job = await _job(kube, namespace, name)
    return job if job.status.state.phase == phase else None


async def test_tensorflow_job_runs_and_completes(kube: KubeClient, namespace: str) -> None:
    """2 ps + 4 workers: PodGroup <job>-<uid> with minMember 6, six pods named <job>-<task>-<i>
    with Volcano's labels and TF_CONFIG, Running, then Completed when the workers finish."""
    await kube.create(JOB, _tf_job(run_for="4s"), namespace=namespace)
    running = await eventually(
        lambda: _phase(kube, namespace, "tensorflow-dist-mnist", "Running"),
        timeout=60,
        what="Running",
    )
    pg = await kube.get(
        PODGROUP, f"tensorflow-dist-mnist-{running.metadata.uid}", namespace=namespace
    )
    assert pg.spec.min_member == 6
    assert pg.spec.min_task_member == {"ps": 2, "worker": 4}
    assert pg.metadata.owner_references[0].uid == running.metadata.uid
    pods = {p.metadata.name: p for p in (await kube.list(POD, namespace=namespace)).items}
    assert sorted(pods) == [
        "tensorflow-dist-mnist-ps-0",
        "tensorflow-dist-mnist-ps-1",
        *[f"tensorflow-dist-mnist-worker-{i}" for i in range(4)],
    ]
    worker = pods["tensorflow-dist-mnist-worker-3"]
    assert worker.metadata.annotations["volcano.sh/task-index"] == "3"
    assert worker.metadata.annotations["scheduling.k8s.io/group-name"] == pg.metadata.name
    raw_pod = json.loads(
        await kube.request("GET", f"/api/v1/namespaces/{namespace}/pods/{worker.metadata.name}")
    )
    env = {e["name"]: e.get("value") for e in raw_pod["spec"]["containers"][0].get("env", [])}
    tf_config = json.loads(env["TF_CONFIG"])
    assert tf_config["task"] == {"type": "worker", "index": 3}
    assert len(tf_config["cluster"]["ps"]) == 2
    assert len(tf_config["cluster"]["worker"]) == 4
    # the svc plugin the tensorflow plugin needs: headless Service and hosts ConfigMap
    await kube.get(SERVICE, "tensorflow-dist-mnist", namespace=namespace)
    await kube.get(CONFIGMAP, "tensorflow-dist-mnist-svc", namespace=namespace)

    done = await eventually(
        lambda: _phase(kube, namespace, "tensorflow-dist-mnist", "Completed"),
        timeout=90,
        what="Completed",
    )
    assert done.status.succeeded >= 4
    assert [c.status for c in done.status.conditions][-1] == "Completed"


async def test_deleted_pod_comes_back_with_its_name_and_index(
    kube: KubeClient, namespace: str
) -> None:
    """Deleting worker-3 of a running job (PodEvicted, default policy: sync) recreates a pod
    with the same name and index."""
    job = _tf_job(run_for="600s")
    await kube.create(JOB, job, namespace=namespace)
    await eventually(
        lambda: _phase(kube, namespace, "tensorflow-dist-mnist", "Running"),
        timeout=60,
        what="Running",
    )
    old = await kube.get(POD, "tensorflow-dist-mnist-worker-3", namespace=namespace)
    await kube.delete(POD, old.metadata.name, namespace=namespace)

    async def replaced() -> bool:
        try:
            pod = await kube.get(POD, old.metadata.name, namespace=namespace)
        except NotFound:
            return False
        return pod.metadata.uid != old.metadata.uid and pod.status.phase == "Running"

    await eventually(replaced, timeout=60, what="a new worker-3")
    new = await kube.get(POD, old.metadata.name, namespace=namespace)
    assert new.metadata.annotations["volcano.sh/task-index"] == "3"


async def test_deleted_podgroup_comes_back(kube: KubeClient, namespace: str) -> None:
    """Deleting a running job's PodGroup (as a restart does, or a user) has the job controller
    create it again at once, not at the next resync (found by the chaos run: a restarted job
    whose sync still saw the old PodGroup waited with Pending pods and no group)."""
    job = _tf_job(run_for="600s")
    await kube.create(JOB, job, namespace=namespace)
    running = await eventually(
        lambda: _phase(kube, namespace, "tensorflow-dist-mnist", "Running"),
        timeout=60,
        what="Running",
    )
    name = f"tensorflow-dist-mnist-{running.metadata.uid}"
    old = await kube.get(PODGROUP, name, namespace=namespace)
    await kube.delete(PODGROUP, name, namespace=namespace)

    async def recreated() -> bool:
        try:
            group = await kube.get(PODGROUP, name, namespace=namespace)
        except NotFound:
            return False
        return group.metadata.uid != old.metadata.uid

    await eventually(recreated, timeout=20, what="the PodGroup created again")
