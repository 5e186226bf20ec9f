"""Registry of the kinds Caldera talks to: group, version, plural, scope, model and decoders.

`resource_path` builds API paths the way the API server lays them out: `/api/v1/...` for the core
group, `/apis/<group>/<version>/...` otherwise, with `/namespaces/<ns>` for namespaced kinds, then
the plural, the name and a subresource. A namespaced kind without a namespace gives the
all-namespaces collection (for LIST and WATCH).

This module is pure data plus string building; the HTTP side is `caldera.kube`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar
from urllib.parse import quote

from caldera.api import core, dra, flow, numatopology, shard, topology, volcano
from caldera.api.codec import ListDecoder, ObjectDecoder, WatchEventDecoder
from caldera.api.meta import ObjectMeta, ObjectReference, OwnerReference

__all__ = [
    "ALL_KINDS",
    "COMMAND",
    "CONFIGMAP",
    "CRONJOB",
    "DEVICE_CLASS",
    "EVENT",
    "HYPERNODE",
    "JOB",
    "JOBFLOW",
    "JOBTEMPLATE",
    "LEASE",
    "NAMESPACE",
    "NETWORK_POLICY",
    "NODE",
    "POD",
    "PODGROUP",
    "POD_DISRUPTION_BUDGET",
    "PRIORITY_CLASS",
    "PVC",
    "QUEUE",
    "RESOURCE_CLAIM",
    "RESOURCE_CLAIM_TEMPLATE",
    "RESOURCE_QUOTA",
    "RESOURCE_SLICE",
    "SECRET",
    "SERVICE",
    "KindInfo",
    "controller_reference",
    "kind_for",
    "kind_of",
    "reference",
    "resource_path",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KindInfo(Generic[T]):
    """One API kind: where it lives, its model, and its decoders (built once, here)."""

    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool
    type: type[T]
    short_names: tuple[str, ...] = ()
    decoder: ObjectDecoder[T] = field(init=False, repr=False, compare=False)
    list_decoder: ListDecoder[T] = field(init=False, repr=False, compare=False)
    watch_decoder: WatchEventDecoder[T] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # frozen dataclass: the decoders are derived once from `type` at construction
        object.__setattr__(self, "decoder", ObjectDecoder(self.type))
        object.__setattr__(self, "list_decoder", ListDecoder(self.type))
        object.__setattr__(self, "watch_decoder", WatchEventDecoder(self.type))

    @property
    def api_version(self) -> str:
        """ "v1" for the core group, else "<group>/<version>"."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """ "<plural>.<group>" (the plural alone for the core group), as RBAC and CRDs name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


POD: Final = KindInfo("Pod", "", "v1", "pods", True, core.Pod)
NODE: Final = KindInfo("Node", "", "v1", "nodes", False, core.Node, ("no",))
NAMESPACE: Final = KindInfo("Namespace", "", "v1", "namespaces", False, core.Namespace, ("ns",))
SERVICE: Final = KindInfo("Service", "", "v1", "services", True, core.Service, ("svc",))
CONFIGMAP: Final = KindInfo("ConfigMap", "", "v1", "configmaps", True, core.ConfigMap, ("cm",))
SECRET: Final = KindInfo("Secret", "", "v1", "secrets", True, core.Secret)
PVC: Final = KindInfo(
    "PersistentVolumeClaim",
    "",
    "v1",
    "persistentvolumeclaims",
    True,
    core.PersistentVolumeClaim,
    ("pvc",),
)
EVENT: Final = KindInfo("Event", "", "v1", "events", True, core.Event, ("ev",))
PRIORITY_CLASS: Final = KindInfo(
    "PriorityClass",
    "scheduling.k8s.io",
    "v1",
    "priorityclasses",
    False,
    core.PriorityClass,
    ("pc",),
)
RESOURCE_QUOTA: Final = KindInfo(
    "ResourceQuota", "", "v1", "resourcequotas", True, core.ResourceQuota, ("quota",)
)
POD_DISRUPTION_BUDGET: Final = KindInfo(
    "PodDisruptionBudget",
    "policy",
    "v1",
    "poddisruptionbudgets",
    True,
    core.PodDisruptionBudget,
    ("pdb",),
)
LEASE: Final = KindInfo("Lease", "coordination.k8s.io", "v1", "leases", True, core.Lease)
NETWORK_POLICY: Final = KindInfo(
    "NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies", True, core.NetworkPolicy
)
JOB: Final = KindInfo(
    "Job", "batch.volcano.sh", "v1alpha1", "jobs", True, volcano.Job, ("vcjob", "vj")
)
CRONJOB: Final = KindInfo(
    "CronJob",
    "batch.volcano.sh",
    "v1alpha1",
    "cronjobs",
    True,
    volcano.CronJob,
    ("cronvcjob", "cronvj"),
)
COMMAND: Final = KindInfo(
    "Command", "bus.volcano.sh", "v1alpha1", "commands", True, volcano.Command
)
JOBTEMPLATE: Final = KindInfo(
    "JobTemplate", "flow.volcano.sh", "v1alpha1", "jobtemplates", True, flow.JobTemplate, ("jt",)
)
JOBFLOW: Final = KindInfo(
    "JobFlow", "flow.volcano.sh", "v1alpha1", "jobflows", True, flow.JobFlow, ("jf",)
)
PODGROUP: Final = KindInfo(
    "PodGroup",
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    True,
    volcano.PodGroup,
    ("pg", "podgroup-v1beta1"),
)
QUEUE: Final = KindInfo(
    "Queue",
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    False,
    volcano.Queue,
    ("q", "queue-v1beta1"),
)
HYPERNODE: Final = KindInfo(
    "HyperNode", "topology.volcano.sh", "v1alpha1", "hypernodes", False, topology.HyperNode, ("hn",)
)
NODESHARD: Final = KindInfo(
    "NodeShard", "shard.volcano.sh", "v1alpha1", "nodeshards", False, shard.NodeShard, ("nsh",)
)
NUMATOPOLOGY: Final = KindInfo(
    "Numatopology",
    "nodeinfo.volcano.sh",
    "v1alpha1",
    "numatopologies",
    False,
    numatopology.Numatopology,
    ("numatopo",),
)
# Dynamic Resource Allocation (resource.k8s.io/v1, GA in Kubernetes 1.34; caldera.api.dra)
RESOURCE_CLAIM: Final = KindInfo(
    "ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, dra.ResourceClaim
)
RESOURCE_CLAIM_TEMPLATE: Final = KindInfo(
    "ResourceClaimTemplate",
    "resource.k8s.io",
    "v1",
    "resourceclaimtemplates",
    True,
    dra.ResourceClaimTemplate,
)
RESOURCE_SLICE: Final = KindInfo(
    "ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False, dra.ResourceSlice
)
DEVICE_CLASS: Final = KindInfo(
    "DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False, dra.DeviceClass
)

ALL_KINDS: Final[tuple[KindInfo[Any], ...]] = (
    POD,
    NODE,
    NAMESPACE,
    SERVICE,
    CONFIGMAP,
    SECRET,
    PVC,
    EVENT,
    PRIORITY_CLASS,
    RESOURCE_QUOTA,
    POD_DISRUPTION_BUDGET,
    LEASE,
    NETWORK_POLICY,
    JOB,
    CRONJOB,
    COMMAND,
    JOBTEMPLATE,
    JOBFLOW,
    PODGROUP,
    QUEUE,
    HYPERNODE,
    NODESHARD,
    NUMATOPOLOGY,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_SLICE,
    DEVICE_CLASS,
)
_BY_API_VERSION_KIND: Final = {(info.api_version, info.kind): info for info in ALL_KINDS}
_BY_TYPE: Final[dict[type[Any], KindInfo[Any]]] = {info.type: info for info in ALL_KINDS}


def kind_for(api_version: str, kind: str) -> KindInfo[Any]:
    """The registered kind with this apiVersion and kind; KeyError names it when there is none."""
    try:
        return _BY_API_VERSION_KIND[(api_version, kind)]
    except KeyError:
        raise KeyError(f"kind {kind!r} of {api_version!r} is not registered") from None


def kind_of(type_: type[T]) -> KindInfo[T]:
    """The registered kind whose model is `type_`."""
    try:
        info: KindInfo[T] = _BY_TYPE[type_]
    except KeyError:
        raise KeyError(f"{type_.__name__} is not a registered kind") from None
    return info


def controller_reference(info: KindInfo[Any], meta: ObjectMeta) -> OwnerReference:
    """The owner reference by which the object of kind ``info`` with metadata ``meta`` controls
    what it creates (``controller`` and ``blockOwnerDeletion`` true, as
    ``metav1.NewControllerRef``): the garbage collector deletes those objects with it."""
    return OwnerReference(
        api_version=info.api_version,
        kind=info.kind,
        name=meta.name,
        uid=meta.uid,
        controller=True,
        block_owner_deletion=True,
    )


def reference(info: KindInfo[Any], meta: ObjectMeta) -> ObjectReference:
    """A reference to the object of kind ``info`` with metadata ``meta``: the involved object of
    its Events."""
    return ObjectReference(
        api_version=info.api_version,
        kind=info.kind,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
    )


def resource_path(
    info: KindInfo[Any],
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The API path of a collection, an object, or an object's subresource.

    >>> resource_path(JOB, "ns", "name", "status")
    '/apis/batch.volcano.sh/v1alpha1/namespaces/ns/jobs/name/status'
    >>> resource_path(POD)
    '/api/v1/pods'
    """
    if not info.namespaced and namespace:
        raise ValueError(f"{info.kind} is cluster-scoped: no namespace expected, got {namespace!r}")
    if info.namespaced and name and not namespace:
        raise ValueError(f"{info.kind} {name!r} is namespaced: a namespace is required")
    if subresource and not name:
        raise ValueError(f"subresource {subresource!r} of {info.kind} needs an object name")
    parts = [f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(info.plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)
