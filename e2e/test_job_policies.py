"""Volcano's lifecycle policies (pkg/controllers/job/) on the real API server: one test per
policy path — events, exit codes, timeouts, task-level over job-level policies, maxRetry,
Commands, minSuccess, dependsOn, scaling and the last retry. Pods are kwok pods that run until
deleted or exit when a test says so (``finish_pod``); the stand-in scheduler enqueues PodGroups
and binds pods, except where a test needs pods to stay Pending."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from caldera.api.kinds import COMMAND, EVENT, JOB, POD, PODGROUP
from caldera.api.meta import parse_time
from caldera.api.volcano import Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from caldera.kube.requests import PatchType
from e2e.conftest import Cluster
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    enqueued_only,
    finish_pod,
    get_job,
    get_pod,
    in_phase,
    job,
    job_controller,
    pods_of,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually, gone

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("job_controller")]


async def _running(kube: KubeClient, ns: str, name: str, pods: int) -> Job:
    """Wait until the Job is Running with ``pods`` Running pods; return the Job."""
    await eventually(lambda: running_pods(kube, ns, name, pods), timeout=60, what=f"{pods} pods")
    return await eventually(lambda: in_phase(kube, ns, name, "Running"), timeout=60, what="Running")


async def _phase(kube: KubeClient, ns: str, name: str, phase: str, wait: float = 60) -> Job:
    return await eventually(lambda: in_phase(kube, ns, name, phase), timeout=wait, what=phase)


async def _stays(kube: KubeClient, ns: str, name: str, seconds: float) -> Job:
    """Watch the Job for ``seconds``: it must keep its phase, retryCount and version."""
    first = await get_job(kube, ns, name)
    for _ in range(int(seconds / 0.5)):
        await asyncio.sleep(0.5)
        now = await get_job(kube, ns, name)
        assert now.status.state.phase == first.status.state.phase, now.status
        assert now.status.retry_count == first.status.retry_count, now.status
        assert now.status.version == first.status.version, now.status
    return first


async def _settled(
    kube: KubeClient, ns: str, name: str, *, succeeded: int = 0, failed: int = 0
) -> Job | None:
    """The Job once its counters show no live pod and these finished ones (for `eventually`)."""
    st = (await get_job(kube, ns, name)).status
    live = (st.pending, st.running, st.terminating)
    if live == (0, 0, 0) and (st.succeeded, st.failed) == (succeeded, failed):
        return await get_job(kube, ns, name)
    return None


def _condition_time(j: Job, phase: str) -> float:
    for c in j.status.conditions:
        if c.status == phase and c.last_transition_time:
            return parse_time(c.last_transition_time).timestamp()
    raise AssertionError(f"no {phase} condition in {j.status.conditions}")


async def _command(kube: KubeClient, ns: str, target: Job, action: str) -> str:
    """Create a Command as vcctl does (ownerRef and target to the Job); return its name."""
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": target.metadata.name,
        "uid": target.metadata.uid,
        "controller": True,
    }
    body = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"{target.metadata.name}-{action.lower()}-",
            "namespace": ns,
            "ownerReferences": [ref],
        },
        "target": ref,
        "action": action,
    }
    created = await kube.create(COMMAND, body, namespace=ns)
    return created.metadata.name


@pytest.mark.usefixtures("scheduled")
async def test_pod_failed_restart_job_bumps_version_and_recreates_pods(
    kube: KubeClient, namespace: str
) -> None:
    """PodFailed → RestartJob: every pod is killed, status.version and retryCount go to 1, the
    Job passes through Restarting and runs again with new pods of job-version 1."""
    policies = [{"event": "PodFailed", "action": "RestartJob"}]
    await kube.create(JOB, job("pf", [task("w", 2)], policies=policies), namespace=namespace)
    first = await _running(kube, namespace, "pf", 2)
    pg_before = await kube.get(PODGROUP, f"pf-{first.metadata.uid}", namespace=namespace)
    before = await pods_of(kube, namespace, "pf")
    assert {p.metadata.annotations["volcano.sh/job-version"] for p in before.values()} == {"0"}
    await finish_pod(kube, namespace, "pf-w-0", 1)

    await eventually(lambda: _retried(kube, namespace, "pf", 1), timeout=30, what="retry 1")
    after = await eventually(lambda: running_pods(kube, namespace, "pf", 2), timeout=60)
    final = await _phase(kube, namespace, "pf", "Running")
    assert final.status.version == 1
    assert final.status.retry_count == 1
    assert "Restarting" in [c.status for c in final.status.conditions]
    assert sorted(after) == ["pf-w-0", "pf-w-1"]
    for name, pod in after.items():
        assert pod.metadata.uid != before[name].metadata.uid, name
        assert pod.metadata.annotations["volcano.sh/job-version"] == "1"
        assert pod.metadata.annotations["volcano.sh/job-retry-count"] == "1"
    # a full kill deletes the PodGroup; the next sync creates it again (re-gang)
    pg_after = await kube.get(PODGROUP, f"pf-{first.metadata.uid}", namespace=namespace)
    assert pg_after.metadata.uid != pg_before.metadata.uid


@pytest.mark.usefixtures("scheduled")
async def test_pod_evicted_triggers_policy_action(kube: KubeClient, namespace: str) -> None:
    """PodEvicted → AbortJob: deleting a pod aborts the Job (not the default recreate): Aborting,
    then Aborted once no pod is left, and the deleted pod is not recreated."""
    policies = [{"event": "PodEvicted", "action": "AbortJob"}]
    await kube.create(JOB, job("ev", [task("w", 2)], policies=policies), namespace=namespace)
    await _running(kube, namespace, "ev", 2)
    await kube.delete(POD, "ev-w-0", namespace=namespace)

    aborted = await _phase(kube, namespace, "ev", "Aborted")
    assert [c.status for c in aborted.status.conditions][-2:] == ["Aborting", "Aborted"]
    assert await eventually(lambda: _no_pods(kube, namespace, "ev"), timeout=30)
    await asyncio.sleep(2)
    assert await pods_of(kube, namespace, "ev") == {}


async def _no_pods(kube: KubeClient, ns: str, name: str) -> bool:
    return not await pods_of(kube, ns, name)


@pytest.mark.usefixtures("scheduled")
async def test_exit_code_policy_matches_only_its_code(kube: KubeClient, namespace: str) -> None:
    """A policy with exitCode 3 → AbortJob ignores a pod failing with exit code 1 (the Job keeps
    running, no restart) and aborts the Job when a pod fails with exit code 3."""
    policies = [{"exitCode": 3, "action": "AbortJob"}]
    await kube.create(JOB, job("ec", [task("w", 3)], policies=policies), namespace=namespace)
    await _running(kube, namespace, "ec", 3)
    await finish_pod(kube, namespace, "ec-w-1", 1)
    await eventually(lambda: _pod_phase(kube, namespace, "ec-w-1", "Failed"), timeout=30)

    async def counted() -> bool:
        return (await get_job(kube, namespace, "ec")).status.failed == 1

    await eventually(counted, timeout=30, what="the failed pod counted")
    kept = await _stays(kube, namespace, "ec", 4)
    assert kept.status.state.phase == "Running"
    assert kept.status.failed == 1

    await finish_pod(kube, namespace, "ec-w-0", 3)
    aborted = await _phase(kube, namespace, "ec", "Aborted")
    assert aborted.status.retry_count == 0
    assert "Aborting" in [c.status for c in aborted.status.conditions]


async def _pod_phase(kube: KubeClient, ns: str, name: str, phase: str) -> bool:
    pod = await get_pod(kube, ns, name)
    return pod is not None and pod.status.phase == phase


@pytest.mark.usefixtures("scheduled")
async def test_task_completed_completes_job(kube: KubeClient, namespace: str) -> None:
    """Task policy TaskCompleted → CompleteJob: when the master's only pod succeeds, the Job goes
    Completing → Completed, the still running workers are killed, the master pod is kept."""
    master = task(
        "master",
        1,
        run_for="2s",
        exit_code=0,
        policies=[{"event": "TaskCompleted", "action": "CompleteJob"}],
    )
    await kube.create(JOB, job("tc", [master, task("worker", 2)]), namespace=namespace)
    done = await _phase(kube, namespace, "tc", "Completed")
    assert "Completing" in [c.status for c in done.status.conditions]
    await eventually(lambda: _only(kube, namespace, "tc", {"tc-master-0"}), timeout=30)
    pod = await get_pod(kube, namespace, "tc-master-0")
    assert pod is not None
    assert pod.status.phase == "Succeeded"
    await eventually(lambda: _settled(kube, namespace, "tc", succeeded=1), timeout=30)


async def _only(kube: KubeClient, ns: str, name: str, names: set[str]) -> bool:
    return set(await pods_of(kube, ns, name)) == names


@pytest.mark.usefixtures("scheduled")
async def test_task_failed_on_restart_count(kube: KubeClient, namespace: str) -> None:
    """TaskFailed → TerminateJob: a Running pod whose containers restarted task.maxRetry times
    (written to its status as a kubelet would; kwok never restarts containers) fails the task
    without a phase change, and the policy terminates the Job."""
    worker = task(
        "w",
        2,
        maxRetry=2,
        policies=[{"event": "TaskFailed", "action": "TerminateJob"}],
    )
    await kube.create(JOB, job("tf", [worker]), namespace=namespace)
    await _running(kube, namespace, "tf", 2)
    await _restart_count(kube, namespace, "tf-w-0", 1)
    kept = await _stays(kube, namespace, "tf", 3)  # 1 restart < maxRetry 2: nothing yet
    assert kept.status.state.phase == "Running"
    await _restart_count(kube, namespace, "tf-w-1", 1)  # Σ restarts of the task = 2
    done = await _phase(kube, namespace, "tf", "Terminated")
    assert "Terminating" in [c.status for c in done.status.conditions]


async def _restart_count(kube: KubeClient, ns: str, pod: str, count: int) -> None:
    raw = json.loads(await kube.request("GET", f"/api/v1/namespaces/{ns}/pods/{pod}"))
    statuses = raw["status"]["containerStatuses"]
    for status in statuses:
        status["restartCount"] = count
    await kube.patch_status(POD, pod, {"status": {"containerStatuses": statuses}}, namespace=ns)


@pytest.mark.usefixtures("scheduled")
async def test_any_event_policy(kube: KubeClient, namespace: str) -> None:
    """A policy with event ``*`` (AnyEvent) → AbortJob: pod creation (PodPending without a
    timeout) and PodRunning do not trigger it; a pod failure does."""
    policies = [{"event": "*", "action": "AbortJob"}]
    await kube.create(JOB, job("any", [task("w", 2)], policies=policies), namespace=namespace)
    await _running(kube, namespace, "any", 2)
    kept = await _stays(kube, namespace, "any", 2)
    assert kept.status.state.phase == "Running"
    await finish_pod(kube, namespace, "any-w-1", 7)
    await _phase(kube, namespace, "any", "Aborted")


@pytest.mark.usefixtures("scheduled")
async def test_task_policy_wins_over_job_policy(kube: KubeClient, namespace: str) -> None:
    """The same event with a task-level policy (RestartJob) and a job-level one (AbortJob): the
    task's pod failing restarts the Job; a pod of a task without policies then aborts it."""
    own = task("own", 1, policies=[{"event": "PodFailed", "action": "RestartJob"}])
    body = job(
        "prio", [own, task("plain", 1)], policies=[{"event": "PodFailed", "action": "AbortJob"}]
    )
    await kube.create(JOB, body, namespace=namespace)
    await _running(kube, namespace, "prio", 2)
    await finish_pod(kube, namespace, "prio-own-0", 1)
    await eventually(lambda: _retried(kube, namespace, "prio", 1), timeout=30, what="retry 1")
    again = await _running(kube, namespace, "prio", 2)
    assert "Aborting" not in [c.status for c in again.status.conditions]
    assert "Restarting" in [c.status for c in again.status.conditions]

    await finish_pod(kube, namespace, "prio-plain-0", 1)
    aborted = await _phase(kube, namespace, "prio", "Aborted")
    assert aborted.status.retry_count == 1


async def _retried(kube: KubeClient, ns: str, name: str, count: int) -> Job | None:
    j = await get_job(kube, ns, name)
    return j if j.status.retry_count >= count else None


@pytest.mark.usefixtures("enqueued_only")
async def test_pod_pending_timeout_runs_action_after_delay(
    kube: KubeClient, namespace: str
) -> None:
    """PodPending with timeout 4s → TerminateJob: pods that nobody binds stay Pending; nothing
    happens before the delay, the Job is terminated after it, with Volcano's ExecuteAction
    Events."""
    policies = [{"event": "PodPending", "action": "TerminateJob", "timeout": "4s"}]
    await kube.create(JOB, job("tmo", [task("w", 1)], policies=policies), namespace=namespace)
    pod = await eventually(lambda: get_pod(kube, namespace, "tmo-w-0"), timeout=30, what="pod")
    assert pod.status.phase == "Pending"
    early = await get_job(kube, namespace, "tmo")
    assert early.status.state.phase == "Pending"
    done = await _phase(kube, namespace, "tmo", "Terminated", wait=30)
    created = parse_time(pod.metadata.creation_timestamp or "").timestamp()
    # timestamps have one-second resolution
    assert _condition_time(done, "Terminating") - created >= 3, done.status.conditions
    assert await eventually(lambda: _no_pods(kube, namespace, "tmo"), timeout=30)
    events = await kube.list(EVENT, namespace=namespace)
    execute = [e.message for e in events.items if e.reason == "ExecuteAction"]
    # Volcano's two ExecuteAction Events: the delay announced, then the action started.
    assert "Execute action TerminateJob after 4s" in execute, execute
    assert "Start to execute action TerminateJob" in execute, execute


@pytest.mark.usefixtures("scheduled")
async def test_restart_job_until_max_retry_then_failed(kube: KubeClient, namespace: str) -> None:
    """PodFailed → RestartJob with maxRetry 2 and pods that always fail: two restarts
    (retryCount 2, version ≥ 2), then Restarting → Failed, and the Job stays there."""
    policies = [{"event": "PodFailed", "action": "RestartJob"}]
    body = job("mr", [task("w", 1, run_for="2s", exit_code=1)], policies=policies, maxRetry=2)
    await kube.create(JOB, body, namespace=namespace)
    failed = await _phase(kube, namespace, "mr", "Failed", wait=90)
    assert failed.status.retry_count == 2
    # Each full kill bumps the version: two restarts, then Failed's own KillJob(Soft) when the
    # phase change comes back as a Job update (Volcano's killJob always does Version++).
    assert failed.status.version >= 2
    assert failed.status.state.reason == "MaxRetryReached"

    # Every event of a finished Job runs its KillJob(Soft), which bumps the version (as
    # Volcano's killJob does): the version settles once the last pod events are in.
    async def quiet() -> bool:
        st = (await get_job(kube, namespace, "mr")).status
        return (st.pending, st.running, st.terminating) == (0, 0, 0)

    await eventually(quiet, timeout=60, what="no live pods")
    await asyncio.sleep(1)
    await _stays(kube, namespace, "mr", 2)


@pytest.mark.usefixtures("scheduled")
async def test_abort_then_resume_via_commands(kube: KubeClient, namespace: str) -> None:
    """Command AbortJob: the controller deletes the Command, the Job goes Aborting → Aborted and
    its pods go; Command ResumeJob: Restarting (retryCount 1) → Pending → Running with new pods."""
    await kube.create(JOB, job("cmd", [task("w", 2)]), namespace=namespace)
    running = await _running(kube, namespace, "cmd", 2)
    abort = await _command(kube, namespace, running, "AbortJob")
    await eventually(lambda: gone(kube, COMMAND, abort, namespace), timeout=30, what="consumed")
    aborted = await _phase(kube, namespace, "cmd", "Aborted")
    assert aborted.status.retry_count == 0
    await eventually(lambda: _no_pods(kube, namespace, "cmd"), timeout=30, what="no pods")

    resume = await _command(kube, namespace, aborted, "ResumeJob")
    await eventually(lambda: gone(kube, COMMAND, resume, namespace), timeout=30, what="consumed")
    back = await _running(kube, namespace, "cmd", 2)
    assert back.status.retry_count == 1
    events = await kube.list(EVENT, namespace=namespace)
    issued = [e.message for e in events.items if e.reason == "CommandIssued"]
    assert any("AbortJob" in m for m in issued), issued
    assert any("ResumeJob" in m for m in issued), issued
    phases = [c.status for c in back.status.conditions]
    assert phases.index("Aborted") < phases.index("Restarting") < phases.index("Running")


@pytest.mark.usefixtures("scheduled")
async def test_terminate_job_keeps_finished_pods(kube: KubeClient, namespace: str) -> None:
    """PodFailed → TerminateJob: Terminating, running pods killed, the failed pod kept
    (PodRetainPhaseSoft), then Terminated."""
    policies = [{"event": "PodFailed", "action": "TerminateJob"}]
    await kube.create(JOB, job("term", [task("w", 3)], policies=policies), namespace=namespace)
    await _running(kube, namespace, "term", 3)
    await finish_pod(kube, namespace, "term-w-2", 2)
    done = await _phase(kube, namespace, "term", "Terminated")
    assert "Terminating" in [c.status for c in done.status.conditions]
    await eventually(lambda: _only(kube, namespace, "term", {"term-w-2"}), timeout=30)
    pod = await get_pod(kube, namespace, "term-w-2")
    assert pod is not None
    assert pod.status.phase == "Failed"
    await eventually(lambda: _settled(kube, namespace, "term", failed=1), timeout=30)


@pytest.mark.usefixtures("scheduled")
async def test_complete_job_command(kube: KubeClient, namespace: str) -> None:
    """Command CompleteJob on a running Job: Completing, the running pods killed, Completed."""
    await kube.create(JOB, job("cj", [task("w", 2)]), namespace=namespace)
    running = await _running(kube, namespace, "cj", 2)
    await _command(kube, namespace, running, "CompleteJob")
    done = await _phase(kube, namespace, "cj", "Completed")
    assert [c.status for c in done.status.conditions][-2:] == ["Completing", "Completed"]
    await eventually(lambda: _no_pods(kube, namespace, "cj"), timeout=30, what="no pods")
    await eventually(lambda: _settled(kube, namespace, "cj"), timeout=30, what="counters")


@pytest.mark.usefixtures("scheduled")
async def test_min_success_completes_early(kube: KubeClient, namespace: str) -> None:
    """minSuccess 2 of 3: one success is not enough; the second completes the Job while the third
    pod still runs, and that pod is then killed."""
    await kube.create(JOB, job("ms", [task("w", 3)], minSuccess=2), namespace=namespace)
    await _running(kube, namespace, "ms", 3)
    await finish_pod(kube, namespace, "ms-w-0", 0)
    await eventually(lambda: _pod_phase(kube, namespace, "ms-w-0", "Succeeded"), timeout=30)
    kept = await _stays(kube, namespace, "ms", 2)
    assert kept.status.state.phase == "Running"
    await finish_pod(kube, namespace, "ms-w-1", 0)
    done = await _phase(kube, namespace, "ms", "Completed")
    assert done.status.succeeded == 2
    await eventually(lambda: _only(kube, namespace, "ms", {"ms-w-0", "ms-w-1"}), timeout=30)
    await eventually(lambda: _settled(kube, namespace, "ms", succeeded=2), timeout=30)


@pytest.mark.usefixtures("enqueued_only")
async def test_depends_on_creates_workers_after_ps_runs(
    kube: KubeClient, namespace: str, cluster: Cluster
) -> None:
    """worker dependsOn ps: while ps-0 is Pending (nobody binds it) no worker pod exists; once
    the test binds ps-0 and kwok runs it, the worker pods are created."""
    worker = task("worker", 2, dependsOn={"name": ["ps"]})
    await kube.create(JOB, job("dep", [task("ps", 1), worker]), namespace=namespace)
    await eventually(lambda: get_pod(kube, namespace, "dep-ps-0"), timeout=30, what="ps-0")
    await asyncio.sleep(3)
    assert set(await pods_of(kube, namespace, "dep")) == {"dep-ps-0"}

    await kube.bind(namespace, "dep-ps-0", cluster.nodes[0])
    await eventually(lambda: _pod_phase(kube, namespace, "dep-ps-0", "Running"), timeout=30)
    ps = await kube.get(POD, "dep-ps-0", namespace=namespace)
    pods = await eventually(lambda: _named(kube, namespace, "dep", 3), timeout=30, what="workers")
    started = parse_time(ps.status.start_time or "").timestamp()
    for name in ("dep-worker-0", "dep-worker-1"):
        created = parse_time(pods[name].metadata.creation_timestamp or "").timestamp()
        assert created >= started, (name, created, started)


async def _named(kube: KubeClient, ns: str, name: str, count: int) -> dict[str, Any] | None:
    pods = await pods_of(kube, ns, name)
    return dict(pods) if len(pods) == count else None


@pytest.mark.usefixtures("scheduled")
async def test_scale_up_and_down(kube: KubeClient, namespace: str) -> None:
    """Patching tasks[0].replicas: 2 → 4 adds w-2 and w-3, 4 → 1 (with minAvailable 1) removes
    w-1..w-3; the PodGroup's minTaskMember and minMember follow; the Job stays Running."""
    await kube.create(JOB, job("sc", [task("w", 2)]), namespace=namespace)
    running = await _running(kube, namespace, "sc", 2)
    pg_name = f"sc-{running.metadata.uid}"
    await kube.patch(
        JOB,
        "sc",
        [{"op": "replace", "path": "/spec/tasks/0/replicas", "value": 4}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    up = await eventually(lambda: running_pods(kube, namespace, "sc", 4), timeout=60)
    assert sorted(up) == [f"sc-w-{i}" for i in range(4)]
    await eventually(lambda: _pg_members(kube, namespace, pg_name, 2, 4), timeout=30)

    await kube.patch(
        JOB,
        "sc",
        [
            {"op": "replace", "path": "/spec/tasks/0/replicas", "value": 1},
            {"op": "replace", "path": "/spec/minAvailable", "value": 1},
        ],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    await eventually(lambda: _only(kube, namespace, "sc", {"sc-w-0"}), timeout=60)
    await eventually(lambda: _pg_members(kube, namespace, pg_name, 1, 1), timeout=30)
    final = await _phase(kube, namespace, "sc", "Running")
    assert final.status.retry_count == 0

    async def one_running() -> bool:
        st = (await get_job(kube, namespace, "sc")).status
        return (st.running, st.terminating) == (1, 0) and st.task_status_count["w"].phase == {
            "Running": 1
        }

    await eventually(one_running, timeout=30, what="counters of one running pod")


async def _pg_members(kube: KubeClient, ns: str, name: str, member: int, task_member: int) -> bool:
    pg = await kube.get(PODGROUP, name, namespace=ns)
    return pg.spec.min_member == member and pg.spec.min_task_member == {"w": task_member}


@pytest.mark.usefixtures("scheduled")
async def test_last_retry_retains_finished_pods(kube: KubeClient, namespace: str) -> None:
    """maxRetry 1: the first restart is the last retry, so RestartJob keeps the Failed pod (only
    the Running one is killed); the Job then fails with retryCount 1."""
    policies = [{"event": "PodFailed", "action": "RestartJob"}]
    body = job("last", [task("w", 2)], policies=policies, maxRetry=1)
    await kube.create(JOB, body, namespace=namespace)
    await _running(kube, namespace, "last", 2)
    failed_before = await kube.get(POD, "last-w-0", namespace=namespace)
    await finish_pod(kube, namespace, "last-w-0", 1)
    done = await _phase(kube, namespace, "last", "Failed")
    assert done.status.retry_count == 1
    await eventually(lambda: _only(kube, namespace, "last", {"last-w-0"}), timeout=30)
    kept = await kube.get(POD, "last-w-0", namespace=namespace)
    assert kept.metadata.uid == failed_before.metadata.uid
    assert kept.status.phase == "Failed"
    await eventually(lambda: _settled(kube, namespace, "last", failed=1), timeout=30)


@pytest.mark.usefixtures("enqueued_only")
async def test_pod_pending_timeout_cancelled_when_pod_runs(
    kube: KubeClient, namespace: str, cluster: Cluster
) -> None:
    """PodPending with timeout 8s → TerminateJob, but the pod is bound and Running before the
    delay expires: leaving Pending cancels the delayed action, the Job keeps running past it."""
    policies = [{"event": "PodPending", "action": "TerminateJob", "timeout": "8s"}]
    await kube.create(JOB, job("tmc", [task("w", 1)], policies=policies), namespace=namespace)
    pod = await eventually(lambda: get_pod(kube, namespace, "tmc-w-0"), timeout=30, what="pod")
    await kube.bind(namespace, "tmc-w-0", cluster.nodes[0])
    await _running(kube, namespace, "tmc", 1)
    created = parse_time(pod.metadata.creation_timestamp or "").timestamp()
    await asyncio.sleep(max(0.0, created + 8 - time.time()))
    kept = await _stays(kube, namespace, "tmc", 3)
    assert kept.status.state.phase == "Running"
    assert "Terminating" not in [c.status for c in kept.status.conditions]


@pytest.mark.usefixtures("scheduled")
async def test_restart_task_restarts_only_that_task(kube: KubeClient, namespace: str) -> None:
    """PodFailed → RestartTask (v1.11+ KillTarget): the failed task's pods are recreated, the
    other task's pod and the PodGroup are kept, status.version is not bumped, retryCount 1."""
    a = task("a", 2, policies=[{"event": "PodFailed", "action": "RestartTask"}])
    await kube.create(JOB, job("rt", [a, task("b", 1)]), namespace=namespace)
    first = await _running(kube, namespace, "rt", 3)
    pg = await kube.get(PODGROUP, f"rt-{first.metadata.uid}", namespace=namespace)
    before = await pods_of(kube, namespace, "rt")
    await finish_pod(kube, namespace, "rt-a-0", 1)
    await eventually(lambda: _retried(kube, namespace, "rt", 1), timeout=30, what="retry 1")
    after = await eventually(lambda: _new_uids(kube, namespace, "rt", before, 2), timeout=60)
    assert sorted(after) == ["rt-a-0", "rt-a-1"]
    final = await _running(kube, namespace, "rt", 3)
    assert final.status.version == 0
    assert final.status.retry_count == 1
    assert "Restarting" in [c.status for c in final.status.conditions]
    b = await kube.get(POD, "rt-b-0", namespace=namespace)
    assert b.metadata.uid == before["rt-b-0"].metadata.uid
    same_pg = await kube.get(PODGROUP, pg.metadata.name, namespace=namespace)
    assert same_pg.metadata.uid == pg.metadata.uid


async def _new_uids(
    kube: KubeClient, ns: str, name: str, before: dict[str, Any], count: int
) -> set[str] | None:
    """Names of the Job's Running pods whose uid changed, once there are ``count`` of them."""
    pods = await pods_of(kube, ns, name)
    changed = {
        n
        for n, p in pods.items()
        if p.status.phase == "Running" and n in before and p.metadata.uid != before[n].metadata.uid
    }
    return changed if len(changed) == count else None


@pytest.mark.usefixtures("scheduled")
async def test_restart_pod_restarts_only_that_pod(kube: KubeClient, namespace: str) -> None:
    """PodFailed → RestartPod (v1.11+): only the failed pod is recreated; its sibling keeps its
    uid; retryCount 1, no version bump."""
    w = task("w", 2, policies=[{"event": "PodFailed", "action": "RestartPod"}])
    await kube.create(JOB, job("rp", [w]), namespace=namespace)
    await _running(kube, namespace, "rp", 2)
    before = await pods_of(kube, namespace, "rp")
    await finish_pod(kube, namespace, "rp-w-1", 1)
    await eventually(lambda: _retried(kube, namespace, "rp", 1), timeout=30, what="retry 1")
    after = await eventually(lambda: _new_uids(kube, namespace, "rp", before, 1), timeout=60)
    assert after == {"rp-w-1"}
    final = await _running(kube, namespace, "rp", 2)
    assert final.status.version == 0
    w0 = await kube.get(POD, "rp-w-0", namespace=namespace)
    assert w0.metadata.uid == before["rp-w-0"].metadata.uid


@pytest.mark.usefixtures("scheduled")
async def test_podgroup_unknown_event(kube: KubeClient, namespace: str) -> None:
    """The PodGroup going to phase Unknown is the ``Unknown`` event: policy Unknown → AbortJob."""
    policies = [{"event": "Unknown", "action": "AbortJob"}]
    await kube.create(JOB, job("unk", [task("w", 1)], policies=policies), namespace=namespace)
    running = await _running(kube, namespace, "unk", 1)
    await kube.patch(
        PODGROUP,
        f"unk-{running.metadata.uid}",
        {"status": {"phase": "Unknown"}},
        namespace=namespace,
    )
    await _phase(kube, namespace, "unk", "Aborted")


async def test_pods_wait_for_podgroup_inqueue(kube: KubeClient, namespace: str) -> None:
    """No scheduler: the controller creates the PodGroup (minMember, minTaskMember, owner) but no
    pod while its phase is empty or Pending; moving it to Inqueue lets the pods be created."""
    await kube.create(JOB, job("gate", [task("w", 2)]), namespace=namespace)
    created = await get_job(kube, namespace, "gate")
    pg_name = f"gate-{created.metadata.uid}"
    pg = await eventually(lambda: _pg_or_none(kube, namespace, pg_name), timeout=30, what="pg")
    assert pg.spec.min_member == 2
    assert pg.spec.min_task_member == {"w": 2}
    assert [o.uid for o in pg.metadata.owner_references] == [created.metadata.uid]
    await kube.patch(PODGROUP, pg_name, {"status": {"phase": "Pending"}}, namespace=namespace)
    await asyncio.sleep(3)
    assert await pods_of(kube, namespace, "gate") == {}
    held = await get_job(kube, namespace, "gate")
    assert held.status.state.phase == "Pending"

    await kube.patch(PODGROUP, pg_name, {"status": {"phase": "Inqueue"}}, namespace=namespace)
    await eventually(lambda: _named(kube, namespace, "gate", 2), timeout=30, what="2 pods")


async def _pg_or_none(kube: KubeClient, ns: str, name: str) -> Any:
    try:
        return await kube.get(PODGROUP, name, namespace=ns)
    except NotFound:
        return None


@pytest.mark.usefixtures("scheduled")
async def test_all_finished_below_min_available_fails(kube: KubeClient, namespace: str) -> None:
    """No policies: one pod succeeds and one fails with minAvailable 2; once every pod finished,
    succeeded (1) < minAvailable (2) fails the Job (Volcano's state/running.go)."""
    tasks = [task("ok", 1, run_for="2s", exit_code=0), task("bad", 1, run_for="2s", exit_code=1)]
    await kube.create(JOB, job("fin", tasks), namespace=namespace)
    failed = await _phase(kube, namespace, "fin", "Failed")
    assert (failed.status.succeeded, failed.status.failed) == (1, 1)
    assert failed.status.retry_count == 0


@pytest.mark.usefixtures("scheduled")
async def test_task_min_available_not_met_fails(kube: KubeClient, namespace: str) -> None:
    """spec.minAvailable 2 ≥ Σ task minAvailable (1 + 1): all pods finished with 2 successes,
    enough for the Job, but task ``a`` has none of its 1 required: Failed, not Completed."""
    tasks = [
        task("a", 2, run_for="2s", exit_code=1, minAvailable=1),
        task("b", 2, run_for="2s", exit_code=0, minAvailable=1),
    ]
    await kube.create(JOB, job("tma", tasks, minAvailable=2), namespace=namespace)
    failed = await _phase(kube, namespace, "tma", "Failed")
    assert (failed.status.succeeded, failed.status.failed) == (2, 2)
    assert "Completed" not in [c.status for c in failed.status.conditions]
