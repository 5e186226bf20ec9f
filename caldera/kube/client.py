"""The Kubernetes API client every Caldera process uses: it sends, waits and counts.

Protocol. Plain HTTPS requests over one `aiohttp.ClientSession` (one connection pool per process),
JSON both ways. Response bodies are read as raw bytes and decoded with msgspec straight into the
caller's model (`KindInfo.decoder`), never through kubernetes-asyncio's model classes, which are 70
times slower. kubernetes-asyncio is used only for configuration and credentials
(`caldera.kube.config`). Requests are built without I/O by `caldera.kube.requests` (paths by
`caldera.api.kinds.resource_path`); answers with an error status are mapped by
`caldera.kube.errors.api_error`, failures without one by `caldera.kube.retry.connection_error`.
A watch's events are read by `caldera.kube.watch.WatchStream`, whose inactivity timeout defaults
to the watch's `timeoutSeconds` plus a margin.

Retries. Each request makes at most `RetryOptions.max_attempts` attempts, waiting as
`caldera.kube.retry.retry_delay` decides between them (429 for every method, 5xx and failures
after sending for reads only, failures before sending for every method; see that module). A 401
reloads the credentials once (token file, exec plugin) and repeats the request once, for every
method: the server did not process it.

Rate limiting. A client-side `TokenBucket` (qps, burst) is passed before every attempt, so a
retry storm or a burst of reconciles cannot flood the API server; the time spent waiting is a
metric. Watches are long-lived and not limited.

Fencing. A client given a `caldera.kube.fence.Fence` (a leader's: `LeaderElector.fence`) checks
it before every attempt of a mutating request (after the rate limiter and any retry backoff),
again once aiohttp has a connection for it (a trace hook, after any wait for a free slot in
the pool or for a new connection), and a last time as the body is written to the socket (with
no event-loop turn between the check and the write; the headers go out with the body): once the
leader's Lease may have passed, the write is dropped with `FencedError` instead of sent. Reads and
watches go on. The Lease itself is renewed through `lease_client()`: a client of its own,
without retries, rate limiter or fence, with a short timeout.

Metrics go to the `CollectorRegistry` given to the client (a private one otherwise), with
client-go's names under the `caldera_` prefix. Logs never contain headers or tokens.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import math
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

import aiohttp
import structlog
from prometheus_client import CollectorRegistry, Counter, Histogram

from caldera import __version__
from caldera.api.kinds import POD, KindInfo, resource_path
from caldera.api.meta import ObjectList
from caldera.kube.config import ConnectionSettings, load_config, load_kubeconfig
from caldera.kube.errors import ApiConnectionError, ApiError, Unauthorized, api_error
from caldera.kube.fence import Fence, FencedError
from caldera.kube.requests import (
    ParamValue,
    PatchType,
    PropagationPolicy,
    Query,
    binding,
    body_identity,
    delete_options,
    encode_body,
    encode_query,
    eviction,
    list_query,
    patch_request,
    watch_query,
    write_query,
)
from caldera.kube.retry import READ_METHODS, RetryOptions, connection_error, retry_delay
from caldera.kube.watch import WatchStream
from caldera.ratelimit import TokenBucket

__all__ = ["ClientMetrics", "ClientOptions", "KubeClient", "ListResult"]

T = TypeVar("T")
R = TypeVar("R")

JSON: Final = "application/json"
# client-go's rest client latency buckets, in seconds.
LATENCY_BUCKETS: Final = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
# How long a watch may stay silent beyond its own timeoutSeconds before it is presumed dead.
WATCH_SILENCE_MARGIN: Final = 30.0
DEFAULT_WATCH_SECONDS: Final = 300


@dataclasses.dataclass(frozen=True, slots=True)
class ClientOptions:
    """Tunables of a `KubeClient`."""

    qps: float = 50.0
    """Sustained requests per second (watches excluded); client-go's default of 5 is too low for
    a controller that creates pods for 1000-replica jobs."""
    burst: int = 100
    """Requests allowed at once after a quiet period."""
    timeout: float = 60.0
    """Whole-request timeout in seconds (a LIST page of 500 pods can take a few seconds)."""
    connect_timeout: float = 10.0
    """Timeout to establish a connection, in seconds."""
    max_connections: int = 100
    """Concurrent connections to the API server (each watch holds one)."""
    retry: RetryOptions = dataclasses.field(default_factory=RetryOptions)
    """Retry policy."""
    user_agent: str = f"caldera/{__version__}"
    """Sent as User-Agent; shows in the API server's audit log."""


@dataclasses.dataclass(frozen=True, slots=True)
class ListResult(Generic[T]):
    """All items of a (paginated) LIST, and the resourceVersion to watch from."""

    items: tuple[T, ...]
    resource_version: str


# --- metrics -----------------------------------------------------------------------------------


class ClientMetrics:
    """The client's Prometheus metrics, in the registry it is given (one client per registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "caldera_rest_client_requests_total",
            "API requests by verb and HTTP status code (<error> when no answer came).",
            ["verb", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "caldera_rest_client_request_duration_seconds",
            "Latency of each attempt of an API request, until the body is read (watch: headers).",
            ["verb"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.retries = Counter(
            "caldera_rest_client_retries_total",
            "Retried API requests by verb and reason (429, 5xx code, connection, unauthorized).",
            ["verb", "reason"],
            registry=registry,
        )
        self.fenced = Counter(
            "caldera_rest_client_fenced_writes_total",
            "Writes dropped before they were sent because the leader's Lease may have passed.",
            ["verb"],
            registry=registry,
        )
        self.rate_limiter = Histogram(
            "caldera_rest_client_rate_limiter_duration_seconds",
            "Time requests waited for the client-side rate limiter.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )


# --- the client --------------------------------------------------------------------------------


class KubeClient:
    """An asyncio client of one API server. Use `async with KubeClient.from_config(...)`.

    Create it inside the event loop that uses it; `close()` releases the connection pool.
    """

    def __init__(
        self,
        settings: ConnectionSettings,
        options: ClientOptions = ClientOptions(),
        *,
        registry: CollectorRegistry | None = None,
        logger: Any = None,
        # Seams for tests: fake time and randomness make retry paths fast and deterministic.
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
        fence: Fence | None = None,
    ) -> None:
        self.settings = settings
        self.fence = fence
        """Checked before every write attempt when set (see the module docstring)."""
        self.options = options
        self._metrics = ClientMetrics(registry if registry is not None else CollectorRegistry())
        self._log = logger if logger is not None else structlog.get_logger("caldera.kube")
        self._sleep = sleep
        self._rng = rng
        self._clock = clock
        self._limiter = TokenBucket(options.qps, options.burst, clock=clock)
        connector = aiohttp.TCPConnector(
            limit=options.max_connections,
            ssl=settings.ssl_context if settings.ssl_context is not None else True,
        )
        # The fence's second check, when a write has its connection (see the module docstring).
        on_wire = aiohttp.TraceConfig()
        on_wire.on_connection_create_end.append(self._fence_on_connection)
        on_wire.on_connection_reuseconn.append(self._fence_on_connection)
        self._session = aiohttp.ClientSession(
            connector=connector,
            trace_configs=[on_wire],
            headers={"User-Agent": options.user_agent, "Accept": JSON},
            # Only the kubeconfig's proxy-url applies; HTTP(S)_PROXY must not capture the
            # API server traffic of an in-cluster process.
            trust_env=False,
        )
        self._timeout = aiohttp.ClientTimeout(
            total=options.timeout, sock_connect=options.connect_timeout
        )

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        options: ClientOptions = ClientOptions(),
        registry: CollectorRegistry | None = None,
        logger: Any = None,
    ) -> _Opening:
        """A client for a kubeconfig (path, else $KUBECONFIG, else ~/.kube/config).

        `async with KubeClient.from_kubeconfig(p) as client: ...`, or `await` it and `close()`.
        """
        return cls._opening(
            lambda: load_kubeconfig(path, context=context), options, registry, logger
        )

    @classmethod
    def from_config(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        options: ClientOptions = ClientOptions(),
        registry: CollectorRegistry | None = None,
        logger: Any = None,
    ) -> _Opening:
        """A client from a kubeconfig when one is given or present, else the in-cluster account."""
        return cls._opening(
            lambda: load_config(kubeconfig, context=context), options, registry, logger
        )

    @classmethod
    def _opening(
        cls,
        load: Callable[[], Awaitable[ConnectionSettings]],
        options: ClientOptions,
        registry: CollectorRegistry | None,
        logger: Any,
    ) -> _Opening:
        """The one way both constructors open a client: ``load`` the settings, then build."""
        return _Opening(load, lambda s: cls(s, options, registry=registry, logger=logger))

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool; open watches end."""
        await self._session.close()

    @property
    def closed(self) -> bool:
        return self._session.closed

    def lease_client(self, timeout: float) -> KubeClient:
        """A client for leader election: same server and credentials, its own connections, one
        attempt per request (no retries), no rate limiter, no fence, and ``timeout`` seconds per
        request (connecting included), so a Lease call can neither wait behind the process's
        own requests nor outlast the renew deadline. Close it when done."""
        options = dataclasses.replace(
            self.options,
            qps=math.inf,
            burst=1,
            timeout=timeout,
            connect_timeout=min(self.options.connect_timeout, timeout),
            max_connections=4,
            retry=RetryOptions(max_attempts=1),
        )
        return KubeClient(self.settings, options, logger=self._log)

    # ---- raw requests ------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Query | Mapping[str, ParamValue] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-request HTTP timeout
        max_bytes: int | None = None,
    ) -> bytes:
        """Send a request (rate-limited, retried per the module's rule) and return the body.

        Raises a typed `ApiError` for an error status and `ApiConnectionError` without an answer;
        with `max_bytes`, `ResponseTooLargeError` (not retried) for a longer body, read no further.
        """
        method = method.upper()
        query = encode_query(params) if isinstance(params, Mapping) else list(params or ())
        headers = {"Content-Type": content_type or JSON} if body is not None else {}
        client_timeout = (
            self._timeout
            if timeout is None
            else aiohttp.ClientTimeout(total=timeout, sock_connect=self.options.connect_timeout)
        )

        async def once() -> bytes:
            response = await self._send(method, method, path, query, body, headers, client_timeout)
            async with response:
                if max_bytes is None:
                    return await response.read()
                return await read_bounded(response, max_bytes)

        return await self._with_retries(method, method, path, once, limited=True)

    async def _throttle(self) -> None:
        """Wait for the client-side rate limiter (every attempt, retries included)."""
        delay = self._limiter.reserve()
        if delay > 0:
            await self._sleep(delay)
        self._metrics.rate_limiter.observe(delay)

    async def _fence_on_connection(
        self, _session: aiohttp.ClientSession, context: Any, _params: object
    ) -> None:
        """aiohttp's trace hook once a request has its connection: a write is checked again."""
        write = context.trace_request_ctx
        if self.fence is not None and isinstance(write, _Write):
            self._check_fence(write.verb, write.method, write.path)

    def _check_fence(self, verb: str, method: str, path: str) -> None:
        assert self.fence is not None
        try:
            self.fence.check(method, path)
        except ApiConnectionError:
            self._metrics.fenced.labels(verb).inc()
            self._log.warning("write dropped: the Lease may have passed", verb=verb, path=path)
            raise

    async def _send(
        self,
        verb: str,
        method: str,
        path: str,
        query: Query,
        body: bytes | None,
        headers: Mapping[str, str],
        client_timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """One HTTP exchange up to the response headers; raises ApiError on an error status, and
        `FencedError` (sending nothing) for a write once the fence has closed."""
        auth = await self.settings.auth.header()
        all_headers = {**headers, "Authorization": auth} if auth else dict(headers)
        write = None
        data: bytes | _FencedBody | None = body
        if self.fence is not None and method not in READ_METHODS:
            self._check_fence(verb, method, path)  # and again once connected: _fence_on_connection
            write = _Write(verb, method, path)
            if body:  # and a last time as the body goes on the wire (see `_FencedBody`)
                data = _FencedBody(body, lambda: self._check_fence(verb, method, path))
        try:
            response = await self._session.request(
                method,
                self.settings.host + path,
                params=query,
                data=data,
                headers=all_headers,
                timeout=client_timeout,
                proxy=self.settings.proxy,
                server_hostname=self.settings.tls_server_name,
                trace_request_ctx=write,
            )
        except BaseException as exc:
            # Nothing was sent when the fence refused (once connected, or as the body went
            # out: aiohttp wraps that one in a ClientConnectionError).
            if (fenced := _fenced_cause(exc)) is not None:
                raise fenced from None
            self._metrics.requests.labels(verb, "<error>").inc()
            raise
        self._metrics.requests.labels(verb, str(response.status)).inc()
        self._log.debug("api request", verb=verb, path=path, code=response.status)
        if response.status >= 400:
            async with response:
                data = await response.read()
            raise api_error(response.status, data, response.headers, method=method, path=path)
        return response

    async def _with_retries(
        self,
        verb: str,
        method: str,
        path: str,
        once: Callable[[], Awaitable[R]],
        *,
        limited: bool,
    ) -> R:
        """Run `once` until it succeeds or the retry rule gives up; count and log each attempt.

        With `limited`, every attempt first waits for the rate limiter."""
        attempt = 0
        reauthenticated = False
        while True:
            if limited:
                await self._throttle()
            start = self._clock()
            try:
                return await once()
            except ApiError as exc:
                error: ApiError | ApiConnectionError = exc
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = connection_error(exc, method, path)
                error.__cause__ = exc
            finally:
                self._metrics.duration.labels(verb).observe(self._clock() - start)
            if isinstance(error, Unauthorized) and not reauthenticated:
                reauthenticated = True
                if await self.settings.auth.refresh():
                    self._metrics.retries.labels(verb, "unauthorized").inc()
                    self._log.info("credentials reloaded after 401", verb=verb, path=path)
                    continue
            decision = retry_delay(method, error, attempt, self.options.retry, self._rng)
            if decision is None:
                raise error
            delay, reason = decision
            self._metrics.retries.labels(verb, reason).inc()
            self._log.warning(
                "retrying API request",
                verb=verb,
                path=path,
                attempt=attempt + 1,
                delay=round(delay, 3),
                reason=reason,
                error=str(error),
            )
            await self._sleep(delay)
            attempt += 1

    # ---- typed helpers -----------------------------------------------------------------------

    async def get(self, kind: KindInfo[T], name: str, *, namespace: str | None = None) -> T:
        """GET one object."""
        data = await self.request("GET", resource_path(kind, namespace, name))
        return kind.decoder.decode(data)

    async def list_pages(
        self,
        kind: KindInfo[T],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> AsyncIterator[ObjectList[T]]:
        """LIST page by page (`limit` items each, following `continue`); all pages are one
        consistent snapshot. An expired continue token raises Gone: list again from the start."""
        path = resource_path(kind, namespace)
        continue_: str | None = None
        while True:
            query = list_query(
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_=continue_,
                resource_version=resource_version,
                resource_version_match=resource_version_match,
            )
            page = kind.list_decoder.decode(await self.request("GET", path, params=query))
            for skipped in kind.list_decoder.on_skip:  # read before any await: decoders are shared
                self._log.error(
                    "skipped an object the model cannot decode", path=path, error=str(skipped)
                )
            yield page
            continue_ = page.metadata.continue_
            if not continue_:
                return

    async def list(
        self,
        kind: KindInfo[T],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> ListResult[T]:
        """LIST every page; returns the items and the list's resourceVersion (to watch from)."""
        items: collections.deque[T] = collections.deque()
        version = ""
        async for page in self.list_pages(
            kind,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        ):
            items.extend(page.items)
            version = page.metadata.resource_version
        return ListResult(tuple(items), version)

    def watch(
        self,
        kind: KindInfo[T],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        allow_watch_bookmarks: bool = True,
        timeout_seconds: int | None = DEFAULT_WATCH_SECONDS,
        label_selector: str | None = None,
        field_selector: str | None = None,
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
        inactivity_timeout: float | None = None,
    ) -> WatchStream[T]:
        """A WATCH stream: `async with client.watch(kind, ...) as events: async for e in events`.

        The request is sent on entering the block (so changes made inside it are seen) and the
        response closed on leaving it. ERROR events are yielded with a `Status` object;
        `caldera.kube.errors.error_from_status` turns one into its typed error (Gone for 410).
        """
        path = resource_path(kind, namespace)
        query = watch_query(
            resource_version=resource_version,
            allow_watch_bookmarks=allow_watch_bookmarks,
            timeout_seconds=timeout_seconds,
            label_selector=label_selector,
            field_selector=field_selector,
            send_initial_events=send_initial_events,
            resource_version_match=resource_version_match,
        )
        if inactivity_timeout is None:
            inactivity_timeout = (timeout_seconds or DEFAULT_WATCH_SECONDS) + WATCH_SILENCE_MARGIN
        # No total timeout: the stream lives as long as timeoutSeconds; silence is handled by the
        # stream's inactivity timeout.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.options.connect_timeout)
        headers_timeout = self.options.timeout

        async def open_stream() -> aiohttp.ClientResponse:
            async def once() -> aiohttp.ClientResponse:
                async with asyncio.timeout(headers_timeout):
                    return await self._send("WATCH", "GET", path, query, None, {}, timeout)

            return await self._with_retries("WATCH", "GET", path, once, limited=False)

        return WatchStream(open_stream, kind, path, inactivity_timeout, self._log)

    async def create(
        self,
        kind: KindInfo[T],
        body: object,
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> T:
        """POST a new object; the namespace defaults to the body's. AlreadyExists if taken."""
        if kind.namespaced and not namespace:
            namespace = body_identity(body)[1] or None
        query = write_query(field_manager=field_manager, dry_run=dry_run)
        data = await self.request(
            "POST", resource_path(kind, namespace), params=query, body=encode_body(body)
        )
        return kind.decoder.decode(data)

    async def replace(
        self,
        kind: KindInfo[T],
        body: object,
        *,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> T:
        """PUT a whole object (optimistic concurrency: Conflict if its resourceVersion is stale).

        Only for Caldera's own kinds, whose models are complete: a PUT of a partial model of
        another kind would erase the fields the model lacks. Patch those instead.
        """
        body_name, body_namespace = body_identity(body)
        name = name or body_name
        if kind.namespaced and not namespace:
            namespace = body_namespace or None
        if not name:
            raise ValueError(f"replace of a {kind.kind} needs a name (in the body or as name=)")
        query = write_query(field_manager=field_manager, dry_run=dry_run)
        data = await self.request(
            "PUT",
            resource_path(kind, namespace, name, subresource),
            params=query,
            body=encode_body(body),
        )
        return kind.decoder.decode(data)

    async def update_status(
        self, kind: KindInfo[T], body: object, *, namespace: str | None = None
    ) -> T:
        """PUT the status subresource of an own object (the spec in `body` is ignored)."""
        return await self.replace(kind, body, namespace=namespace, subresource="status")

    async def patch(
        self,
        kind: KindInfo[T],
        name: str,
        patch: object,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
        dry_run: bool = False,
    ) -> T:
        """PATCH an object or one of its subresources; returns the object after the patch."""
        body, content_type, query = patch_request(
            patch, patch_type, field_manager=field_manager, force=force, dry_run=dry_run
        )
        data = await self.request(
            "PATCH",
            resource_path(kind, namespace, name, subresource),
            params=query,
            body=body,
            content_type=content_type,
        )
        return kind.decoder.decode(data)

    async def patch_status(
        self,
        kind: KindInfo[T],
        name: str,
        patch: object,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> T:
        """PATCH the status subresource."""
        return await self.patch(
            kind,
            name,
            patch,
            namespace=namespace,
            patch_type=patch_type,
            subresource="status",
            field_manager=field_manager,
            force=force,
        )

    async def delete(
        self,
        kind: KindInfo[Any],
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: PropagationPolicy | str | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> None:
        """DELETE an object. `uid` / `resource_version` are preconditions (Conflict when they do
        not match); NotFound propagates, since only the caller knows whether absence is fine."""
        options = delete_options(
            uid=uid,
            resource_version=resource_version,
            propagation_policy=propagation_policy,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )
        await self.request(
            "DELETE",
            resource_path(kind, namespace, name),
            body=encode_body(options) if options else None,
        )

    async def bind(
        self,
        namespace: str,
        pod: str,
        node: str,
        *,
        uid: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind a pod to a node (POST pods/binding), as a scheduler does; ``annotations`` are
        set on the pod in the same write."""
        await self.request(
            "POST",
            resource_path(POD, namespace, pod, "binding"),
            body=encode_body(binding(namespace, pod, node, uid=uid, annotations=annotations)),
        )

    async def evict(
        self,
        namespace: str,
        pod: str,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Evict a pod through the policy/v1 Eviction API (honours PodDisruptionBudgets: a refusal
        is TooManyRequests, raised without retrying)."""
        await self.request(
            "POST",
            resource_path(POD, namespace, pod, "eviction"),
            body=encode_body(
                eviction(namespace, pod, uid=uid, grace_period_seconds=grace_period_seconds)
            ),
        )


class ResponseTooLargeError(ValueError):
    """An answer longer than the caller's bound (`KubeClient.request`'s `max_bytes`)."""


async def read_bounded(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body, read no further than `max_bytes` (`ResponseTooLargeError` beyond)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > max_bytes:
            raise ResponseTooLargeError(f"the answer is over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


@dataclasses.dataclass(frozen=True, slots=True)
class _Write:
    """What the trace hook needs to know of a fenced write."""

    verb: str
    method: str
    path: str


class _FencedBody(aiohttp.BytesPayload):
    """A write's body that checks the fence once more as it is written, in the same synchronous
    stretch as the socket write (aiohttp buffers the headers and sends them with the first body
    bytes). On Python < 3.12 aiohttp writes a body from a task of its own, one event-loop turn or
    more after the connection hook: a process stopped in that turn would otherwise send, on
    resuming, a write its fence allowed before the stop."""

    def __init__(self, body: bytes, check: Callable[[], None]) -> None:
        super().__init__(body, content_type=JSON)
        self._check = check

    async def write(self, writer: Any) -> None:
        self._check()
        await super().write(writer)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        self._check()
        await super().write_with_length(writer, content_length)


def _fenced_cause(exc: BaseException) -> FencedError | None:
    """``exc`` itself when it is a `FencedError`, or the one aiohttp wrapped when `_FencedBody`
    refused to write; None for any other failure."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FencedError):
            return seen
        seen = seen.__cause__
    return None


class _Opening:
    """What `KubeClient.from_config` returns: awaitable, or an async context manager."""

    def __init__(
        self,
        load: Callable[[], Awaitable[ConnectionSettings]],
        build: Callable[[ConnectionSettings], KubeClient],
    ) -> None:
        self._load = load
        self._build = build
        self._client: KubeClient | None = None

    async def _open(self) -> KubeClient:
        return self._build(await self._load())

    def __await__(self) -> Generator[Any, None, KubeClient]:
        return self._open().__await__()

    async def __aenter__(self) -> KubeClient:
        self._client = await self._open()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.close()
