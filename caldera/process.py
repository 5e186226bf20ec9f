"""What every long-running Caldera process does the same way: connect to the API server (or say
in one line why not), install signal handlers, and run its work only while holding its Lease."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable

import msgspec
import structlog
from prometheus_client import CollectorRegistry, Gauge

from caldera.api.crdcheck import FIX, CrdProblem, check_served_crd, definitions
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.config import ConfigError, load_config
from caldera.kube.errors import ApiConnectionError, ApiError, Forbidden, NotFound
from caldera.kube.leader import LeaderElector, LeaseConfig
from caldera.settings import ProcessSettings

log = structlog.get_logger("process")


class StartupError(Exception):
    """The process cannot start; the message is the one line the user sees."""


RETRY_EVERY = 2.0


def _worth_waiting(exc: Exception) -> bool:
    """An API server that is down or overloaded may come back, and a 403 may pass: a restarted
    API server refuses requests until its authorizer has loaded the RBAC objects, and
    ``helm install`` may start the pods before their RoleBindings exist. A 401 (a token or
    certificate the server does not accept) or a 404 will not pass."""
    if isinstance(exc, ApiError):
        return exc.status >= 500 or exc.status in (403, 429)
    return True


async def connect(settings: ProcessSettings, registry: CollectorRegistry) -> KubeClient:
    """A client that has answered once, or StartupError naming what is wrong: at once for a bad
    kubeconfig or a refusal, after ``settings.startup_timeout`` seconds of an API server that
    does not answer (restarting, or its address not routable yet). A process that exited at
    once would crash-loop through an API server restart and come back only after the kubelet's
    backoff."""
    try:
        connection = await load_config(settings.kubeconfig, context=settings.context)
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    options = ClientOptions(qps=settings.kube_qps, burst=settings.kube_burst)
    client = KubeClient(connection, options, registry=registry)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.startup_timeout
    while True:
        try:
            async with asyncio.timeout(15):
                await client.request("GET", "/version")
            return client
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            if not _worth_waiting(exc) or loop.time() + RETRY_EVERY > deadline:
                await client.close()
                raise StartupError(
                    f"cannot reach the API server at {connection.host}: {reason}"
                ) from None
            log.warning("the API server does not answer yet; waiting", error=reason)
            await asyncio.sleep(RETRY_EVERY)


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"


async def check_crds(client: KubeClient, resources: tuple[str, ...], *, strict: bool) -> None:
    """Read the served CRDs (``<plural>.<group>``) and compare each with Caldera's
    (``caldera.api.crdcheck``): StartupError naming every problem when ``strict``, a warning
    otherwise. A process whose credentials may not read CRDs warns and starts (the chart grants
    ``get`` on exactly these names)."""
    problems: list[CrdProblem] = []
    for definition in definitions(resources):
        name = definition.info.resource
        try:
            served = msgspec.json.decode(await client.request("GET", CRD_PATH + name))
        except NotFound:
            served = None
        except Forbidden:
            log.warning("cannot read the CRD to check its fields; not checked", crd=name)
            continue
        problem = check_served_crd(definition, served)
        if problem is not None:
            problems.append(problem)
    if not problems:
        return
    text = "; ".join(p.message() for p in problems)
    if strict:
        raise StartupError(f"{text}. To fix: {FIX}, or start with --check-crds=false")
    log.warning(
        "CRDs lack fields Caldera writes; starting anyway (--check-crds=false)", detail=text
    )


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGTERM or SIGINT (the entry point owns the signals, not aiohttp)."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    return stopping


def lease_config(settings: ProcessSettings, default_name: str) -> LeaseConfig:
    namespace = settings.leader_election_namespace or os.environ.get("POD_NAMESPACE") or "default"
    return LeaseConfig(
        namespace=namespace,
        name=settings.leader_election_id or default_name,
        identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
    )


async def lead_when_elected(
    settings: ProcessSettings,
    default_lease: str,
    client: KubeClient,
    registry: CollectorRegistry,
    lead: Callable[[], Awaitable[None]],
    stopping: asyncio.Event,
) -> None:
    """Run ``lead`` while holding the Lease (or at once without leader election); return when
    it ends or when ``stopping`` is set while still a candidate. LeadershipLostError propagates.
    With leader election, ``client``'s writes are fenced: they stop once the Lease may have
    passed (`caldera.kube.fence`), and raise `FencedError`, a LeadershipLostError."""
    if not settings.leader_elect:
        await lead()
        return
    config = lease_config(settings, default_lease)
    is_leader = Gauge(
        "caldera_leader_election_master_status",
        "1 while this process holds the lease",
        ["name"],
        registry=registry,
    )
    # The Lease has its own client (no retries, no shared rate limiter, short timeouts); every
    # write of the process's client is fenced by the elector (caldera.kube.fence).
    lease_client = client.lease_client(config.call_timeout)
    elector = LeaderElector(
        lease_client,
        config,
        on_change=lambda leading: is_leader.labels(name=config.name).set(leading),
    )
    client.fence = elector.fence
    log.info("waiting for leadership", lease=f"{config.namespace}/{config.name}")
    try:
        waiting = asyncio.create_task(elector.run(lead))
        stop_wait = asyncio.create_task(stopping.wait())
        done, _ = await asyncio.wait({waiting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        if waiting not in done and not elector.is_leader:
            waiting.cancel()  # stopped while still a candidate
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    finally:
        await lease_client.close()
