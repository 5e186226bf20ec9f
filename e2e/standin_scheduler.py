"""A stand-in for Caldera's scheduler in job-controller tests: it moves a namespace's PodGroups
to Inqueue (what the scheduler's enqueue action does) and binds their pending pods to fake nodes
round-robin (unless told not to bind). No gang logic: the tests that need scheduling decisions
use the real scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence

from caldera.api.kinds import POD, PODGROUP
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError


async def _loop(
    kube: KubeClient, namespace: str, nodes: Sequence[str], period: float, bind: bool
) -> None:
    rotation = itertools.cycle(nodes)
    while True:
        for pg in (await kube.list(PODGROUP, namespace=namespace)).items:
            if pg.status.phase in ("", "Pending"):
                with contextlib.suppress(ApiError):
                    await kube.patch(
                        PODGROUP,
                        pg.metadata.name,
                        {"status": {"phase": "Inqueue"}},
                        namespace=namespace,
                    )
        if not bind:
            await asyncio.sleep(period)
            continue
        for pod in (await kube.list(POD, namespace=namespace)).items:
            if not pod.spec.node_name and not pod.metadata.deletion_timestamp:
                with contextlib.suppress(ApiError):
                    await kube.bind(
                        namespace, pod.metadata.name, next(rotation), uid=pod.metadata.uid
                    )
        await asyncio.sleep(period)


@contextlib.asynccontextmanager
async def standin_scheduler(
    kube: KubeClient,
    namespace: str,
    nodes: Sequence[str],
    period: float = 0.3,
    *,
    bind: bool = True,
) -> AsyncIterator[None]:
    """Run the stand-in while the context is open; ``bind=False`` only enqueues PodGroups, so
    pods stay Pending (for PodPending timeouts)."""
    task = asyncio.create_task(_loop(kube, namespace, nodes, period, bind))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
