"""``caldera webhook``: the admission webhook process (HTTPS), stateless and active-active.

Start-up: load the serving certificate and connect to the API server (one clear line and exit 1
if either fails), start the queue (and, for /podgroups/mutate, namespace) informers, serve
``/metrics``, ``/healthz`` and ``/readyz`` on the metrics port (ready once the caches have
synced), and answer AdmissionReviews on the HTTPS port. No leader election: every replica
answers, because every answer is a pure function of the request, the cache and, for a queue
Command only, the API server's answer to a SubjectAccessReview (``webhooks.access``).

A request that arrives before the caches have synced waits for them up to
``cache_sync_timeout`` (an empty cache would refuse every job as "queue not found"),
then is refused carrying its uid (an HTTP error would admit it under ``failurePolicy: Ignore``).
Lookups never call the API server, so they cannot deadlock with a
``failurePolicy: Fail`` webhook; nor can the SubjectAccessReview, which the API server answers
without calling admission webhooks.

Hostile clients: connections go through ``webhooks.listener`` (a connection cap before the TLS
handshake; handshake, header and idle timeouts); a request's headers read, ``_limit`` refuses
compressed bodies (415), bodies longer than ``client_max_size`` by their Content-Length (413),
and requests past ``max_in_flight`` or, above ``LARGE_REVIEW``, past ``max_large_in_flight``
(429), all before the body is read; ``_admit`` gives the body ``body_timeout`` (408). Each
refusal is counted by reason.

Certificates: a guarded background task looks at the modification time and size of the
certificate and key files every ``cert_reload_interval`` seconds and, when they change, loads
them into a new ``SSLContext``, which replaces the served one only once the pair loaded; new
connections then use it, connections already open keep theirs. A pair that fails to load (a
half-written file, a certificate beside the old key) is logged and tried again next time; the
served context is never touched. With ``--cert-secret`` a ``CertificateKeeper`` task renews the
pair while the process runs (``webhooks.selfcert``).

Shutdown on SIGTERM or SIGINT, in order: readiness goes false while reviews are still answered
for ``shutdown_delay`` seconds (the Service's endpoints drop the pod meanwhile), the listener
closes, reviews in flight get ``shutdown_grace_period`` seconds, the connections close, the
informers stop, the metrics server and the client close.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Histogram

from caldera.api.authz import SubjectAccessReview, SubjectAccessReviewStatus
from caldera.api.kinds import HYPERNODE, NAMESPACE, QUEUE
from caldera.api.volcano import Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError
from caldera.obs.metrics import new_registry
from caldera.obs.server import HealthServer
from caldera.process import StartupError, connect, stop_on_signals
from caldera.settings import WebhookSettings
from informers.factory import SharedInformerFactory
from webhooks.access import access_check
from webhooks.admission import Verdict, encode_response
from webhooks.listener import Listener, ListenerLimits
from webhooks.lookups import InformerView
from webhooks.queues import QueueRules
from webhooks.review import AccessCheck, Admission, AdmissionOptions, review_uid
from webhooks.selfcert import CertificateKeeper
from webhooks.view import QUEUE_PARENT_INDEX, queue_parent

__all__ = [
    "LARGE_REVIEW",
    "CertificateReloader",
    "RequestLimits",
    "WebhookMetrics",
    "WebhookServer",
    "build_app",
    "run",
]

log = structlog.get_logger("webhook")

# Latency buckets around the 10 ms goal, down to the 100 us a small review takes.
_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1)


class WebhookMetrics:
    """Admission requests by path, operation and result, and their latency."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "caldera_webhook_admission_requests",
            "AdmissionReviews answered, by path, operation and result "
            "(allowed, patched, denied, error)",
            ["path", "operation", "result"],
            registry=registry,
        )
        self.latency = Histogram(
            "caldera_webhook_admission_duration_seconds",
            "Time from the request's arrival to its answer, by path",
            ["path"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.refusals = Counter(
            "caldera_webhook_refusals",
            "Connections and requests turned away before an admission decision, by reason "
            "(connections, idle, header_timeout, body_timeout, in_flight, too_large, encoding, "
            "not_synced)",
            ["reason"],
            registry=registry,
        )


@dataclass(frozen=True, slots=True)
class _ReadyGate:
    """Waits (bounded) for the caches the rules read before a request is decided."""

    factory: SharedInformerFactory | None
    timeout: float

    async def wait(self) -> bool:
        if self.factory is None or self.factory.has_synced():
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout):
                await self.factory.wait_for_sync()
        return self.factory.has_synced()


ADMISSION_KEY: Final = web.AppKey("admission", Admission)
METRICS_KEY: Final = web.AppKey("metrics", WebhookMetrics)
GATE_KEY: Final = web.AppKey("gate", _ReadyGate)
READ_TIMEOUT_KEY: Final = web.AppKey("read_timeout", float)
ACCESS_KEY: Final[web.AppKey[AccessCheck]] = web.AppKey("access")
BODY_READ_TIMEOUT: Final = 10.0  # seconds a client may take to send a review's body


# A review above this size counts against max_large_in_flight too: a Job of ordinary size is a
# few KiB; the large ones (many tasks, long scripts) are few, and each may hold client_max_size.
LARGE_REVIEW: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """Bounds on requests (settings of the same names): memory for bodies is at most
    ``max_in_flight * LARGE_REVIEW + max_large_in_flight * client_max_size``."""

    max_in_flight: int = 256
    max_large_in_flight: int = 16


@dataclass(slots=True)
class _InFlight:
    """Requests being read or decided, and the watcher of their connections' timers."""

    all: int = 0
    large: int = 0
    listener: Listener | None = None  # set by WebhookServer (None: served some other way)
    drained: asyncio.Event = field(default_factory=asyncio.Event)  # set while `all` is 0


LIMITS_KEY: Final = web.AppKey("limits", RequestLimits)
IN_FLIGHT_KEY: Final = web.AppKey("in_flight", _InFlight)
MAX_SIZE_KEY: Final = web.AppKey("client_max_size", int)


def _refuse(request: web.Request, status: int, reason: str, message: str) -> web.Response:
    """An errored AdmissionReview with HTTP `status`, before the body is read (so without the
    uid: reading it is the cost being refused); the connection is closed after it."""
    request.app[METRICS_KEY].refusals.labels(reason=reason).inc()
    verdict = Verdict(False, message=message, code=status)
    response = web.Response(
        status=status, body=encode_response("", verdict), content_type="application/json"
    )
    if status == 429:
        response.headers["Retry-After"] = "1"
    response.force_close()
    return response


@web.middleware
async def _limit(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Headers read: stop the connection's header timer; refuse compressed, oversized and
    excess requests before reading their bodies; restart the idle timer once answered."""
    state = request.app[IN_FLIGHT_KEY]
    if state.listener is not None:
        state.listener.request_started(request.protocol)
    try:
        return await _limited(request, handler, state)
    finally:
        if state.listener is not None:
            state.listener.request_finished(request.protocol)


async def _limited(request: web.Request, handler: Handler, state: _InFlight) -> web.StreamResponse:
    limits = request.app[LIMITS_KEY]
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # The API server never compresses a review; a compressed body would be inflated past
        # client_max_size before its size is known.
        return _refuse(request, 415, "encoding", f"Content-Encoding {encoding} is not accepted")
    length = request.content_length
    most = request.app[MAX_SIZE_KEY]
    if length is not None and length > most:
        # Refused from its Content-Length, before a byte of it is buffered.
        message = f"the review is {length} bytes; at most {most} are accepted"
        return _refuse(request, 413, "too_large", message)
    # A body of unknown length (chunked) may be as large as any.
    large = length > LARGE_REVIEW if length is not None else request.body_exists
    if state.all >= limits.max_in_flight or (large and state.large >= limits.max_large_in_flight):
        return _refuse(request, 429, "in_flight", "too many reviews in flight; try again")
    state.all += 1
    state.large += large
    state.drained.clear()
    try:
        return await handler(request)
    finally:
        state.all -= 1
        state.large -= large
        if state.all == 0:
            state.drained.set()


async def _admit(request: web.Request) -> web.Response:
    started = time.perf_counter()
    app = request.app
    path = request.path
    metrics = app[METRICS_KEY]
    try:
        async with asyncio.timeout(app[READ_TIMEOUT_KEY]):
            body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        metrics.requests.labels(path=path, operation="-", result="error").inc()
        metrics.refusals.labels(reason="too_large").inc()
        raise
    except ConnectionError:
        # The client left mid-body (or was cut): nobody to answer, nothing worth a traceback.
        metrics.requests.labels(path=path, operation="-", result="error").inc()
        return web.Response(status=400)
    except TimeoutError:
        # A client that trickles its body would hold a request open forever; the API server
        # itself never takes this long (it gives a webhook 30 s at most).
        metrics.requests.labels(path=path, operation="-", result="error").inc()
        metrics.refusals.labels(reason="body_timeout").inc()
        raise web.HTTPRequestTimeout(text="the request body did not arrive in time") from None
    if not await app[GATE_KEY].wait():
        # A refusal carrying the request's uid (not an HTTP error): under failurePolicy Ignore
        # an error would admit the object unchecked.
        verdict = Verdict(False, message="the webhook's queue cache has not synced yet", code=503)
        metrics.requests.labels(path=path, operation="-", result="error").inc()
        metrics.refusals.labels(reason="not_synced").inc()
        refusal = encode_response(review_uid(body), verdict)
        return web.Response(body=refusal, content_type="application/json")
    answer = await app[ADMISSION_KEY].review_async(
        path, request.content_type, body, app[ACCESS_KEY]
    )
    metrics.requests.labels(path=path, operation=answer.operation, result=answer.result).inc()
    metrics.latency.labels(path=path).observe(time.perf_counter() - started)
    return web.Response(status=answer.status, body=answer.body, content_type="application/json")


def build_app(
    admission: Admission,
    metrics: WebhookMetrics,
    *,
    client_max_size: int,
    factory: SharedInformerFactory | None = None,  # None: the view needs no cache (tests, bench)
    cache_sync_timeout: float = 5.0,
    read_timeout: float = BODY_READ_TIMEOUT,
    access: AccessCheck | None = None,  # None: no API server to ask (tests, bench)
    limits: RequestLimits | None = None,
) -> web.Application:
    """The aiohttp application answering AdmissionReviews on every path of `admission`; a body
    that takes longer than `read_timeout` seconds to arrive is answered 408. ``access`` sends
    the SubjectAccessReviews of /commands/validate."""
    app = web.Application(client_max_size=client_max_size, middlewares=[_limit])
    app[LIMITS_KEY] = limits or RequestLimits()
    app[IN_FLIGHT_KEY] = _InFlight()
    app[MAX_SIZE_KEY] = client_max_size
    app[ACCESS_KEY] = access or _no_access
    app[READ_TIMEOUT_KEY] = read_timeout
    app[ADMISSION_KEY] = admission
    app[METRICS_KEY] = metrics
    app[GATE_KEY] = _ReadyGate(factory, cache_sync_timeout)
    for path in admission.routes:
        app.router.add_post(path, _admit)
    return app


async def _no_access(review: SubjectAccessReview) -> SubjectAccessReviewStatus:
    raise RuntimeError("this webhook was started without an API client to ask")


def _server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class CertificateReloader:
    """Holds the `SSLContext` of the current certificate files. A reload builds a new context
    and replaces `context` only once the pair loaded into it: a certificate whose key does not
    match yet (mid-rotation) never touches the context being served. The listener takes
    `context` for each new connection; connections already open keep theirs."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._stamp = self._files_stamp()
        self.context = _server_context(cert_file, key_file)
        self.reloads = 0

    def _files_stamp(self) -> tuple[tuple[int, int], ...]:
        stats = (os.stat(self.cert_file), os.stat(self.key_file))
        return tuple((s.st_mtime_ns, s.st_size) for s in stats)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last load; True if it did."""
        try:
            stamp = self._files_stamp()
        except OSError as exc:
            log.warning("cannot read the certificate files", error=str(exc))
            return False
        if stamp == self._stamp:
            return False
        try:
            context = _server_context(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            # Mid-rotation the key may not match the certificate yet: keep the old pair.
            log.warning("new certificate does not load yet; keeping the old one", error=str(exc))
            return False
        self.context, self._stamp = context, stamp
        self.reloads += 1
        log.info("serving certificate reloaded", cert_file=self.cert_file)
        return True

    async def watch(self, interval: float) -> None:
        """Check the files every `interval` seconds, forever."""
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()


class WebhookServer:
    """The HTTPS listener around an application, with certificate reloading."""

    def __init__(
        self,
        app: web.Application,
        certs: CertificateReloader,
        *,
        host: str,
        port: int,
        limits: ListenerLimits | None = None,
    ) -> None:
        self.app, self.certs = app, certs
        self.host, self.port = host, port
        self.limits = limits or ListenerLimits()
        self.listener: Listener | None = None
        self._runner: web.AppRunner | None = None
        self._reload_task: asyncio.Task[None] | None = None
        self._grace = 0.0

    async def start(self, *, reload_interval: float, shutdown_timeout: float) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        self._grace = shutdown_timeout
        self._runner = web.AppRunner(
            self.app,
            handle_signals=False,
            access_log=None,
            # aiohttp's own wait drops the bytes of a body still arriving: `stop` waits first.
            shutdown_timeout=min(1.0, shutdown_timeout),
            keepalive_timeout=self.limits.idle_timeout,
            lingering_time=0,  # an unread body (a refused request) closes the connection
        )
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        refusals = self.app[METRICS_KEY].refusals
        self.listener = Listener(
            server,
            lambda: self.certs.context,
            self.limits,
            refused=lambda reason: refusals.labels(reason=reason).inc(),
        )
        self.app[IN_FLIGHT_KEY].listener = self.listener
        self.port = await self.listener.start(self.host, self.port)
        self._reload_task = asyncio.create_task(
            self.certs.watch(reload_interval), name="certificate reloader"
        )
        self._reload_task.add_done_callback(_log_unexpected_end)
        return self.port

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (bounded), stop reloading."""
        if self._reload_task is not None:
            self._reload_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reload_task
            self._reload_task = None
        if self.listener is not None:
            await self.listener.close()
        # Reviews being read or decided finish (bounded) before aiohttp closes connections.
        state = self.app[IN_FLIGHT_KEY]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._grace):
                if state.all > 0:
                    await state.drained.wait()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _log_unexpected_end(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    log.error("background task ended", task=task.get_name(), error=repr(exc) if exc else None)


def _parent_index(queue: Queue) -> Iterable[str]:
    parent = queue_parent(queue)
    return (parent,) if parent else ()


def admission_options(settings: WebhookSettings) -> AdmissionOptions:
    """The rules' options from the process settings."""
    return AdmissionOptions(
        scheduler_names=settings.scheduler_names,
        queue_admission_gates=settings.queue_admission_gates,
        queue_rules=QueueRules(
            max_depth=settings.max_queue_depth, root_protection=settings.root_queue_protection
        ),
    )


def _load_certificate(settings: WebhookSettings) -> CertificateReloader:
    try:
        return CertificateReloader(settings.tls_cert_file, settings.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(
            f"cannot load the serving certificate {settings.tls_cert_file} and key "
            f"{settings.tls_key_file}: {exc}"
        ) from None


def cert_secret_ref(settings: WebhookSettings) -> tuple[str, str]:
    """(namespace, name) of ``--cert-secret``: "ns/name", or a name in $POD_NAMESPACE."""
    namespace, _, name = settings.cert_secret.rpartition("/")
    return namespace or os.environ.get("POD_NAMESPACE") or "default", name


async def _own_certificate(settings: WebhookSettings, client: KubeClient) -> CertificateKeeper:
    """With --cert-secret: the pair from (or made into) the Secret, written to the files the
    reloader serves, its CA bundle registered in the webhook configurations; the keeper then
    renews it in the running process."""
    namespace, name = cert_secret_ref(settings)
    keeper = CertificateKeeper(
        client,
        namespace=namespace,
        name=name,
        names=settings.cert_dns_names,
        days=settings.cert_validity_days,
        cert_file=settings.tls_cert_file,
        key_file=settings.tls_key_file,
        configurations=settings.webhook_configurations,
    )
    try:
        await keeper.check()
    except ApiError as exc:
        raise StartupError(
            f"cannot keep the serving certificate in Secret {namespace}/{name}: {exc}"
        ) from None
    except OSError as exc:
        raise StartupError(f"cannot write the serving certificate files: {exc}") from None
    return keeper


async def run(settings: WebhookSettings) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""
    certs = None if settings.cert_secret else _load_certificate(settings)
    registry = new_registry()
    client = await connect(settings, registry)
    try:
        keeper = None
        if certs is None:
            keeper = await _own_certificate(settings, client)
            certs = _load_certificate(settings)
            keeper.reload = certs.reload_if_changed
        return await _run_connected(settings, registry, client, certs, keeper)
    finally:
        await client.close()


async def _run_connected(
    settings: WebhookSettings,
    registry: CollectorRegistry,
    client: KubeClient,
    certs: CertificateReloader,
    keeper: CertificateKeeper | None = None,  # --cert-secret: renews and registers the pair
) -> int:
    stopping = stop_on_signals()
    renewing: asyncio.Task[None] | None = None
    if keeper is not None:
        renewing = asyncio.create_task(keeper.run(), name="certificate renewal")
        renewing.add_done_callback(_log_unexpected_end)

    factory = SharedInformerFactory(client, registry=registry)
    queues = factory.informer(QUEUE)
    queues.add_indexer(QUEUE_PARENT_INDEX, _parent_index)
    namespaces = (
        factory.informer(NAMESPACE).store
        if "/podgroups/mutate" in settings.enabled_admission
        else None
    )
    hypernodes = (
        factory.informer(HYPERNODE).store
        if "/hypernodes/validate" in settings.enabled_admission
        else None
    )
    admission = Admission(
        InformerView(queues.store, namespaces, hypernodes),
        admission_options(settings),
        paths=settings.enabled_admission,
    )
    app = build_app(
        admission,
        WebhookMetrics(registry),
        client_max_size=settings.client_max_size,
        factory=factory,
        cache_sync_timeout=settings.cache_sync_timeout,
        access=access_check(client),
        limits=RequestLimits(
            max_in_flight=settings.max_in_flight,
            max_large_in_flight=settings.max_large_in_flight,
        ),
        read_timeout=settings.body_timeout,
    )
    health = HealthServer(registry, host=settings.listen_address, port=settings.metrics_port)
    health.add_readiness_check("not-stopping", lambda: not stopping.is_set())
    health.add_readiness_check("informers-synced", factory.has_synced)
    server = WebhookServer(
        app,
        certs,
        host=settings.listen_address,
        port=settings.port,
        limits=ListenerLimits(
            max_connections=settings.max_connections,
            header_timeout=settings.header_timeout,
            idle_timeout=settings.idle_timeout,
        ),
    )
    factory.start()
    try:
        try:
            metrics_port = await health.start()
            port = await server.start(
                reload_interval=settings.cert_reload_interval,
                shutdown_timeout=settings.shutdown_grace_period,
            )
        except OSError as exc:
            raise StartupError(f"cannot listen: {exc}") from None
        # Everything allocated so far lives as long as the process: keep it out of the garbage
        # collector's full scans, which would otherwise add their pauses to admission latency.
        gc.freeze()
        log.info(
            "started",
            port=port,
            metrics_port=metrics_port,
            paths=sorted(admission.routes),
            scheduler_names=settings.scheduler_names,
        )
        await stopping.wait()
        # Readiness is false from here; keep answering while the endpoints drop this pod (the
        # API server may still pick it meanwhile), then close the listener.
        log.info("stopping: not ready, still serving", delay=settings.shutdown_delay)
        await asyncio.sleep(settings.shutdown_delay)
        log.info("stopping: finishing requests in flight", grace=settings.shutdown_grace_period)
    finally:
        if renewing is not None:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
        await server.stop()
        await factory.stop()
        await health.stop()
        log.info("stopped")
    return 0
