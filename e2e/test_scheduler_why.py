"""Why a job waits, end to end: the job controller and the scheduler on the real API server
write, on the job's PodGroup, the record ``caldera job why`` reads (annotation
``scheduling.caldera.dev/why``), and the command prints it: a job held at the enqueue gate by
its queue's capability, one whose pods no node's labels match, one in a Closed queue; and the
scheduler's per-reason pod count.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import JOB, PODGROUP, QUEUE
from caldera.api.volcano import PodGroup
from caldera.api.why import WHY_ANNOTATION, WaitRecord, WaitStage, decode_record
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.job_fixtures import job, task
from e2e.test_cli import acaldera, ok
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
async def processes(
    cluster: Cluster, crds: Path, tmp_path: Path
) -> AsyncIterator[tuple[CalderaProcess, CalderaProcess]]:
    """The job and queue controllers and the scheduler (Volcano's default configuration,
    which has proportion and overcommit at the enqueue gate)."""
    controllers = CalderaProcess(
        "controllers",
        ["--controllers=job,queue", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    scheduler = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=0.5"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield controllers, scheduler
    assert scheduler.stop() == 0, scheduler.log()[-3000:]
    assert controllers.stop() == 0, controllers.log()[-3000:]


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": True, **spec},
    }


def _cpu_task(name: str, replicas: int, cpu: str, **pod_spec: Any) -> dict[str, Any]:
    spec = task(name, replicas)
    container = spec["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    spec["template"]["spec"].update(pod_spec)
    return spec


async def _record(kube: KubeClient, namespace: str, job_name: str, stage: WaitStage) -> WaitRecord:
    """The job's PodGroup's wait record, once it has reached ``stage``."""

    async def probe() -> WaitRecord | None:
        pgs: list[PodGroup] = list((await kube.list(PODGROUP, namespace=namespace)).items)
        for pg in pgs:
            if pg.metadata.name.startswith(f"{job_name}-"):
                record = decode_record(pg.metadata.annotations.get(WHY_ANNOTATION))
                if record is not None and record.stage == stage:
                    return record
        return None

    return await eventually(probe, timeout=60, what=f"a {stage} record for {job_name}")


async def test_enqueue_gate_says_the_queue_limit_holds_the_job(
    kube: KubeClient,
    namespace: str,
    cluster: Cluster,
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """A gang of 3 one-cpu pods in a queue capped at 2 cpu stays Pending, and its record says
    that the queue can never give it 3 cpu."""
    queue = f"why-gate-{namespace}"[:63]
    await kube.create(QUEUE, _queue(queue, capability={"cpu": "2"}))
    try:
        body = job("gate", [_cpu_task("worker", 3, "1")], queue=queue)
        await kube.create(JOB, body, namespace=namespace)
        record = await _record(kube, namespace, "gate", WaitStage.ENQUEUE)
        summary = (
            "this job needs 3 cpu at least, more than queue "
            f"{queue} can ever give (2 cpu): it cannot enqueue until that limit grows"
        )
        assert record.summary == summary
        why = ok(await acaldera(cluster, "job", "why", "gate", "-n", namespace))
        assert re.search(rf"scheduler \(as of [^)]*\): {re.escape(summary)}", why), why
    finally:
        await kube.delete(JOB, "gate", namespace=namespace)
        await kube.delete(QUEUE, queue)


async def test_predicates_say_which_nodes_refused_which_task(
    kube: KubeClient,
    namespace: str,
    cluster: Cluster,
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """Pods selecting a label no node has: the record names the gang's need and the task's
    node histogram, and the scheduler counts the pod that tried under that reason (its
    gang mate was not tried once the first found no node)."""
    _controllers, scheduler = processes
    selector = {"why-e2e": "nowhere"}
    body = job("picky", [_cpu_task("trainer", 2, "100m", nodeSelector=selector)])
    await kube.create(JOB, body, namespace=namespace)
    record = await _record(kube, namespace, "picky", WaitStage.ALLOCATE)
    assert record.summary == "needs 2 pods at once (minAvailable); 0 fit now"
    assert len(record.details) >= 1
    line = record.details[0]
    assert line.startswith("task trainer (2 pending): 0/"), line
    assert "node(s) didn't match Pod's node affinity/selector" in line
    why = ok(await acaldera(cluster, "job", "why", "picky", "-n", namespace))
    assert re.search(r"scheduler \(as of [^)]*\): " + re.escape(record.summary), why), why
    assert line in why, why

    reason = "node(s) didn't match Pod's node affinity/selector"

    async def counted() -> float | None:
        value = scheduler.metric("caldera_unschedule_task_reason_count", {"reason": reason})
        return value if value is not None and value >= 1 else None

    await eventually(counted, timeout=30, what="the per-reason metric")


async def test_closed_queue_holds_its_jobs(
    kube: KubeClient,
    namespace: str,
    cluster: Cluster,
    processes: tuple[CalderaProcess, CalderaProcess],
) -> None:
    """A job in a queue that is Closed waits for the queue, and the record says so."""
    queue = f"why-closed-{namespace}"[:63]
    await kube.create(QUEUE, _queue(queue))
    try:
        # Closing a queue is the queue controller's answer to a Command; here the state is set
        # as that controller would set it.
        await kube.patch_status(QUEUE, queue, {"status": {"state": "Closed"}})
        await asyncio.sleep(1)  # the controllers and the scheduler see it
        body = job("shut", [_cpu_task("worker", 1, "100m")], queue=queue)
        await kube.create(JOB, body, namespace=namespace)
        record = await _record(kube, namespace, "shut", WaitStage.QUEUE)
        assert record.summary == (
            f"queue {queue} is Closed: no job in it is admitted until it is opened"
        )
        why = ok(await acaldera(cluster, "job", "why", "shut", "-n", namespace))
        assert f"queue {queue} is Closed: no job in it is admitted until it is opened" in why
    finally:
        await kube.delete(JOB, "shut", namespace=namespace)
        await kube.delete(QUEUE, queue)
