"""From informer notifications to job-controller requests (Volcano's
pkg/controllers/job/job_controller_handler.go).

Every function here is pure: it reads the old and new objects handed to an informer
handler, plus what the caller looked up in the cache, and returns the `Request` to enqueue, or None
when the notification means nothing to the job controller. The reconcile loop then resolves the
request into an action with `controllers.job.policy.apply_policies`.

Rules, as Volcano applies them:

- pods count only when they carry a controller ownerRef to a batch.volcano.sh Job and the
  annotations job-name, job-version (an integer) and task-spec;
- a pod marked ``volcano.sh/controller-out-of-sync: "true"`` (the controller is killing it) only
  ever yields ``OutOfSync``: its own events must not trigger policies again;
- add → ``PodPending`` (a pod first seen finished: as an update from an unknown phase);
  update → ``PodFailed`` (with the exit code of the first container),
  ``TaskCompleted``, ``TaskFailed``, ``PodRunning``, ``PodPending`` or ``OutOfSync``; delete →
  ``PodEvicted`` (``OutOfSync`` for a pod the cache did not hold);
- Job add and update (spec or phase changed) → ``OutOfSync``; PodGroup phase change → ``Unknown``
  or a plain sync (event None); Command → ``CommandIssued`` carrying the command's action;
- a PVC appearing → a plain sync of every Job whose ``spec.volumes`` names it (a Job waiting in
  Pending for its claim, "until the PVC is created", as syncJob has it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

import msgspec

from caldera.api.core import Pod, PodPhase
from caldera.api.meta import OwnerReference, controller_of
from caldera.api.volcano import (
    BATCH_API_VERSION,
    CONTROLLER_OUT_OF_SYNC_KEY,
    JOB_NAME_KEY,
    JOB_VERSION_KEY,
    PARTITION_ID_KEY,
    TASK_SPEC_KEY,
    Action,
    Command,
    Event,
    Job,
    JobPhase,
    PodGroup,
    PodGroupPhase,
)

__all__ = [
    "UNLIMITED_RETRY",
    "Request",
    "claim_keys",
    "events_first",
    "is_out_of_sync",
    "job_owner",
    "on_command",
    "on_job_add",
    "on_job_update",
    "on_pod_add",
    "on_pod_delete",
    "on_pod_update",
    "on_podgroup_update",
    "on_pvc_add",
    "plain_sync",
    "task_failed",
]

T = TypeVar("T")

# tasks[].maxRetry as `cache.TaskFailed` reads it: 0 means the default 3, -1 never fails the task.
UNLIMITED_RETRY: Final = -1
_TASK_MAX_RETRY_DEFAULT: Final = 3


@dataclass(frozen=True, slots=True)
class Request:
    """One unit of work for the job controller (Volcano's ``apis.Request``).

    ``event`` None is a plain sync (a PodGroup phase change other than Unknown). ``exit_code`` is
    set only for ``PodFailed`` when the first container has terminated. ``action`` is set only by
    a Command and then wins over every policy. ``job_version`` is the pod's
    ``volcano.sh/job-version``; None for requests that do not come from a pod (they are never
    stale). ``job_uid`` is the UID of the Job the source object points to ("" when unknown).
    ``partition_id`` is the pod's ``volcano.sh/partition-id`` ("" for a pod of a task without
    partitionPolicy): RestartPartition restarts that partition.
    """

    namespace: str
    job_name: str
    job_uid: str = ""
    task_name: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    event: Event | None = None
    exit_code: int | None = None
    action: Action | None = None
    job_version: int | None = None
    partition_id: str = ""

    @property
    def job_key(self) -> str:
        """The Job's cache key, "namespace/name"."""
        return f"{self.namespace}/{self.job_name}"


# --- helpers ------------------------------------------------------------------------------------


def job_owner(owner: OwnerReference | None) -> OwnerReference | None:
    """`owner` if it is a batch.volcano.sh/v1alpha1 Job reference, else None."""
    if owner is None or owner.kind != "Job" or owner.api_version != BATCH_API_VERSION:
        return None
    return owner


def is_out_of_sync(pod: Pod) -> bool:
    """Whether the controller marked the pod ``volcano.sh/controller-out-of-sync: "true"``."""
    return pod.metadata.annotations.get(CONTROLLER_OUT_OF_SYNC_KEY) == "true"


def _pod_request(pod: Pod, event: Event, exit_code: int | None = None) -> Request | None:
    """The request for a pod of a Job, or None if the pod is not one (see the module docstring)."""
    owner = job_owner(controller_of(pod.metadata))
    annotations = pod.metadata.annotations
    job_name = annotations.get(JOB_NAME_KEY)
    version = annotations.get(JOB_VERSION_KEY)
    task = annotations.get(TASK_SPEC_KEY)
    if owner is None or job_name is None or version is None or task is None:
        return None
    try:
        job_version = int(version)
    except ValueError:
        return None
    if is_out_of_sync(pod):
        event, exit_code = Event.OUT_OF_SYNC, None
    return Request(
        namespace=pod.metadata.namespace,
        job_name=job_name,
        job_uid=owner.uid,
        task_name=task,
        pod_name=pod.metadata.name,
        pod_uid=pod.metadata.uid,
        event=event,
        exit_code=exit_code,
        job_version=job_version,
        partition_id=pod.metadata.labels.get(PARTITION_ID_KEY, ""),
    )


def _first_exit_code(pod: Pod) -> int | None:
    statuses = pod.status.container_statuses
    if not statuses or statuses[0].state.terminated is None:
        return None
    return statuses[0].state.terminated.exit_code


_LIVE_PHASES = frozenset({PodPhase.RUNNING, PodPhase.PENDING})


def task_failed(task_pods: Sequence[Pod], task_max_retry: int | None) -> bool:
    """Volcano's ``cache.TaskFailed``: the restarts of the task's live pods reached maxRetry.

    Sums container and init-container restartCounts over the Running and Pending pods and
    compares with ``task_max_retry`` (0 means 3; -1 or None, an unknown task, never fails).
    """
    if task_max_retry is None or task_max_retry == UNLIMITED_RETRY:
        return False
    limit = task_max_retry or _TASK_MAX_RETRY_DEFAULT
    restarts = 0
    # Loops and a set looked up once: every Running or Pending transition of a pod reads its
    # task's pods.
    for pod in task_pods:
        status = pod.status
        if status.phase not in _LIVE_PHASES:
            continue
        for container in status.init_container_statuses:
            restarts += container.restart_count
        for container in status.container_statuses:
            restarts += container.restart_count
    return restarts >= limit


def _with(task_pods: Sequence[Pod], new: Pod) -> list[Pod]:
    """The task's pods with `new` in place of its older copy (the cache may not have it yet)."""
    name = new.metadata.name
    return [p for p in task_pods if p.metadata.name != name] + [new]


# --- pods ---------------------------------------------------------------------------------------


def on_pod_add(
    pod: Pod,
    task_pods: Sequence[Pod] = (),
    task_max_retry: int | None = None,
    task_replicas: int | None = None,
) -> Request | None:
    """A pod appeared: ``PodPending`` (``OutOfSync`` if marked), None if not a Job's pod.

    A pod first seen already Succeeded or Failed finished while nobody watched: the controller
    was restarting, or a watch gap hid its transition. It gets the event `on_pod_update` gives
    for a transition from an unknown phase (``PodFailed`` with its exit code, ``TaskCompleted``
    when its task is done), so its policies still act; Volcano's addPod says ``PodPending`` and
    an MPI job whose launcher finished during a controller restart then runs forever. A request
    from a pod of an older run is ignored by `apply_policies` as usual, and the finished phases
    ignore actions, so seeing the same pod again after another restart changes nothing.
    """
    if pod.status.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
        unseen = msgspec.structs.replace(
            pod,
            metadata=msgspec.structs.replace(pod.metadata, resource_version=""),
            status=msgspec.structs.replace(pod.status, phase=""),
        )
        return on_pod_update(unseen, pod, task_pods, task_max_retry, task_replicas)
    return _pod_request(pod, Event.POD_PENDING)


def on_pod_update(
    old: Pod,
    new: Pod,
    task_pods: Sequence[Pod],
    task_max_retry: int | None,
    task_replicas: int | None,
) -> Request | None:
    """A pod changed: the event its phase transition means (Volcano's updatePod).

    ``task_pods`` are the pods of the same task as the cache holds them (``new`` replaces its
    older copy if present); ``task_max_retry`` and ``task_replicas`` come from the task's spec,
    None when the Job or the task is not in the cache (then neither TaskFailed nor TaskCompleted
    fires). An update with an unchanged non-empty resourceVersion (a resync) yields None.

    - → Failed: ``PodFailed`` with containerStatuses[0].state.terminated.exitCode;
    - → Succeeded: ``TaskCompleted`` if every replica of the task is Succeeded, else OutOfSync;
    - Running/Pending: ``TaskFailed`` if the task's restarts reached maxRetry; a transition into
      Running or Pending overrides it with ``PodRunning`` / ``PodPending``;
    - anything else: ``OutOfSync``.
    """
    rv = new.metadata.resource_version
    if rv and rv == old.metadata.resource_version:
        return None
    phase, before = new.status.phase, old.status.phase
    event = Event.OUT_OF_SYNC
    exit_code: int | None = None
    if phase == PodPhase.FAILED:
        if before != PodPhase.FAILED:
            event, exit_code = Event.POD_FAILED, _first_exit_code(new)
    elif phase == PodPhase.SUCCEEDED:
        if before != PodPhase.SUCCEEDED and task_replicas is not None:
            pods = _with(task_pods, new)
            done = sum(1 for p in pods if p.status.phase == PodPhase.SUCCEEDED)
            if done >= task_replicas:
                event = Event.TASK_COMPLETED
    elif phase in (PodPhase.RUNNING, PodPhase.PENDING):
        if before != phase:  # the transition's event wins: TaskFailed is not asked
            event = Event.POD_RUNNING if phase == PodPhase.RUNNING else Event.POD_PENDING
        elif task_failed(_with(task_pods, new), task_max_retry):
            event = Event.TASK_FAILED
    return _pod_request(new, event, exit_code)


def on_pod_delete(pod: Pod, in_cache: bool) -> Request | None:
    """A pod was deleted: ``PodEvicted``; ``OutOfSync`` if it was marked out-of-sync or the cache
    did not hold it (``in_cache`` False, e.g. a tombstone of an unknown pod)."""
    return _pod_request(pod, Event.POD_EVICTED if in_cache else Event.OUT_OF_SYNC)


# --- job, podgroup, command ---------------------------------------------------------------------


def on_job_add(job: Job) -> Request:
    """A Job appeared: ``OutOfSync`` (a sync)."""
    return Request(
        namespace=job.metadata.namespace,
        job_name=job.metadata.name,
        job_uid=job.metadata.uid,
        event=Event.OUT_OF_SYNC,
    )


def on_job_update(old: Job, new: Job) -> Request | None:
    """A Job changed: ``OutOfSync`` if its spec or ``status.state.phase`` changed, else None (our
    own status writes with the same phase do not loop back)."""
    if old.spec == new.spec and old.status.state.phase == new.status.state.phase:
        return None
    return on_job_add(new)


def on_podgroup_update(old: PodGroup, new: PodGroup) -> Request | None:
    """A PodGroup changed: on a phase change, event ``Unknown`` if the new phase is Unknown, else a
    plain sync (event None). None when the phase did not change or the PodGroup is not controlled
    by a Job (its owner names the Job: the PodGroup itself is ``<job>-<uid>``)."""
    if old.status.phase == new.status.phase:
        return None
    owner = job_owner(controller_of(new.metadata))
    if owner is None:
        return None
    event = Event.JOB_UNKNOWN if new.status.phase == PodGroupPhase.UNKNOWN else None
    return Request(
        namespace=new.metadata.namespace, job_name=owner.name, job_uid=owner.uid, event=event
    )


# Phases whose sync creates pods and so needs the PodGroup ("": not yet written, Pending); the
# others only kill.
_NEEDS_PODGROUP: Final = frozenset({"", JobPhase.PENDING, JobPhase.RUNNING, JobPhase.RESTARTING})


def on_podgroup_delete(podgroup: PodGroup, job: Job | None) -> Request | None:
    """A Job's PodGroup was deleted (by a restart of the Job, or by hand): a plain sync, which
    creates it again, when the Job (``job``, as cached) is in a phase that needs one. Volcano
    reacts to PodGroup updates only, and a Job whose restart's sync ran while its cache still
    held the old PodGroup waited for a resync with Pending pods and no group to schedule them.
    None for a PodGroup no Job controls, or a Job that is finishing or finished."""
    owner = job_owner(controller_of(podgroup.metadata))
    if owner is None or job is None or job.status.state.phase not in _NEEDS_PODGROUP:
        return None
    return Request(namespace=podgroup.metadata.namespace, job_name=owner.name, job_uid=owner.uid)


def on_command(command: Command) -> Request | None:
    """A Command for a Job: ``CommandIssued`` carrying its action; None if it targets anything
    else. An action Volcano does not define becomes ``SyncJob`` (every state's default branch).

    The I/O layer deletes the Command before enqueueing, so it runs at most once.
    """
    target = job_owner(command.target)
    if target is None:
        return None
    try:
        action = Action(command.action)
    except ValueError:
        action = Action.SYNC_JOB
    return Request(
        namespace=command.metadata.namespace,
        job_name=target.name,
        job_uid=target.uid,
        event=Event.COMMAND_ISSUED,
        action=action,
    )


# --- persistent volume claims -------------------------------------------------------------------


def claim_keys(job: Job) -> list[str]:
    """Index function: "namespace/name" of every existing PVC the Job's ``spec.volumes`` name."""
    ns = job.metadata.namespace
    return [f"{ns}/{v.volume_claim_name}" for v in job.spec.volumes if v.volume_claim_name]


def on_pvc_add(namespace: str, name: str, jobs: Sequence[Job]) -> list[Request]:
    """A PVC appeared: a plain sync (event None) for each of ``jobs`` (those the claim index
    returns for it) that names it in ``spec.volumes``. Volcano retries the failed sync with
    rate-limited backoff; syncing on the PVC's arrival keeps the Job Pending exactly until the
    PVC exists."""
    key = f"{namespace}/{name}"
    return [
        Request(
            namespace=job.metadata.namespace, job_name=job.metadata.name, job_uid=job.metadata.uid
        )
        for job in jobs
        if key in claim_keys(job)
    ]


# --- a reconcile's batch ------------------------------------------------------------------------


def plain_sync(item: object) -> bool:
    """Whether `item` is a request that only asks for a sync (no policy can match it, no
    Command's action): anything else a controller queues (a timer, a Command) is not."""
    return (
        isinstance(item, Request)
        and item.action is None
        and (item.event is None or item.event in (Event.OUT_OF_SYNC, Event.POD_RUNNING))
    )


def events_first(items: Sequence[T]) -> list[T]:
    """A reconcile's batch with the requests that may carry a policy (pod events, Commands,
    timers) first, in their order, then one sync for all the plain ones.

    A sync judges the Job by the pods as the cache holds them now, and every pod change the
    cache holds has its request in the same batch (handlers post as the cache updates). Run
    first, a sync queued before a pod's ``PodFailed`` would see every pod finished and end the
    Job by minSuccess (Failed) before that pod's ``exitCode: AbortJob`` could act, as happens
    when the controller lags behind a burst; the policies run first, as they would have with
    the events handled one at a time. Plain syncs are alike, so one is enough.
    """
    ordered: list[T] = []
    last_sync: list[T] = []
    for item in items:  # one pass: every reconcile of every Job orders its batch
        if plain_sync(item):
            last_sync = [item]
        else:
            ordered.append(item)
    return ordered + last_sync
