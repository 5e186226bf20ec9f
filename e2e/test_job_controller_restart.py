"""Pods that finish while the job controller is down (found by the chaos run, docs/reliability.md):
after its restart the controller first sees them already finished, and their policies must
still act. Before the fix, an MPI-style job whose launcher succeeded meanwhile stayed Running
forever (TaskCompleted never fired), and a job whose pods exited with an exitCode policy's code
ended Failed by minSuccess instead of Aborted."""

from __future__ import annotations

from pathlib import Path

import pytest

from caldera.api.kinds import JOB
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    finish_pod,
    in_phase,
    job,
    pods_of,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("scheduled")]


def _controller(cluster: Cluster, tmp_path: Path) -> CalderaProcess:
    return CalderaProcess(
        "controllers",
        ["--controllers=job", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )


async def _running(kube: KubeClient, ns: str, name: str) -> None:
    await eventually(lambda: running_pods(kube, ns, name, 2), timeout=60, what=f"{name} pods")
    await eventually(lambda: in_phase(kube, ns, name, "Running"), timeout=60, what=name)


async def _finished(kube: KubeClient, ns: str, job_name: str, phases: dict[str, str]) -> bool:
    pods = await pods_of(kube, ns, job_name)
    return all(
        pods.get(name) and pods[name].status.phase == phase for name, phase in phases.items()
    )


async def test_policies_act_on_pods_that_finished_while_the_controller_was_down(
    kube: KubeClient, namespace: str, cluster: Cluster, crds: Path, tmp_path: Path
) -> None:
    completes = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    aborts = [{"exitCode": 3, "action": "AbortJob"}]
    mpi = job("mpi", [task("launcher", 1, policies=completes), task("worker", 1)])
    abort = job("abort", [task("worker", 2, policies=aborts)])
    controller = _controller(cluster, tmp_path)
    try:
        for body in (mpi, abort):
            await kube.create(JOB, body, namespace=namespace)
        for name in ("mpi", "abort"):
            await _running(kube, namespace, name)
    finally:
        controller.kill()  # a crash: nothing is flushed or handed over

    await finish_pod(kube, namespace, "mpi-launcher-0", 0)
    for i in range(2):
        await finish_pod(kube, namespace, f"abort-worker-{i}", 3)
    await eventually(
        lambda: _finished(kube, namespace, "mpi", {"mpi-launcher-0": "Succeeded"}),
        timeout=30,
        what="the launcher Succeeded while the controller is down",
    )
    await eventually(
        lambda: _finished(
            kube, namespace, "abort", {"abort-worker-0": "Failed", "abort-worker-1": "Failed"}
        ),
        timeout=30,
        what="both workers Failed while the controller is down",
    )

    restarted = _controller(cluster, tmp_path)
    try:
        await eventually(lambda: in_phase(kube, namespace, "mpi", "Completed"), timeout=60)
        await eventually(lambda: in_phase(kube, namespace, "abort", "Aborted"), timeout=60)
    finally:
        assert restarted.stop() == 0, restarted.log()[-3000:]
