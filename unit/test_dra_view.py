"""What verdicts about pods with claims are keyed by (``claims_class``): hashable whatever a
claim's spec holds, and equal for pods whose claims ask alike."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.dra import (
    CapacityRequirements,
    DeviceClaim,
    DeviceClaimConfiguration,
    OpaqueDeviceConfiguration,
)
from scheduler.api.dra.view import DraView, claims_class
from unit.sched_fixtures import make_task
from unit.test_sched_dra import claim, claim_spec, with_claim

CAPACITY = claim_spec(1, capacity=CapacityRequirements(requests={"memory": "20Gi"}))
OPAQUE = msgspec.structs.replace(
    claim_spec(1),
    config=(
        DeviceClaimConfiguration(
            opaque=OpaqueDeviceConfiguration(
                driver="gpu.example.com", parameters=msgspec.Raw(b'{"mode": "fast"}')
            )
        ),
    ),
)


@pytest.mark.parametrize(
    "spec", [CAPACITY, OPAQUE, claim_spec(2)], ids=["capacity", "opaque", "plain"]
)
def test_claims_class_hashes_whatever_the_spec_holds(spec: DeviceClaim) -> None:
    """A dict (capacity requests) or raw JSON (opaque parameters) in a claim's spec would
    make the key unhashable, and every session that keys a verdict by it fail."""
    a = with_claim(make_task("j", 0), "j-0-gpus", template=True)
    b = with_claim(make_task("j", 1), "j-1-gpus", template=True)
    view = DraView(
        claims={"ns/j-0-gpus": claim("j-0-gpus", spec), "ns/j-1-gpus": claim("j-1-gpus", spec)}
    )
    key_a, key_b = claims_class(a.pod, view), claims_class(b.pod, view)
    assert hash(key_a) == hash(key_b)
    assert key_a == key_b  # alike claims share verdicts
    other = DraView(claims={"ns/j-0-gpus": claim("j-0-gpus", claim_spec(3))}, token=view.token)
    assert claims_class(a.pod, other) != key_a
