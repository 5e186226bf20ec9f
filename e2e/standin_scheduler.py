"""A stand-in for Caldera's scheduler in job-controller tests: it moves a namespace's PodGroups
to Inqueue (what the scheduler's enqueue action does) and binds their pending pods to fake nodes
round-robin. No gang logic: the tests that need scheduling decisions use the real scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Sequence

from caldera.api.kinds import POD, PODGROUP
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError


async def _loop(kube: KubeClient, namespace: str, nodes: Sequence[str], period: float) -> None:
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
        for pod in (await kube.list(POD, namespace=namespace)).items:
            if not pod.spec.node_name and not pod.metadata.deletion_timestamp:
                with contextlib.suppress(ApiError):
                    await kube.bind(
                        namespace, pod.metadata.name, next(rotation), uid=pod.metadata.uid
                    )
        await asyncio.sleep(period)


@contextlib.asynccontextmanager
async def standin_scheduler(
    kube: KubeClient, namespace: str, nodes: Sequence[str], period: float = 0.3
) -> AsyncIterator[None]:
    task = asyncio.create_task(_loop(kube, namespace, nodes, period))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
