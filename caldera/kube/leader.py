"""Leader election on a coordination.k8s.io/v1 Lease, so replicas of a process never act at once.

The holder renews the Lease every ``retry_period``; the others try to take it every
``retry_period`` and succeed once it has gone unrenewed for ``lease_duration``. Expiry is judged
by the *local* clock from the moment this process last saw the record change (never by comparing
``renewTime`` with the local wall clock), so clock skew between nodes cannot make two leaders.
Writes are PUTs carrying the resourceVersion read, so of two candidates only one wins a round.

Fencing (`caldera.kube.fence`): the elector owns a `Fence` that the process's `KubeClient`
consults before every mutating request. Each successful take or renewal extends it to the moment
the request was *sent* plus ``renew_deadline``; past that moment, by this process's monotonic
clock, no write is sent (a queued one is dropped with `FencedError`), whatever the requests and
timers are doing: a leader paused by SIGSTOP, or whose connection hangs, stops writing at its
deadline, not when it next manages to look. The renewal loop wakes at the deadline at the
latest; then the work is cancelled and ``run`` raises ``LeadershipLostError``, and the process
exits and restarts as a candidate. Lease calls go through their own client
(`KubeClient.lease_client`): no retries, no shared rate limiter, each round bounded by
``call_timeout`` (and by the time left before the deadline), so a hung Lease call cannot stretch
the window. On a clean shutdown the Lease is
released (holder cleared, duration 1 s) so a successor starts at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec
import structlog

from caldera.api.core import Lease, LeaseSpec
from caldera.api.kinds import LEASE
from caldera.api.meta import ObjectMeta, format_micro_time
from caldera.kube.client import KubeClient
from caldera.kube.errors import AlreadyExists, ApiConnectionError, ApiError, Conflict, NotFound
from caldera.kube.fence import Fence, LeadershipLostError

__all__ = [
    "LeaderElector",
    "LeadershipLostError",
    "LeaseConfig",
    "claimed_spec",
    "lease_held_by_other",
]


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def call_timeout(self) -> float:
        """The longest one Lease round (a GET and a PUT) may take: half the renew deadline, so a
        hung call leaves time for another try before the deadline."""
        return self.renew_deadline / 2


def lease_held_by_other(
    spec: LeaseSpec, identity: str, observed_at: float, now: float, lease_duration: float
) -> bool:
    """Whether someone else holds a lease we last saw change at ``observed_at`` (monotonic)."""
    if not spec.holder_identity or spec.holder_identity == identity:
        return False
    duration = spec.lease_duration_seconds or lease_duration
    return observed_at + duration > now


def claimed_spec(
    previous: LeaseSpec | None, identity: str, duration: float, wall: dt.datetime
) -> LeaseSpec:
    """The spec a candidate writes to take or renew the Lease."""
    stamp = format_micro_time(wall)
    if previous is not None and previous.holder_identity == identity:
        return msgspec.structs.replace(
            previous, renew_time=stamp, lease_duration_seconds=int(duration)
        )
    transitions = (previous.lease_transitions or 0) + 1 if previous is not None else 0
    return LeaseSpec(
        holder_identity=identity,
        lease_duration_seconds=int(duration),
        acquire_time=stamp,
        renew_time=stamp,
        lease_transitions=transitions,
    )


class LeaderElector:
    """Runs ``lead()`` only while holding the Lease; ``fence`` says when writes must stop.

    ``client`` is used for the Lease alone: give it `KubeClient.lease_client` (no retries, no
    shared rate limiter), and give the process's own client this elector's ``fence``."""

    def __init__(
        self,
        client: KubeClient,
        config: LeaseConfig,
        *,
        on_change: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,  # seam for tests
    ) -> None:
        self.client = client
        self.config = config
        self.on_change = on_change
        self.clock = clock
        self.fence = Fence(config.renew_deadline, clock=clock)
        self.log = structlog.get_logger("leader").bind(lease=f"{config.namespace}/{config.name}")
        self._observed: tuple[str | None, str | None, int | None] | None = None
        self._observed_at = 0.0
        self.is_leader = False

    async def try_acquire_or_renew(self) -> bool:
        """One round: True if we hold the Lease afterwards (the fence then extended from the
        moment the winning write was sent)."""
        cfg = self.config
        now_wall = dt.datetime.now(dt.UTC)
        try:
            lease = await self.client.get(LEASE, cfg.name, namespace=cfg.namespace)
        except NotFound:
            body = Lease(
                metadata=ObjectMeta(name=cfg.name, namespace=cfg.namespace),
                spec=claimed_spec(None, cfg.identity, cfg.lease_duration, now_wall),
            )
            sent = self.clock()
            try:
                await self.client.create(LEASE, body, namespace=cfg.namespace)
            except AlreadyExists:
                return False
            self._observe(body.spec)
            return self.fence.renewed(sent)
        spec = lease.spec
        self._observe(spec)
        if self.is_leader and spec.holder_identity not in (None, "", cfg.identity):
            # Someone else holds the Lease we lead on (an administrator's edit, a clock far
            # off): whatever our own deadline says, stop writing now.
            self.log.warning("the Lease is held by another replica", holder=spec.holder_identity)
            self.fence.close()
            return False
        if lease_held_by_other(
            spec, cfg.identity, self._observed_at, self.clock(), cfg.lease_duration
        ):
            return False
        updated = msgspec.structs.replace(
            lease, spec=claimed_spec(spec, cfg.identity, cfg.lease_duration, now_wall)
        )
        sent = self.clock()
        try:
            await self.client.replace(LEASE, updated, namespace=cfg.namespace)
        except Conflict:
            return False  # another candidate wrote first; look again next round
        self._observe(updated.spec)
        return self.fence.renewed(sent)

    def _observe(self, spec: LeaseSpec) -> None:
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()

    def _set_leader(self, value: bool) -> None:
        if value != self.is_leader:
            self.is_leader = value
            self.log.info("leadership acquired" if value else "leadership ended")
            if self.on_change:
                self.on_change(value)

    async def _round(self, limit: float | None = None) -> bool:
        """One round, never longer than the call timeout (nor ``limit`` seconds)."""
        timeout = (
            self.config.call_timeout if limit is None else min(limit, self.config.call_timeout)
        )
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                return await self.try_acquire_or_renew()
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            self.log.warning("lease round failed", error=str(exc) or type(exc).__name__)
            return False

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Wait for the Lease, run ``lead()`` while renewing it; release it when ``lead`` ends
        or this coroutine is cancelled. Raises LeadershipLostError once the fence closes."""
        cfg = self.config
        # Polling is the protocol: the Lease is a record on the API server, not a local event.
        while not await self._round():
            if self.fence.lost:
                raise LeadershipLostError("the Lease was taken after its fence had closed")
            await asyncio.sleep(cfg.retry_period * (1 + 0.2 * random.random()))  # noqa: S311
        self._set_leader(True)
        work = asyncio.create_task(_call(lead), name="leader work")
        renew = asyncio.create_task(self._renew_loop(), name="lease renewal")
        try:
            done, _ = await asyncio.wait({work, renew}, return_when=asyncio.FIRST_COMPLETED)
            if renew in done:
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, LeadershipLostError):
                    await work
                self._set_leader(False)
                raise LeadershipLostError(
                    f"could not renew lease within {cfg.renew_deadline}s of the last renewal"
                )
            await work  # re-raise what ended the work, if anything
        finally:
            for task in (work, renew):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(work, renew, return_exceptions=True)
            if self.is_leader and not self.fence.lost:
                self.fence.close()  # the work has ended; a successor may start at once
                await asyncio.shield(self.release())
            self._set_leader(False)

    async def _renew_loop(self) -> None:
        """Renew every ``retry_period``; return as soon as the fence has closed. Every sleep ends
        at the fence's deadline at the latest, and the clock is read after each wake-up, so a
        process resumed after a pause longer than the deadline returns at once."""
        cfg = self.config
        next_round = self.clock() + cfg.retry_period
        while True:
            now = self.clock()
            if not self.fence.allows(now):
                return  # the deadline passed: leadership is over
            deadline = self.fence.deadline
            assert deadline is not None  # allows() is False before the Lease is held
            if now < next_round:
                await asyncio.sleep(min(next_round, deadline) - now + 0.001)
                continue
            await self._round(limit=self.fence.remaining(self.clock()))
            next_round = self.clock() + cfg.retry_period

    async def release(self) -> None:
        """Give the Lease up so that another replica takes over without waiting for expiry."""
        cfg = self.config
        try:
            lease = await self.client.get(LEASE, cfg.name, namespace=cfg.namespace)
            if lease.spec.holder_identity == cfg.identity:
                spec = msgspec.structs.replace(
                    lease.spec,
                    holder_identity=None,
                    lease_duration_seconds=1,
                    renew_time=format_micro_time(dt.datetime.now(dt.UTC)),
                )
                released = msgspec.structs.replace(lease, spec=spec)
                await self.client.replace(LEASE, released, namespace=cfg.namespace)
        except (ApiError, ApiConnectionError, TimeoutError) as exc:
            self.log.warning("could not release lease", error=str(exc))
        finally:
            self._set_leader(False)


async def _call(fn: Callable[[], Awaitable[None]]) -> None:
    await fn()
