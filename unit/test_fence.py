"""Fencing (caldera.kube.fence): the fence's decision over a fake monotonic clock, and the client
dropping a write that waited (rate limiter, retry backoff) while its fence closed. The client
cases use the in-process fake server of test_kube_protocol only to see what reached the wire;
the proof on a real API server is the pause and stall faults (e2e/test_fencing.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from caldera.api.kinds import CONFIGMAP
from caldera.kube.errors import ApiConnectionError, TooManyRequests
from caldera.kube.fence import Fence, FencedError, LeadershipLostError
from unit.test_kube_protocol import (
    CM,
    FakeApiServer,
    Sleeps,
    make_client,
    reply,
    sample,
    server,
    status,
)

__all__ = ["server"]  # the fixture, used by the client cases

DEADLINE = 10.0


# --- the pure decision -------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    kind: str  # "renew" (a round that succeeds or fails), "write", "pause"
    wait: float  # seconds that pass before the step (a pause: the process stopped)
    ok: bool = True  # a renewal's outcome
    latency: float = 0.0  # a renewal's time on the wire: its answer comes this much later


steps = st.lists(
    st.one_of(
        st.builds(
            Step,
            kind=st.just("renew"),
            wait=st.floats(0, 4),
            ok=st.booleans(),
            latency=st.floats(0, 12),
        ),
        st.builds(Step, kind=st.just("write"), wait=st.floats(0, 4)),
        st.builds(Step, kind=st.just("pause"), wait=st.floats(0, 60)),
    ),
    max_size=60,
)


@given(steps)
def test_no_write_is_allowed_after_the_last_successful_renewal_sent_plus_the_deadline(
    sequence: list[Step],
) -> None:
    now = [100.0]
    fence = Fence(DEADLINE, clock=lambda: now[0])
    assert not fence.allows(now[0]), "closed before the Lease is held"
    fence.renewed(now[0])  # the take
    last_sent = now[0]
    refused_after_holding = False
    for step in sequence:
        now[0] += step.wait
        if step.kind == "renew":
            sent = now[0]
            now[0] += step.latency  # the answer arrives later; the base is the send
            if step.ok and fence.renewed(sent):
                last_sent = sent
        elif step.kind == "write":
            allowed = fence.allows(now[0])
            if allowed:
                assert now[0] <= last_sent + DEADLINE
                assert not refused_after_holding, "a closed fence never reopens"
            else:
                refused_after_holding = True
                with pytest.raises(FencedError):
                    fence.check("POST", "/x")


@given(st.lists(st.floats(0, DEADLINE * 0.99), min_size=1, max_size=40))
def test_a_leader_renewing_within_the_deadline_keeps_writing(gaps: list[float]) -> None:
    now = [0.0]
    fence = Fence(DEADLINE, clock=lambda: now[0])
    fence.renewed(now[0])
    for gap in gaps:
        now[0] += gap
        assert fence.allows(now[0])
        assert fence.renewed(now[0])


def test_a_renewal_sent_after_the_deadline_does_not_reopen_the_fence() -> None:
    """A process resumed after a pause may still win a Lease round (nobody took the Lease), but
    it was not leader meanwhile by its own rule: it stays fenced and exits."""
    fence = Fence(DEADLINE, clock=lambda: 0.0)
    assert fence.renewed(0.0)
    assert fence.allows(DEADLINE)
    assert not fence.renewed(DEADLINE + 0.001)
    assert not fence.allows(1.0)
    assert fence.lost


def test_the_base_is_the_send_not_the_answer() -> None:
    fence = Fence(DEADLINE, clock=lambda: 0.0)
    fence.renewed(0.0)
    fence.renewed(5.0)  # sent at 5, answered at 14: the deadline is 15, not 24
    assert fence.allows(15.0)
    assert not fence.allows(15.001)


def test_closing_on_release_stops_writes_at_once() -> None:
    fence = Fence(DEADLINE, clock=lambda: 1.0)
    fence.renewed(0.0)
    fence.close()
    with pytest.raises(FencedError, match="the Lease was released"):
        fence.check("DELETE", "/api/v1/namespaces/ns/pods/p")


def test_fenced_is_a_connection_error_never_sent_nor_retried_and_a_lost_leadership() -> None:
    fence = Fence(DEADLINE, clock=lambda: 30.0)
    fence.renewed(0.0)
    with pytest.raises(FencedError) as caught:
        fence.check("POST", "/api/v1/namespaces/ns/pods/p/binding")
    err = caught.value
    assert isinstance(err, ApiConnectionError)
    assert isinstance(err, LeadershipLostError)
    assert not err.sent
    assert not err.transient
    assert "POST /api/v1/namespaces/ns/pods/p/binding" in str(err)
    assert "20.000s ago" in str(err)


def test_a_fence_needs_a_positive_deadline() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        Fence(0)


# --- the client ----------------------------------------------------------------------------------


async def test_a_write_waiting_on_the_rate_limiter_is_dropped_when_its_fence_closes(
    server: FakeApiServer,
) -> None:
    """The second create waits for the limiter; meanwhile the process is paused past the
    deadline: it is dropped, never sent. Reads go on."""
    server.handlers = [reply(201, CM)]
    now = [100.0]
    sleeps, registry = Sleeps(), CollectorRegistry()

    async def paused() -> None:
        now[0] += 40.0  # SIGSTOP for 40 s while the write waited

    sleeps.on_sleep = paused
    fence = Fence(DEADLINE, clock=lambda: now[0])
    fence.renewed(now[0])
    async with make_client(
        server.port, sleeps, registry, qps=1, burst=1, clock=lambda: now[0]
    ) as c:
        c.fence = fence
        await c.create(CONFIGMAP, CM, namespace="ns")
        with pytest.raises(FencedError):
            await c.create(CONFIGMAP, CM, namespace="ns")
        assert sleeps.delays, "the second write waited for the limiter"
        server.handlers = [reply(200, CM)]
        await c.get(CONFIGMAP, "a", namespace="ns")
    assert [m for m, _, _ in server.seen] == ["POST", "GET"]
    assert sample(registry, "caldera_rest_client_fenced_writes_total", verb="POST") == 1


async def test_a_write_is_dropped_if_its_fence_closes_while_it_waits_for_a_connection(
    server: FakeApiServer,
) -> None:
    """The second check, once aiohttp has a connection for the write (a new one, then a reused
    one): the fence allowed the write before, and closed while it connected."""
    server.handlers = [reply(201, CM)]
    times = iter([100.0])  # the check before sending; connected, the clock reads 120
    fence = Fence(DEADLINE, clock=lambda: next(times, 120.0))
    fence.renewed(100.0)
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(server.port, sleeps, registry) as c:
        c.fence = fence
        await c.get(CONFIGMAP, "a", namespace="ns")  # a read: no check, and a pooled connection
        with pytest.raises(FencedError):
            await c.create(CONFIGMAP, CM, namespace="ns")
    assert [m for m, _, _ in server.seen] == ["GET"], "the write never reached the server"
    assert sample(registry, "caldera_rest_client_fenced_writes_total", verb="POST") == 1
    assert sample(registry, "caldera_rest_client_requests_total", verb="POST", code="<error>") == 0


async def test_a_write_is_dropped_if_its_fence_closes_before_its_body_goes_on_the_wire(
    server: FakeApiServer,
) -> None:
    """The last check, as the body is written: the fence allowed the write before sending and
    once connected, and closed before aiohttp's body writer ran (a process stopped in between).
    Nothing reaches the server, headers included (aiohttp sends them with the body)."""
    server.handlers = [reply(201, CM)]
    times = iter([100.0, 100.0])  # before sending, once connected; as the body goes, 120
    fence = Fence(DEADLINE, clock=lambda: next(times, 120.0))
    fence.renewed(100.0)
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(server.port, sleeps, registry) as c:
        c.fence = fence
        with pytest.raises(FencedError):
            await c.create(CONFIGMAP, CM, namespace="ns")
        server.handlers = [reply(200, CM)]
        await c.get(CONFIGMAP, "a", namespace="ns")  # the client goes on reading
    assert [m for m, _, _ in server.seen] == ["GET"], "the write never reached the server"
    assert sample(registry, "caldera_rest_client_fenced_writes_total", verb="POST") == 1
    assert sample(registry, "caldera_rest_client_requests_total", verb="POST", code="<error>") == 0


async def test_a_fenced_write_with_its_fence_open_sends_its_body_as_json(
    server: FakeApiServer,
) -> None:
    received: list[tuple[str, dict[str, Any]]] = []

    async def record(request: web.Request) -> web.StreamResponse:
        received.append((request.content_type, await request.json()))
        return await reply(201, CM)(request)

    server.handlers = [record]
    fence = Fence(DEADLINE, clock=lambda: 100.0)
    fence.renewed(100.0)
    sleeps, registry = Sleeps(), CollectorRegistry()
    async with make_client(server.port, sleeps, registry) as c:
        c.fence = fence
        await c.patch(CONFIGMAP, "a", {"data": {"k": "v"}}, namespace="ns")
        await c.create(CONFIGMAP, CM, namespace="ns")
    assert received == [
        ("application/merge-patch+json", {"data": {"k": "v"}}),
        ("application/json", CM),
    ]


async def test_a_write_in_retry_backoff_is_not_retried_once_its_fence_closes(
    server: FakeApiServer,
) -> None:
    server.handlers = [
        reply(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "5"})
    ]
    now = [100.0]
    sleeps, registry = Sleeps(), CollectorRegistry()

    async def backoff() -> None:
        now[0] += 11.0  # the backoff (and a slow wake-up) outlasts the deadline

    sleeps.on_sleep = backoff
    fence = Fence(DEADLINE, clock=lambda: now[0])
    fence.renewed(now[0])
    async with make_client(server.port, sleeps, registry, clock=lambda: now[0]) as c:
        c.fence = fence
        with pytest.raises(FencedError):
            await c.patch(CONFIGMAP, "a", {"data": {"k": "v"}}, namespace="ns")
    assert [m for m, _, _ in server.seen] == ["PATCH"], "sent once, the retry dropped"


async def test_the_lease_client_is_unfenced_unlimited_and_never_retries(
    server: FakeApiServer,
) -> None:
    server.handlers = [
        reply(429, status(429, "TooManyRequests", "slow down"), {"Retry-After": "1"})
    ]
    sleeps, registry = Sleeps(), CollectorRegistry()
    fence = Fence(DEADLINE, clock=lambda: 0.0)  # never held: every write of `c` is refused
    async with make_client(server.port, sleeps, registry) as c:
        c.fence = fence
        lease = c.lease_client(3.0)
        try:
            assert lease.fence is None
            assert lease.options.retry.max_attempts == 1
            assert lease.options.timeout == 3.0
            assert lease.options.connect_timeout <= 3.0
            with pytest.raises(TooManyRequests):
                await lease.create(CONFIGMAP, CM, namespace="ns")
        finally:
            await lease.close()
    assert len(server.seen) == 1
    assert sleeps.delays == [], "the shared client's sleeps (limiter, backoff) are not used"
