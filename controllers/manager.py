"""``caldera controllers``: runs the chosen controllers in one process on ONE informer cache.

Start-up: connect (one clear line and exit 1 if the API server cannot be reached), serve
``/metrics``, ``/healthz`` and ``/readyz``, start the shared informers (every replica keeps a warm
cache; ``/readyz`` turns 200 once it has synced), take the Lease if leader election is on, and
then start each controller's workers.

Shutdown on SIGTERM or SIGINT, in order: readiness goes false; controllers stop taking keys and
reconciles in flight get ``shutdown_grace_period`` seconds to finish; workers are cancelled; the
Lease is released so a standby takes over at once; the informers stop; Events are flushed; the
HTTP server and the client close. A lost Lease ends the process with exit code 1 (the kubelet
restarts it as a candidate).
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog
from prometheus_client import CollectorRegistry

from caldera.api.crdgen import CRDS
from caldera.api.kinds import NODESHARD, NUMATOPOLOGY
from caldera.kube.client import KubeClient
from caldera.kube.events import EventRecorder
from caldera.kube.leader import LeadershipLostError
from caldera.obs.metrics import ControllerMetrics, new_registry
from caldera.obs.server import HealthServer
from caldera.process import (
    StartupError,
    check_crds,
    connect,
    lead_when_elected,
    stop_on_signals,
)
from caldera.settings import ControllersSettings
from controllers.command.controller import CommandController
from controllers.cronjob.controller import CronJobController
from controllers.gc.controller import GarbageCollector
from controllers.hypernode.controller import HyperNodeController
from controllers.job.controller import JobController
from controllers.jobflow.controller import JobFlowController
from controllers.jobtemplate.controller import JobTemplateController
from controllers.podgroup.controller import PodGroupController
from controllers.queue.controller import QueueController
from controllers.runtime import Controller, ControllerContext
from controllers.sharding.controller import ShardingController
from informers.factory import SharedInformerFactory
from informers.metrics import WorkQueueMetrics

# The controllers this build provides, by the name ``--controllers`` uses. Explicit, not
# registered at import time, so tests and subsets build exactly what they ask for.
AVAILABLE: dict[str, type[Controller]] = {
    JobController.name: JobController,
    QueueController.name: QueueController,
    PodGroupController.name: PodGroupController,
    CommandController.name: CommandController,
    GarbageCollector.name: GarbageCollector,
    CronJobController.name: CronJobController,
    JobFlowController.name: JobFlowController,
    JobTemplateController.name: JobTemplateController,
    HyperNodeController.name: HyperNodeController,
    ShardingController.name: ShardingController,
}

log = structlog.get_logger("manager")


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


async def run(settings: ControllersSettings) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""
    classes = choose_controllers(settings.chosen_controllers)
    registry = new_registry()
    client = await connect(settings, registry)
    try:
        # Every CRD of Caldera's: the controllers write Jobs, CronJobs, PodGroups and Queues and
        # read Commands; NodeShards only when the sharding controller runs (off by default, so
        # a cluster without the NodeShard CRD runs the others). Numatopology is the scheduler's
        # numa-aware plugin's alone.
        sharding = ShardingController in classes
        crds = tuple(
            c.info.resource
            for c in CRDS
            if (sharding or c.info is not NODESHARD) and c.info is not NUMATOPOLOGY
        )
        await check_crds(client, crds, strict=settings.check_crds)
        return await _run_connected(settings, classes, registry, client)
    finally:
        await client.close()


async def _run_connected(
    settings: ControllersSettings,
    classes: list[type[Controller]],
    registry: CollectorRegistry,
    client: KubeClient,
) -> int:
    health = HealthServer(
        registry,
        host=settings.listen_address,
        port=settings.metrics_port,
        volcano_names=settings.volcano_metrics,
    )
    stopping = stop_on_signals()

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
        # Before the Lease is released (and the fence closes): the reconciles' last Events.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                await recorder.flush()

    code = 0
    try:
        await lead_when_elected(settings, "caldera-controllers", client, registry, lead, stopping)
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
