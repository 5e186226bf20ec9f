"""ResourceClaim writes: allocations and reservations before a bind, releases when pods go.

Before the scheduler binds a pod with claims, each claim gets, in this order (as
kube-scheduler's DynamicResources plugin does):

1. the ``resource.kubernetes.io/delete-protection`` finalizer, when the session allocated it
   (an allocated claim is not deleted under its pod);
2. its ``status.allocation`` (when the session allocated it) and the pod's ``reservedFor``
   entry, in one merge patch of the status subresource.

Every write carries the ``resourceVersion`` the decision was made on (a merge patch with
``metadata.resourceVersion`` is refused with 409 Conflict when the claim changed), so a claim
is never allocated twice: a claim someone else allocated meanwhile is read again, and the
bind goes ahead only if the allocation found is the one the session made (or the claim was
allocated before and only needs the reservation). The writes of one claim are serialised
(several pods of a gang may share it), and the answer to each write is kept until the cache
shows it (``claims``), as are the allocations planned but not written yet: the next session,
which may start while writes are in flight, never gives those devices again.

Releases: when a pod with claims is deleted or ends (Succeeded, Failed), its ``reservedFor``
entries are removed; a claim left without consumers is deallocated (allocation and finalizer
removed). Kubernetes' resource claim controller does the same (and deletes claims made from
templates with their pods); doing it here as well frees the devices without waiting for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping

import structlog

from caldera.api.dra import (
    DELETE_PROTECTION_FINALIZER,
    RESERVED_FOR_MAX,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from caldera.api.kinds import RESOURCE_CLAIM
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, Conflict, NotFound
from scheduler.api.dra.view import ClaimPlan

log = structlog.get_logger("scheduler.claims")


def _version(claim: ResourceClaim) -> int:
    """The resourceVersion as a number (etcd's revision: later writes have larger ones)."""
    text = claim.metadata.resource_version
    return int(text) if text.isdigit() else 0


def _consumer(name: str, uid: str) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(resource="pods", name=name, uid=uid)


class ClaimWriter:
    """Writes claims for the scheduler process; ``claims`` is what sessions see."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._locks: dict[str, asyncio.Lock] = {}
        self._written: dict[str, ResourceClaim] = {}  # our last write's answer, by key
        self._planned: dict[str, ResourceClaim] = {}  # allocations not written yet, by key
        self._in_flight: dict[str, int] = {}  # pods whose writes of a key are pending

    def claims(self, cached: Iterable[ResourceClaim]) -> dict[str, ResourceClaim]:
        """The cache's claims by key, each replaced by our later write or planned allocation
        until the cache shows as much."""
        found = {f"{c.metadata.namespace}/{c.metadata.name}": c for c in cached}
        for key, written in list(self._written.items()):
            seen = found.get(key)
            if seen is None or _version(seen) >= _version(written):
                if key not in self._in_flight:
                    del self._written[key]
                continue
            found[key] = written
        for key, planned in self._planned.items():
            seen = found.get(key)
            if (
                seen is not None
                and seen.metadata.uid == planned.metadata.uid
                and seen.status.allocation is None
            ):
                found[key] = planned
        return found

    def plan(
        self, claims: Mapping[str, ResourceClaim], pod: tuple[str, str], plans: Iterable[ClaimPlan]
    ) -> None:
        """Note a session's plans for a pod (``pod``: name and uid) before its writes start, so
        the next session sees the devices as taken."""
        name, uid = pod
        for plan in plans:
            claim = claims.get(plan.claim)
            self._in_flight[plan.claim] = self._in_flight.get(plan.claim, 0) + 1
            if claim is None or plan.allocation is None or claim.status.allocation is not None:
                continue
            planned = self._planned.get(plan.claim, claim)
            reserved = (*planned.status.reserved_for, _consumer(name, uid))
            status = ResourceClaimStatus(allocation=plan.allocation, reserved_for=reserved)
            self._planned[plan.claim] = ResourceClaim(
                metadata=claim.metadata, spec=claim.spec, status=status
            )

    def _done(self, key: str) -> None:
        left = self._in_flight.get(key, 0) - 1
        if left > 0:
            self._in_flight[key] = left
            return
        self._in_flight.pop(key, None)
        self._planned.pop(key, None)

    async def reserve(
        self,
        namespace: str,
        pod: str,
        uid: str,
        plans: Iterable[ClaimPlan],
        cached: Mapping[str, ResourceClaim],
    ) -> str | None:
        """Write each claim's allocation and the pod's reservation; None when done, else why
        the pod cannot be bound now (the claims it did get stay reserved for it and are
        released when it goes, or used by its next attempt)."""
        plans = list(plans)
        try:
            for plan in plans:
                lock = self._locks.setdefault(plan.claim, asyncio.Lock())
                async with lock:
                    why = await self._reserve_one(plan, pod, uid, cached)
                if why is not None:
                    return why
            return None
        finally:
            for plan in plans:
                self._done(plan.claim)
                kept = self._locks.get(plan.claim)
                if kept is not None and not kept.locked() and plan.claim not in self._in_flight:
                    del self._locks[plan.claim]

    def _fresh(self, key: str, cached: Mapping[str, ResourceClaim]) -> ResourceClaim | None:
        seen, written = cached.get(key), self._written.get(key)
        if written is not None and (seen is None or _version(written) > _version(seen)):
            return written
        return seen

    async def _reserve_one(
        self, plan: ClaimPlan, pod: str, uid: str, cached: Mapping[str, ResourceClaim]
    ) -> str | None:
        claim = self._fresh(plan.claim, cached)
        namespace, _, name = plan.claim.partition("/")
        for attempt in range(2):
            if claim is None:
                return f"ResourceClaim {plan.claim} is gone"
            why = self._refusal(claim, plan, uid)
            if why is not None:
                return None if why == "" else why
            try:
                claim = await self._write(claim, plan, pod, uid)
                self._written[plan.claim] = claim
                return None
            except Conflict:
                if attempt == 1:
                    return f"ResourceClaim {plan.claim} kept changing"
                try:
                    claim = await self.client.get(RESOURCE_CLAIM, name, namespace=namespace)
                except NotFound:
                    claim = None
            except NotFound:
                return f"ResourceClaim {plan.claim} is gone"
        return None

    @staticmethod
    def _refusal(claim: ResourceClaim, plan: ClaimPlan, uid: str) -> str | None:
        """Why the write must not be made: "" when there is nothing to write (the pod is
        reserved already), a reason when the claim no longer agrees with the session."""
        status = claim.status
        if any(r.uid == uid for r in status.reserved_for):
            return ""
        if claim.metadata.deletion_timestamp is not None:
            return f"ResourceClaim {plan.claim} is being deleted"
        if status.allocation is None and plan.allocation is None:
            return f"ResourceClaim {plan.claim} was deallocated since the session"
        if (
            status.allocation is not None
            and plan.allocation is not None
            and status.allocation != plan.allocation
        ):
            return f"ResourceClaim {plan.claim} was allocated by someone else since the session"
        if len(status.reserved_for) >= RESERVED_FOR_MAX:
            return f"ResourceClaim {plan.claim} has {RESERVED_FOR_MAX} consumers already"
        return None

    async def _write(
        self, claim: ResourceClaim, plan: ClaimPlan, pod: str, uid: str
    ) -> ResourceClaim:
        namespace, name = claim.metadata.namespace, claim.metadata.name
        status: dict[str, object] = {
            "reservedFor": [*claim.status.reserved_for, _consumer(pod, uid)],
        }
        if claim.status.allocation is None:
            finalizers = claim.metadata.finalizers
            if DELETE_PROTECTION_FINALIZER not in finalizers:
                protect: dict[str, object] = {
                    "metadata": {
                        "resourceVersion": claim.metadata.resource_version,
                        "finalizers": [*finalizers, DELETE_PROTECTION_FINALIZER],
                    }
                }
                claim = await self.client.patch(RESOURCE_CLAIM, name, protect, namespace=namespace)
            status["allocation"] = plan.allocation
        patch: dict[str, object] = {
            "metadata": {"resourceVersion": claim.metadata.resource_version},
            "status": status,
        }
        return await self.client.patch_status(RESOURCE_CLAIM, name, patch, namespace=namespace)

    async def release(
        self, uid: str, keys: Iterable[str], cached: Mapping[str, ResourceClaim]
    ) -> None:
        """Remove the pod's reservations; deallocate the claims left without consumers. A
        write that conflicts is read again and retried once; what still fails is left to the
        resource claim controller (and to the next release)."""
        for key in keys:
            lock = self._locks.setdefault(key, asyncio.Lock())
            async with lock:
                with contextlib.suppress(NotFound):
                    try:
                        await self._release_one(key, uid, cached)
                    except (ApiError, ApiConnectionError, TimeoutError) as exc:
                        log.warning("claim release failed", claim=key, error=str(exc))
            if not lock.locked() and key not in self._in_flight:
                self._locks.pop(key, None)

    async def _release_one(self, key: str, uid: str, cached: Mapping[str, ResourceClaim]) -> None:
        namespace, _, name = key.partition("/")
        claim = self._fresh(key, cached)
        for attempt in range(2):
            if claim is None or not any(r.uid == uid for r in claim.status.reserved_for):
                return
            left = [r for r in claim.status.reserved_for if r.uid != uid]
            status: dict[str, object] = {"reservedFor": left or None}
            if not left:
                status["allocation"] = None
            try:
                patch = {
                    "metadata": {"resourceVersion": claim.metadata.resource_version},
                    "status": status,
                }
                claim = await self.client.patch_status(
                    RESOURCE_CLAIM, name, patch, namespace=namespace
                )
                if not left and DELETE_PROTECTION_FINALIZER in claim.metadata.finalizers:
                    kept = [
                        f for f in claim.metadata.finalizers if f != DELETE_PROTECTION_FINALIZER
                    ]
                    patch = {
                        "metadata": {
                            "resourceVersion": claim.metadata.resource_version,
                            "finalizers": kept or None,
                        }
                    }
                    claim = await self.client.patch(
                        RESOURCE_CLAIM, name, patch, namespace=namespace
                    )
                self._written[key] = claim
                return
            except Conflict:
                if attempt == 1:
                    raise
                claim = await self.client.get(RESOURCE_CLAIM, name, namespace=namespace)
