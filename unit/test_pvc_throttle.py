"""PVC creation is fair across jobs (round-robin), paced by one token bucket, retried on
transient errors, and final on errors retrying cannot fix."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import PersistentVolumeClaim
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.kube.errors import AlreadyExists, Invalid, ServerError
from controllers.job.pvc_throttle import FairQueue, PvcCreator


def test_fair_queue_round_robins_across_owners() -> None:
    """Owners take turns, one item each; each owner's own items stay in order."""
    q: FairQueue[str] = FairQueue()
    for i in range(4):
        q.push("big", f"b{i}")
    q.push("small", "s0")
    q.push("small", "s1")
    order = []
    while (item := q.pop()) is not None:
        order.append(item[1])
    assert order == ["b0", "s0", "b1", "s1", "b2", "b3"]
    assert len(q) == 0


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers()), max_size=60))
def test_fair_queue_loses_nothing_and_keeps_per_owner_order(items: list[tuple[str, int]]) -> None:
    """Everything pushed comes out exactly once, each owner's items in push order."""
    q: FairQueue[int] = FairQueue()
    for owner, value in items:
        q.push(owner, value)
    out = []
    while (got := q.pop()) is not None:
        out.append(got)
    assert sorted(out) == sorted(items)
    for owner in "abcde":
        assert [v for o, v in out if o == owner] == [v for o, v in items if o == owner]


def _body(name: str) -> dict[str, Any]:
    owner = {"kind": "Job", "name": "j", "uid": "u1", "controller": True}
    return {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]}}


async def own_claim(namespace: str, name: str) -> PersistentVolumeClaim:
    ref = OwnerReference(kind="Job", name="j", uid="u1", controller=True)
    return PersistentVolumeClaim(
        metadata=ObjectMeta(name=name, namespace=namespace, owner_references=(ref,))
    )


async def test_creator_paces_creations_with_the_bucket() -> None:
    """After the burst, creations are spaced by 1/qps."""
    stamps: list[float] = []

    async def create(body: dict[str, Any]) -> None:
        stamps.append(time.monotonic())

    creator = PvcCreator(None, qps=50, burst=2, create=create)  # type: ignore[arg-type]
    creator.start()
    try:
        await asyncio.gather(*(creator.submit("j", _body(f"p{i}")) for i in range(8)))
    finally:
        await creator.stop()
    elapsed = stamps[-1] - stamps[0]
    assert elapsed >= (8 - 2) / 50 * 0.9, f"8 creations at 50/s with burst 2 took {elapsed:.3f}s"


async def test_creator_retries_transient_errors_and_accepts_already_exists() -> None:
    """A 5xx is retried until it succeeds; AlreadyExists counts as created when the existing
    claim is the Job's own (unit/test_ownership.py has the other cases)."""
    calls: dict[str, int] = {}

    async def create(body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        calls[name] = calls.get(name, 0) + 1
        if name == "flaky" and calls[name] < 3:
            raise ServerError(503, "ServiceUnavailable", "try later")
        if name == "exists":
            raise AlreadyExists(409, "AlreadyExists", "exists")

    created: list[str] = []
    creator = PvcCreator(
        None,  # type: ignore[arg-type]
        qps=1000,
        burst=100,
        backoff_base=0.001,
        create=create,
        get=own_claim,
        on_created=lambda owner, name: created.append(name),
    )
    creator.start()
    try:
        await asyncio.wait_for(
            asyncio.gather(
                creator.submit("j", _body("flaky")), creator.submit("j", _body("exists"))
            ),
            5,
        )
    finally:
        await creator.stop()
    assert calls == {"flaky": 3, "exists": 1}
    assert sorted(created) == ["exists", "flaky"]


async def test_creator_reports_errors_retrying_cannot_fix() -> None:
    """An Invalid PVC fails its caller at once, with the server's message, and is not retried."""
    calls = 0

    async def create(body: dict[str, Any]) -> None:
        nonlocal calls
        calls += 1
        raise Invalid(
            422, "Invalid", 'PersistentVolumeClaim "x" is invalid: spec.resources: Required value'
        )

    creator = PvcCreator(None, qps=1000, burst=100, create=create)  # type: ignore[arg-type]
    creator.start()
    try:
        with pytest.raises(Invalid, match=r"spec\.resources"):
            await asyncio.wait_for(creator.submit("j", _body("x")), 5)
    finally:
        await creator.stop()
    assert calls == 1
