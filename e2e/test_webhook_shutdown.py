"""``caldera webhook`` on SIGTERM, with the real API server calling it: readiness goes false at
once while reviews are still answered for ``--shutdown-delay`` (the endpoints of a Service drop
the pod meanwhile, so a rollout refuses no admission), then the process exits 0."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import free_port, kubectl_result
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.job_fixtures import job, task
from e2e.waiting import until

pytestmark = pytest.mark.e2e


def _kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return kubectl_result(cluster.kubeconfig, *args, input=stdin)


def test_sigterm_turns_not_ready_and_keeps_answering(
    cluster: Cluster, crds: Path, namespace: str, tmp_path: Path
) -> None:
    """After SIGTERM /readyz is 503 within a second, yet creates through the webhook are still
    admitted for the shutdown delay (before: the listener closed at once and they were
    refused); then the webhook exits 0."""
    if cluster.plane is None:
        pytest.skip("the API server must reach a webhook on this machine's loopback")
    crt, key = write_serving_pair(cluster.plane.pki, tmp_path / "tls", ["127.0.0.1"])
    port = free_port()
    proc = CalderaProcess(
        "webhook",
        [
            f"--port={port}",
            f"--tls-cert-file={crt}",
            f"--tls-key-file={key}",
            "--shutdown-delay=4",
            "--shutdown-grace-period=2",
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    name = f"e2e-shutdown-{namespace}"
    configs = webhook_configurations(
        f"https://127.0.0.1:{port}",
        cluster.plane.pki.ca_crt.read_bytes(),
        name=name,
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        queue_selector={"matchLabels": {"caldera.io/e2e-never": "x"}},
        hook_domain=f"{name}.caldera.io",
    )
    default = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"weight": 1},
    }
    items = {"apiVersion": "v1", "kind": "List", "items": [default, *configs]}
    applied = _kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(items))
    assert applied.returncode == 0, applied.stderr

    def create() -> subprocess.CompletedProcess[str]:
        body = json.dumps(job("through-webhook", [task("w", 1)]))
        return _kubectl(
            cluster, "-n", namespace, "create", "--dry-run=server", "-f", "-", stdin=body
        )

    try:
        until(lambda: proc.get("/readyz")[0] == 200, what="the webhook to be ready", timeout=60)
        # The webhook's queue cache learns of the queue just applied.
        until(lambda: create().returncode == 0, what="a create admitted", timeout=30)
        proc.proc.send_signal(signal.SIGTERM)
        until(lambda: proc.get("/readyz")[0] == 503, what="readiness false", timeout=1)
        started = time.monotonic()
        admitted = 0
        while time.monotonic() - started < 2.5:
            result = create()
            assert result.returncode == 0, result.stderr
            admitted += 1
        assert admitted >= 2
        assert proc.proc.wait(15) == 0
        assert "stopping: not ready, still serving" in proc.log()
        refused = create()
        assert refused.returncode != 0  # gone now: the API server cannot call it
        assert "failed calling webhook" in refused.stderr
    finally:
        proc.stop()
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            _kubectl(cluster, "delete", kind, name, "--ignore-not-found")
