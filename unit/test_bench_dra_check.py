"""bench/_dra_check.py judges DRA allocations: each rule can fail, and what a correct allocator
does always passes (hypothesis)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bench._dra_cases import CASES, objects, pods
from bench._dra_check import Device, check, pod_claim_names
from e2e.fake_dra_driver import DRIVER, NodeGpus, resource_slice

Json = dict[str, Any]


def _accept_all(_request: str, device: Device) -> bool:
    return device.driver == DRIVER


def _world(
    counts: list[int], nodes: int = 2, gpus: int = 4
) -> tuple[list[Json], list[Json], list[Json]]:
    """Slices of ``nodes`` x ``gpus``; one pod per entry of ``counts`` with one claim of that
    many devices, placed first-fit as a correct allocator would (pods that fit nowhere stay
    unbound and unallocated)."""
    slices = [resource_slice(f"n{i}", NodeGpus(gpus=gpus)) for i in range(nodes)]
    free = {f"n{i}": [f"gpu-{j}" for j in range(gpus)] for i in range(nodes)}
    pods_, claims = [], []
    for k, count in enumerate(counts):
        claim: Json = {
            "metadata": {"namespace": "ns", "name": f"c{k}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": count}}]}},
            "status": {},
        }
        pod: Json = {
            "metadata": {"namespace": "ns", "name": f"p{k}", "uid": f"u{k}"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{k}"}]},
        }
        node = next((n for n, devs in free.items() if len(devs) >= count), None)
        if node is not None:
            chosen, free[node] = free[node][:count], free[node][count:]
            pod["spec"]["nodeName"] = node
            claim["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": DRIVER, "pool": node, "device": d}
                            for d in chosen
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": f"p{k}", "uid": f"u{k}"}],
            }
        pods_.append(pod)
        claims.append(claim)
    return pods_, claims, slices


def test_a_valid_world_passes() -> None:
    pods_, claims, slices = _world([2, 2, 3, 5])
    verdict = check(pods_, claims, slices, _accept_all)
    assert verdict.problems == []
    assert (verdict.pods, verdict.bound, verdict.unallocated) == (4, 3, 0)


def test_a_device_in_two_claims_is_caught() -> None:
    pods_, claims, slices = _world([2, 2])
    claims[1]["status"]["allocation"]["devices"]["results"][0] = copy.deepcopy(
        claims[0]["status"]["allocation"]["devices"]["results"][0]
    )
    problems = check(pods_, claims, slices, _accept_all).problems
    assert any("allocated to 2 claims" in p for p in problems)


def test_a_device_on_another_node_is_caught() -> None:
    pods_, claims, slices = _world([2])
    pods_[0]["spec"]["nodeName"] = "n1"
    assert any("the pod on n1" in p for p in check(pods_, claims, slices, _accept_all).problems)


def test_an_unknown_device_wrong_count_and_class_are_caught() -> None:
    pods_, claims, slices = _world([2])
    results = claims[0]["status"]["allocation"]["devices"]["results"]
    results.append({"request": "gpu", "driver": DRIVER, "pool": "n0", "device": "gpu-99"})
    problems = check(pods_, claims, slices, lambda _r, _d: False).problems
    assert any("in no ResourceSlice" in p for p in problems)
    assert any("got 3 devices, wants 2" in p for p in problems)
    assert any("does not match request gpu" in p for p in problems)


def test_unreserved_and_leaked_claims_are_caught() -> None:
    pods_, claims, slices = _world([1, 1])
    claims[0]["status"]["reservedFor"] = []
    del pods_[1]["spec"]["nodeName"]
    problems = check(pods_, claims, slices, _accept_all).problems
    assert any("not reserved for it" in p for p in problems)
    assert any("claim c1 allocated but used by no bound pod" in p for p in problems)


def test_unbound_pods_say_why_they_wait() -> None:
    pods_, claims, slices = _world([9, 9])
    pods_[0]["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "claim c0: 9 devices wanted"}
        ]
    }
    assert check(pods_, claims, slices, _accept_all).waiting == [
        "pod p0: claim c0: 9 devices wanted",
        "pod p1: no reason given",
    ]


def test_a_bound_pod_without_allocation_counts_as_unallocated() -> None:
    pods_, claims, slices = _world([9])  # fits nowhere
    pods_[0]["spec"]["nodeName"] = "n0"  # a scheduler that ignores claims
    verdict = check(pods_, claims, slices, _accept_all)
    assert (verdict.bound, verdict.unallocated, verdict.problems) == (1, 1, [])


def test_match_attribute_and_all_mode() -> None:
    slices = [resource_slice("n0", NodeGpus(gpus=4, models=("A", "B")))]
    claim: Json = {
        "metadata": {"namespace": "ns", "name": "c"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"allocationMode": "All"}}],
                "constraints": [{"matchAttribute": f"{DRIVER}/model"}],
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": "n0", "device": f"gpu-{i}"}
                        for i in (0, 1, 2)
                    ]
                }
            },
            "reservedFor": [{"uid": "u"}],
        },
    }
    pod: Json = {
        "metadata": {"namespace": "ns", "name": "p", "uid": "u"},
        "spec": {"nodeName": "n0", "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]},
    }
    problems = check([pod], [claim], slices, _accept_all).problems
    assert any("matchAttribute" in p and "'A', 'B'" in p for p in problems)
    assert any("got 3 devices, wants 4" in p for p in problems)


def test_first_available_takes_one_subrequest() -> None:
    pods_, claims, slices = _world([2])
    claims[0]["spec"]["devices"]["requests"] = [
        {
            "name": "gpu",
            "firstAvailable": [{"name": "nine", "count": 9}, {"name": "two", "count": 2}],
        }
    ]
    for result in claims[0]["status"]["allocation"]["devices"]["results"]:
        result["request"] = "gpu/two"
    assert check(pods_, claims, slices, _accept_all).problems == []
    claims[0]["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu/nine"
    assert any("2 subrequests" in p for p in check(pods_, claims, slices, _accept_all).problems)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5), max_size=8))
def test_first_fit_is_always_valid_and_any_stolen_device_is_caught(counts: list[int]) -> None:
    pods_, claims, slices = _world(counts)
    assert check(pods_, claims, slices, _accept_all).problems == []
    allocated = [c for c in claims if c["status"].get("allocation")]
    if len(allocated) >= 2:
        stolen = allocated[0]["status"]["allocation"]["devices"]["results"][0]
        allocated[1]["status"]["allocation"]["devices"]["results"][0] = dict(stolen)
        assert check(pods_, claims, slices, _accept_all).problems


def test_cases_are_well_formed() -> None:
    """Every case's objects are named after it, its pods select its nodes and name claims the
    case makes."""
    assert len({c.name for c in CASES}) == len(CASES)
    for case in CASES:
        made = {o["metadata"]["name"] for o in objects(case)}
        assert all(name.startswith(f"{case.name}-") for name in made)
        for pod in pods(case, "s", lambda _n: {}):
            assert pod["spec"]["nodeSelector"] == {"caldera.io/dra-case": case.name}
            refs = pod["spec"]["resourceClaims"]
            named = {r.get("resourceClaimName") or r.get("resourceClaimTemplateName") for r in refs}
            assert named <= made, case.name
            assert set(pod_claim_names(pod)) == {r["name"] for r in refs}
