"""Tests of controllers.job.events: how informer notifications become job-controller requests
(Volcano's pkg/controllers/job/job_controller_handler.go)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.api.core import (
    ContainerState,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodStatus,
)
from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import (
    BATCH_API_VERSION,
    CONTROLLER_OUT_OF_SYNC_KEY,
    JOB_NAME_KEY,
    JOB_VERSION_KEY,
    SCHEDULING_API_VERSION,
    TASK_SPEC_KEY,
    Action,
    Command,
    Event,
    Job,
    JobSpec,
    JobState,
    JobStatus,
    PodGroup,
    PodGroupStatus,
    TaskSpec,
    VolumeSpec,
)
from controllers.job.events import (
    Request,
    claim_keys,
    on_command,
    on_job_add,
    on_job_update,
    on_pod_add,
    on_pod_delete,
    on_pod_update,
    on_podgroup_delete,
    on_podgroup_update,
    on_pvc_add,
    task_failed,
)

JOB_OWNER = OwnerReference(
    api_version=BATCH_API_VERSION, kind="Job", name="j", uid="job-uid", controller=True
)
ANNOTATIONS = {JOB_NAME_KEY: "j", JOB_VERSION_KEY: "2", TASK_SPEC_KEY: "worker"}


def pod(
    phase: str = "Running",
    *,
    name: str = "j-worker-0",
    uid: str = "pod-uid",
    rv: str = "",
    owner: OwnerReference | None = JOB_OWNER,
    annotations: dict[str, str] | None = None,
    restarts: int = 0,
    init_restarts: int = 0,
    exit_code: int | None = None,
    out_of_sync: bool = False,
) -> Pod:
    ann = dict(ANNOTATIONS if annotations is None else annotations)
    if out_of_sync:
        ann[CONTROLLER_OUT_OF_SYNC_KEY] = "true"
    state = ContainerState(
        terminated=None if exit_code is None else ContainerStateTerminated(exit_code=exit_code)
    )
    statuses = (ContainerStatus(name="main", restart_count=restarts, state=state),)
    inits = (ContainerStatus(name="init", restart_count=init_restarts),)
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=uid,
            resource_version=rv,
            annotations=ann,
            owner_references=() if owner is None else (owner,),
        ),
        status=PodStatus(phase=phase, container_statuses=statuses, init_container_statuses=inits),
    )


def expected(event: Event, exit_code: int | None = None) -> Request:
    return Request(
        namespace="ns",
        job_name="j",
        job_uid="job-uid",
        task_name="worker",
        pod_name="j-worker-0",
        pod_uid="pod-uid",
        event=event,
        exit_code=exit_code,
        job_version=2,
    )


# --- which pods count ---------------------------------------------------------------------------

NOT_A_JOB_POD: list[Any] = [
    pytest.param({"owner": None}, id="no-owner"),
    pytest.param(
        {"owner": OwnerReference(api_version="batch/v1", kind="Job", name="j", controller=True)},
        id="batch-v1-job-owner",
    ),
    pytest.param(
        {
            "owner": OwnerReference(
                api_version=BATCH_API_VERSION, kind="CronJob", name="j", controller=True
            )
        },
        id="cronjob-owner",
    ),
    pytest.param(
        {"owner": OwnerReference(api_version=BATCH_API_VERSION, kind="Job", name="j")},
        id="owner-not-controller",
    ),
    pytest.param(
        {"annotations": {JOB_VERSION_KEY: "2", TASK_SPEC_KEY: "worker"}}, id="no-job-name"
    ),
    pytest.param({"annotations": {JOB_NAME_KEY: "j", TASK_SPEC_KEY: "worker"}}, id="no-version"),
    pytest.param({"annotations": {JOB_NAME_KEY: "j", JOB_VERSION_KEY: "2"}}, id="no-task-spec"),
    pytest.param(
        {"annotations": {JOB_NAME_KEY: "j", JOB_VERSION_KEY: "two", TASK_SPEC_KEY: "w"}},
        id="version-not-int",
    ),
]


@pytest.mark.parametrize("kwargs", NOT_A_JOB_POD)
def test_pods_not_of_a_job_are_skipped(kwargs: dict[str, Any]) -> None:
    """Without a Volcano Job controller ownerRef and the job-name, job-version (an integer) and
    task-spec annotations, add, update and delete all yield None."""
    old, new = pod("Running", **kwargs), pod("Failed", exit_code=1, **kwargs)
    assert on_pod_add(new) is None
    assert on_pod_update(old, new, [new], 3, 1) is None
    assert on_pod_delete(new, True) is None


# --- add / delete -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out_of_sync", "event"),
    [
        pytest.param(False, Event.POD_PENDING, id="pending"),
        pytest.param(True, Event.OUT_OF_SYNC, id="marked-out-of-sync"),
    ],
)
def test_on_pod_add(out_of_sync: bool, event: Event) -> None:
    """A new pod of a Job sends PodPending, or OutOfSync when marked out-of-sync; the request
    carries namespace, job name and uid, task, pod name and uid and the job version."""
    assert on_pod_add(pod("Pending", out_of_sync=out_of_sync)) == expected(event)


@pytest.mark.parametrize(
    ("first_seen", "siblings", "replicas", "event", "exit_code"),
    [
        pytest.param(pod("Failed", exit_code=3), [], 2, Event.POD_FAILED, 3, id="failed"),
        pytest.param(pod("Succeeded"), [], 1, Event.TASK_COMPLETED, None, id="task-done"),
        pytest.param(
            pod("Succeeded"),
            [pod("Running", name="j-worker-1", uid="u1")],
            2,
            Event.OUT_OF_SYNC,
            None,
            id="task-not-done",
        ),
        pytest.param(pod("Succeeded"), [], None, Event.OUT_OF_SYNC, None, id="job-not-cached"),
        pytest.param(
            pod("Failed", exit_code=3, out_of_sync=True),
            [],
            1,
            Event.OUT_OF_SYNC,
            None,
            id="failed-out-of-sync",
        ),
    ],
)
def test_a_pod_first_seen_finished_is_judged_as_it_finished(
    first_seen: Pod, siblings: list[Pod], replicas: int | None, event: Event, exit_code: int | None
) -> None:
    """A pod the controller first sees already finished (it finished while the controller was
    restarting) sends what its finishing would have sent: PodFailed with its exit code, or
    TaskCompleted once every replica of its task succeeded, so exitCode and TaskCompleted
    policies still act; PodPending would leave an MPI job running forever."""
    assert on_pod_add(first_seen, siblings, 3, replicas) == expected(event, exit_code)


@pytest.mark.parametrize(
    ("in_cache", "out_of_sync", "event"),
    [
        pytest.param(True, False, Event.POD_EVICTED, id="evicted"),
        pytest.param(False, False, Event.OUT_OF_SYNC, id="not-in-cache"),
        pytest.param(True, True, Event.OUT_OF_SYNC, id="marked-out-of-sync"),
    ],
)
def test_on_pod_delete(in_cache: bool, out_of_sync: bool, event: Event) -> None:
    """A deleted pod sends PodEvicted; OutOfSync if it was marked or the cache did not hold it."""
    assert on_pod_delete(pod("Running", out_of_sync=out_of_sync), in_cache) == expected(event)


# --- update -------------------------------------------------------------------------------------

SIBLING_DONE = pod("Succeeded", name="j-worker-1", uid="u1")
SIBLING_RUNNING = pod("Running", name="j-worker-1", uid="u1")

UPDATES: list[Any] = [
    # (old, new, siblings, maxRetry, replicas, expected event, exit code)
    pytest.param(
        pod("Running"), pod("Failed", exit_code=137), [], 3, 1, Event.POD_FAILED, 137,
        id="to-failed-exit-code",
    ),
    pytest.param(
        pod("Pending"), pod("Failed"), [], 3, 1, Event.POD_FAILED, None,
        id="to-failed-no-terminated-state",
    ),
    pytest.param(
        pod("Failed", exit_code=1), pod("Failed", exit_code=1, rv="9"), [], 3, 1,
        Event.OUT_OF_SYNC, None, id="failed-stays-failed",
    ),
    pytest.param(
        pod("Running"), pod("Succeeded"), [SIBLING_DONE], 3, 2, Event.TASK_COMPLETED, None,
        id="to-succeeded-all-replicas-done",
    ),
    pytest.param(
        pod("Running"), pod("Succeeded"), [SIBLING_RUNNING], 3, 2, Event.OUT_OF_SYNC, None,
        id="to-succeeded-sibling-running",
    ),
    pytest.param(
        pod("Running"), pod("Succeeded"), [pod("Running")], 3, 1, Event.TASK_COMPLETED, None,
        id="stale-cache-copy-replaced-by-new",
    ),
    pytest.param(
        pod("Running"), pod("Succeeded"), [], 3, None, Event.OUT_OF_SYNC, None,
        id="to-succeeded-task-unknown",
    ),
    pytest.param(
        pod("Succeeded"), pod("Succeeded", rv="9"), [SIBLING_DONE], 3, 2, Event.OUT_OF_SYNC,
        None, id="succeeded-stays-succeeded",
    ),
    pytest.param(
        pod("Pending"), pod("Running"), [], 3, 1, Event.POD_RUNNING, None, id="to-running"
    ),
    pytest.param(
        pod("Running"), pod("Pending"), [], 3, 1, Event.POD_PENDING, None, id="to-pending"
    ),
    pytest.param(pod(""), pod("Pending"), [], 3, 1, Event.POD_PENDING, None, id="new-to-pending"),
    pytest.param(
        pod("Running"), pod("Running", restarts=3), [], 3, 1, Event.TASK_FAILED, None,
        id="restarts-reach-max-retry",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=2), [], 3, 1, Event.OUT_OF_SYNC, None,
        id="restarts-below-max-retry",
    ),
    pytest.param(
        pod("Pending"), pod("Pending", init_restarts=1), [pod("Running", name="b", restarts=1)],
        2, 2, Event.TASK_FAILED, None, id="init-and-sibling-restarts-add-up",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=1), [pod("Failed", name="b", restarts=5)], 2, 2,
        Event.OUT_OF_SYNC, None, id="finished-siblings-restarts-ignored",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=3), [], 0, 1, Event.TASK_FAILED, None,
        id="max-retry-0-means-3",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=2), [], 0, 1, Event.OUT_OF_SYNC, None,
        id="max-retry-0-below-3",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=99), [], -1, 1, Event.OUT_OF_SYNC, None,
        id="max-retry-minus-1-unlimited",
    ),
    pytest.param(
        pod("Running"), pod("Running", restarts=99), [], None, 1, Event.OUT_OF_SYNC, None,
        id="task-unknown-never-fails",
    ),
    pytest.param(
        pod("Pending"), pod("Running", restarts=5), [], 3, 1, Event.POD_RUNNING, None,
        id="transition-overrides-task-failed",
    ),
    pytest.param(
        pod("Running"), pod("Unknown"), [], 3, 1, Event.OUT_OF_SYNC, None, id="to-unknown"
    ),
    pytest.param(
        pod("Running"), pod("Failed", exit_code=1, out_of_sync=True), [], 3, 1,
        Event.OUT_OF_SYNC, None, id="marked-out-of-sync-ignored",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "siblings", "max_retry", "replicas", "event", "exit_code"), UPDATES
)
def test_on_pod_update(
    old: Pod,
    new: Pod,
    siblings: list[Pod],
    max_retry: int | None,
    replicas: int | None,
    event: Event,
    exit_code: int | None,
) -> None:
    """Each rule of Volcano's updatePod: PodFailed with the first container's exit code,
    TaskCompleted when every replica succeeded, TaskFailed from restartCounts (0 means 3, -1
    unlimited), PodRunning / PodPending on transitions (overriding TaskFailed), else OutOfSync."""
    got = on_pod_update(old, new, [*siblings, old], max_retry, replicas)
    assert got is not None
    assert (got.event, got.exit_code) == (event, exit_code)


def test_on_pod_update_resync_is_ignored() -> None:
    """An update with the same non-empty resourceVersion (an informer resync) yields None."""
    old, new = pod("Pending", rv="7"), pod("Running", rv="7")
    assert on_pod_update(old, new, [new], 3, 1) is None


@pytest.mark.parametrize(
    ("restarts", "limit", "failed"),
    [
        pytest.param(3, 3, True, id="equal"),
        pytest.param(4, 3, True, id="above"),
        pytest.param(2, 3, False, id="below"),
    ],
)
def test_task_failed_threshold(restarts: int, limit: int, failed: bool) -> None:
    """TaskFailed fires when the restarts reach maxRetry (>=), not only when they exceed it."""
    assert task_failed([pod("Running", restarts=restarts)], limit) is failed


# --- jobs, podgroups, commands ------------------------------------------------------------------


def job(*, replicas: int = 1, phase: str = "Running", running: int = 0) -> Job:
    return Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="job-uid"),
        spec=JobSpec(tasks=(TaskSpec(name="worker", replicas=replicas),)),
        status=JobStatus(state=JobState(phase=phase), running=running),
    )


def test_on_job_add() -> None:
    """A new Job sends OutOfSync with its name and uid."""
    assert on_job_add(job()) == Request(
        namespace="ns", job_name="j", job_uid="job-uid", event=Event.OUT_OF_SYNC
    )


@pytest.mark.parametrize(
    ("new", "sends"),
    [
        pytest.param(job(replicas=2), True, id="spec-changed"),
        pytest.param(job(phase="Completed"), True, id="phase-changed"),
        pytest.param(job(running=1), False, id="only-counts-changed"),
        pytest.param(job(), False, id="nothing-changed"),
    ],
)
def test_on_job_update(new: Job, sends: bool) -> None:
    """An updated Job sends OutOfSync only when its spec or status.state.phase changed."""
    got = on_job_update(job(), new)
    assert (got is not None) is sends
    if got is not None:
        assert got.event is Event.OUT_OF_SYNC


def podgroup(phase: str, *, owner: OwnerReference | None = JOB_OWNER) -> PodGroup:
    return PodGroup(
        metadata=ObjectMeta(
            name="j-job-uid", namespace="ns", owner_references=() if owner is None else (owner,)
        ),
        status=PodGroupStatus(phase=phase),
    )


@pytest.mark.parametrize(
    ("old", "new", "result"),
    [
        pytest.param(
            podgroup("Running"),
            podgroup("Unknown"),
            Request(namespace="ns", job_name="j", job_uid="job-uid", event=Event.JOB_UNKNOWN),
            id="to-unknown",
        ),
        pytest.param(
            podgroup("Pending"),
            podgroup("Inqueue"),
            Request(namespace="ns", job_name="j", job_uid="job-uid", event=None),
            id="to-inqueue-plain-sync",
        ),
        pytest.param(podgroup("Running"), podgroup("Running"), None, id="phase-unchanged"),
        pytest.param(
            podgroup("Pending", owner=None), podgroup("Inqueue", owner=None), None, id="no-owner"
        ),
    ],
)
def test_on_podgroup_update(old: PodGroup, new: PodGroup, result: Request | None) -> None:
    """A PodGroup phase change sends Unknown (to Unknown) or a plain sync, for its owner Job."""
    assert on_podgroup_update(old, new) == result


def command(action: str, *, kind: str = "Job", api_version: str = BATCH_API_VERSION) -> Command:
    ref = OwnerReference(api_version=api_version, kind=kind, name="j", uid="job-uid")
    return Command(metadata=ObjectMeta(name="c", namespace="ns"), action=action, target=ref)


@pytest.mark.parametrize(
    ("cmd", "action"),
    [
        pytest.param(command("AbortJob"), Action.ABORT_JOB, id="abort"),
        pytest.param(command("ResumeJob"), Action.RESUME_JOB, id="resume"),
        pytest.param(command("Dance"), Action.SYNC_JOB, id="unknown-action-syncs"),
        pytest.param(command("CloseQueue", kind="Queue", api_version=SCHEDULING_API_VERSION),
                     None, id="queue-target"),
        pytest.param(Command(action="AbortJob"), None, id="no-target"),
    ],
)  # fmt: skip
def test_on_command(cmd: Command, action: Action | None) -> None:
    """A Command for a Job sends CommandIssued with its action; other targets yield None."""
    got = on_command(cmd)
    if action is None:
        assert got is None
    else:
        assert got == Request(
            namespace="ns",
            job_name="j",
            job_uid="job-uid",
            event=Event.COMMAND_ISSUED,
            action=action,
        )


def _job_with_volumes(name: str, *volumes: VolumeSpec) -> Job:
    return Job(
        metadata=ObjectMeta(name=name, namespace="ns", uid=f"{name}-uid"),
        spec=JobSpec(volumes=volumes),
    )


def test_claim_keys_name_existing_claims_only() -> None:
    """Only volumes with a volumeClaimName index the Job; a claim template (no name yet) not."""
    job = _job_with_volumes(
        "j",
        VolumeSpec(mount_path="/a", volume_claim_name="data"),
        VolumeSpec(mount_path="/b", volume_claim={"accessModes": ["ReadWriteOnce"]}),
    )
    assert claim_keys(job) == ["ns/data"]


def test_pvc_add_syncs_the_jobs_waiting_for_it() -> None:
    """A PVC appearing is a plain sync of each Job naming it (syncJob: Pending until
    the PVC is created), and of no other Job."""
    waiting = _job_with_volumes("w", VolumeSpec(mount_path="/d", volume_claim_name="data"))
    other = _job_with_volumes("o", VolumeSpec(mount_path="/d", volume_claim_name="else"))
    assert on_pvc_add("ns", "data", [waiting, other]) == [
        Request(namespace="ns", job_name="w", job_uid="w-uid")
    ]
    assert on_pvc_add("other-ns", "data", [waiting]) == []


@pytest.mark.parametrize("phase", ["", "Pending", "Running", "Restarting"])
def test_a_deleted_podgroup_syncs_a_job_that_needs_one(phase: str) -> None:
    """The chaos smoke run's find: a restarted Job whose sync still saw its old PodGroup in the
    cache had Pending pods and no group until a resync; the deletion now asks for a sync."""
    assert on_podgroup_delete(podgroup("Running"), job(phase=phase)) == Request(
        namespace="ns", job_name="j", job_uid="job-uid"
    )


@pytest.mark.parametrize(
    "phase", ["Aborting", "Aborted", "Completing", "Completed", "Failed", "Terminating"]
)
def test_a_deleted_podgroup_of_a_finishing_job_asks_nothing(phase: str) -> None:
    """A Job that only kills (finishing, finished, aborted) deletes its PodGroup itself."""
    assert on_podgroup_delete(podgroup("Running"), job(phase=phase)) is None


def test_a_deleted_podgroup_without_a_job_asks_nothing() -> None:
    assert on_podgroup_delete(podgroup("Running", owner=None), job()) is None
    assert on_podgroup_delete(podgroup("Running"), None) is None
