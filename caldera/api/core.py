"""Slim models of the built-in objects Caldera reads: Pod, Node, PriorityClass, PVC, Service, ...

Each holds only the fields some part of Caldera reads; the rest is skipped on decode, which keeps
pod and node watch events cheap. Objects decoded from these models are therefore partial and must
never be written back with PUT: changes to them are PATCHes (docs/architecture.md).
Objects Caldera creates from scratch (Services, ConfigMaps, Secrets, Events, Leases) carry every
field it sets.

The pod models are the slimmest, because the informer caches hold every pod of the cluster: they
keep the fields the scheduler, the controllers, the webhook and the CLI read (and the few the
tests build pods with), and nothing else. A field added here costs memory in every process for
every pod; `informers.interning` shares the parts equal across pods, so a field whose values
repeat (a scheduler name, a toleration) costs a pointer, and one unique per pod (an IP, a
timestamp, a container id) costs its whole value. `docs/benchmarks.md` ("Informer cache: pods")
lists what is kept and what is dropped.
"""

# msgspec turns an empty `{}` default into a per-instance default_factory, so the shared mutable
# class attribute RUF012 warns about never exists; ruff only sees that for direct Struct subclasses.
# ruff: noqa: RUF012

from __future__ import annotations

import enum
from typing import Any, Final

import msgspec

from caldera.api.meta import (
    Condition,
    Int32,
    Int64,
    LabelSelector,
    MicroTime,
    Model,
    ObjectMeta,
    ObjectReference,
    ResourceList,
    Time,
    type_meta,
)

# --- Pod ----------------------------------------------------------------------------------------


class PodPhase(enum.StrEnum):
    """Pod status.phase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class ResourceRequirements(Model, frozen=True):
    """A container's requests and limits."""

    requests: ResourceList = {}
    limits: ResourceList = {}


class ContainerPort(Model, frozen=True):
    """A container port; hostPort matters to the host-ports predicate."""

    name: str = ""
    container_port: Int32 = 0
    host_port: Int32 = 0
    host_ip: str = msgspec.field(default="", name="hostIP")
    protocol: str = ""


class Container(Model, frozen=True):
    """The slice of a container the scheduler and controllers read (resources through
    `caldera.api.resources.pod_requests`); `image` is kept for the pods tests create."""

    name: str = ""
    image: str = ""
    resources: ResourceRequirements = ResourceRequirements()
    ports: tuple[ContainerPort, ...] = ()
    restart_policy: str = ""  # "Always" marks a sidecar init container


class NodeSelectorRequirement(Model, frozen=True):
    """One expression of a node selector term (In, NotIn, Exists, DoesNotExist, Gt, Lt)."""

    key: str = ""
    operator: str = ""
    values: tuple[str, ...] = ()


class NodeSelectorTerm(Model, frozen=True):
    """Expressions ANDed together; the terms of a NodeSelector are ORed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(Model, frozen=True):
    """requiredDuringSchedulingIgnoredDuringExecution of a node affinity."""

    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(Model, frozen=True):
    """A weighted preferred node selector term."""

    weight: Int32 = 0
    preference: NodeSelectorTerm = NodeSelectorTerm()


class NodeAffinity(Model, frozen=True):
    """Pod node affinity."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class PodAffinityTerm(Model, frozen=True):
    """Pods (by labels, in some namespaces) a pod wants or refuses in its topology domain: the
    nodes sharing the value of the node label ``topologyKey``. ``matchLabelKeys`` and
    ``mismatchLabelKeys`` are merged into ``labelSelector`` by the API server when the pod is
    created (Kubernetes 1.31 and later), so the scheduler reads the selector alone."""

    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    topology_key: str = ""
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


class WeightedPodAffinityTerm(Model, frozen=True):
    """A preferred term and its weight (1-100)."""

    weight: Int32 = 0
    pod_affinity_term: PodAffinityTerm = PodAffinityTerm()


class PodAffinity(Model, frozen=True):
    """Pods a pod wants to share a topology domain with."""

    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class PodAntiAffinity(Model, frozen=True):
    """Pods a pod refuses to share a topology domain with."""

    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class Affinity(Model, frozen=True):
    """Pod affinity: to nodes (by their labels) and to other pods (by theirs)."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class Toleration(Model, frozen=True):
    """A pod toleration."""

    key: str = ""
    operator: str = ""  # "Equal" (the default when empty) or "Exists"
    value: str = ""
    effect: str = ""  # empty matches every effect
    toleration_seconds: Int64 | None = None


class PodSchedulingGate(Model, frozen=True):
    """A scheduling gate: the pod is not scheduled while any remains."""

    name: str = ""


class PodResourceClaim(Model, frozen=True):
    """A pod's claim (Dynamic Resource Allocation): a ResourceClaim by name, or one the resource
    claim controller makes for the pod from a ResourceClaimTemplate."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(Model, frozen=True):
    """The ResourceClaim made from a template for the pod's claim ``name``."""

    name: str = ""
    resource_claim_name: str | None = None


class TopologySpreadConstraint(Model, frozen=True):
    """A pod topology spread constraint (``spec.topologySpreadConstraints[]``), read by the
    scheduler's predicates (DoNotSchedule) and nodeorder (ScheduleAnyway) plugins; the API
    server validates the fields, the scheduler checks them again (scheduler.api.topology_spread).
    """

    max_skew: Int32 = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""  # "DoNotSchedule" or "ScheduleAnyway"
    label_selector: LabelSelector | None = None  # None: matches no pod
    min_domains: Int32 | None = None  # None: 1
    node_affinity_policy: str | None = None  # "Honor" (None) or "Ignore"
    node_taints_policy: str | None = None  # "Ignore" (None) or "Honor"
    match_label_keys: tuple[str, ...] = ()


class PodSpec(Model, frozen=True):
    """The slice of a pod spec Caldera reads.

    Not kept: volumes (the job controller reads a Job's volumes, never a pod's; a pod's
    service-account token volume alone weighs more than the rest of its spec), hostname and
    subdomain, terminationGracePeriodSeconds, and everything else no code reads.
    `restart_policy` is kept for the pods tests create.
    """

    node_name: str = ""
    scheduler_name: str = ""
    priority: Int32 | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None  # "PreemptLowerPriority" (default) or "Never"
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    overhead: ResourceList = {}
    restart_policy: str = ""
    scheduling_gates: tuple[PodSchedulingGate, ...] = ()
    resource_claims: tuple[PodResourceClaim, ...] = ()
    # Read by the scheduler's reservation plugin: a pod's runtime the kubelet enforces.
    active_deadline_seconds: Int64 | None = None
    # Read by the scheduler's predicates and nodeorder plugins (pod topology spread).
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()


class ContainerStateTerminated(Model, frozen=True):
    """A terminated container: policies match its exit code, the CLI shows the rest."""

    exit_code: Int32 = 0
    signal: Int32 = 0
    reason: str = ""
    finished_at: Time | None = None


class ContainerStateRunning(Model, frozen=True):
    """A running container. Only its presence is read: without `startedAt`, the statuses of
    the running containers of a task's pods are equal, and the informer cache shares them."""


class ContainerStateWaiting(Model, frozen=True):
    """A waiting container (ImagePullBackOff, CrashLoopBackOff, ...)."""

    reason: str = ""


class ContainerState(Model, frozen=True):
    """Exactly one of the three is set."""

    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(Model, frozen=True):
    """A container's status; policies match `state.terminated.exitCode`. The container id and
    image id (unique per pod) are not kept."""

    name: str = ""
    ready: bool = False
    restart_count: Int32 = 0
    state: ContainerState = ContainerState()
    last_state: ContainerState = ContainerState()


class PodCondition(Model, frozen=True):
    """A pod condition: the scheduler reads PodScheduled (its status, message and transition
    time), the CLI Ready. Its reason and lastProbeTime are not kept."""

    type: str = ""
    status: str = ""
    message: str = ""
    last_transition_time: Time | None = None


class PodStatus(Model, frozen=True):
    """The slice of a pod status Caldera reads.

    Not kept: message, hostIP(s), podIPs, nominatedNodeName, qosClass. `start_time` is kept
    for the tests; `pod_ip` for `caldera pod list -o wide`.
    """

    phase: str = ""  # PodPhase
    conditions: tuple[PodCondition, ...] = ()
    reason: str = ""
    pod_ip: str = msgspec.field(default="", name="podIP")
    start_time: Time | None = None
    container_statuses: tuple[ContainerStatus, ...] = ()
    init_container_statuses: tuple[ContainerStatus, ...] = ()
    resource_claim_statuses: tuple[PodResourceClaimStatus, ...] = ()


class Pod(Model, frozen=True):
    """core/v1 Pod (partial)."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Pod")
    metadata: ObjectMeta = ObjectMeta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# --- Node ---------------------------------------------------------------------------------------


class Taint(Model, frozen=True):
    """A node taint."""

    key: str = ""
    value: str = ""
    effect: str = ""  # NoSchedule, PreferNoSchedule, NoExecute
    time_added: Time | None = None


class NodeSpec(Model, frozen=True):
    """The slice of a node spec Caldera reads."""

    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    provider_id: str = msgspec.field(default="", name="providerID")


class NodeStatus(Model, frozen=True):
    """The slice of a node status Caldera reads."""

    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    conditions: tuple[Condition, ...] = ()
    phase: str = ""


class Node(Model, frozen=True):
    """core/v1 Node (partial)."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Node")
    metadata: ObjectMeta = ObjectMeta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# --- PriorityClass ------------------------------------------------------------------------------


class PriorityClass(Model, frozen=True):
    """scheduling.k8s.io/v1 PriorityClass; its fields sit at the top level, there is no spec."""

    api_version: str = type_meta("scheduling.k8s.io/v1")
    kind: str = type_meta("PriorityClass")
    metadata: ObjectMeta = ObjectMeta()
    value: Int32 = 0
    global_default: bool = False
    description: str = ""
    preemption_policy: str | None = None


# --- ResourceQuota -----------------------------------------------------------------------------


class ResourceQuotaSpec(Model, frozen=True):
    """The slice of a ResourceQuota spec the scheduler reads: its limits, and whether it is
    scoped (the scopes themselves are not evaluated)."""

    hard: ResourceList = {}
    scopes: tuple[str, ...] = ()
    scope_selector: dict[str, Any] | None = None


class ResourceQuotaStatus(Model, frozen=True):
    """What the quota controller last computed: the limits in force and what is used."""

    hard: ResourceList = {}
    used: ResourceList = {}


class ResourceQuota(Model, frozen=True):
    """core/v1 ResourceQuota (partial): the scheduler's resourcequota plugin reads it."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("ResourceQuota")
    metadata: ObjectMeta = ObjectMeta()
    spec: ResourceQuotaSpec = ResourceQuotaSpec()
    status: ResourceQuotaStatus = ResourceQuotaStatus()


# --- PodDisruptionBudget ------------------------------------------------------------------------


class PodDisruptionBudgetSpec(Model, frozen=True):
    """The slice of a PDB spec the scheduler reads: which pods it covers."""

    selector: LabelSelector | None = None


class PodDisruptionBudgetStatus(Model, frozen=True):
    """The disruption controller's verdict: how many covered pods may go now, and the pods
    whose eviction it has admitted but not yet seen happen (name -> time)."""

    observed_generation: int = 0
    disruptions_allowed: Int32 = 0
    disrupted_pods: dict[str, str] = {}


class PodDisruptionBudget(Model, frozen=True):
    """policy/v1 PodDisruptionBudget (partial): the scheduler's pdb plugin reads it."""

    api_version: str = type_meta("policy/v1")
    kind: str = type_meta("PodDisruptionBudget")
    metadata: ObjectMeta = ObjectMeta()
    spec: PodDisruptionBudgetSpec = PodDisruptionBudgetSpec()
    status: PodDisruptionBudgetStatus = PodDisruptionBudgetStatus()


# --- PersistentVolumeClaim ----------------------------------------------------------------------


class VolumeResourceRequirements(Model, frozen=True):
    """A claim's storage requests and limits."""

    requests: ResourceList = {}
    limits: ResourceList = {}


class PersistentVolumeClaimSpec(Model, frozen=True):
    """The slice of a PVC spec Caldera reads."""

    access_modes: tuple[str, ...] = ()
    storage_class_name: str | None = None
    volume_name: str = ""
    volume_mode: str | None = None
    resources: VolumeResourceRequirements = VolumeResourceRequirements()
    selector: LabelSelector | None = None


class PersistentVolumeClaimStatus(Model, frozen=True):
    """PVC status."""

    phase: str = ""  # Pending, Bound, Lost
    access_modes: tuple[str, ...] = ()
    capacity: ResourceList = {}
    conditions: tuple[Condition, ...] = ()


class PersistentVolumeClaim(Model, frozen=True):
    """core/v1 PersistentVolumeClaim (partial)."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("PersistentVolumeClaim")
    metadata: ObjectMeta = ObjectMeta()
    spec: PersistentVolumeClaimSpec = PersistentVolumeClaimSpec()
    status: PersistentVolumeClaimStatus = PersistentVolumeClaimStatus()


# --- Service ------------------------------------------------------------------------------------


class ServicePort(Model, frozen=True):
    """A service port."""

    name: str = ""
    protocol: str = ""
    port: Int32 = 0
    target_port: int | str | None = None
    node_port: Int32 = 0


class ServiceSpec(Model, frozen=True):
    """What the svc plugin sets on the headless Service of a Job."""

    type: str = ""
    cluster_ip: str = msgspec.field(default="", name="clusterIP")  # "None": headless
    cluster_ips: tuple[str, ...] = msgspec.field(default=(), name="clusterIPs")
    selector: dict[str, str] = {}
    ports: tuple[ServicePort, ...] = ()
    publish_not_ready_addresses: bool = False


class Service(Model, frozen=True):
    """core/v1 Service."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Service")
    metadata: ObjectMeta = ObjectMeta()
    spec: ServiceSpec = ServiceSpec()


# --- ConfigMap, Secret, Namespace ---------------------------------------------------------------


class ConfigMap(Model, frozen=True):
    """core/v1 ConfigMap."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("ConfigMap")
    metadata: ObjectMeta = ObjectMeta()
    data: dict[str, str] = {}
    binary_data: dict[str, str] = {}  # base64
    immutable: bool | None = None


class Secret(Model, frozen=True):
    """core/v1 Secret. `data` values are base64; never log them."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Secret")
    metadata: ObjectMeta = ObjectMeta()
    type: str = ""
    data: dict[str, str] = {}
    string_data: dict[str, str] = {}
    immutable: bool | None = None


class NamespaceSpec(Model, frozen=True):
    """Namespace spec."""

    finalizers: tuple[str, ...] = ()


class NamespaceStatus(Model, frozen=True):
    """Namespace status."""

    phase: str = ""  # Active, Terminating


class Namespace(Model, frozen=True):
    """core/v1 Namespace (its annotations carry scheduling.volcano.sh/queue-name)."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Namespace")
    metadata: ObjectMeta = ObjectMeta()
    spec: NamespaceSpec = NamespaceSpec()
    status: NamespaceStatus = NamespaceStatus()


# --- Lease --------------------------------------------------------------------------------------


class LeaseSpec(Model, frozen=True):
    """coordination.k8s.io/v1 LeaseSpec, complete: leader election writes it whole."""

    holder_identity: str | None = None
    lease_duration_seconds: Int32 | None = None
    acquire_time: MicroTime | None = None
    renew_time: MicroTime | None = None
    lease_transitions: Int32 | None = None
    strategy: str | None = None
    preferred_holder: str | None = None


class Lease(Model, frozen=True):
    """coordination.k8s.io/v1 Lease."""

    api_version: str = type_meta("coordination.k8s.io/v1")
    kind: str = type_meta("Lease")
    metadata: ObjectMeta = ObjectMeta()
    spec: LeaseSpec = LeaseSpec()


# --- Event --------------------------------------------------------------------------------------


class EventType(enum.StrEnum):
    """core/v1 Event type."""

    NORMAL = "Normal"
    WARNING = "Warning"


class EventSource(Model, frozen=True):
    """The component (and host) that reported an event."""

    component: str = ""
    host: str = ""


class EventSeries(Model, frozen=True):
    """A series of repeated events."""

    count: Int32 = 0
    last_observed_time: MicroTime | None = None


class Event(Model, frozen=True):
    """core/v1 Event, complete: Caldera records them."""

    api_version: str = type_meta("v1")
    kind: str = type_meta("Event")
    metadata: ObjectMeta = ObjectMeta()
    involved_object: ObjectReference = ObjectReference()
    reason: str = ""
    message: str = ""
    type: str = ""  # EventType
    count: Int32 = 0
    first_timestamp: Time | None = None
    last_timestamp: Time | None = None
    event_time: MicroTime | None = None
    series: EventSeries | None = None
    source: EventSource = EventSource()
    action: str = ""
    related: ObjectReference | None = None
    reporting_component: str = ""
    reporting_instance: str = ""


POD_DECODER: Final = msgspec.json.Decoder(Pod)
NODE_DECODER: Final = msgspec.json.Decoder(Node)
PRIORITY_CLASS_DECODER: Final = msgspec.json.Decoder(PriorityClass)
PVC_DECODER: Final = msgspec.json.Decoder(PersistentVolumeClaim)
SERVICE_DECODER: Final = msgspec.json.Decoder(Service)
CONFIGMAP_DECODER: Final = msgspec.json.Decoder(ConfigMap)
SECRET_DECODER: Final = msgspec.json.Decoder(Secret)
NAMESPACE_DECODER: Final = msgspec.json.Decoder(Namespace)
LEASE_DECODER: Final = msgspec.json.Decoder(Lease)
EVENT_DECODER: Final = msgspec.json.Decoder(Event)


# --- NetworkPolicy ------------------------------------------------------------------------------


class NetworkPolicy(Model, frozen=True):
    """networking.k8s.io/v1 NetworkPolicy: the svc plugin creates one; its spec is kept whole."""

    api_version: str = type_meta("networking.k8s.io/v1")
    kind: str = type_meta("NetworkPolicy")
    metadata: ObjectMeta = ObjectMeta()
    spec: dict[str, Any] = {}
