"""The fake DRA driver's pure part: the manifests it publishes and which claims it prepares."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from e2e.fake_dra_driver import (
    DRIVER,
    NodeGpus,
    allocated_devices,
    device_class,
    devices_to_prepare,
    prepared_status,
    resource_slice,
)

NOW = dt.datetime(2026, 11, 29, 8, 0, tzinfo=dt.UTC)


def _claim(
    results: list[tuple[str, str, str]], *, reserved: bool = True, devices: Any = None
) -> Any:
    status: dict[str, Any] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": d, "pool": p, "device": n} for d, p, n in results
                ]
            }
        }
    }
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}]
    if devices is not None:
        status["devices"] = devices
    return {"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "7"}, "status": status}


def test_slice_publishes_the_node_gpus_with_their_attributes() -> None:
    body = resource_slice("n1", NodeGpus(gpus=4, models=("A", "B"), memory="40Gi"))
    spec = body["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]["name"]) == (DRIVER, "n1", "n1")
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert [d["attributes"]["model"]["string"] for d in spec["devices"]] == ["A", "A", "B", "B"]
    assert [d["attributes"]["index"]["int"] for d in spec["devices"]] == [0, 1, 2, 3]
    assert {d["capacity"]["memory"]["value"] for d in spec["devices"]} == {"40Gi"}


def test_device_class_selects_the_driver() -> None:
    selectors = device_class()["spec"]["selectors"]
    assert selectors == [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]


@pytest.mark.parametrize(
    ("gpus", "models"), [(0, ("A",)), (129, ("A",)), (2, ()), (2, ("A", "B", "C"))]
)
def test_bad_layouts_are_refused(gpus: int, models: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=r"gpus|models"):
        NodeGpus(gpus=gpus, models=models)


def test_only_reserved_claims_of_own_pools_are_prepared() -> None:
    mine, other_pool, other_driver = (
        (DRIVER, "n1", "gpu-0"),
        (DRIVER, "x", "gpu-1"),
        (
            "other.dev",
            "n1",
            "gpu-2",
        ),
    )
    claim = _claim([mine, other_pool, other_driver])
    assert allocated_devices(claim) == [mine, other_pool, other_driver]
    assert devices_to_prepare(claim, DRIVER, ["n1"]) == [mine]
    assert devices_to_prepare(_claim([mine], reserved=False), DRIVER, ["n1"]) == []
    assert devices_to_prepare({"metadata": {}}, DRIVER, ["n1"]) == []


def test_prepared_status_marks_devices_ready_once() -> None:
    claim = _claim([(DRIVER, "n1", "gpu-3")])
    devices = prepared_status(claim, DRIVER, ["n1"], NOW)
    assert devices is not None
    [entry] = devices
    assert (entry["driver"], entry["pool"], entry["device"]) == (DRIVER, "n1", "gpu-3")
    assert entry["conditions"][0]["type"] == "Ready"
    assert entry["conditions"][0]["status"] == "True"
    assert entry["conditions"][0]["lastTransitionTime"] == "2026-11-29T08:00:00Z"
    assert entry["data"] == {"env": {"CUDA_VISIBLE_DEVICES": "3"}}
    done = _claim([(DRIVER, "n1", "gpu-3")], devices=devices)
    assert prepared_status(done, DRIVER, ["n1"], NOW) is None


def test_prepared_status_keeps_other_drivers_and_drops_stale_entries() -> None:
    others = {"driver": "other.dev", "pool": "n1", "device": "nic-0", "conditions": []}
    stale = {"driver": DRIVER, "pool": "n1", "device": "gpu-7", "conditions": []}
    claim = _claim([(DRIVER, "n1", "gpu-0"), ("other.dev", "n1", "nic-0")], devices=[others, stale])
    devices = prepared_status(claim, DRIVER, ["n1"], NOW)
    assert devices is not None
    assert [(e["driver"], e["device"]) for e in devices] == [
        ("other.dev", "nic-0"),
        (DRIVER, "gpu-0"),
    ]
