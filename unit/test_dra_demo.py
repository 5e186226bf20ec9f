"""The demo's DRA step decides from the job's pods and claims whether the scheduler did DRA."""

from __future__ import annotations

from typing import Any

from e2e.cluster.dra_demo import claim_lines, outcome, prepared


def _pod(node: str | None, claim: str | None) -> dict[str, Any]:
    statuses = [{"name": "gpu", "resourceClaimName": claim}] if claim else []
    status = {"resourceClaimStatuses": statuses} if statuses else {}
    return {"spec": {"nodeName": node} if node else {}, "status": status}


def _claim(name: str, devices: list[str], ready: tuple[str, ...] = ()) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if devices:
        status["allocation"] = {
            "devices": {"results": [{"pool": "n0", "device": d, "request": "gpu"} for d in devices]}
        }
        status["reservedFor"] = [{"name": f"pod-of-{name}"}]
    if ready:
        status["devices"] = [
            {"device": d, "conditions": [{"type": "Ready", "status": "True"}]} for d in ready
        ]
    return {"metadata": {"name": name}, "status": status}


def test_waiting_until_every_pod_is_bound() -> None:
    assert outcome([], []) == "waiting"
    assert outcome([_pod("n0", "c0"), _pod(None, "c1")], [_claim("c0", ["gpu-0"])]) == "waiting"


def test_bound_with_allocations_or_without() -> None:
    claims = [_claim("c0", ["gpu-0"]), _claim("c1", [])]
    assert outcome([_pod("n0", "c0")], claims) == "allocated"
    assert outcome([_pod("n0", "c0"), _pod("n0", "c1")], claims) == "unallocated"
    assert outcome([_pod("n0", None)], claims) == "unallocated"  # claim never made


def test_claim_lines_show_devices_and_readiness() -> None:
    done, half = _claim("c0", ["gpu-0"], ("gpu-0",)), _claim("c1", ["gpu-1", "gpu-2"], ("gpu-1",))
    assert prepared(done)
    assert not prepared(half)
    assert claim_lines([half, done]) == [
        "  claim c0: for pod-of-c0; devices n0/gpu-0; prepared by the driver: gpu-0",
        "  claim c1: for pod-of-c1; devices n0/gpu-1, n0/gpu-2; prepared by the driver: gpu-1",
    ]
