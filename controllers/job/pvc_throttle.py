"""Process-wide, fair, rate-limited creation of PVCs (the per-task PVC template extension).

Cloud volume provisioners rate-limit their APIs, so a burst of jobs must not turn into a burst
of PVCs. Every PVC the job controller needs goes through one ``PvcCreator`` per process:

- one token bucket (``--pvc-create-qps``, ``--pvc-create-burst``) paces all creations;
- requests queue per job and jobs are served round-robin, one PVC each in turn, so a
  1,000-replica job cannot starve a 2-replica one that arrived later;
- a failed creation is retried with exponential backoff without blocking the other jobs;
- AlreadyExists counts as done only when the existing claim is the Job's own and alive (names
  are deterministic: a deleted Job's Terminating claims, or a StatefulSet's, may hold the name):
  another owner's claim, or one being deleted, fails the request with ``ClaimUnusableError``
  and is left alone;
- callers await the result of their own PVC, so a pod is created only after its PVC exists.

``FairQueue`` is the pure round-robin part; ``PvcCreator`` drives it with the client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog

from caldera.api.core import PersistentVolumeClaim
from caldera.api.kinds import PVC
from caldera.api.ownership import ClaimUse, claim_use
from caldera.kube.client import KubeClient
from caldera.kube.errors import (
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    Forbidden,
    Invalid,
    NotFound,
)
from caldera.ratelimit import TokenBucket, jittered_backoff

T = TypeVar("T")


class ClaimUnusableError(Exception):
    """A claim of the wanted name exists and may not be used: another owner's, or Terminating.
    The message names the claim and says what happens; ``use`` tells which."""

    def __init__(self, message: str, use: ClaimUse) -> None:
        super().__init__(message)
        self.use = use


def claim_problem(claim: PersistentVolumeClaim, owner_uid: str) -> ClaimUnusableError | None:
    """Why the existing ``claim`` may not be used by the Job of ``owner_uid``, or None. Pure."""
    use = claim_use(claim.metadata, owner_uid)
    name = claim.metadata.name
    if use is ClaimUse.FOREIGN and claim.metadata.deletion_timestamp:
        # A deleted namesake Job's claim on its way out: wait for it, never mount it.
        return ClaimUnusableError(
            f"PersistentVolumeClaim/{name} belongs to another owner and is being deleted; the "
            "pod that needs it waits and a fresh claim is made once it is gone",
            use,
        )
    if use is ClaimUse.FOREIGN:
        return ClaimUnusableError(
            f"PersistentVolumeClaim/{name} exists and is not controlled by this Job; Caldera "
            "leaves it alone and the pod that needs it is not created (rename or delete it)",
            use,
        )
    if use is ClaimUse.TERMINATING:
        return ClaimUnusableError(
            f"PersistentVolumeClaim/{name} is being deleted; the pod that needs it waits and a "
            "fresh claim is made once it is gone",
            use,
        )
    return None


def _owner_uid(body: dict[str, Any]) -> str:
    for ref in body.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


class FairQueue(Generic[T]):
    """Items queued per owner, handed out round-robin across owners (pure; no I/O).

    Within one owner the order is FIFO. An owner that runs dry leaves the rotation and joins
    at its end when it queues again.
    """

    def __init__(self) -> None:
        self._queues: dict[str, collections.deque[T]] = {}
        self._rotation: collections.deque[str] = collections.deque()

    def push(self, owner: str, item: T) -> None:
        queue = self._queues.get(owner)
        if queue is None:
            queue = self._queues[owner] = collections.deque()
            self._rotation.append(owner)
        queue.append(item)

    def pop(self) -> tuple[str, T] | None:
        """The next (owner, item) in turn, or None when empty."""
        if not self._rotation:
            return None
        owner = self._rotation.popleft()
        queue = self._queues[owner]
        item = queue.popleft()
        if queue:
            self._rotation.append(owner)
        else:
            del self._queues[owner]
        return owner, item

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues.values())


@dataclass
class _Request:
    body: dict[str, Any]
    done: asyncio.Future[None]
    attempt: int = 0


class PvcCreator:
    """Creates PVCs paced by one token bucket and fair across jobs; see the module docstring."""

    def __init__(
        self,
        client: KubeClient,
        *,
        qps: float,
        burst: int,
        max_attempts: int = 8,
        backoff_base: float = 0.5,
        backoff_cap: float = 60.0,
        on_created: Callable[[str, str], None] | None = None,  # (owner, pvc name); for metrics
        create: Callable[[dict[str, Any]], Awaitable[object]] | None = None,  # seam for tests
        get: Callable[[str, str], Awaitable[PersistentVolumeClaim]] | None = None,  # (ns, name)
    ) -> None:
        self._bucket = TokenBucket(qps, burst)
        self._queue: FairQueue[_Request] = FairQueue()
        self._wake = asyncio.Event()
        self._max_attempts = max_attempts
        self._backoff = (backoff_base, backoff_cap)
        self._on_created = on_created
        self._create = create or (lambda body: client.create(PVC, body))
        self._get = get or (lambda ns, name: client.get(PVC, name, namespace=ns))
        self._log = structlog.get_logger("pvc-creator")
        self._task: asyncio.Task[None] | None = None
        self._retries: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="pvc creator")

    async def stop(self) -> None:
        tasks = [t for t in (self._task, *self._retries) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._retries.clear()

    def submit(self, owner: str, body: dict[str, Any]) -> asyncio.Future[None]:
        """Queue one PVC for ``owner`` (a job key); the future resolves once it exists and
        raises if it cannot be created (Invalid, Forbidden, or retries exhausted) or the claim
        of its name may not be used (``ClaimUnusableError``)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.push(owner, _Request(body, done))
        self._wake.set()
        return done

    async def ensure(self, owner: str, body: dict[str, Any]) -> None:
        await self.submit(owner, body)

    async def _run(self) -> None:
        while True:
            popped = self._queue.pop()
            if popped is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._bucket.wait()
            owner, request = popped
            await self._attempt(owner, request)

    async def _attempt(self, owner: str, request: _Request) -> None:
        name = request.body.get("metadata", {}).get("name", "?")
        try:
            try:
                await self._create(request.body)
            except AlreadyExists:
                meta = request.body.get("metadata", {})
                existing = await self._get(str(meta.get("namespace", "")), str(name))
                problem = claim_problem(existing, _owner_uid(request.body))
                if problem is not None:
                    _resolve(request.done, problem)
                    return
        except NotFound as exc:  # the claim went between the 409 and the read: create again
            self._retry(owner, request, exc)
            return
        except (Invalid, Forbidden) as exc:
            # Retrying cannot fix these: the user (or the cluster admin) must.
            _resolve(request.done, exc)
            return
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            self._retry(owner, request, exc)
            return
        if self._on_created is not None:
            self._on_created(owner, name)
        _resolve(request.done, None)

    def _retry(self, owner: str, request: _Request, exc: Exception) -> None:
        name = request.body.get("metadata", {}).get("name", "?")
        request.attempt += 1
        if request.attempt >= self._max_attempts:
            _resolve(request.done, exc)
            return
        delay = jittered_backoff(request.attempt - 1, *self._backoff)
        self._log.warning(
            "PVC creation failed, retrying", pvc=name, error=str(exc), retry_in=round(delay, 2)
        )
        retry = asyncio.create_task(self._requeue_later(owner, request, delay))
        self._retries.add(retry)
        retry.add_done_callback(self._retries.discard)

    async def _requeue_later(self, owner: str, request: _Request, delay: float) -> None:
        await asyncio.sleep(delay)
        self._queue.push(owner, request)
        self._wake.set()


def _resolve(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return  # the caller gave up (cancelled); nothing to report to
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


__all__ = ["ClaimUnusableError", "FairQueue", "PvcCreator", "claim_problem"]
