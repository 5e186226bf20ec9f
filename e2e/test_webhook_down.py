"""The admission webhook down under ``failurePolicy: Fail``, on the real API server: a user's
``kubectl apply`` of a Volcano Job is refused with an error that names the webhook and the
address it could not reach, nothing of the Job is created, and once ``caldera webhook`` is back
(same port and certificate, nothing else restarted) the same apply works and is defaulted.

A module of its own: it kills its webhook, which the rule tables of ``e2e/test_webhook.py``
must not see.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from caldera.api.kinds import JOB, PODGROUP
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import free_port, kubectl_result
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.waiting import until
from unit.webhook_fixtures import job_dict

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

TOKEN = secrets.token_hex(3)
QUEUE = f"whdown-{TOKEN}"


def _kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return kubectl_result(cluster.kubeconfig, *args, input=stdin)


class Hook:
    """One ``caldera webhook`` on a fixed port, which the test can kill and start again."""

    def __init__(self, cluster: Cluster, tmp: Path) -> None:
        assert cluster.plane is not None
        self.cluster, self.tmp = cluster, tmp
        self.crt, self.key = write_serving_pair(cluster.plane.pki, tmp / "tls", ["127.0.0.1"])
        self.port = free_port()
        self.process: CalderaProcess | None = None

    def start(self) -> None:
        self.process = CalderaProcess(
            "webhook",
            [f"--port={self.port}", f"--tls-cert-file={self.crt}", f"--tls-key-file={self.key}"],
            kubeconfig=self.cluster.kubeconfig,
            log_dir=self.tmp,
        )
        process = self.process
        until(lambda: process.get("/readyz")[0] == 200, what="the webhook to be ready")

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.stop()  # closes its log; the process is gone already


@pytest.fixture
def hook(cluster: Cluster, tmp_path: Path) -> Iterator[tuple[Hook, str, str]]:
    """A webhook registered for one labelled namespace; yields (hook, namespace, config name)."""
    if cluster.plane is None:
        pytest.skip("the API server must reach a webhook on this machine's loopback")
    namespace, name = f"e2e-whdown-{TOKEN}", f"caldera-e2e-down-{TOKEN}"
    hook = Hook(cluster, tmp_path)
    hook.start()
    namespace_object = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {"caldera.io/e2e": namespace}},
    }
    configs = webhook_configurations(
        f"https://127.0.0.1:{hook.port}",
        cluster.plane.pki.ca_crt.read_bytes(),
        name=name,
        namespace_selector={"matchLabels": {"caldera.io/e2e": namespace}},
        queue_selector={"matchLabels": {"caldera.io/e2e-down": TOKEN}},
        hook_domain=f"down-{TOKEN}.caldera.io",
    )
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"weight": 1},
    }
    items = [namespace_object, queue, *configs]
    applied = _kubectl(
        cluster,
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )
    assert applied.returncode == 0, applied.stderr
    try:
        yield hook, namespace, name
    finally:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            _kubectl(cluster, "delete", kind, name, "--ignore-not-found")
        _kubectl(cluster, "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
        _kubectl(cluster, "delete", "queue", QUEUE, "--ignore-not-found", "--wait=false")
        if hook.process is not None:
            hook.process.stop()


def _job_manifest(namespace: str) -> str:
    body = {**job_dict(queue=QUEUE), "metadata": {"name": "when-down", "namespace": namespace}}
    body["spec"].pop("schedulerName", None)  # left for the mutating webhook to default
    return json.dumps(body)


async def test_webhook_down_refuses_clearly_and_recovers(
    cluster: Cluster, kube: KubeClient, hook: tuple[Hook, str, str]
) -> None:
    """Webhook killed: the apply fails naming the webhook and its address, no Job or PodGroup
    exists; webhook started again: the same apply succeeds and the Job is defaulted."""
    webhook, namespace, _name = hook
    manifest = _job_manifest(namespace)

    def mutated_by_dry_run() -> bool:
        done = _kubectl(
            cluster, "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=manifest
        )
        return done.returncode == 0 and json.loads(done.stdout)["spec"].get("schedulerName") == (
            "volcano"
        )

    until(mutated_by_dry_run, what="the API server to call the webhook")

    webhook.kill()
    done = _kubectl(cluster, "apply", "-f", "-", stdin=manifest)
    assert done.returncode != 0
    error = done.stderr
    assert "failed calling webhook" in error, error
    assert f"down-{TOKEN}.caldera.io" in error, error  # which webhook
    assert f"127.0.0.1:{webhook.port}" in error, error  # and where it was looked for
    assert "connection refused" in error, error
    with pytest.raises(NotFound):
        await kube.get(JOB, "when-down", namespace=namespace)
    assert list((await kube.list(PODGROUP, namespace=namespace)).items) == []

    webhook.start()  # nothing else is restarted

    again = _kubectl(cluster, "apply", "-f", "-", stdin=manifest)
    assert again.returncode == 0, again.stderr
    job = await kube.get(JOB, "when-down", namespace=namespace)
    assert job.spec.scheduler_name == "volcano"  # defaulted by the mutating webhook
