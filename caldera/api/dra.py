"""Kubernetes' Dynamic Resource Allocation kinds (``resource.k8s.io/v1``) as msgspec models.

Drivers publish ``ResourceSlice``s (the devices of a pool, on one node, on the nodes a selector
picks, or on every node), administrators define ``DeviceClass``es (CEL selectors and driver
configuration), users write ``ResourceClaim``s or ``ResourceClaimTemplate``s that pods name in
``spec.resourceClaims``. The scheduler allocates: it writes the claim's ``status.allocation``
(which devices, where the claim may be used) and ``status.reservedFor`` (the pods using it)
before it binds the pod. Caldera's scheduler does that (``scheduler.plugins.dynamic_resources``,
docs/dra.md).

The models keep what the scheduler reads and writes. Opaque driver configuration is kept as
raw JSON (``msgspec.Raw``): the scheduler copies it into the allocation untouched.
"""

from __future__ import annotations

from typing import Final

import msgspec

from caldera.api.core import NodeSelector
from caldera.api.meta import Model, ObjectMeta, type_meta

RESOURCE_API_VERSION: Final = "resource.k8s.io/v1"
# kube-scheduler's finalizer on a claim it allocated: the claim is not deleted while allocated
# (the resource claim controller, or the scheduler, removes it when it deallocates).
DELETE_PROTECTION_FINALIZER: Final = "resource.kubernetes.io/delete-protection"
# At most this many consumers may reserve one claim (ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX: Final = 256
ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"


class CelDeviceSelector(Model, frozen=True):
    expression: str = ""


class DeviceSelector(Model, frozen=True):
    """One selector; only ``cel`` exists in v1."""

    cel: CelDeviceSelector | None = None


class OpaqueDeviceConfiguration(Model, frozen=True):
    driver: str = ""
    parameters: msgspec.Raw = msgspec.Raw(b"null")


class DeviceClassConfiguration(Model, frozen=True):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(Model, frozen=True):
    selectors: tuple[DeviceSelector, ...] = ()
    config: tuple[DeviceClassConfiguration, ...] = ()
    # Alpha (DRAExtendedResource): refused when set, see the allocator's refusals.
    extended_resource_name: str = ""


class DeviceClass(Model, frozen=True):
    """resource.k8s.io/v1 DeviceClass, cluster-scoped."""

    api_version: str = type_meta(RESOURCE_API_VERSION)
    kind: str = type_meta("DeviceClass")
    metadata: ObjectMeta = ObjectMeta()
    spec: DeviceClassSpec = DeviceClassSpec()


class DeviceToleration(Model, frozen=True):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class CapacityRequirements(Model, frozen=True):
    requests: dict[str, str] = msgspec.field(default_factory=dict)


class DeviceSubRequest(Model, frozen=True):
    """One alternative of a ``firstAvailable`` list."""

    name: str = ""
    device_class_name: str = ""
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


class ExactDeviceRequest(Model, frozen=True):
    device_class_name: str = ""
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: CapacityRequirements | None = None


class DeviceRequest(Model, frozen=True):
    """A named request: ``exactly`` one kind of device, or the ``firstAvailable`` of a list."""

    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


class DeviceConstraint(Model, frozen=True):
    """``matchAttribute``: every device allocated for ``requests`` (all of the claim's when
    empty) has the attribute, with one value."""

    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    # Alpha (DRAConsumableCapacity): refused when set.
    distinct_attribute: str = ""


class DeviceClaimConfiguration(Model, frozen=True):
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(Model, frozen=True):
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[DeviceClaimConfiguration, ...] = ()


class ResourceClaimSpec(Model, frozen=True):
    devices: DeviceClaim = DeviceClaim()


class DeviceRequestAllocationResult(Model, frozen=True):
    """One allocated device: ``request`` is ``<request>`` or ``<request>/<subrequest>``."""

    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None


class DeviceAllocationConfiguration(Model, frozen=True):
    source: str = ""  # FromClass or FromClaim
    requests: tuple[str, ...] = ()
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(Model, frozen=True):
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[DeviceAllocationConfiguration, ...] = ()


class AllocationResult(Model, frozen=True):
    devices: DeviceAllocationResult = DeviceAllocationResult()
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(Model, frozen=True):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(Model, frozen=True):
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()


class ResourceClaim(Model, frozen=True):
    """resource.k8s.io/v1 ResourceClaim, namespaced."""

    api_version: str = type_meta(RESOURCE_API_VERSION)
    kind: str = type_meta("ResourceClaim")
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimSpec = ResourceClaimSpec()
    status: ResourceClaimStatus = ResourceClaimStatus()


class ResourceClaimTemplateSpec(Model, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimSpec = ResourceClaimSpec()


class ResourceClaimTemplate(Model, frozen=True):
    """resource.k8s.io/v1 ResourceClaimTemplate, namespaced."""

    api_version: str = type_meta(RESOURCE_API_VERSION)
    kind: str = type_meta("ResourceClaimTemplate")
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceClaimTemplateSpec = ResourceClaimTemplateSpec()


class DeviceAttribute(Model, frozen=True):
    """Exactly one of the four is set."""

    # named for the wire only: fields called int and bool would hide the builtins
    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacity(Model, frozen=True):
    value: str = "0"


class Counter(Model, frozen=True):
    value: str = "0"


class CounterSet(Model, frozen=True):
    name: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)


class DeviceCounterConsumption(Model, frozen=True):
    counter_set: str = ""
    counters: dict[str, Counter] = msgspec.field(default_factory=dict)


class DeviceTaint(Model, frozen=True):
    key: str = ""
    value: str = ""
    effect: str = ""


class Device(Model, frozen=True):
    """One device of a slice. Per-device node selection (``nodeName``, ``nodeSelector``,
    ``allNodes``) applies when the slice sets ``perDeviceNodeSelection``."""

    name: str = ""
    attributes: dict[str, DeviceAttribute] = msgspec.field(default_factory=dict)
    capacity: dict[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool | None = None
    binding_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None


class ResourcePool(Model, frozen=True):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(Model, frozen=True):
    driver: str = ""
    pool: ResourcePool = ResourcePool()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


class ResourceSlice(Model, frozen=True):
    """resource.k8s.io/v1 ResourceSlice, cluster-scoped."""

    api_version: str = type_meta(RESOURCE_API_VERSION)
    kind: str = type_meta("ResourceSlice")
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceSliceSpec = ResourceSliceSpec()
