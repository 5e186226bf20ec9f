"""The HTTPS admission server in-process on loopback: TLS, body size, metrics, certificate
reload and shutdown (protocol edges the API server cannot be made to produce on demand)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from e2e.cluster.pki import Pki, ensure_pki, write_serving_pair
from unit.webhook_fixtures import job_dict, queue, review
from webhooks.review import Admission, AdmissionOptions
from webhooks.server import CertificateReloader, WebhookMetrics, WebhookServer, build_app
from webhooks.view import StaticView


@dataclass
class Running:
    url: str
    server: WebhookServer
    registry: CollectorRegistry
    pki: Pki
    cert_dir: Path
    client_ssl: ssl.SSLContext


async def _start(tmp_path: Path, client_max_size: int, read_timeout: float = 10.0) -> Running:
    pki = ensure_pki(tmp_path / "pki")
    cert_dir = tmp_path / "serving"
    crt, key = write_serving_pair(pki, cert_dir, ["127.0.0.1"])
    registry = CollectorRegistry()
    app = build_app(
        Admission(StaticView([queue("default")]), AdmissionOptions()),
        WebhookMetrics(registry),
        client_max_size=client_max_size,
        read_timeout=read_timeout,
    )
    server = WebhookServer(app, CertificateReloader(str(crt), str(key)), host="127.0.0.1", port=0)
    port = await server.start(reload_interval=3600, shutdown_timeout=5)
    client_ssl = ssl.create_default_context(cafile=str(pki.ca_crt))
    return Running(f"https://127.0.0.1:{port}", server, registry, pki, cert_dir, client_ssl)


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    r = await _start(tmp_path, 7 * 1024 * 1024)
    yield r
    await r.server.stop()


async def _post(r: Running, path: str, body: bytes) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            r.url + path,
            data=io.BytesIO(body),
            headers={"Content-Type": "application/json"},
            ssl=r.client_ssl,
        ) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else {}


async def test_answers_over_tls_and_counts(running: Running) -> None:
    """A review over HTTPS (certificate signed by the CA) is answered and counted by result."""
    status, body = await _post(running, "/jobs/validate", json.dumps(review(job_dict())).encode())
    assert status == 200
    assert body["response"]["allowed"] is True  # type: ignore[index]
    labels = {"path": "/jobs/validate", "operation": "CREATE", "result": "allowed"}
    assert (
        running.registry.get_sample_value("caldera_webhook_admission_requests_total", labels) == 1
    )
    assert (
        running.registry.get_sample_value(
            "caldera_webhook_admission_duration_seconds_count", {"path": "/jobs/validate"}
        )
        == 1
    )


async def test_large_review_up_to_limit(running: Running) -> None:
    """A 6 MiB review (aiohttp's default limit is 1 MiB) is accepted; 8 MiB gets 413."""
    big = job_dict()
    big["metadata"]["annotations"] = {"blob": "x" * (6 * 1024 * 1024)}
    status, _ = await _post(running, "/jobs/validate", json.dumps(review(big)).encode())
    assert status == 200
    big["metadata"]["annotations"] = {"blob": "x" * (8 * 1024 * 1024)}
    status, _ = await _post(running, "/jobs/validate", json.dumps(review(big)).encode())
    assert status == 413


async def test_bad_content_type_is_400(running: Running) -> None:
    """A wrong content type is answered 400 with an errored AdmissionReview."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(running.url + "/jobs/validate", data=b"x", ssl=running.client_ssl) as resp,
    ):
        assert resp.status == 400
        body = await resp.json()
    assert "expected Content-Type application/json" in body["response"]["status"]["message"]


async def test_garbage_gets_an_errored_review_and_others_still_pass(running: Running) -> None:
    """Bad JSON, a review of another kind and an empty body are each answered 400 with a
    message; the next good review is allowed."""
    for body, words in (
        (b"{not json", "JSON is malformed"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "AdmissionReview"),
        (b"", "empty"),
    ):
        status, answer = await _post(running, "/jobs/validate", body)
        assert status == 400, body
        message = answer["response"]["status"]["message"]  # type: ignore[index]
        assert words.lower() in str(message).lower(), (body, message)
    status, answer = await _post(running, "/jobs/validate", json.dumps(review(job_dict())).encode())
    assert status == 200
    assert answer["response"]["allowed"] is True  # type: ignore[index]


async def test_a_trickling_client_is_cut_off_while_others_are_answered(tmp_path: Path) -> None:
    """A client sending its body a byte at a time gets 408 once the read deadline passes;
    meanwhile ordinary reviews are answered at once."""
    r = await _start(tmp_path, 7 * 1024 * 1024, read_timeout=1.0)
    try:
        port = int(r.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=r.client_ssl)
        writer.write(
            b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError):
                for _ in range(40):
                    writer.write(b" ")
                    await writer.drain()
                    await asyncio.sleep(0.1)

        trickling = asyncio.create_task(trickle())
        good = json.dumps(review(job_dict())).encode()
        loop = asyncio.get_running_loop()
        for _ in range(5):
            started = loop.time()
            status, _ = await _post(r, "/jobs/validate", good)
            assert status == 200
            assert loop.time() - started < 0.5
        status_line = await asyncio.wait_for(reader.readline(), 5)
        assert status_line.startswith(b"HTTP/1.1 408"), status_line
        trickling.cancel()
        writer.close()
        labels = {"path": "/jobs/validate", "operation": "-", "result": "error"}
        assert r.registry.get_sample_value("caldera_webhook_admission_requests_total", labels) == 1
    finally:
        await r.server.stop()


async def _serial(r: Running) -> int:
    """The serial number of the certificate a new TLS connection is served."""
    port = int(r.url.rsplit(":", 1)[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=r.client_ssl)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der).serial_number


async def test_certificate_is_reloaded_when_files_change(running: Running) -> None:
    """After the files are replaced, new connections get the new certificate."""
    before = await _serial(running)
    assert running.server.certs.reload_if_changed() is False
    crt, _ = write_serving_pair(running.pki, running.cert_dir, ["127.0.0.1"])
    os.utime(crt, ns=(1, 1))  # a different stamp even within one filesystem tick
    assert running.server.certs.reload_if_changed() is True
    assert await _serial(running) != before


async def test_broken_new_certificate_keeps_the_old_one(running: Running) -> None:
    """A half-written certificate is not loaded; the server keeps answering with the old one."""
    (running.cert_dir / "tls.crt").write_text("-----BEGIN CERTIFICATE-----\ntruncated")
    assert running.server.certs.reload_if_changed() is False
    status, _ = await _post(running, "/jobs/validate", json.dumps(review(job_dict())).encode())
    assert status == 200


async def test_stop_closes_the_port(tmp_path: Path) -> None:
    """After stop() the port refuses connections."""
    r = await _start(tmp_path, 1024 * 1024)
    await r.server.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _post(r, "/jobs/validate", b"{}")
