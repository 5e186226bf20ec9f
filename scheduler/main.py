"""``caldera scheduler``: start-up, leadership and shutdown around the session loop."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import structlog

from caldera.api.kinds import NODESHARD, PODGROUP, QUEUE
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError
from caldera.kube.events import EventRecorder
from caldera.kube.leader import LeadershipLostError
from caldera.obs.metrics import new_registry
from caldera.obs.server import HealthServer
from caldera.process import (
    StartupError,
    check_crds,
    connect,
    lead_when_elected,
    stop_on_signals,
)
from caldera.settings import SchedulerSettings
from informers.factory import SharedInformerFactory
from scheduler.conf import ConfError
from scheduler.metrics import SchedulerMetrics
from scheduler.process import ConfSource, SchedulerLoop, scheduler_conf_path
from scheduler.registry import REGISTRY
from scheduler.visibility.requestheader import RequestHeaderError
from scheduler.visibility.routing import mark_own_pod
from scheduler.visibility.server import AccessReviews, VisibilityServer, read_requestheader

log = structlog.get_logger("scheduler")
# The CRDs whose objects the scheduler writes (PodGroup status, Queue status).
CHECKED_CRDS = (PODGROUP.resource, QUEUE.resource)


async def run(settings: SchedulerSettings) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit code."""
    try:
        conf = ConfSource(
            scheduler_conf_path(settings), actions=REGISTRY.actions, plugins=REGISTRY.plugins
        )
    except ConfError as exc:
        raise StartupError(str(exc)) from None
    metrics_registry = new_registry()
    client = await connect(settings, metrics_registry)
    try:
        # In hard sharding mode it also writes its NodeShard's status.
        hard = settings.scheduler_sharding_mode == "hard"
        crds = CHECKED_CRDS + ((NODESHARD.resource,) if hard else ())
        await check_crds(client, crds, strict=settings.check_crds)
        stopping = stop_on_signals()
        factory = SharedInformerFactory(client, registry=metrics_registry)
        recorder = EventRecorder(client, "caldera-scheduler", registry=metrics_registry)
        loop = SchedulerLoop(
            settings=settings,
            client=client,
            factory=factory,
            recorder=recorder,
            registry=REGISTRY,
            conf=conf,
            metrics=SchedulerMetrics(metrics_registry),
        )
        health = HealthServer(
            metrics_registry,
            host=settings.listen_address,
            port=settings.metrics_port,
            volcano_names=settings.volcano_metrics,
        )
        health.add_readiness_check("not-stopping", lambda: not stopping.is_set())
        health.add_readiness_check("informers-synced", factory.has_synced)
        try:
            port = await health.start()
        except OSError as exc:
            raise StartupError(
                f"cannot serve metrics on port {settings.metrics_port}: {exc}"
            ) from None
        visibility = await start_visibility(settings, client, loop)
        factory.start()
        log.info("started", metrics_port=port, conf=settings.scheduler_conf or "(default)")

        async def lead() -> None:
            if visibility is not None:
                await mark_own_pod(client, leading=True)  # the Service now routes here
            await loop.run(stopping)
            # Before the Lease is released (and the fence closes): the session's last Events.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await recorder.flush()

        code = 0
        try:
            await lead_when_elected(
                settings, "caldera-scheduler", client, metrics_registry, lead, stopping
            )
        except LeadershipLostError as exc:
            log.error(
                "leadership lost; exiting so that a restart rejoins as candidate", error=str(exc)
            )
            code = 1
        finally:
            await factory.stop()
            if visibility is not None:
                await visibility.stop()
            await recorder.close()
            await health.stop()
            log.info("stopped")
        return code
    finally:
        await client.close()


async def start_visibility(
    settings: SchedulerSettings, client: KubeClient, loop: SchedulerLoop
) -> VisibilityServer | None:
    """The visibility API's server, serving the loop's positions, when it is asked for."""
    if not settings.visibility:
        return None
    await mark_own_pod(client, leading=False)  # a restarted container may keep the label
    try:
        config = await read_requestheader(client)
    except (RequestHeaderError, ApiError, ApiConnectionError) as exc:
        raise StartupError(f"cannot serve the visibility API: {exc}") from None
    server = VisibilityServer(
        positions=lambda: loop.positions,
        access=AccessReviews(client),
        config=config,
        cert_file=settings.visibility_cert_file,
        key_file=settings.visibility_key_file,
    )
    try:
        port = await server.start(settings.listen_address, settings.visibility_port)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(f"cannot serve the visibility API: {exc}") from None
    log.info("serving the visibility API", port=port)
    return server


def main(settings: SchedulerSettings) -> int:
    return asyncio.run(run(settings))
