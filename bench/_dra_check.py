"""Whether a scheduler's DRA allocations are valid, from the objects as the API server has them
(``bench/dra.py``'s check of kube-scheduler and of Caldera): pure, on plain JSON.

Valid means: no device is in two claims' allocations; every claim of a bound pod is allocated,
reserved for the pod, and each of its devices exists in a ResourceSlice of the pod's node (or of
every node) and is one its request accepts (the DeviceClass and the selectors, as a Python
predicate the caller gives per request: this check evaluates no CEL); an ``ExactCount`` request
got exactly ``count`` devices and an ``All`` request every device of the node it accepts;
``matchAttribute`` constraints hold; and no allocated claim is left reserved for no bound pod.
A bound pod whose claim has no allocation at all is counted apart (``unallocated``): that is a
scheduler that does not do DRA, not a wrong allocation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

Json: TypeAlias = dict[str, Any]
DeviceKey: TypeAlias = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True)
class Device:
    """One published device, with its node and its attributes' plain values."""

    driver: str
    pool: str
    name: str
    node: str | None  # None: a slice for every node
    attributes: Mapping[str, Any]
    capacity: Mapping[str, str]

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> Any:
        """An attribute by its qualified name (``<driver>/<id>``; the driver's own attributes
        may be published unqualified), None if the device has none."""
        domain, _, ident = qualified.rpartition("/")
        if qualified in self.attributes:
            return self.attributes[qualified]
        return self.attributes.get(ident) if domain == self.driver else None


# What a request accepts: (request name, device) -> bool. Subrequests of firstAvailable are
# named "<request>/<subrequest>", as allocation results name them.
Accepts: TypeAlias = Callable[[str, Device], bool]


@dataclass
class Verdict:
    """The check's outcome over some pods."""

    pods: int = 0
    bound: int = 0
    unallocated: int = 0  # bound pods with a claim that has no allocation
    problems: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # unbound pods: why, as the scheduler says

    @property
    def valid(self) -> bool:
        return not self.problems


def devices_of(slices: Iterable[Json]) -> dict[DeviceKey, Device]:
    """Every device the slices publish, by (driver, pool, device)."""
    found: dict[DeviceKey, Device] = {}
    for item in slices:
        spec = item.get("spec") or {}
        node = None if spec.get("allNodes") else spec.get("nodeName")
        for dev in spec.get("devices") or []:
            attributes = {k: _plain(v) for k, v in (dev.get("attributes") or {}).items()}
            capacity = {k: str(v.get("value")) for k, v in (dev.get("capacity") or {}).items()}
            device = Device(
                spec["driver"], spec["pool"]["name"], dev["name"], node, attributes, capacity
            )
            found[device.key] = device
    return found


def _plain(value: Mapping[str, Any]) -> Any:
    for kind in ("string", "int", "bool", "version"):
        if kind in value:
            return value[kind]
    return None


def results_of(claim: Json) -> list[Json]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[Json] = (allocation.get("devices") or {}).get("results") or []
    return results


def _key(result: Json) -> DeviceKey:
    return (result["driver"], result["pool"], result["device"])


def double_allocations(claims: Iterable[Json]) -> list[str]:
    """A problem for each device in more than one claim's allocation."""
    holders: dict[DeviceKey, list[str]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        for key in {_key(r) for r in results_of(claim)}:
            holders.setdefault(key, []).append(f"{meta.get('namespace')}/{meta.get('name')}")
    return [
        f"device {'/'.join(key)} allocated to {len(who)} claims: {', '.join(sorted(who))}"
        for key, who in sorted(holders.items())
        if len(who) > 1
    ]


def pod_claim_names(pod: Json) -> dict[str, str | None]:
    """A pod's claims: its name for each -> the ResourceClaim's name (None while the template's
    claim has not been made)."""
    statuses = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: dict[str, str | None] = {}
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        names[ref["name"]] = ref.get("resourceClaimName") or statuses.get(ref["name"])
    return names


def check_claim(
    claim: Json, node: str, devices: Mapping[DeviceKey, Device], accepts: Accepts
) -> list[str]:
    """The problems of one allocated claim used on ``node``."""
    name = f"claim {(claim.get('metadata') or {}).get('name')}"
    problems: list[str] = []
    spec = (claim.get("spec") or {}).get("devices") or {}
    got: dict[str, list[Device]] = {}
    counts: Counter[str] = Counter(r["request"] for r in results_of(claim))
    for result in results_of(claim):
        device = devices.get(_key(result))
        if device is None:
            problems.append(f"{name}: device {'/'.join(_key(result))} is in no ResourceSlice")
            continue
        if device.node not in (None, node):
            problems.append(f"{name}: device {device.name} is on {device.node}, the pod on {node}")
        if not accepts(result["request"], device):
            problems.append(
                f"{name}: device {device.name} does not match request {result['request']}"
            )
        got.setdefault(result["request"], []).append(device)
    for request in spec.get("requests") or []:
        problems += _check_count(name, request, counts, devices, node, accepts)
    for constraint in spec.get("constraints") or []:
        attr = constraint.get("matchAttribute")
        if not attr:
            continue
        wanted = constraint.get("requests")
        values = {
            repr(d.attribute(attr))
            for request, chosen in got.items()
            if not wanted or request.split("/")[0] in wanted
            for d in chosen
        }
        if len(values) > 1:
            problems.append(f"{name}: matchAttribute {attr} differs: {', '.join(sorted(values))}")
    return problems


def _check_count(
    name: str,
    request: Json,
    counts: Mapping[str, int],
    devices: Mapping[DeviceKey, Device],
    node: str,
    accepts: Accepts,
) -> list[str]:
    req = request["name"]
    if "firstAvailable" in request:
        chosen = [k for k in counts if k.split("/")[0] == req]
        if len(chosen) != 1:
            return [f"{name}: request {req} has results from {len(chosen)} subrequests"]
        sub = chosen[0].split("/", 1)[1]
        subs = {s["name"]: s for s in request["firstAvailable"]}
        if sub not in subs:
            return [f"{name}: request {req} names no subrequest {sub}"]
        return _check_count(name, {**subs[sub], "name": chosen[0]}, counts, devices, node, accepts)
    exactly = request.get("exactly", request)
    mode = exactly.get("allocationMode", "ExactCount")
    have = counts.get(req, 0)
    if mode == "All":
        want = sum(1 for d in devices.values() if d.node in (None, node) and accepts(req, d))
    else:
        want = int(exactly.get("count", 1))
    return [] if have == want else [f"{name}: request {req} got {have} devices, wants {want}"]


def waiting_reason(pod: Json) -> str:
    """The message of an unbound pod's ``PodScheduled=False`` condition ("" without one)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "")
    return ""


def check(
    pods: Iterable[Json],
    claims: Iterable[Json],
    slices: Iterable[Json],
    accepts: Accepts,
    *,
    all_claims: Iterable[Json] | None = None,
) -> Verdict:
    """The verdict over ``pods`` (with their ``claims``); ``all_claims`` (every claim in the
    cluster, ``claims`` by default) is what double allocation is checked over."""
    claims = list(claims)
    devices = devices_of(slices)
    by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    verdict = Verdict(problems=double_allocations(all_claims if all_claims is not None else claims))
    holders: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        verdict.pods += 1
        meta, node = pod["metadata"], (pod.get("spec") or {}).get("nodeName")
        if not node:
            verdict.waiting.append(
                f"pod {meta['name']}: {waiting_reason(pod) or 'no reason given'}"
            )
            continue
        verdict.bound += 1
        unallocated = False
        for ref, claim_name in pod_claim_names(pod).items():
            claim = by_name.get((meta["namespace"], claim_name or ""))
            if claim is None:
                verdict.problems.append(f"pod {meta['name']}: claim {ref} ({claim_name}) not found")
                continue
            holders[(meta["namespace"], claim_name or "")] += 1
            if not results_of(claim):
                unallocated = True
                continue
            reserved = {r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []}
            if meta.get("uid") not in reserved:
                verdict.problems.append(
                    f"pod {meta['name']}: claim {claim_name} not reserved for it"
                )
            verdict.problems += check_claim(claim, node, devices, accepts)
        verdict.unallocated += unallocated
    for key, claim in by_name.items():
        if results_of(claim) and not holders[key]:
            verdict.problems.append(f"claim {key[1]} allocated but used by no bound pod")
    return verdict
