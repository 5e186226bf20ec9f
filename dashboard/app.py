"""The dashboard process: check what the user may list, fill one informer cache, serve the
pages on a loopback address until interrupted.

Access is checked before anything starts, with a one-item LIST of each kind: Jobs, PodGroups
and pods are what the pages are made of, so being refused them ends the start with a message
that says what to do (``-n NAMESPACE`` when the user may not list them cluster-wide); queues,
nodes and PriorityClasses are cluster-scoped, so a namespace's user often may not read them:
they are left out and the pages say so.

Read-only: the client carries a fence that never opens (`caldera.kube.fence.Fence`, never
renewed), so any write the code might attempt is dropped before it is sent.

In-cluster (`DashboardOptions.in_cluster`), the dashboard reads with its ServiceAccount and
serves many users: a second, unfenced client, given only to the `Gate`, creates the
TokenReviews and SubjectAccessReviews that say who each user is and what they may see.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from caldera.api.kinds import (
    HYPERNODE,
    JOB,
    NODE,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    QUEUE,
    KindInfo,
)
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.config import load_config
from caldera.kube.errors import Forbidden, NotFound
from caldera.kube.fence import Fence
from caldera.kube.retry import RetryOptions
from dashboard.auth import Gate
from dashboard.cache import ClusterCache, EventReader, PositionReader
from dashboard.live import Hub
from dashboard.server import make_app
from informers.factory import SharedInformerFactory

__all__ = ["AccessError", "DashboardOptions", "check_access", "connect", "reviewer", "serve"]

REQUIRED: Final[tuple[KindInfo[Any], ...]] = (JOB, PODGROUP, POD)
OPTIONAL: Final[tuple[KindInfo[Any], ...]] = (QUEUE, NODE, PRIORITY_CLASS, HYPERNODE)
# HyperNodes are optional in Volcano too: without their CRD, the topology page says so.
MAY_BE_ABSENT: Final = frozenset({HYPERNODE.plural})
SYNC_TIMEOUT: Final = 120.0
# A person's tool: a few quick attempts, so "no cluster" answers in seconds.
OPTIONS: Final = ClientOptions(
    qps=50.0, burst=100, timeout=30.0, connect_timeout=5.0,
    retry=RetryOptions(max_attempts=3, base=0.2, cap=1.0),
)  # fmt: skip


class AccessError(Exception):
    """The user may not list what the dashboard needs; the message says what to do."""


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    """Where to listen and what to watch."""

    host: str = "127.0.0.1"
    """Locally, loopback only: the pages show what the user's credentials may read."""
    port: int = 8090
    namespace: str | None = None
    """Watch this namespace only; None: every namespace (needs cluster-wide list)."""
    max_clients: int = 100
    """Live pages at once; more are served without live updates."""
    in_cluster: bool = False
    """Serve many users, each with a bearer token, each seeing what their RBAC allows."""


async def connect(
    kubeconfig: str | None, context: str | None, master: str | None = None
) -> KubeClient:
    """A read-only client of the user's own kubeconfig (see the module docstring), or of the
    pod's ServiceAccount in a cluster; `master` overrides its server address."""
    settings = await load_config(kubeconfig, context=context)
    if master:
        settings = dataclasses.replace(settings, host=master.rstrip("/"))
    return KubeClient(settings, OPTIONS, fence=Fence(1.0))


def reviewer(reader: KubeClient) -> KubeClient:
    """The in-cluster gate's client: the reader's connection without the fence, since a
    review is a create (see the module docstring); the gate sends nothing else."""
    return KubeClient(reader.settings, OPTIONS)


async def _listable(client: KubeClient, kind: KindInfo[Any], namespace: str | None) -> bool:
    pages = client.list_pages(kind, namespace=namespace if kind.namespaced else None, limit=1)
    try:
        await anext(aiter(pages))  # the first page answers the question; no need for more
    except StopAsyncIteration:
        pass
    except Forbidden:
        return False
    except NotFound as exc:
        if kind.plural in MAY_BE_ABSENT:
            return False
        raise AccessError(
            f"the API server does not serve {kind.plural}.{kind.group or 'core'}: "
            "are Caldera's (Volcano's) CRDs installed?"
        ) from exc
    finally:
        close = getattr(pages, "aclose", None)  # an async generator: end its request now
        if close is not None:
            await close()
    return True


async def check_access(client: KubeClient, namespace: str | None) -> tuple[str, ...]:
    """The optional kinds the user may not list; raises `AccessError` for a required one."""
    for kind in REQUIRED:
        if not await _listable(client, kind, namespace):
            if namespace is None:
                raise AccessError(
                    f"you may not list {kind.plural} in every namespace; run "
                    "'caldera dashboard -n NAMESPACE' to watch a namespace you may read"
                )
            raise AccessError(f"you may not list {kind.plural} in namespace {namespace}")
    return tuple([kind.plural for kind in OPTIONAL if not await _listable(client, kind, namespace)])


async def serve(
    client: KubeClient,
    options: DashboardOptions,
    *,
    on_ready: Callable[[str, tuple[str, ...]], None],
    stop: asyncio.Event | None = None,  # None: SIGINT and SIGTERM stop it
    review_client: KubeClient | None = None,  # in-cluster: the gate's (see `reviewer`)
) -> None:
    """Run the dashboard until `stop` is set (or a signal comes); `on_ready` gets the URL
    and the kinds left out once the cache has synced and the server listens."""
    if options.in_cluster and review_client is None:
        raise ValueError("in-cluster, the dashboard needs a client for reviews")
    hidden = await check_access(client, options.namespace)
    gate = Gate(review_client, hidden=hidden) if review_client is not None else None
    hub = Hub(max_clients=options.max_clients)
    factory = SharedInformerFactory(client, namespace=options.namespace)
    cache = ClusterCache.from_informers(factory, hub, hidden=hidden)
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    factory.start()
    runner = web.AppRunner(
        make_app(
            cache,
            hub,
            read_events=EventReader(client).read,
            read_positions=PositionReader(client).read,
            gate=gate,
        ),
        handle_signals=False,
        shutdown_timeout=2.0,
        access_log=None,
    )
    try:
        async with asyncio.timeout(SYNC_TIMEOUT):
            await factory.wait_for_sync()
        await runner.setup()
        site = web.TCPSite(runner, options.host, options.port)
        await site.start()
        host, port = runner.addresses[0][:2]
        on_ready(f"http://{host}:{port}/", hidden)
        await stop.wait()
    finally:
        await runner.cleanup()
        await factory.stop()
