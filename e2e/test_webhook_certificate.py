"""The webhook's own certificate (``--cert-secret``, the chart's certificates.generator=webhook)
on the real API server: two replicas starting at once agree on one pair kept in a Secret, the CA
lands in the webhook configurations (rendered without one), the API server then calls the
webhook over TLS, and a restart serves the same pair again."""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import free_port, run_kubectl
from e2e.conftest import Cluster
from e2e.job_fixtures import job, task
from e2e.waiting import until
from webhooks.selfcert import register_ca

pytestmark = pytest.mark.e2e
CONFIG_PATH = "/apis/admissionregistration.k8s.io/v1/{kind}/{name}"


def _wait_ready(proc: CalderaProcess) -> None:
    until(
        lambda: proc.get("/readyz")[0] == 200 or proc.proc.poll() is not None,
        what="the webhook ready",
        timeout=60,
    )
    assert proc.proc.poll() is None, proc.log()[-3000:]


def _served_certificate(port: int) -> str:
    return ssl.get_server_certificate(("127.0.0.1", port))


def _bundles(cluster: Cluster, name: str) -> set[str]:
    found: set[str] = set()
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        config = json.loads(run_kubectl(cluster.kubeconfig, "get", kind, name, "-o", "json"))
        found |= {h["clientConfig"].get("caBundle", "") for h in config["webhooks"]}
    return found


async def test_webhook_keeps_its_own_certificate(
    cluster: Cluster, crds: Path, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """Replicas share the pair of the Secret; the API server trusts the CA they registered;
    a restarted replica serves the same certificate; a cleared caBundle is put back."""
    name = f"e2e-selfcert-{namespace}"
    port, other_port = free_port(), free_port()
    only_here = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    configs = webhook_configurations(
        f"https://127.0.0.1:{port}",
        b"",
        name=name,
        namespace_selector=only_here,
        queue_selector={"matchLabels": {"caldera.io/e2e-never": "x"}},
    )
    for rendered in configs:
        for hook in rendered["webhooks"]:
            del hook["clientConfig"]["caBundle"]  # as the chart renders them for this mode
        run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(rendered))

    def replica(listen: int, index: int) -> CalderaProcess:
        return CalderaProcess(
            "webhook",
            [
                f"--port={listen}",
                f"--cert-secret={namespace}/webhook-cert",
                "--cert-dns-names=127.0.0.1,localhost",
                f"--webhook-configurations={name}",
                f"--tls-cert-file={tmp_path / f'r{index}' / 'tls.crt'}",
                f"--tls-key-file={tmp_path / f'r{index}' / 'tls.key'}",
            ],
            kubeconfig=cluster.kubeconfig,
            log_dir=tmp_path,
        )

    first, second = replica(port, 1), replica(other_port, 2)
    procs = [first, second]
    try:
        for proc in procs:
            _wait_ready(proc)
        secret = json.loads(
            run_kubectl(
                cluster.kubeconfig, "-n", namespace, "get", "secret", "webhook-cert", "-o", "json"
            )
        )
        assert secret["type"] == "kubernetes.io/tls"
        ca_b64 = secret["data"]["ca.crt"]
        served = _served_certificate(port)
        assert served == _served_certificate(other_port)  # one pair for every replica
        kept = base64.b64decode(secret["data"]["tls.crt"]).decode()
        assert ssl.PEM_cert_to_DER_cert(kept) == ssl.PEM_cert_to_DER_cert(served)
        assert _bundles(cluster, name) == {ca_b64}

        # The API server calls the webhook over TLS, trusting the registered CA: the job is
        # mutated (its unnamed task gets Volcano's default name). Its queue must exist.
        default = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "default"},
            "spec": {"weight": 1},
        }
        run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(default))
        unnamed = job("through-webhook", [task("w", 1)])
        del unnamed["spec"]["tasks"][0]["name"]
        dry_run = ["-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-"]
        created = json.loads(run_kubectl(cluster.kubeconfig, *dry_run, input=json.dumps(unnamed)))
        assert created["spec"]["tasks"][0]["name"] == "default0"

        # A restart reads the Secret back: the same certificate.
        first.stop()
        procs[0] = first = replica(port, 3)
        _wait_ready(first)
        assert _served_certificate(port) == served

        # A configuration re-applied without its CA gets it back.
        reapplied: dict[str, Any] = configs[0]
        run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(reapplied))
        assert _bundles(cluster, name) == {ca_b64}  # apply's three-way merge keeps it
        run_kubectl(
            cluster.kubeconfig,
            "patch",
            "mutatingwebhookconfiguration",
            name,
            "--type=json",
            "-p",
            json.dumps([{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]),
        )
        assert "" in _bundles(cluster, name)
        assert await register_ca(kube, [name], base64.b64decode(ca_b64)) == 1
        assert _bundles(cluster, name) == {ca_b64}
    finally:
        codes = [proc.stop() for proc in procs]
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            run_kubectl(cluster.kubeconfig, "delete", kind, name, "--ignore-not-found")
    assert codes == [0, 0], "\n".join(p.log()[-2000:] for p in procs)
