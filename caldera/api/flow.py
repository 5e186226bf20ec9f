"""Volcano's workflow kinds (``flow.volcano.sh/v1alpha1``) as msgspec models: JobTemplate and
JobFlow, and the names, labels and annotations of the Jobs a JobFlow creates.

Field names and markers follow Volcano's API types (volcano-sh/apis pkg/apis/flow/v1alpha1,
v1.12-v1.13) and its CRDs (config/crd/jobflow/bases): a JobTemplate is a Volcano Job spec kept for
reuse; a JobFlow lists ``flows``, each naming a JobTemplate and the flows it waits for
(``dependsOn.targets``). The Job of a flow is ``<jobflow>-<flow name>``, labelled and annotated
with ``volcano.sh/createdByJobFlow`` and ``volcano.sh/createdByJobTemplate`` (``<namespace>.<name>``
each) and controlled by the JobFlow.

Two parts of the API are stored but acted on by no controller, Volcano's or Caldera's:
``dependsOn.probe`` (HTTP GET, TCP socket and task-status probes: Volcano declares the types and
its controller never reads them) and ``flows[].patch`` (added to Volcano's CRD in v1.13 for
per-flow overrides of the template; no Volcano release applies it). ``patch`` is kept whole,
unpruned and without schema defaults, so nothing a user wrote is changed or lost.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

# msgspec turns an empty `{}` default into a per-instance default_factory, so the shared mutable
# class attribute RUF012 warns about never exists; ruff only sees that for direct Struct subclasses.
# ruff: noqa: RUF012

from __future__ import annotations

import enum
from typing import Annotated, Any, Final

import msgspec

from caldera.api.meta import Int32, Model, ObjectMeta, Time, crd, type_meta
from caldera.api.volcano import JobSpec, TaskState

__all__ = [
    "CREATED_BY_JOB_FLOW_KEY",
    "CREATED_BY_JOB_TEMPLATE_KEY",
    "FLOW_API_VERSION",
    "JOBFLOW_DECODER",
    "JOBTEMPLATE_DECODER",
    "Flow",
    "FlowCondition",
    "FlowDependsOn",
    "FlowJobStatus",
    "FlowPhase",
    "FlowState",
    "HttpGet",
    "HttpHeader",
    "JobFlow",
    "JobFlowSpec",
    "JobFlowStatus",
    "JobRunningHistory",
    "JobTemplate",
    "JobTemplateStatus",
    "Probe",
    "RetainPolicy",
    "TaskStatusProbe",
    "TcpSocket",
    "flow_job_name",
    "object_string",
    "parse_object_string",
]

FLOW_API_VERSION: Final = "flow.volcano.sh/v1alpha1"
# On the Jobs a JobFlow creates, as label and annotation both, valued "<namespace>.<name>".
CREATED_BY_JOB_TEMPLATE_KEY: Final = "volcano.sh/createdByJobTemplate"
CREATED_BY_JOB_FLOW_KEY: Final = "volcano.sh/createdByJobFlow"


class RetainPolicy(enum.StrEnum):
    """JobFlow spec.jobRetainPolicy (a CRD enum): keep the Jobs of a succeeded flow, or delete
    them. Empty means retain."""

    RETAIN = "retain"
    DELETE = "delete"


class FlowPhase(enum.StrEnum):
    """JobFlow status.state.phase. Terminating is declared by Volcano and set by no controller."""

    SUCCEED = "Succeed"
    TERMINATING = "Terminating"
    FAILED = "Failed"
    RUNNING = "Running"
    PENDING = "Pending"


# --- flow.volcano.sh/v1alpha1 JobTemplate --------------------------------------------------------


class JobTemplateStatus(Model, frozen=True):
    """JobTemplate.status: the Jobs created from the template (Volcano's misleading name)."""

    job_depends_on_list: tuple[str, ...] = ()


class JobTemplate(Model, frozen=True):
    """flow.volcano.sh/v1alpha1 JobTemplate (jt): a Volcano Job spec kept for JobFlows."""

    api_version: str = type_meta(FLOW_API_VERSION)
    kind: str = type_meta("JobTemplate")
    metadata: ObjectMeta = ObjectMeta()
    spec: JobSpec = JobSpec()
    status: JobTemplateStatus = JobTemplateStatus()


# --- flow.volcano.sh/v1alpha1 JobFlow ------------------------------------------------------------

Port = Annotated[int, crd(minimum=0, maximum=65535)]


class HttpHeader(Model, frozen=True):
    """core/v1 HTTPHeader."""

    name: Annotated[str, crd(required=True)] = ""
    value: Annotated[str, crd(required=True)] = ""


class HttpGet(Model, frozen=True):
    """An HTTP GET probe on a task's pods (stored; no controller runs it)."""

    task_name: str = ""
    path: str = ""
    port: Port = 0
    http_header: HttpHeader | None = None


class TcpSocket(Model, frozen=True):
    """A TCP connect probe on a task's pods (stored; no controller runs it)."""

    task_name: str = ""
    port: Annotated[Port, crd(required=True)] = 0


class TaskStatusProbe(Model, frozen=True):
    """A task-phase probe (Volcano's ``TaskStatus``; stored, no controller runs it)."""

    task_name: str = ""
    phase: str = ""


class Probe(Model, frozen=True):
    """flows[].dependsOn.probe."""

    http_get_list: tuple[HttpGet, ...] = ()
    tcp_socket_list: tuple[TcpSocket, ...] = ()
    task_status_list: tuple[TaskStatusProbe, ...] = ()


class FlowDependsOn(Model, frozen=True):
    """flows[].dependsOn: the flows whose Jobs must have completed first."""

    targets: tuple[str, ...] = ()
    probe: Probe | None = None


class Flow(Model, frozen=True):
    """One step of a JobFlow: the JobTemplate ``name`` and what it waits for."""

    name: Annotated[str, crd(required=True, min_length=1)] = ""
    depends_on: FlowDependsOn | None = None
    # {"jobSpec": <overrides>}: stored whole, applied by no controller (see the module docstring).
    patch: dict[str, Any] | None = None


class JobFlowSpec(Model, frozen=True):
    """JobFlow.spec."""

    flows: tuple[Flow, ...] = ()
    job_retain_policy: Annotated[str, crd(enum=RetainPolicy)] = ""


class JobRunningHistory(Model, frozen=True):
    """One phase of a Job as the JobFlow controller saw it, from when it saw it until the next."""

    start_timestamp: Time | None = None
    end_timestamp: Time | None = None
    state: str = ""  # a JobPhase


class FlowJobStatus(Model, frozen=True):
    """One entry of status.jobStatusList (Volcano's flow ``JobStatus``)."""

    name: str = ""
    state: str = ""  # a JobPhase
    start_timestamp: Time | None = None  # the Job's creation
    end_timestamp: Time | None = None  # its creation plus its runningDuration
    restart_count: Int32 = 0
    running_histories: tuple[JobRunningHistory, ...] = ()


class FlowCondition(Model, frozen=True):
    """One value of status.conditions, keyed by Job name (Volcano's flow ``Condition``)."""

    phase: str = ""  # a JobPhase
    create_time: Time | None = None
    running_duration: str | None = None  # a Go duration
    task_status_count: dict[str, TaskState] = {}


class FlowState(Model, frozen=True):
    """status.state."""

    phase: str = ""  # a FlowPhase; Volcano's CRD declares no enum


class JobFlowStatus(Model, frozen=True):
    """JobFlow.status: its Jobs by phase, their histories, and the flow's phase."""

    pending_jobs: tuple[str, ...] = ()
    running_jobs: tuple[str, ...] = ()
    failed_jobs: tuple[str, ...] = ()
    completed_jobs: tuple[str, ...] = ()
    terminated_jobs: tuple[str, ...] = ()
    un_know_jobs: tuple[str, ...] = ()
    job_status_list: tuple[FlowJobStatus, ...] = ()
    conditions: dict[str, FlowCondition] = {}
    state: FlowState = FlowState()


class JobFlow(Model, frozen=True):
    """flow.volcano.sh/v1alpha1 JobFlow (jf)."""

    api_version: str = type_meta(FLOW_API_VERSION)
    kind: str = type_meta("JobFlow")
    metadata: ObjectMeta = ObjectMeta()
    spec: JobFlowSpec = JobFlowSpec()
    status: JobFlowStatus = JobFlowStatus()


# --- names ---------------------------------------------------------------------------------------


def flow_job_name(jobflow: str, flow: str) -> str:
    """The name of the Job a JobFlow creates for one flow: ``<jobflow>-<flow>``."""
    return f"{jobflow}-{flow}"


def object_string(namespace: str, name: str) -> str:
    """``<namespace>.<name>``: the value of the createdBy label and annotation."""
    return f"{namespace}.{name}"


def parse_object_string(value: str) -> tuple[str, str] | None:
    """``(namespace, name)`` from ``<namespace>.<name>``, or None. A namespace has no dot, so the
    first one separates them (Volcano splits on every dot and so skips names that have one)."""
    namespace, dot, name = value.partition(".")
    if not dot or not namespace or not name:
        return None
    return namespace, name


JOBFLOW_DECODER: Final = msgspec.json.Decoder(JobFlow)
JOBTEMPLATE_DECODER: Final = msgspec.json.Decoder(JobTemplate)
