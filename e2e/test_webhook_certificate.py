"""The webhook's own certificate (``--cert-secret``, the chart's certificates.generator=webhook)
on the real API server: two replicas starting at once agree on one pair kept in a Secret, the CA
lands in the webhook configurations (rendered without one), the API server then calls the
webhook over TLS, and a restart serves the same pair again; two replicas renew a pair in their
running processes and the API server trusts both while they switch."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import free_port, run_kubectl
from e2e.conftest import Cluster
from e2e.job_fixtures import job, task
from e2e.waiting import until
from unit.webhook_fixtures import queue
from webhooks.review import Admission, AdmissionOptions
from webhooks.selfcert import CertificateKeeper, register_ca
from webhooks.server import CertificateReloader, WebhookMetrics, WebhookServer, build_app
from webhooks.view import StaticView

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


def _keeper(
    kube: KubeClient, namespace: str, configurations: list[str], files: Path, now: list[dt.datetime]
) -> CertificateKeeper:
    return CertificateKeeper(
        kube,
        namespace=namespace,
        name="rotating-cert",
        names=["127.0.0.1"],
        days=3,
        cert_file=str(files / "tls.crt"),
        key_file=str(files / "tls.key"),
        configurations=configurations,
        clock=lambda: now[0],
    )


async def _replica(keeper: CertificateKeeper, port: int) -> WebhookServer:
    """A webhook server (its HTTPS listener and admission rules) serving the keeper's pair."""
    await keeper.check()
    certs = CertificateReloader(keeper.cert_file, keeper.key_file)
    keeper.reload = certs.reload_if_changed
    admission = Admission(StaticView([queue("default")]), AdmissionOptions())
    app = build_app(admission, WebhookMetrics(CollectorRegistry()), client_max_size=1 << 20)
    server = WebhookServer(app, certs, host="127.0.0.1", port=port)
    await server.start(reload_interval=3600, shutdown_timeout=1)
    return server


def _secret_pair(cluster: Cluster, namespace: str) -> dict[str, str]:
    secret = json.loads(
        run_kubectl(
            cluster.kubeconfig, "-n", namespace, "get", "secret", "rotating-cert", "-o", "json"
        )
    )
    data: dict[str, str] = secret["data"]
    return data


def _served_der(port: int) -> bytes:
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port)))


async def test_two_replicas_rotate_the_certificate_without_a_refused_review(
    cluster: Cluster, crds: Path, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """Two replicas renew a pair two thirds into its life at the same moment and converge on
    one (the loser's write gets 409 and it takes the winner's); the configurations then trust
    the new CA and the previous one, so the API server still calls a replica serving the old
    pair (a third server here) while both serve the new. Each replica is the webhook's server
    and keeper in this process (blocking calls run in threads); their clocks start 2.1 days
    back, so a 3-day pair is due now and every pair is valid for the API server."""
    ports = [free_port(), free_port(), free_port()]
    names = [f"e2e-rot-{i}-{namespace}" for i in "abc"]
    only_here = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    for name, port in zip(names, ports, strict=True):
        for rendered in webhook_configurations(
            f"https://127.0.0.1:{port}",
            b"",
            name=name,
            namespace_selector=only_here,
            queue_selector={"matchLabels": {"caldera.io/e2e-never": "x"}},
        ):
            for hook in rendered["webhooks"]:
                del hook["clientConfig"]["caBundle"]
            run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(rendered))
    default = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"weight": 1},
    }
    run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(default))

    def admitted() -> bool:
        """A dry-run create goes through every server's webhooks (a configuration each)."""
        dry_run = ["-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-"]
        created = json.loads(
            run_kubectl(cluster.kubeconfig, *dry_run, input=json.dumps(job("rot", [task("w", 1)])))
        )
        return bool(created["metadata"]["name"] == "rot")

    now = [dt.datetime.now(dt.UTC) - dt.timedelta(days=2.1)]
    a = _keeper(kube, namespace, names, tmp_path / "a", now)
    b = _keeper(kube, namespace, names, tmp_path / "b", now)
    servers = [await _replica(a, ports[0]), await _replica(b, ports[1])]
    try:
        first = _secret_pair(cluster, namespace)
        assert await asyncio.to_thread(_served_der, ports[0]) == await asyncio.to_thread(
            _served_der, ports[1]
        )
        # The third server keeps serving the first pair: a replica that has not switched yet.
        old = tmp_path / "old"
        old.mkdir()
        for file in ("tls.crt", "tls.key"):
            (old / file).write_bytes((tmp_path / "a" / file).read_bytes())
        stale = WebhookServer(
            build_app(
                Admission(StaticView([queue("default")]), AdmissionOptions()),
                WebhookMetrics(CollectorRegistry()),
                client_max_size=1 << 20,
            ),
            CertificateReloader(str(old / "tls.crt"), str(old / "tls.key")),
            host="127.0.0.1",
            port=ports[2],
        )
        await stale.start(reload_interval=3600, shutdown_timeout=1)
        servers.append(stale)
        assert {first["ca.crt"]} == _bundles(cluster, names[0]) == _bundles(cluster, names[2])
        assert await asyncio.to_thread(admitted)

        # Two thirds in, both renew at once: one pair wins, kept with the previous CA.
        now[0] = dt.datetime.now(dt.UTC)
        changed = await asyncio.gather(a.check(), b.check())
        assert list(changed) == [True, True]
        second = _secret_pair(cluster, namespace)
        assert second["tls.crt"] != first["tls.crt"]
        assert second["ca-previous.crt"] == first["ca.crt"]
        served = [await asyncio.to_thread(_served_der, port) for port in ports]
        new_der = ssl.PEM_cert_to_DER_cert(base64.b64decode(second["tls.crt"]).decode())
        assert served[0] == served[1] == new_der != served[2]
        bundle = base64.b64encode(
            base64.b64decode(second["ca.crt"]) + base64.b64decode(second["ca-previous.crt"])
        ).decode()
        assert all(_bundles(cluster, name) == {bundle} for name in names)
        assert await asyncio.to_thread(admitted)  # new pair on a and b, the old one on c
        assert await a.check() is False  # converged: nothing more to do
        assert await b.check() is False
    finally:
        for server in servers:
            await server.stop()
        for name in names:
            for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
                run_kubectl(cluster.kubeconfig, "delete", kind, name, "--ignore-not-found")
