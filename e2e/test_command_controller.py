"""Commands nobody runs are removed with a Warning Event; a Job Command with an unknown action is
removed and the Job left alone; closing a queue with a running job goes Closing, then Closed once
the job ends."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import COMMAND, EVENT, JOB, QUEUE
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.job_fixtures import in_phase, job, scheduled, task
from e2e.waiting import eventually, gone

pytestmark = pytest.mark.e2e
__all__ = ["scheduled"]  # a fixture used by name


@pytest.fixture
def controllers(
    cluster: Cluster, crds: Path, tmp_path: Path, namespace: str
) -> Iterator[CalderaProcess]:
    # No webhook stamps Commands here: the test's namespace is trusted with queue Commands.
    proc = CalderaProcess(
        "controllers",
        [
            "--controllers=job,queue,command",
            "--leader-elect=false",
            f"--queue-command-namespaces={namespace}",
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield proc
    assert proc.stop() == 0, proc.log()[-3000:]


def _command(name: str, action: str, target: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name},
        "action": action,
    }
    if target is not None:
        body["target"] = target
    return body


async def _warning(kube: KubeClient, namespace: str, text: str) -> bool:
    events = (await kube.list(EVENT, namespace=namespace)).items
    return any(e.type == "Warning" and text in e.message for e in events)


async def test_commands_for_unknown_targets_are_removed_with_an_event(
    kube: KubeClient, namespace: str, controllers: CalderaProcess
) -> None:
    """A Command aimed at a Deployment, or at nothing, is deleted and a Warning says why."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u-1"}
    await kube.create(COMMAND, _command("odd", "RestartJob", deployment), namespace=namespace)
    await kube.create(COMMAND, _command("aimless", "AbortJob", None), namespace=namespace)
    for name in ("odd", "aimless"):
        await eventually(lambda n=name: gone(kube, COMMAND, n, namespace), what=f"{name} removed")  # type: ignore[misc]
    await eventually(
        lambda: _warning(kube, namespace, "is neither a batch.volcano.sh/v1alpha1 Job"),
        what="the Warning about the Deployment target",
    )
    await eventually(
        lambda: _warning(kube, namespace, "names no target"), what="the no-target Warning"
    )


async def test_unknown_action_on_a_job_is_removed_and_the_job_left_alone(
    kube: KubeClient, namespace: str, controllers: CalderaProcess, scheduled: None
) -> None:
    """A Command with action "Explode" on a running Job is deleted with a Warning naming the
    allowed actions; the Job keeps running with the same version."""
    await kube.create(JOB, job("j", [task("w", 1)]), namespace=namespace)
    running = await eventually(
        lambda: in_phase(kube, namespace, "j", "Running"), timeout=60, what="Running"
    )
    target = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "j",
        "uid": running.metadata.uid,
        "controller": True,
    }
    await kube.create(COMMAND, _command("boom", "Explode", target), namespace=namespace)
    await eventually(lambda: gone(kube, COMMAND, "boom", namespace), what="the Command removed")
    await eventually(
        lambda: _warning(kube, namespace, "unknown action Explode"), what="the Warning"
    )
    after = await kube.get(JOB, "j", namespace=namespace)
    assert after.status.state.phase == "Running"
    assert after.status.version == running.status.version


async def test_closing_a_queue_with_a_running_job(
    kube: KubeClient, namespace: str, controllers: CalderaProcess, scheduled: None
) -> None:
    """CloseQueue on a queue whose job runs: Closing while its PodGroup exists, Closed once the
    job has ended (its PodGroup goes with the finished job)."""
    queue_name = f"q-{secrets.token_hex(3)}"
    await kube.create(
        QUEUE,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": queue_name},
            "spec": {"weight": 1},
        },
    )
    try:
        await kube.create(
            JOB,
            job("long", [task("w", 2, run_for="8s", exit_code=0)], queue=queue_name),
            namespace=namespace,
        )
        await eventually(
            lambda: in_phase(kube, namespace, "long", "Running"), timeout=60, what="Running"
        )
        ref = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "name": queue_name,
            "uid": (await kube.get(QUEUE, queue_name)).metadata.uid,
        }
        await kube.create(COMMAND, _command("close-q", "CloseQueue", ref), namespace=namespace)

        async def state(expected: str) -> bool:
            return (await kube.get(QUEUE, queue_name)).status.state == expected

        await eventually(lambda: state("Closing"), timeout=30, what="Closing")
        await eventually(
            lambda: in_phase(kube, namespace, "long", "Completed"), timeout=60, what="Completed"
        )
        await eventually(lambda: state("Closed"), timeout=60, what="Closed")
    finally:
        await kube.delete(JOB, "long", namespace=namespace)
        await kube.delete(QUEUE, queue_name)
