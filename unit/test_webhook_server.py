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
from webhooks.listener import ListenerLimits
from webhooks.review import Admission, AdmissionOptions
from webhooks.server import (
    CertificateReloader,
    RequestLimits,
    WebhookMetrics,
    WebhookServer,
    build_app,
)
from webhooks.view import StaticView


@dataclass
class Running:
    url: str
    server: WebhookServer
    registry: CollectorRegistry
    pki: Pki
    cert_dir: Path
    client_ssl: ssl.SSLContext


async def _start(
    tmp_path: Path,
    client_max_size: int,
    read_timeout: float = 10.0,
    *,
    limits: ListenerLimits | None = None,
    requests: RequestLimits | None = None,
    admission: Admission | None = None,
    factory: object = None,
) -> Running:
    pki = ensure_pki(tmp_path / "pki")
    cert_dir = tmp_path / "serving"
    crt, key = write_serving_pair(pki, cert_dir, ["127.0.0.1"])
    registry = CollectorRegistry()
    app = build_app(
        admission or Admission(StaticView([queue("default")]), AdmissionOptions()),
        WebhookMetrics(registry),
        client_max_size=client_max_size,
        read_timeout=read_timeout,
        limits=requests,
        factory=factory,  # type: ignore[arg-type]
        cache_sync_timeout=0.2,
    )
    certs = CertificateReloader(str(crt), str(key))
    server = WebhookServer(app, certs, host="127.0.0.1", port=0, limits=limits)
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


# --- hostile clients (issue 39) -----------------------------------------------------------------


async def _refused_connection(r: Running) -> None:
    """Connect; raises when the server closes the connection (during or after the handshake)."""
    reader, _ = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)
    if not await reader.read(1):
        raise ConnectionResetError


def _port(r: Running) -> int:
    return int(r.url.rsplit(":", 1)[1])


def _refusals(r: Running, reason: str) -> float:
    value = r.registry.get_sample_value("caldera_webhook_refusals_total", {"reason": reason})
    return value or 0.0


async def _until_closed(reader: asyncio.StreamReader, within: float) -> bytes:
    """What the server sent before closing the connection (fails if it stays open)."""
    received = b""
    async with asyncio.timeout(within):
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while chunk := await reader.read(65536):
                received += chunk
    return received


_HEAD = b"POST /jobs/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


async def test_trickled_headers_are_cut_while_others_are_answered(tmp_path: Path) -> None:
    """A client sending its headers a byte at a time is disconnected header_timeout after its
    first byte (aiohttp alone waits forever); meanwhile reviews are answered at once."""
    r = await _start(tmp_path, 1 << 20, limits=ListenerLimits(header_timeout=0.5))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)

        async def trickle() -> None:
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                for byte in _HEAD * 10:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.05)

        trickling = asyncio.create_task(trickle())
        loop = asyncio.get_running_loop()
        started = loop.time()
        good = json.dumps(review(job_dict())).encode()
        for _ in range(3):
            status, _ = await _post(r, "/jobs/validate", good)
            assert status == 200
        assert await _until_closed(reader, 3) == b""
        assert 0.4 < loop.time() - started < 3.0
        assert _refusals(r, "header_timeout") == 1
        trickling.cancel()
        writer.close()
    finally:
        await r.server.stop()


async def test_silent_connections_are_closed(tmp_path: Path) -> None:
    """A TCP connection that never starts TLS is closed after header_timeout; a TLS connection
    that never sends a request after idle_timeout."""
    limits = ListenerLimits(header_timeout=0.3, idle_timeout=1.5)
    r = await _start(tmp_path, 1 << 20, limits=limits)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        plain, plain_writer = await asyncio.open_connection("127.0.0.1", _port(r))
        tls, tls_writer = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)
        assert await _until_closed(plain, 3) == b""
        assert loop.time() - started < 1.2  # the handshake's deadline, not the idle one
        assert await _until_closed(tls, 5) == b""
        assert 1.4 < loop.time() - started < 4.0
        assert _refusals(r, "idle") == 1
        for w in (plain_writer, tls_writer):
            w.close()
        assert r.server.listener is not None
        assert r.server.listener.open == 0
    finally:
        await r.server.stop()


async def test_connections_beyond_the_cap_are_closed_and_open_ones_keep_working(
    tmp_path: Path,
) -> None:
    """With max_connections 3, a fourth connection is closed at once; the three keep working,
    and a slot freed is taken again."""
    r = await _start(tmp_path, 1 << 20, limits=ListenerLimits(max_connections=3))
    try:
        opened = [
            await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl) for _ in range(3)
        ]
        with pytest.raises((ConnectionError, ssl.SSLError)):
            await _refused_connection(r)
        assert _refusals(r, "connections") == 1
        body = json.dumps(review(job_dict())).encode()
        reader, writer = opened[0]
        writer.write(_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        for _, w in opened:
            w.close()
            await w.wait_closed()
        await asyncio.sleep(0.1)
        status, _ = await _post(r, "/jobs/validate", body)
        assert status == 200
    finally:
        await r.server.stop()


async def test_requests_beyond_the_in_flight_caps_get_429(tmp_path: Path) -> None:
    """With one large review being read (max_large_in_flight 1), another large one is answered
    429 unread, while a small one is still decided; max_in_flight counts every review."""
    r = await _start(
        tmp_path, 1 << 20, requests=RequestLimits(max_in_flight=2, max_large_in_flight=1)
    )
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)
        writer.write(_HEAD + b"Content-Length: 100000\r\n\r\n{")  # a large body, held open
        await writer.drain()
        await asyncio.sleep(0.1)
        big = job_dict()
        big["metadata"]["annotations"] = {"blob": "x" * 70000}
        status, answer = await _post(r, "/jobs/validate", json.dumps(review(big)).encode())
        assert status == 429
        assert "too many reviews in flight" in answer["response"]["status"]["message"]  # type: ignore[index]
        small = json.dumps(review(job_dict())).encode()
        status, _ = await _post(r, "/jobs/validate", small)
        assert status == 200
        async with (  # a request without a body is not a large one
            aiohttp.ClientSession() as session,
            session.get(r.url + "/jobs/validate", ssl=r.client_ssl) as resp,
        ):
            assert resp.status == 405
        _, other_writer = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)
        other_writer.write(_HEAD + b"Content-Length: 10\r\n\r\n{")  # a second one in flight
        await other_writer.drain()
        await asyncio.sleep(0.1)
        status, _ = await _post(r, "/jobs/validate", small)
        assert status == 429
        assert _refusals(r, "in_flight") == 2
        for w in (writer, other_writer):
            w.close()
        await asyncio.sleep(0.1)
        status, _ = await _post(r, "/jobs/validate", small)
        assert status == 200
    finally:
        await r.server.stop()


async def test_compressed_and_oversized_bodies_are_refused_unread(running: Running) -> None:
    """Content-Encoding gzip is answered 415; a Content-Length above client_max_size 413 at
    once, before a byte of the body was sent."""
    body = json.dumps(review(job_dict())).encode()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            running.url + "/jobs/validate",
            data=body,
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            ssl=running.client_ssl,
        ) as resp,
    ):
        assert resp.status == 415
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", _port(running), ssl=running.client_ssl
    )
    writer.write(_HEAD + b"Content-Length: %d\r\n\r\n" % (8 << 20))
    answer = await asyncio.wait_for(_until_closed(reader, 3), 3)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:80]
    writer.close()
    assert _refusals(running, "encoding") == 1
    assert _refusals(running, "too_large") == 1


class _NeverSynced:
    """The informer factory of a webhook whose caches do not sync."""

    def has_synced(self) -> bool:
        return False

    async def wait_for_sync(self) -> None:
        await asyncio.Event().wait()


async def test_a_review_before_the_cache_synced_is_refused_with_its_uid(tmp_path: Path) -> None:
    """An early review is refused (HTTP 200, allowed false) carrying its uid: an HTTP error or
    an empty uid would admit it unchecked under failurePolicy Ignore."""
    r = await _start(tmp_path, 1 << 20, factory=_NeverSynced())
    try:
        sent = review(job_dict())
        status, answer = await _post(r, "/jobs/validate", json.dumps(sent).encode())
        assert status == 200
        response = answer["response"]
        assert response["uid"] == sent["request"]["uid"]  # type: ignore[index]
        assert response["allowed"] is False  # type: ignore[index]
        assert "not synced" in response["status"]["message"]  # type: ignore[index]
        assert _refusals(r, "not_synced") == 1
    finally:
        await r.server.stop()


async def test_malformed_review_with_a_readable_uid_is_refused_with_it(running: Running) -> None:
    """A review whose object cannot be read but whose uid can is refused with that uid (HTTP
    200), not answered 400 with an empty uid."""
    sent = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": 7}}  # fmt: skip
    status, answer = await _post(running, "/jobs/validate", json.dumps(sent).encode())
    assert status == 200
    assert answer["response"]["uid"] == "u-1"  # type: ignore[index]
    assert answer["response"]["allowed"] is False  # type: ignore[index]


async def test_an_internal_error_is_not_shown_to_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a rule is refused with a generic message and an error id, not its text."""

    def broken(self: Admission, req: object) -> None:
        raise RuntimeError("secret detail")

    monkeypatch.setattr(Admission, "_validate_job", broken)
    r = await _start(tmp_path, 1 << 20, admission=Admission(StaticView([]), AdmissionOptions()))
    try:
        status, answer = await _post(r, "/jobs/validate", json.dumps(review(job_dict())).encode())
        assert status == 200
        message = answer["response"]["status"]["message"]  # type: ignore[index]
        assert "secret detail" not in message
        assert "error id" in message
    finally:
        await r.server.stop()


async def test_a_certificate_with_the_old_key_leaves_the_served_context_alone(
    running: Running,
) -> None:
    """A new certificate beside the old key does not load, and the context being served is not
    touched (it kept the new certificate without its key before); the pair loads once both
    files are new, into a new context."""
    before = await _serial(running)
    served = running.server.certs.context
    old_key = (running.cert_dir / "tls.key").read_bytes()
    crt, key = write_serving_pair(running.pki, running.cert_dir, ["127.0.0.1"])
    new_key = key.read_bytes()
    key.write_bytes(old_key)
    os.utime(crt, ns=(1, 1))
    assert running.server.certs.reload_if_changed() is False
    assert running.server.certs.context is served
    assert await _serial(running) == before  # handshakes still succeed, with the old pair
    status, _ = await _post(running, "/jobs/validate", json.dumps(review(job_dict())).encode())
    assert status == 200
    key.write_bytes(new_key)
    assert running.server.certs.reload_if_changed() is True
    assert running.server.certs.context is not served
    assert await _serial(running) != before


async def test_stop_lets_a_request_in_flight_finish(tmp_path: Path) -> None:
    """A review whose body is still arriving when stop() begins is answered; the port is closed
    to new connections meanwhile."""
    r = await _start(tmp_path, 1 << 20)
    body = json.dumps(review(job_dict())).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", _port(r), ssl=r.client_ssl)
    writer.write(_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
    await writer.drain()
    await asyncio.sleep(0.1)
    stopping = asyncio.create_task(r.server.stop())
    await asyncio.sleep(0.2)
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", _port(r))
    writer.write(body[10:])
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    await stopping
