"""The scheduler's ResourceClaim writes (scheduler.claim_writer) against an in-memory API that
holds merge patches to their resourceVersion, as the API server does: allocation and
reservation before a bind, a claim allocated by someone else meanwhile never allocated again,
a shared claim reserved by two pods in turn, and release with deallocation after the last."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from caldera.api.dra import (
    DELETE_PROTECTION_FINALIZER,
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from caldera.api.kinds import KindInfo
from caldera.kube.errors import Conflict
from scheduler.api.dra.view import ClaimPlan
from scheduler.claim_writer import ClaimWriter


def allocation(device: str) -> AllocationResult:
    result = DeviceRequestAllocationResult(request="gpu", driver="d", pool="p", device=device)
    return AllocationResult(devices=DeviceAllocationResult(results=(result,)))


class FakeClaims:
    """ResourceClaims by name; a patch naming a stale resourceVersion answers Conflict."""

    def __init__(self, *claims: ResourceClaim) -> None:
        self.objects = {c.metadata.name: msgspec.to_builtins(c) for c in claims}
        self.version = 10
        self.writes: list[str] = []

    def _decode(self, name: str) -> ResourceClaim:
        return msgspec.convert(self.objects[name], ResourceClaim)

    async def get(self, _kind: KindInfo[Any], name: str, *, namespace: str) -> ResourceClaim:
        return self._decode(name)

    async def patch(
        self, kind: KindInfo[Any], name: str, patch: Any, *, namespace: str, subresource: str = ""
    ) -> ResourceClaim:
        await asyncio.sleep(0)  # let other writers run between the read and the write
        body = msgspec.to_builtins(patch)
        current = self.objects[name]
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"].get("resourceVersion"):
            raise Conflict(409, "Conflict", "the object has been modified")
        meta = {k: v for k, v in body.get("metadata", {}).items() if k != "resourceVersion"}
        for key, value in meta.items():
            if value is None:
                current["metadata"].pop(key, None)
            else:
                current["metadata"][key] = value
        status = current.setdefault("status", {})
        for key, value in body.get("status", {}).items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        self.version += 1
        current["metadata"]["resourceVersion"] = str(self.version)
        self.writes.append(f"{subresource or 'claim'} {name}")
        return self._decode(name)

    async def patch_status(
        self, kind: KindInfo[Any], name: str, patch: Any, *, namespace: str
    ) -> ResourceClaim:
        return await self.patch(kind, name, patch, namespace=namespace, subresource="status")

    def cached(self) -> dict[str, ResourceClaim]:
        return {f"ns/{n}": self._decode(n) for n in self.objects}


def claim(name: str, version: str = "5", **status: Any) -> ResourceClaim:
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "uid": f"u-{name}",
                "resourceVersion": version,
            },
            "status": status,
        },
        ResourceClaim,
    )


def writer(api: FakeClaims) -> ClaimWriter:
    return ClaimWriter(api)  # type: ignore[arg-type]


async def test_a_claim_is_protected_allocated_and_reserved_before_the_bind() -> None:
    """The finalizer first, then allocation and reservedFor in one status patch."""
    api = FakeClaims(claim("c"))
    why = await writer(api).reserve(
        "ns", "p", "uid-p", [ClaimPlan("ns/c", allocation("g0"))], api.cached()
    )
    assert why is None
    assert api.writes == ["claim c", "status c"]
    stored = api._decode("c")
    assert stored.metadata.finalizers == (DELETE_PROTECTION_FINALIZER,)
    assert stored.status.allocation == allocation("g0")
    assert [r.uid for r in stored.status.reserved_for] == ["uid-p"]


async def test_a_claim_someone_else_allocated_meanwhile_is_not_allocated_again() -> None:
    """The session saw the claim free; the API server has it allocated to g1 now: the write
    conflicts, the claim is read again, and the bind is refused, the claim left as it is."""
    api = FakeClaims(claim("c", version="7", allocation=msgspec.to_builtins(allocation("g1"))))
    stale = {"ns/c": claim("c", version="5")}
    why = await writer(api).reserve(
        "ns", "p", "uid-p", [ClaimPlan("ns/c", allocation("g0"))], stale
    )
    assert why is not None
    assert "allocated by someone else" in why
    assert api._decode("c").status.allocation == allocation("g1")
    assert api._decode("c").status.reserved_for == ()


async def test_two_pods_sharing_a_claim_reserve_it_in_turn_and_release_it() -> None:
    """Both plans carry the session's allocation: the first writes it, the second only adds
    itself; released by both, the claim is deallocated and loses its finalizer."""
    api = FakeClaims(claim("c"))
    w = writer(api)
    cached = api.cached()
    plan = [ClaimPlan("ns/c", allocation("g0"))]
    w.plan(cached, ("p1", "u1"), plan)
    w.plan(cached, ("p2", "u2"), plan)
    # the next session sees the planned allocation before any write
    assert w.claims(cached.values())["ns/c"].status.allocation == allocation("g0")
    results = await asyncio.gather(
        w.reserve("ns", "p1", "u1", plan, cached), w.reserve("ns", "p2", "u2", plan, cached)
    )
    assert list(results) == [None, None]
    stored = api._decode("c")
    assert sorted(r.uid for r in stored.status.reserved_for) == ["u1", "u2"]
    assert stored.status.allocation == allocation("g0")
    await w.release("u1", ["ns/c"], api.cached())
    assert [r.uid for r in api._decode("c").status.reserved_for] == ["u2"]
    assert api._decode("c").status.allocation is not None
    await w.release("u2", ["ns/c"], api.cached())
    stored = api._decode("c")
    assert stored.status.allocation is None
    assert stored.status.reserved_for == ()
    assert DELETE_PROTECTION_FINALIZER not in stored.metadata.finalizers
