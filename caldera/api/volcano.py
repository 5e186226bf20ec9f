"""Volcano's CRDs as msgspec models: Job and CronJob, Command, PodGroup and Queue.

Field names, defaults and markers follow Volcano's API types (volcano-sh/apis pkg/apis/; Volcano
v1.9-v1.13, plus the optional v1.14 fields partitionPolicy, subGroupPolicy and dequeueStrategy).
Defaults are what the stored object means when a key is absent (see `caldera.api.meta`): the CRD
default where Volcano's CRD declares one (`spec.queue` "default", `spec.maxRetry` 3, Queue `weight`
1, ...), otherwise Go's zero value or None. Webhook defaults (schedulerName "volcano", task maxRetry
3, reclaimable true, minAvailable sums) are not model defaults: the mutating webhook applies them
explicitly, as Volcano does.

Pod templates (`tasks[].template`), `volumes[].volumeClaim` and the Caldera extension
`tasks[].volumeClaimTemplates[].spec` are plain dicts: they are handed to pods and PVCs whole, so no
field of theirs may be lost. Treat them as read-only and deep-copy before changing them.

String enums are `StrEnum`s, but model fields are typed `str`: a value a newer Volcano adds still
decodes, and `job.status.state.phase == JobPhase.RUNNING` compares as expected.
"""

# msgspec turns an empty `{}` default into a per-instance default_factory, so the shared mutable
# class attribute RUF012 warns about never exists; ruff only sees that for direct Struct subclasses.
# ruff: noqa: RUF012

from __future__ import annotations

import enum
from typing import Annotated, Any, Final

import msgspec

from caldera.api.meta import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    Int32,
    Int64,
    LabelSelector,
    Model,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    ResourceList,
    TemplateMeta,
    Time,
    crd,
    type_meta,
)

BATCH_API_VERSION: Final = "batch.volcano.sh/v1alpha1"
BUS_API_VERSION: Final = "bus.volcano.sh/v1alpha1"
SCHEDULING_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"

DEFAULT_QUEUE: Final = "default"
ROOT_QUEUE: Final = "root"
DEFAULT_MAX_RETRY: Final = 3


# --- enums --------------------------------------------------------------------------------------


class JobPhase(enum.StrEnum):
    """Job.status.state.phase (a CRD enum)."""

    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


class Event(enum.StrEnum):
    """bus/v1alpha1 Event: what a lifecycle policy reacts to; the CRD enum of policies[].event."""

    ANY = "*"
    POD_PENDING = "PodPending"
    POD_RUNNING = "PodRunning"  # internal
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    JOB_UNKNOWN = "Unknown"  # the PodGroup went to phase Unknown
    TASK_COMPLETED = "TaskCompleted"
    TASK_FAILED = "TaskFailed"
    JOB_UPDATED = "JobUpdated"
    OUT_OF_SYNC = "OutOfSync"  # internal
    COMMAND_ISSUED = "CommandIssued"  # internal


class Action(enum.StrEnum):
    """bus/v1alpha1 Action: what a policy or a Command asks the controllers to do."""

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    RESTART_PARTITION = "RestartPartition"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    # internal
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"
    SYNC_QUEUE = "SyncQueue"
    OPEN_QUEUE = "OpenQueue"
    CLOSE_QUEUE = "CloseQueue"


# The job webhook's allow-lists for policies (pkg/webhooks/admission/jobs/validate/util.go).
POLICY_EVENTS: Final = (
    Event.ANY,
    Event.POD_FAILED,
    Event.POD_EVICTED,
    Event.POD_PENDING,
    Event.JOB_UNKNOWN,
    Event.TASK_COMPLETED,
    Event.TASK_FAILED,
    Event.JOB_UPDATED,
)
POLICY_ACTIONS: Final = (
    Action.ABORT_JOB,
    Action.RESTART_JOB,
    Action.RESTART_TASK,
    Action.RESTART_POD,
    Action.RESTART_PARTITION,
    Action.TERMINATE_JOB,
    Action.COMPLETE_JOB,
    Action.RESUME_JOB,
)


class JobEventReason(enum.StrEnum):
    """Reasons of the Kubernetes Events the job controller records on a Job."""

    COMMAND_ISSUED = "CommandIssued"
    PLUGIN_ERROR = "PluginError"
    PVC_ERROR = "PVCError"
    POD_GROUP_ERROR = "PodGroupError"
    EXECUTE_ACTION = "ExecuteAction"
    JOB_STATUS_ERROR = "JobStatusError"
    POD_GROUP_PENDING = "PodGroupPending"
    FAILED_CREATE = "FailedCreate"
    SUCCESSFUL_CREATE = "SuccessfulCreate"
    FAILED_DELETE = "FailedDelete"
    SUCCESSFUL_DELETE = "SuccessfulDelete"
    INVALID_POLICY = "InvalidPolicy"  # Caldera's: a stored policy no controller runs


class NumaPolicy(enum.StrEnum):
    """tasks[].topologyPolicy (a CRD enum)."""

    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class Iteration(enum.StrEnum):
    """tasks[].dependsOn.iteration: start after any / all of the named tasks."""

    ANY = "any"
    ALL = "all"


class NetworkTopologyMode(enum.StrEnum):
    """networkTopology.mode (a CRD enum, default hard)."""

    HARD = "hard"
    SOFT = "soft"


class ConcurrencyPolicy(enum.StrEnum):
    """CronJob spec.concurrencyPolicy (a CRD enum, default Allow)."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    REPLACE = "Replace"


class PodGroupPhase(enum.StrEnum):
    """PodGroup status.phase (a CRD enum)."""

    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


class PodGroupConditionType(enum.StrEnum):
    """PodGroup status.conditions[].type."""

    UNSCHEDULABLE = "Unschedulable"
    SCHEDULED = "Scheduled"


class PodGroupConditionReason(enum.StrEnum):
    """PodGroup status.conditions[].reason."""

    POD_FAILED = "PodFailed"
    POD_DELETED = "PodDeleted"
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    NOT_ENOUGH_TASKS = "NotEnoughTasks"
    NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


class PodGroupConditionDetail(enum.StrEnum):
    """Detail strings of PodGroup conditions."""

    READY = "pod group is ready"
    NOT_READY = "pod group is not ready"


class QueueState(enum.StrEnum):
    """Queue status.state (a CRD enum); an empty state counts as Open."""

    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


class DequeueStrategy(enum.StrEnum):
    """Queue spec.dequeueStrategy (a CRD enum, default traverse; v1.14+)."""

    FIFO = "fifo"
    TRAVERSE = "traverse"


# --- labels and annotations (volcano-sh/apis batch/v1alpha1/labels.go, scheduling/v1beta1) -----

TASK_INDEX_KEY: Final = "volcano.sh/task-index"
TASK_SPEC_KEY: Final = "volcano.sh/task-spec"
JOB_NAME_KEY: Final = "volcano.sh/job-name"
JOB_NAMESPACE_KEY: Final = "volcano.sh/job-namespace"
QUEUE_NAME_KEY: Final = "volcano.sh/queue-name"
JOB_VERSION_KEY: Final = "volcano.sh/job-version"
TEMPLATE_UID_KEY: Final = "volcano.sh/template-uid"
JOB_RETRY_COUNT_KEY: Final = "volcano.sh/job-retry-count"
JOB_TYPE_KEY: Final = "volcano.sh/job-type"
JOB_FORWARDING_KEY: Final = "volcano.sh/job-forwarding"
PARTITION_ID_KEY: Final = "volcano.sh/partition-id"
CONTROLLER_OUT_OF_SYNC_KEY: Final = "volcano.sh/controller-out-of-sync"
NUMA_TOPOLOGY_POLICY_KEY: Final = "volcano.sh/numa-topology-policy"
TOPOLOGY_DECISION_KEY: Final = "volcano.sh/topology-decision"
QOS_LEVEL_KEY: Final = "volcano.sh/qos-level"
PREEMPTABLE_KEY: Final = "volcano.sh/preemptable"
COOLDOWN_TIME_KEY: Final = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY: Final = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE_KEY: Final = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY: Final = "volcano.sh/jdb-max-unavailable"
BURST_NAME_KEY: Final = "volcano.sh/burst-name"
SILO_RESOURCE_KEY: Final = "volcano.sh/silo-resource"
FORWARD_CLUSTER_KEY: Final = "volcano.sh/forward-cluster"
CRONJOB_SCHEDULED_TIMESTAMP_KEY: Final = "volcano.sh/cronjob-scheduled-timestamp"
NODEGROUP_NAME_KEY: Final = "volcano.sh/nodegroup-name"
NODEGROUP_RESOURCE_LIMITS_KEY: Final = "volcano.sh/nodegroup-resource-limits"
HIERARCHY_KEY: Final = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_KEY: Final = "volcano.sh/hierarchy-weights"
SLA_WAITING_TIME_KEY: Final = "volcano.sh/sla-waiting-time"
TASK_TOPOLOGY_AFFINITY_KEY: Final = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY_KEY: Final = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_TASK_ORDER_KEY: Final = "volcano.sh/task-topology-task-order"
CLOSED_BY_PARENT_KEY: Final = "volcano.sh/closed-by-parent"
# The PodGroup name on a pod: the Kubernetes key, and Volcano's alias.
KUBE_GROUP_NAME_KEY: Final = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME_KEY: Final = "scheduling.volcano.sh/group-name"
GROUP_MIN_MEMBER_KEY: Final = "scheduling.volcano.sh/group-min-member"
GROUP_MIN_RESOURCES_KEY: Final = "scheduling.volcano.sh/group-min-resources"
SCHEDULING_QUEUE_NAME_KEY: Final = "scheduling.volcano.sh/queue-name"
QUEUE_ALLOCATION_GATE: Final = "scheduling.volcano.sh/queue-allocation-gate"


# --- batch.volcano.sh/v1alpha1 Job --------------------------------------------------------------


class NetworkTopologySpec(Model, frozen=True):
    """Network-topology constraint (v1.12+); set highestTierAllowed or highestTierName, not both."""

    mode: Annotated[str, crd(enum=NetworkTopologyMode, crd_default=True)] = (
        NetworkTopologyMode.HARD.value
    )
    highest_tier_allowed: Annotated[int, crd(minimum=0)] | None = None
    highest_tier_name: Annotated[str, crd(max_length=253)] = ""


class VolumeSpec(Model, frozen=True):
    """A volume mounted in every pod of the Job: an existing PVC or one the controller creates."""

    mount_path: Annotated[str, crd(required=True, min_length=1, pattern=r"^[^:]+$")] = ""
    volume_claim_name: Annotated[str, crd(max_length=253)] = ""
    # A PersistentVolumeClaimSpec, passed to the PVC whole.
    volume_claim: dict[str, Any] | None = None


class LifecyclePolicy(Model, frozen=True):
    """The action to take on a pod/job event or a container exit code, maybe after a timeout."""

    action: str = ""
    event: Annotated[str, crd(enum=Event)] = ""
    events: tuple[Annotated[str, crd(enum=Event)], ...] = ()
    exit_code: Int32 | None = None
    timeout: str | None = None  # a Go duration, see duration.parse_duration


class DependsOn(Model, frozen=True):
    """Tasks a task waits for before its pods are created."""

    name: tuple[str, ...] = ()
    iteration: str = ""  # Iteration: "any" means any one dependency; otherwise all of them


class PartitionPolicy(Model, frozen=True):
    """Splits a task's pods into partitions scheduled as units (v1.14+)."""

    total_partitions: Annotated[Int32, crd(required=True, minimum=1)] = 0
    partition_size: Annotated[Int32, crd(required=True, minimum=1)] = 0
    network_topology: NetworkTopologySpec | None = None
    min_partitions: Annotated[Int32, crd(minimum=0, crd_default=True)] = 0


class VolumeClaimTemplate(Model, frozen=True):
    """Caldera extension: a PVC template; each pod of the task gets `<template>-<pod>`."""

    metadata: TemplateMeta = TemplateMeta()
    # A PersistentVolumeClaimSpec, passed to the PVC whole.
    spec: dict[str, Any] = {}


class TaskSpec(Model, frozen=True):
    """One task (role) of a Job: `replicas` pods from `template`."""

    name: Annotated[str, crd(max_length=63, pattern=DNS1123_LABEL)] = ""
    replicas: Annotated[Int32, crd(minimum=0)] = 0
    min_available: Annotated[Int32, crd(minimum=0)] | None = None
    # A PodTemplateSpec, passed to the pods whole.
    template: dict[str, Any] = {}
    policies: tuple[LifecyclePolicy, ...] = ()
    topology_policy: Annotated[str, crd(enum=NumaPolicy)] = ""
    max_retry: Annotated[Int32, crd(minimum=0)] = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None
    volume_claim_templates: tuple[VolumeClaimTemplate, ...] = ()


class JobSpec(Model, frozen=True):
    """Job.spec."""

    scheduler_name: Annotated[str, crd(max_length=63)] = ""
    min_available: Annotated[Int32, crd(minimum=0)] = 0
    volumes: tuple[VolumeSpec, ...] = ()
    tasks: Annotated[tuple[TaskSpec, ...], crd(min_items=1)] = ()
    policies: tuple[LifecyclePolicy, ...] = ()
    plugins: dict[str, tuple[str, ...]] = {}
    running_estimate: str | None = None  # a Go duration
    queue: Annotated[str, crd(crd_default=True, max_length=253, pattern=DNS1123_SUBDOMAIN)] = (
        DEFAULT_QUEUE
    )
    max_retry: Annotated[Int32, crd(crd_default=True, minimum=0)] = DEFAULT_MAX_RETRY
    ttl_seconds_after_finished: Annotated[Int32, crd(minimum=0)] | None = None
    priority_class_name: Annotated[str, crd(max_length=253, pattern=DNS1123_SUBDOMAIN)] = ""
    min_success: Annotated[Int32, crd(minimum=1)] | None = None
    network_topology: NetworkTopologySpec | None = None


class JobState(Model, frozen=True):
    """Job.status.state."""

    phase: Annotated[str, crd(enum=JobPhase)] = ""
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None


class TaskState(Model, frozen=True):
    """Pod counts of one task by pod phase."""

    phase: dict[str, Int32] = {}


class JobCondition(Model, frozen=True):
    """One entry of Job.status.conditions: at most one per phase, latest last."""

    status: Annotated[str, crd(required=True)] = ""  # a JobPhase
    last_transition_time: Time | None = None


NonNegative32 = Annotated[Int32, crd(minimum=0)]


class JobStatus(Model, frozen=True):
    """Job.status."""

    state: JobState = JobState()
    min_available: NonNegative32 = 0
    task_status_count: dict[str, TaskState] = {}
    pending: NonNegative32 = 0
    running: NonNegative32 = 0
    succeeded: NonNegative32 = 0
    failed: NonNegative32 = 0
    terminating: NonNegative32 = 0
    unknown: NonNegative32 = 0
    version: NonNegative32 = 0
    retry_count: NonNegative32 = 0
    running_duration: str | None = None  # a Go duration
    controlled_resources: dict[str, str] = {}
    conditions: tuple[JobCondition, ...] = ()


class Job(Model, frozen=True):
    """batch.volcano.sh/v1alpha1 Job (vcjob)."""

    api_version: str = type_meta(BATCH_API_VERSION)
    kind: str = type_meta("Job")
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSpec = JobSpec()
    status: JobStatus = JobStatus()


def job_reference(job: Job) -> ObjectReference:
    """A reference to ``job``: the involved object of its Events, an entry of a CronJob's
    ``status.active``."""
    return ObjectReference(
        api_version=BATCH_API_VERSION,
        kind="Job",
        namespace=job.metadata.namespace,
        name=job.metadata.name,
        uid=job.metadata.uid,
        resource_version=job.metadata.resource_version,
    )


def policy_events(policy: LifecyclePolicy) -> tuple[str, ...]:
    """The events a policy reacts to: `event` and `events` merged, as the controller does."""
    if not policy.event:
        return policy.events
    if policy.event in policy.events:
        return policy.events
    return (policy.event, *policy.events)


# --- batch.volcano.sh/v1alpha1 CronJob ----------------------------------------------------------


class JobTemplateSpec(Model, frozen=True):
    """The Job a CronJob creates."""

    metadata: TemplateMeta = TemplateMeta()
    spec: JobSpec = JobSpec()


class CronJobSpec(Model, frozen=True):
    """CronJob.spec."""

    schedule: Annotated[str, crd(required=True)] = ""
    time_zone: str | None = None
    starting_deadline_seconds: Annotated[Int64, crd(minimum=0)] | None = None
    concurrency_policy: Annotated[str, crd(enum=ConcurrencyPolicy, crd_default=True)] = (
        ConcurrencyPolicy.ALLOW.value
    )
    suspend: Annotated[bool, crd(crd_default=True)] = False
    job_template: Annotated[JobTemplateSpec, crd(required=True)] = JobTemplateSpec()
    successful_jobs_history_limit: Annotated[Int32, crd(minimum=0, crd_default=True)] = 3
    failed_jobs_history_limit: Annotated[Int32, crd(minimum=0, crd_default=True)] = 1


class CronJobStatus(Model, frozen=True):
    """CronJob.status."""

    active: tuple[ObjectReference, ...] = ()
    last_schedule_time: Time | None = None
    last_successful_time: Time | None = None


class CronJob(Model, frozen=True):
    """batch.volcano.sh/v1alpha1 CronJob (cronvcjob)."""

    api_version: str = type_meta(BATCH_API_VERSION)
    kind: str = type_meta("CronJob")
    metadata: ObjectMeta = ObjectMeta()
    spec: CronJobSpec = CronJobSpec()
    status: CronJobStatus = CronJobStatus()


# --- bus.volcano.sh/v1alpha1 Command ------------------------------------------------------------


class Command(Model, frozen=True):
    """bus.volcano.sh/v1alpha1 Command: a one-shot action on a Job or Queue; no spec, no status."""

    api_version: str = type_meta(BUS_API_VERSION)
    kind: str = type_meta("Command")
    metadata: ObjectMeta = ObjectMeta()
    action: str = ""
    target: OwnerReference | None = None
    reason: str = ""
    message: str = ""


# --- scheduling.volcano.sh/v1beta1 PodGroup -----------------------------------------------------


class SubGroupPolicy(Model, frozen=True):
    """A subgroup of a PodGroup's pods with its own gang and topology constraint (v1.14+)."""

    name: Annotated[str, crd(max_length=253)] = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: Annotated[Int32, crd(minimum=1, crd_default=True)] = 1
    min_sub_groups: Annotated[Int32, crd(minimum=0, crd_default=True)] = 0
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()


class PodGroupSpec(Model, frozen=True):
    """PodGroup.spec."""

    min_member: Annotated[Int32, crd(minimum=0)] = 0
    min_task_member: dict[str, Int32] = {}
    queue: Annotated[str, crd(crd_default=True, max_length=253, pattern=DNS1123_SUBDOMAIN)] = (
        DEFAULT_QUEUE
    )
    priority_class_name: Annotated[str, crd(max_length=253)] = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: tuple[SubGroupPolicy, ...] = ()


class PodGroupCondition(Model, frozen=True):
    """One entry of PodGroup.status.conditions."""

    type: str = ""  # PodGroupConditionType
    status: str = ""  # "True" / "False" / "Unknown"
    transition_id: str = msgspec.field(default="", name="transitionID")
    last_transition_time: Time | None = None
    reason: str = ""
    message: str = ""


class PodGroupStatus(Model, frozen=True):
    """PodGroup.status; written with a plain update (the CRD has no status subresource)."""

    phase: Annotated[str, crd(enum=PodGroupPhase)] = ""
    conditions: tuple[PodGroupCondition, ...] = ()
    running: NonNegative32 = 0
    succeeded: NonNegative32 = 0
    failed: NonNegative32 = 0


class PodGroup(Model, frozen=True):
    """scheduling.volcano.sh/v1beta1 PodGroup (pg)."""

    api_version: str = type_meta(SCHEDULING_API_VERSION)
    kind: str = type_meta("PodGroup")
    metadata: ObjectMeta = ObjectMeta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


# --- scheduling.volcano.sh/v1beta1 Queue --------------------------------------------------------


class Cluster(Model, frozen=True):
    """An extra cluster jobs of the queue may be dispatched to."""

    name: str = ""
    weight: Int32 = 0
    capacity: ResourceList = {}


class Guarantee(Model, frozen=True):
    """Resources reserved for the queue."""

    resource: ResourceList = {}


class NodeGroupAffinity(Model, frozen=True):
    """Node groups (label volcano.sh/nodegroup-name) a queue's pods must/should (not) use."""

    required_during_scheduling_ignored_during_execution: tuple[str, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[str, ...] = ()


class QueueAffinity(Model, frozen=True):
    """Queue.spec.affinity."""

    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class QueueSpec(Model, frozen=True):
    """Queue.spec."""

    weight: Annotated[Int32, crd(minimum=1, maximum=65535, crd_default=True)] = 1
    capability: ResourceList = {}
    reclaimable: bool | None = None
    extend_clusters: tuple[Cluster, ...] = ()
    guarantee: Guarantee = Guarantee()
    affinity: QueueAffinity | None = None
    type: Annotated[str, crd(max_length=253)] = ""
    parent: Annotated[str, crd(max_length=253, pattern=DNS1123_SUBDOMAIN)] = ""
    deserved: ResourceList = {}
    priority: Annotated[Int32, crd(minimum=0)] = 0
    dequeue_strategy: Annotated[str, crd(enum=DequeueStrategy, crd_default=True)] = (
        DequeueStrategy.TRAVERSE.value
    )


class Reservation(Model, frozen=True):
    """Queue.status.reservation."""

    nodes: tuple[str, ...] = ()
    resource: ResourceList = {}


class QueueCondition(Model, frozen=True):
    """One entry of Queue.status.conditions (a Caldera extension: Volcano's Queue has none)."""

    type: str = ""
    status: str = ""  # "True" / "False" / "Unknown"
    last_transition_time: Time | None = None
    reason: str = ""
    message: str = ""


class QueueStatus(Model, frozen=True):
    """Queue.status. Since Volcano v1.11 the PodGroup counts are no longer written. ``conditions``
    is Caldera's: the queue controller reports a spec the webhook would have refused there."""

    state: Annotated[str, crd(enum=QueueState)] = ""
    unknown: NonNegative32 = 0
    pending: NonNegative32 = 0
    running: NonNegative32 = 0
    inqueue: NonNegative32 = 0
    completed: NonNegative32 = 0
    reservation: Reservation = Reservation()
    allocated: ResourceList = {}
    conditions: tuple[QueueCondition, ...] = ()


class Queue(Model, frozen=True):
    """scheduling.volcano.sh/v1beta1 Queue (q), cluster-scoped."""

    api_version: str = type_meta(SCHEDULING_API_VERSION)
    kind: str = type_meta("Queue")
    metadata: ObjectMeta = ObjectMeta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


JOB_DECODER: Final = msgspec.json.Decoder(Job)
CRONJOB_DECODER: Final = msgspec.json.Decoder(CronJob)
COMMAND_DECODER: Final = msgspec.json.Decoder(Command)
PODGROUP_DECODER: Final = msgspec.json.Decoder(PodGroup)
QUEUE_DECODER: Final = msgspec.json.Decoder(Queue)
