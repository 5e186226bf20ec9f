"""Protocol edge cases of the API client (caldera.kube.client and .watch) that a real API server
cannot be made to produce on demand (a 429 with Retry-After, a 503, a watch stream cut mid-line,
a silent stream, a refused connection, an expiring token), against a small in-process aiohttp
server; and the pure request building (caldera.kube.requests) and retry rule
(caldera.kube.retry). Everything else is tested on the real server in e2e/test_kube_client.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from caldera.api.core import ConfigMap
from caldera.api.kinds import CONFIGMAP
from caldera.api.meta import ObjectMeta, StatusCause, StatusDetails
from caldera.kube.client import ClientOptions, KubeClient, ResponseTooLargeError
from caldera.kube.config import ConnectionSettings
from caldera.kube.errors import (
    ApiConnectionError,
    ApiError,
    Conflict,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from caldera.kube.requests import (
    PatchType,
    PropagationPolicy,
    binding,
    delete_options,
    encode_body,
    eviction,
    list_query,
    patch_request,
    watch_query,
)
from caldera.kube.retry import RetryOptions, retry_delay

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "code": code,
        "reason": reason,
        "message": message,
    }


def reply(code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.json_response(body, status=code, headers=headers)

    return handle


def event_line(type_: str, name: str, rv: str) -> bytes:
    obj = {**CM, "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}
    return json.dumps({"type": type_, "object": obj}).encode() + b"\n"


class FakeApiServer:
    """Answers each request with the next queued handler (the last one repeats)."""

    def __init__(self) -> None:
        self.handlers: list[Handler] = []
        self.seen: list[tuple[str, str, str | None]] = []  # method, path?query, Authorization
        self.release = asyncio.Event()  # lets handlers that hang (silent watches) finish
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.seen.append((request.method, request.path_qs, request.headers.get("Authorization")))
        handler = self.handlers.pop(0) if len(self.handlers) > 1 else self.handlers[0]
        return await handler(request)

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", port)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    fake = FakeApiServer()
    await fake.start()
    yield fake
    await fake.stop()


class Sleeps:
    """The client's sleep seam: records each delay instead of waiting it."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.on_sleep: Callable[[], Awaitable[None]] | None = None

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.on_sleep is not None:
            await self.on_sleep()


def make_client(
    port: int,
    sleeps: Sleeps,
    registry: CollectorRegistry,
    *,
    max_attempts: int = 5,
    qps: float = 1000.0,
    burst: int = 1000,
    clock: Callable[[], float] = time.monotonic,
    settings: ConnectionSettings | None = None,
) -> KubeClient:
    options = ClientOptions(
        qps=qps,
        burst=burst,
        timeout=5.0,
        retry=RetryOptions(max_attempts=max_attempts, base=0.25, cap=4.0, jitter=0.2),
    )
    return KubeClient(
        settings or ConnectionSettings(host=f"http://127.0.0.1:{port}", ssl_context=None),
        options,
        registry=registry,
        sleep=sleeps,
        rng=lambda: 0.0,  # no jitter: backoffs are exactly base * 2**attempt
        clock=clock,
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


# --- retries against the fake server -----------------------------------------------------------


async def test_429_with_retry_after_is_retried_even_for_a_create(server: FakeApiServer) -> None:
    """A 429 was not processed, so even a POST is retried, after the Retry-After delay."""
    server.handlers = [
        reply(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "2"}),
        reply(201, CM),
    ]
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(server.port, sleeps, registry) as client:
        created = await client.create(
            CONFIGMAP, ConfigMap(metadata=ObjectMeta(name="a")), namespace="ns"
        )
    assert created.metadata.name == "a"
    assert sleeps.delays == [2.0]
    assert [m for m, _, _ in server.seen] == ["POST", "POST"]
    assert sample(registry, "caldera_rest_client_retries_total", verb="POST", reason="429") == 1
    assert sample(registry, "caldera_rest_client_requests_total", verb="POST", code="429") == 1
    assert sample(registry, "caldera_rest_client_requests_total", verb="POST", code="201") == 1


async def test_503_on_a_read_is_retried_with_backoff(server: FakeApiServer) -> None:
    """A GET answered 503 is retried after the base backoff, then succeeds."""
    server.handlers = [
        reply(503, status(503, "ServiceUnavailable", "etcd leader changed")),
        reply(200, CM),
    ]
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(server.port, sleeps, registry) as client:
        got = await client.get(CONFIGMAP, "a", namespace="ns")
    assert got.metadata.namespace == "ns"
    assert sleeps.delays == [0.25]
    assert sample(registry, "caldera_rest_client_retries_total", verb="GET", reason="503") == 1


async def test_503_on_a_write_is_not_retried(server: FakeApiServer) -> None:
    """A POST answered 503 may have been applied: it is raised at once, sent only once."""
    server.handlers = [reply(503, status(503, "ServiceUnavailable", "try later")), reply(201, CM)]
    sleeps = Sleeps()
    async with make_client(server.port, sleeps, CollectorRegistry()) as client:
        with pytest.raises(ServerError, match="try later"):
            await client.create(CONFIGMAP, CM, namespace="ns")
    assert len(server.seen) == 1
    assert sleeps.delays == []


async def test_read_retries_are_bounded(server: FakeApiServer) -> None:
    """A server that keeps failing gets max_attempts requests, with doubling backoffs between."""
    server.handlers = [reply(500, status(500, "InternalError", "boom"))]
    sleeps = Sleeps()
    async with make_client(server.port, sleeps, CollectorRegistry(), max_attempts=4) as client:
        with pytest.raises(ServerError, match="boom"):
            await client.get(CONFIGMAP, "a", namespace="ns")
    assert len(server.seen) == 4
    assert sleeps.delays == [0.25, 0.5, 1.0]


async def test_a_bounded_request_refuses_a_longer_answer_without_a_retry(
    server: FakeApiServer,
) -> None:
    """``max_bytes``: a body within the bound is returned; a longer one is an error, not
    retried (the next answer would be as long)."""
    server.handlers = [reply(200, {"items": []}), reply(200, {"items": ["x" * 1000]})]
    sleeps = Sleeps()
    async with make_client(server.port, sleeps, CollectorRegistry()) as client:
        assert await client.request("GET", "/apis/x", max_bytes=100) == b'{"items": []}'
        with pytest.raises(ResponseTooLargeError, match="over 100 bytes"):
            await client.request("GET", "/apis/x", max_bytes=100)
    assert len(server.seen) == 2
    assert sleeps.delays == []


async def test_401_reloads_credentials_once_and_retries(server: FakeApiServer) -> None:
    """An expired token (401) makes the client reload credentials and repeat the request once."""

    class RotatingAuth:
        def __init__(self) -> None:
            self.token = "old"

        async def header(self) -> str | None:
            return f"Bearer {self.token}"

        async def refresh(self) -> bool:
            self.token = "new"
            return True

    async def check(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != "Bearer new":
            return web.json_response(status(401, "Unauthorized", "Unauthorized"), status=401)
        return web.json_response(CM)

    server.handlers = [check]
    settings = ConnectionSettings(
        host=f"http://127.0.0.1:{server.port}", ssl_context=None, auth=RotatingAuth()
    )
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(0, sleeps, registry, settings=settings) as client:
        await client.delete(CONFIGMAP, "a", namespace="ns")
    assert [auth for _, _, auth in server.seen] == ["Bearer old", "Bearer new"]
    assert sleeps.delays == []
    assert (
        sample(registry, "caldera_rest_client_retries_total", verb="DELETE", reason="unauthorized")
        == 1
    )


async def test_401_after_reload_is_raised(server: FakeApiServer) -> None:
    """Credentials that are still refused after a reload give Unauthorized, without a loop."""
    server.handlers = [reply(401, status(401, "Unauthorized", "Unauthorized"))]

    class Auth:
        async def header(self) -> str | None:
            return "Bearer nope"

        async def refresh(self) -> bool:
            return True

    settings = ConnectionSettings(
        host=f"http://127.0.0.1:{server.port}", ssl_context=None, auth=Auth()
    )
    async with make_client(0, Sleeps(), CollectorRegistry(), settings=settings) as client:
        with pytest.raises(Unauthorized):
            await client.get(CONFIGMAP, "a", namespace="ns")
    assert len(server.seen) == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_connection_refused_write_is_retried_until_the_server_is_up() -> None:
    """A refused connection never reached the server, so a POST is retried; here the server
    comes up during the first backoff and the retry succeeds."""
    port = free_port()
    late = FakeApiServer()
    late.handlers = [reply(201, CM)]
    sleeps = Sleeps()

    async def start_server() -> None:
        if late.runner is None:
            await late.start(port)

    sleeps.on_sleep = start_server
    registry = CollectorRegistry()
    try:
        async with make_client(port, sleeps, registry) as client:
            created = await client.create(CONFIGMAP, CM, namespace="ns")
    finally:
        await late.stop()
    assert created.metadata.name == "a"
    assert sleeps.delays == [0.25]
    assert [m for m, _, _ in late.seen] == ["POST"]
    assert sample(registry, "caldera_rest_client_requests_total", verb="POST", code="<error>") == 1
    assert (
        sample(registry, "caldera_rest_client_retries_total", verb="POST", reason="connection") == 1
    )


async def test_connection_refused_gives_up_after_max_attempts() -> None:
    """With nobody listening, the client gives up after max_attempts with a clear error."""
    sleeps = Sleeps()
    async with make_client(free_port(), sleeps, CollectorRegistry(), max_attempts=3) as client:
        with pytest.raises(ApiConnectionError) as err:
            await client.patch(CONFIGMAP, "a", {"data": {"k": "v"}}, namespace="ns")
    assert err.value.sent is False
    assert "PATCH /api/v1/namespaces/ns/configmaps/a: cannot connect" in str(err.value)
    assert sleeps.delays == [0.25, 0.5]


async def test_rate_limiter_spaces_requests_but_not_watches(server: FakeApiServer) -> None:
    """Beyond the burst, requests wait 1/qps each for the limiter; opening a watch does not."""
    server.handlers = [reply(200, CM)]
    now = [10.0]
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(
        server.port, sleeps, registry, qps=10, burst=1, clock=lambda: now[0]
    ) as client:
        for _ in range(3):
            await client.get(CONFIGMAP, "a", namespace="ns")
        assert sleeps.delays == pytest.approx([0.1, 0.2])
        server.handlers = [silent_after(b"", server.release)]
        async with client.watch(CONFIGMAP, namespace="ns", inactivity_timeout=0.01) as events:
            assert [e async for e in events] == []
    assert sleeps.delays == pytest.approx([0.1, 0.2])
    assert sample(
        registry, "caldera_rest_client_rate_limiter_duration_seconds_sum"
    ) == pytest.approx(0.3)
    assert sample(registry, "caldera_rest_client_rate_limiter_duration_seconds_count") == 3


# --- watch streams -----------------------------------------------------------------------------


def streaming(*writes: bytes, cut: bool = False) -> Handler:
    """A watch response written in the given pieces, ended cleanly or by closing the socket."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for piece in writes:
            await response.write(piece)
            await asyncio.sleep(0.01)  # separate chunks on the wire
        if cut:
            assert request.transport is not None
            request.transport.abort()  # no terminating chunk: the client sees a broken stream
            return response
        await response.write_eof()
        return response

    return handle


def silent_after(first: bytes, release: asyncio.Event) -> Handler:
    """A watch that sends `first` and then nothing, keeping the connection open until released."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        if first:
            await response.write(first)
        await asyncio.wait_for(release.wait(), timeout=30)
        return response

    return handle


async def names_into(received: list[str], client: KubeClient) -> None:
    """Watch ConfigMaps in "ns", appending each event's object name to `received`."""
    async with client.watch(CONFIGMAP, namespace="ns") as events:
        async for event in events:
            assert isinstance(event.object, ConfigMap)
            received.append(event.object.metadata.name)


async def test_events_split_across_chunks_are_reassembled(server: FakeApiServer) -> None:
    """Lines split over several chunks, and several lines in one chunk, decode in order."""
    one, two, three = (
        event_line(t, "a", rv) for t, rv in (("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "3"))
    )
    server.handlers = [streaming(one[:10], one[10:40], one[40:] + two + three[:5], three[5:])]
    async with (
        make_client(server.port, Sleeps(), CollectorRegistry()) as client,
        client.watch(CONFIGMAP, namespace="ns", resource_version="0") as events,
    ):
        got = [
            (e.type, e.object.metadata.resource_version)
            async for e in events
            if isinstance(e.object, ConfigMap)
        ]
    assert got == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "3")]
    method, path, _ = server.seen[0]
    assert method == "GET"
    assert "watch=true" in path
    assert "allowWatchBookmarks=true" in path
    assert "resourceVersion=0" in path


async def test_stream_cut_mid_line_delivers_whole_events_then_fails(server: FakeApiServer) -> None:
    """A connection lost in the middle of an event: complete events arrive, the partial one is
    dropped, and the stream raises ApiConnectionError (never a decode error)."""
    partial = event_line("MODIFIED", "b", "3")[:25]
    server.handlers = [
        streaming(event_line("ADDED", "a", "1") + event_line("ADDED", "b", "2") + partial, cut=True)
    ]
    received: list[str] = []
    async with make_client(server.port, Sleeps(), CollectorRegistry()) as client:
        with pytest.raises(ApiConnectionError) as err:
            await names_into(received, client)
    assert received == ["a", "b"]
    assert err.value.sent is True
    assert str(err.value).startswith("WATCH /api/v1/namespaces/ns/configmaps: ")


async def test_stream_ending_cleanly_mid_line_is_an_error(server: FakeApiServer) -> None:
    """A body that ends with half an event (a proxy closing cleanly) is also a cut stream."""
    partial = event_line("MODIFIED", "b", "3")[:-20]
    server.handlers = [streaming(event_line("ADDED", "a", "1"), partial)]
    received: list[str] = []
    async with make_client(server.port, Sleeps(), CollectorRegistry()) as client:
        with pytest.raises(ApiConnectionError, match="ended in the middle of an event"):
            await names_into(received, client)
    assert received == ["a"]


async def test_silent_stream_ends_after_the_inactivity_timeout(server: FakeApiServer) -> None:
    """A stream that goes quiet (a dead connection) ends after the inactivity timeout instead
    of hanging forever; what came before is delivered."""
    server.handlers = [silent_after(event_line("ADDED", "a", "1"), server.release)]
    loop = asyncio.get_running_loop()
    async with make_client(server.port, Sleeps(), CollectorRegistry()) as client:
        start = loop.time()
        async with client.watch(CONFIGMAP, namespace="ns", inactivity_timeout=0.3) as events:
            got = [e.type async for e in events]
        elapsed = loop.time() - start
    assert got == ["ADDED"]
    assert 0.3 <= elapsed < 5


async def test_watch_error_status_is_yielded(server: FakeApiServer) -> None:
    """An ERROR event carries a Status object, not a half-decoded ConfigMap."""
    error = json.dumps(
        {"type": "ERROR", "object": status(410, "Expired", "too old resource version: 1 (5)")}
    )
    server.handlers = [streaming(error.encode() + b"\n")]
    async with (
        make_client(server.port, Sleeps(), CollectorRegistry()) as client,
        client.watch(CONFIGMAP, namespace="ns", resource_version="1") as events,
    ):
        got = [e async for e in events]
    assert [e.type for e in got] == ["ERROR"]
    assert not isinstance(got[0].object, ConfigMap)
    assert getattr(got[0].object, "code", None) == 410


# --- pure request building ---------------------------------------------------------------------


def test_list_query_with_continue_drops_resource_version() -> None:
    """A continue token carries the snapshot; resourceVersion must not be sent with it."""
    assert list_query(limit=5, resource_version="0", label_selector="a=b") == [
        ("labelSelector", "a=b"),
        ("limit", "5"),
        ("resourceVersion", "0"),
    ]
    assert list_query(
        limit=5, continue_="tok", resource_version="0", resource_version_match="Exact"
    ) == [
        ("limit", "5"),
        ("continue", "tok"),
    ]


def test_watch_query_spells_booleans_as_the_server_expects() -> None:
    """watch=true, bookmarks on by default, and only the options that were set."""
    assert watch_query(resource_version="7", timeout_seconds=60) == [
        ("watch", "true"),
        ("resourceVersion", "7"),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", "60"),
    ]
    assert ("sendInitialEvents", "true") in watch_query(send_initial_events=True)
    assert ("allowWatchBookmarks", "true") not in watch_query(allow_watch_bookmarks=False)


def test_delete_options_carry_preconditions_and_policy() -> None:
    """uid and resourceVersion become preconditions; nothing set means no body."""
    assert delete_options() is None
    assert delete_options(
        uid="u", propagation_policy=PropagationPolicy.FOREGROUND, grace_period_seconds=0
    ) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u"},
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
    }


def test_patch_request_content_types_and_apply_rules() -> None:
    """Each patch type has its content type; apply needs a manager; force is apply-only."""
    body, ctype, query = patch_request([{"op": "remove", "path": "/data/a"}], PatchType.JSON)
    assert (ctype, query) == ("application/json-patch+json", [])
    assert json.loads(body) == [{"op": "remove", "path": "/data/a"}]
    _, ctype, query = patch_request(CM, PatchType.APPLY, field_manager="caldera", force=True)
    assert ctype == "application/apply-patch+yaml"
    assert query == [("fieldManager", "caldera"), ("force", "true")]
    with pytest.raises(ValueError, match="field_manager"):
        patch_request(CM, PatchType.APPLY)
    with pytest.raises(ValueError, match="only valid with server-side apply"):
        patch_request(CM, PatchType.MERGE, force=True)


def test_struct_bodies_omit_defaults_but_keep_type_meta() -> None:
    """A model encodes only what is set (so a merge patch touches nothing else), plus
    apiVersion and kind."""
    body = msgspec.json.decode(
        encode_body(ConfigMap(metadata=ObjectMeta(name="a"), data={"k": "v"}))
    )
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a"},
        "data": {"k": "v"},
    }
    assert encode_body(b'{"raw": 1}') == b'{"raw": 1}'


def test_binding_and_eviction_bodies() -> None:
    """A Binding targets the node; an Eviction carries delete options when given."""
    assert binding("ns", "p", "n1", uid="u")["target"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "n1",
    }
    assert binding("ns", "p", "n1", uid="u")["metadata"] == {
        "name": "p",
        "namespace": "ns",
        "uid": "u",
    }
    annotated = binding("ns", "p", "n1", annotations={"volcano.sh/bind-phase": "allocating"})
    assert annotated["metadata"]["annotations"] == {"volcano.sh/bind-phase": "allocating"}
    assert "deleteOptions" not in eviction("ns", "p")
    assert eviction("ns", "p", grace_period_seconds=0)["deleteOptions"]["gracePeriodSeconds"] == 0


# --- the retry rule ----------------------------------------------------------------------------

POLICY = RetryOptions(max_attempts=3, base=1.0, cap=8.0, jitter=0.0)


def api(
    cls: type[ApiError],
    code: int,
    *,
    retry_after: float | None = None,
    details: StatusDetails | None = None,
) -> ApiError:
    return cls(code, "", "m", retry_after=retry_after, details=details)


@pytest.mark.parametrize(
    ("method", "error", "expected"),
    [
        ("GET", api(TooManyRequests, 429, retry_after=3), (3.0, "429")),
        ("POST", api(TooManyRequests, 429, retry_after=3), (3.0, "429")),
        ("POST", api(TooManyRequests, 429, retry_after=600), (60.0, "429")),
        ("PATCH", api(TooManyRequests, 429), (1.0, "429")),
        ("GET", api(ServerError, 503), (1.0, "503")),
        ("GET", api(ServerError, 500), (1.0, "500")),
        ("POST", api(ServerError, 503), None),
        ("PUT", api(ServerError, 500), None),
        ("DELETE", api(ServerError, 504), None),
        ("GET", ApiConnectionError("reset", sent=True), (1.0, "connection")),
        ("POST", ApiConnectionError("reset", sent=True), None),
        ("POST", ApiConnectionError("refused", sent=False), (1.0, "connection")),
        ("GET", ApiConnectionError("bad cert", sent=False, transient=False), None),
        ("GET", api(NotFound, 404), None),
        ("GET", api(Conflict, 409), None),
        ("POST", api(ApiError, 400), None),
    ],
)
def test_retry_rule(
    method: str, error: ApiError | ApiConnectionError, expected: tuple[float, str] | None
) -> None:
    """429 always (Retry-After capped), 5xx and sent-connection failures for reads only,
    unsent connection failures always, TLS and 4xx never."""
    assert retry_delay(method, error, 0, POLICY, rng=lambda: 0.0) == expected


def test_retry_rule_stops_at_max_attempts() -> None:
    """The attempt that would exceed max_attempts gets no retry."""
    error = api(ServerError, 503)
    assert retry_delay("GET", error, 1, POLICY, rng=lambda: 0.0) == (2.0, "503")
    assert retry_delay("GET", error, 2, POLICY, rng=lambda: 0.0) is None


def test_disruption_budget_refusal_is_not_retried() -> None:
    """An eviction blocked by a PodDisruptionBudget is an answer, not throttling."""
    details = StatusDetails(causes=(StatusCause(reason="DisruptionBudget", message="needs 1"),))
    assert (
        retry_delay("POST", api(TooManyRequests, 429, retry_after=10, details=details), 0, POLICY)
        is None
    )
