"""``caldera controllers``: runs the chosen controllers in one process on ONE informer cache.

Start-up: connect (one clear line and exit 1 if the API server cannot be reached), serve
``/metrics``, ``/healthz`` and ``/readyz``, start the shared informers (every replica keeps a warm
cache; ``/readyz`` turns 200 once it has synced), take the Lease if leader election is on, and
then start each controller's workers.

Shutdown on SIGTERM or SIGINT, in order: readiness goes false; controllers stop taking keys and
reconciles in flight get ``shutdown_grace_period`` seconds to finish; workers are cancelled; the
informers stop; the Lease is released so a standby takes over at once; Events are flushed; the
client and the HTTP server close. A lost Lease ends the process with exit code 1 (the kubelet
restarts it as a candidate).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable

import structlog
from prometheus_client import CollectorRegistry

from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.config import ConfigError, load_config
from caldera.kube.errors import ApiConnectionError, ApiError
from caldera.kube.events import EventRecorder
from caldera.kube.leader import LeaderElector, LeadershipLostError, LeaseConfig
from caldera.obs.metrics import ControllerMetrics, new_registry
from caldera.obs.server import HealthServer
from caldera.settings import ControllersSettings
from controllers.gc.controller import GarbageCollector
from controllers.job.controller import JobController
from controllers.runtime import Controller, ControllerContext
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics

# The controllers this build provides, by the name ``--controllers`` uses. Explicit, not
# registered at import time, so tests and subsets build exactly what they ask for.
AVAILABLE: dict[str, type[Controller]] = {
    JobController.name: JobController,
    GarbageCollector.name: GarbageCollector,
}

log = structlog.get_logger("manager")


class StartupError(Exception):
    """The process cannot start; the message is the one line the user sees."""


def choose_controllers(requested: tuple[str, ...]) -> list[type[Controller]]:
    """The controller classes for ``--controllers`` (empty: all available), or StartupError."""
    if not requested:
        return list(AVAILABLE.values())
    missing = [name for name in requested if name not in AVAILABLE]
    if missing:
        raise StartupError(
            f"controller {', '.join(missing)} is not in this build yet; "
            f"available: {', '.join(AVAILABLE)}"
        )
    return [AVAILABLE[name] for name in requested]


def lease_config(settings: ControllersSettings) -> LeaseConfig:
    namespace = settings.leader_election_namespace or os.environ.get("POD_NAMESPACE") or "default"
    return LeaseConfig(
        namespace=namespace,
        name=settings.leader_election_id or "caldera-controllers",
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
    )


async def connect(settings: ControllersSettings, registry: CollectorRegistry) -> KubeClient:
    """A client that has answered once, or StartupError naming what is wrong."""
    try:
        connection = await load_config(settings.kubeconfig, context=settings.context)
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    options = ClientOptions(qps=settings.kube_qps, burst=settings.kube_burst)
    client = KubeClient(connection, options, registry=registry)
    try:
        async with asyncio.timeout(15):
            await client.request("GET", "/version")
    except (ApiError, ApiConnectionError, TimeoutError) as exc:
        await client.close()
        reason = str(exc) or type(exc).__name__
        raise StartupError(f"cannot reach the API server at {connection.host}: {reason}") from None
    return client


async def run(settings: ControllersSettings) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""
    classes = choose_controllers(settings.controllers)
    registry = new_registry()
    client = await connect(settings, registry)
    try:
        return await _run_connected(settings, classes, registry, client)
    finally:
        await client.close()


async def _run_connected(
    settings: ControllersSettings,
    classes: list[type[Controller]],
    registry: CollectorRegistry,
    client: KubeClient,
) -> int:
    health = HealthServer(registry, host=settings.listen_address, port=settings.metrics_port)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)

    factory = SharedInformerFactory(client, registry=registry, resync_period=settings.resync_period)
    recorder = EventRecorder(client, "caldera-controllers", registry=registry)
    metrics = ControllerMetrics(registry)
    ctx = ControllerContext(
        client=client,
        informers=factory,
        settings=settings,
        registry=registry,
        metrics=metrics,
        queue_metrics=WorkQueueMetrics(registry),
        recorder=recorder,
    )
    controllers = [cls(ctx) for cls in classes]
    for controller in controllers:
        controller.setup()
    health.add_readiness_check("not-stopping", lambda: not stopping.is_set())
    health.add_readiness_check("informers-synced", factory.has_synced)
    try:
        port = await health.start()
    except OSError as exc:
        raise StartupError(f"cannot serve metrics on port {settings.metrics_port}: {exc}") from None
    log.info("started", controllers=[c.name for c in controllers], metrics_port=port)
    # Every replica keeps a warm cache (and is ready once it has synced), so a standby that
    # takes over the Lease starts working at once; only the leader runs workers.
    factory.start()

    async def lead() -> None:
        await factory.wait_for_sync()
        log.info("caches synced; starting workers")
        for controller in controllers:
            controller.start(settings.workers)
        await stopping.wait()
        log.info("stopping: finishing reconciles in flight", grace=settings.shutdown_grace_period)
        results = await asyncio.gather(
            *(c.shutdown(settings.shutdown_grace_period) for c in controllers)
        )
        if not all(results):
            log.warning("grace period over; reconciles still in flight were cancelled")

    code = 0
    try:
        if settings.leader_elect:
            await _lead_when_elected(settings, client, metrics, lead, stopping)
        else:
            await lead()
    except LeadershipLostError as exc:
        log.error("leadership lost; exiting so that a restart rejoins as candidate", error=str(exc))
        code = 1
    finally:
        for controller in controllers:
            await controller.shutdown(0)
        await factory.stop()
        await recorder.close()
        await health.stop()
        log.info("stopped")
    return code


async def _lead_when_elected(
    settings: ControllersSettings,
    client: KubeClient,
    metrics: ControllerMetrics,
    lead: Callable[[], Awaitable[None]],
    stopping: asyncio.Event,
) -> None:
    config = lease_config(settings)
    elector = LeaderElector(
        client,
        config,
        on_change=lambda leading: metrics.is_leader.labels(name=config.name).set(leading),
    )
    log.info("waiting for leadership", lease=f"{config.namespace}/{config.name}")
    waiting = asyncio.create_task(elector.run(lead))
    stop_wait = asyncio.create_task(stopping.wait())
    done, _ = await asyncio.wait({waiting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
    stop_wait.cancel()
    if waiting not in done and not elector.is_leader:
        waiting.cancel()  # stopped while still a candidate
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
