"""Polling helpers for e2e tests: wait for a condition with a deadline and a useful failure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from caldera.api.kinds import KindInfo
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound

T = TypeVar("T")


# How long a test waits for a process it started to be ready (imports, informers synced): a
# few seconds on a quiet machine, past 30 s at load 16 (CI beside other work).
READY_TIMEOUT: Final = 90.0


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 30.0,  # noqa: ASYNC109 - a deadline for polling, not for one await
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Call ``probe`` until it returns something other than None/False; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = await probe()
        if last is not None and last is not False:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def until(
    probe: Callable[[], object], *, what: str, timeout: float = 60.0, interval: float = 0.5
) -> None:
    """The blocking form of ``eventually``, for tests that drive kubectl: call ``probe`` until
    it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def gone(kube: KubeClient, kind: KindInfo[Any], name: str, namespace: str | None) -> bool:
    """Whether the API server no longer has the object (a probe for ``eventually``)."""
    try:
        await kube.get(kind, name, namespace=namespace)
    except NotFound:
        return True
    return False
