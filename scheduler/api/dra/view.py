"""What a session sees of Dynamic Resource Allocation: the claims, the DeviceClasses and the
ResourceSlices, as the process's cache holds them (with the claims it is writing overlaid,
so that a session never gives away devices an earlier session's writes are taking).

``slices_version`` names the slices: equal versions, equal slices, so the inventory derived
from them is kept across sessions. Which claims a pod uses, and whether Caldera can allocate
them, is decided here from the pod alone (``pod_claims``, ``refusal``).

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final

import msgspec

from caldera.api.core import Pod
from caldera.api.dra import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    AllocationResult,
    DeviceClaim,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)

MAX_CLAIMS_PER_POD: Final = 32  # Kubernetes' limit on a pod's resourceClaims
MAX_REQUESTS: Final = 32  # Kubernetes' DeviceRequestsMaxSize
MAX_COUNT: Final = (
    128  # devices one ExactCount request may ask for (Kubernetes' AllocationResultsMaxSize)
)


@dataclass(slots=True)
class DraView:
    """The DRA objects of one session."""

    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # "<namespace>/<name>"
    classes: dict[str, DeviceClass] = field(default_factory=dict)  # by name
    slices: tuple[ResourceSlice, ...] = ()
    slices_version: int = 0
    # Unique to the session (verdicts about pods with claims live one session), and bumped
    # by the session when an allocation changes what pods on other nodes could get.
    token: object = field(default_factory=object, compare=False)
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """A claim write before a pod's bind: the allocation the session made (None: the claim
    was allocated already) and, always, the pod's reservedFor entry."""

    claim: str  # "<namespace>/<name>"
    allocation: AllocationResult | None


def has_claims(pod: Pod | None) -> bool:
    return pod is not None and bool(pod.spec.resource_claims)


def pod_claims(pod: Pod) -> tuple[list[str], str | None]:
    """The keys of the claims the pod uses, or why they are not known yet: a claim from a
    template exists once the resource claim controller made it and wrote its name in the pod's
    status (a template whose status entry names no claim needs none)."""
    made = {s.name: s for s in pod.status.resource_claim_statuses}
    keys: list[str] = []
    namespace = pod.metadata.namespace
    if len(pod.spec.resource_claims) > MAX_CLAIMS_PER_POD:
        return [], f"the pod has more than {MAX_CLAIMS_PER_POD} resourceClaims"
    for entry in pod.spec.resource_claims:
        if entry.resource_claim_name:
            keys.append(f"{namespace}/{entry.resource_claim_name}")
        elif entry.resource_claim_template_name:
            status = made.get(entry.name)
            if status is None:
                return [], (
                    f"waiting for the ResourceClaim of pod claim {entry.name!r} to be made from "
                    f"template {entry.resource_claim_template_name!r}"
                )
            if status.resource_claim_name:
                keys.append(f"{namespace}/{status.resource_claim_name}")
        else:
            return [], f"pod claim {entry.name!r} names neither a claim nor a template"
    return keys, None


def claims_class(pod: Pod | None, view: DraView) -> Hashable:
    """What a verdict about a pod with claims reads of DRA beyond the node: its claims (an
    unallocated one by its spec, so pods of one template share verdicts; an allocated one by
    name), the session and the session's changes seen from every node (``epoch``)."""
    if pod is None:
        return None
    keys, why = pod_claims(pod)
    parts: list[object] = [why]
    for key in keys:
        claim = view.claims.get(key)
        if claim is None or claim.status.allocation is not None:
            parts.append(key)
        else:
            parts.append(_hashable(claim.spec.devices))
    return (tuple(parts), view.token, view.epoch)


def _hashable(devices: DeviceClaim) -> Hashable:
    """The claim's spec as a key: itself, or its JSON when it holds what does not hash (a
    request's capacity requests, a dict; opaque configuration parameters, raw JSON)."""
    try:
        hash(devices)
    except TypeError:
        return msgspec.json.encode(devices)
    return devices


def refusal(claim: DeviceClaim) -> str | None:
    """Why Caldera will not allocate this claim (a feature it does not implement, or a request
    it cannot read); None when it will. A refused claim makes its pods wait with this reason,
    never be placed with the feature ignored."""
    if not claim.requests:
        return "the claim has no device requests"
    if len(claim.requests) > MAX_REQUESTS:
        return f"the claim has more than {MAX_REQUESTS} device requests"
    names = set()
    for request in claim.requests:
        names.add(request.name)
        if (request.exactly is None) == (not request.first_available):
            return f"request {request.name!r} needs exactly one of exactly and firstAvailable"
        if request.exactly is not None:
            e = request.exactly
            if e.admin_access:
                return f"request {request.name!r}: adminAccess is not supported by Caldera"
            subs = [(request.name, e.allocation_mode, e.count, e.tolerations, e.capacity)]
        else:
            if len(request.first_available) > 8:
                return f"request {request.name!r} has more than 8 firstAvailable subrequests"
            subs = [
                (f"{request.name}/{s.name}", s.allocation_mode, s.count, s.tolerations, s.capacity)
                for s in request.first_available
            ]
        for name, mode, count, tolerations, capacity in subs:
            if tolerations:
                return f"request {name!r}: device taint tolerations are not supported by Caldera"
            if capacity is not None and capacity.requests:
                return f"request {name!r}: capacity requests are not supported by Caldera"
            if mode not in ("", ALLOCATION_MODE_EXACT_COUNT, ALLOCATION_MODE_ALL):
                return f"request {name!r}: unknown allocationMode {mode!r}"
            if mode != ALLOCATION_MODE_ALL and not 1 <= count <= MAX_COUNT:
                return f"request {name!r}: count must be between 1 and {MAX_COUNT}"
    for constraint in claim.constraints:
        if constraint.distinct_attribute:
            return "distinctAttribute constraints are not supported by Caldera"
        if not constraint.match_attribute:
            return "a constraint without matchAttribute is not supported by Caldera"
        for name in constraint.requests:
            if name.partition("/")[0] not in names:
                return f"constraint names request {name!r}, which the claim does not have"
    return None
