"""``caldera job why`` against the real API server, run as a user runs it (the console script as a
subprocess): a job in a Closed queue, a task waiting on dependsOn, a suspended job, and the
scheduler's record on a PodGroup rendered as the user reads it. Each test checks the exact lines
printed. The scheduler's own records (enqueue gate, predicates) are tested with the real
scheduler in the scheduler's e2e tests."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from caldera.api.kinds import JOB, PODGROUP, QUEUE
from caldera.api.meta import format_time
from caldera.api.volcano import Job, PodGroup
from caldera.api.why import WHY_ANNOTATION, bounded, encode_record
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.conftest import Cluster
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    enqueued_only,
    in_phase,
    job,
    job_controller,
    running_pods,
    scheduled,
    task,
)
from e2e.test_cli import _admin_entry, _kubeconfig, acaldera, caldera, ok, one_error
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]


@pytest.fixture
async def queue_name(kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    """A queue name for this test only (queues are cluster-scoped); the queue is deleted after."""
    yield f"{namespace}-q"
    with contextlib.suppress(NotFound):
        await kube.delete(QUEUE, f"{namespace}-q")


async def why(cluster: Cluster, namespace: str, name: str, *extra: str) -> list[str]:
    """The lines ``caldera job why NAME -n NAMESPACE`` prints (it must succeed)."""
    return ok(await acaldera(cluster, "job", "why", name, "-n", namespace, *extra)).splitlines()


async def says(cluster: Cluster, namespace: str, name: str, lines: list[str]) -> list[str]:
    """Wait until ``job why`` prints exactly ``lines`` (the controllers move things along)."""

    async def probe() -> list[str] | None:
        got = await why(cluster, namespace, name)
        return got if got == lines else None

    try:
        return await eventually(probe, timeout=60, interval=0.5, what=f"job why = {lines}")
    except AssertionError:
        got = await why(cluster, namespace, name)
        assert got == lines  # shows the difference
        raise


async def podgroup_of(kube: KubeClient, namespace: str, job_name: str) -> PodGroup:
    current: Job = await kube.get(JOB, job_name, namespace=namespace)
    name = f"{job_name}-{current.metadata.uid}"

    async def probe() -> PodGroup | None:
        listed = await kube.list(PODGROUP, namespace=namespace)
        return next((pg for pg in listed.items if pg.metadata.name == name), None)

    return await eventually(probe, timeout=30, what=f"PodGroup {name}")


def pending_line(pg: PodGroup) -> str:
    return (
        f"PodGroup {pg.metadata.name} is Pending: the scheduler has not admitted it (enqueued) "
        "yet and has not said why"
    )


@pytest.mark.usefixtures("job_controller")
async def test_why_a_job_in_a_closed_queue(
    cluster: Cluster, namespace: str, kube: KubeClient, queue_name: str
) -> None:
    """A job in a Closed queue: the first line names the queue and the command that opens it,
    then the Pending PodGroup; once the queue is Open the queue line is gone. -o json gives the
    same findings as {stage, text, details} objects."""
    closed = queue_name
    ok(await acaldera(cluster, "queue", "create", "-n", closed, "-S", "Closed"))
    await kube.create(JOB, job("held", [task("worker", 2)], queue=closed), namespace=namespace)
    pg = await podgroup_of(kube, namespace, "held")
    queue_line = (
        f"queue {closed} is Closed: no job in it is admitted until it is opened "
        f"(`caldera queue operate -n {closed} -a open`)"
    )
    await says(cluster, namespace, "held", [queue_line, pending_line(pg)])

    got = json.loads(
        ok(await acaldera(cluster, "job", "why", "-N", "held", "-n", namespace, "-o", "json"))
    )
    assert got == [
        {"stage": "queue", "text": queue_line, "details": []},
        {"stage": "podgroup", "text": pending_line(pg), "details": []},
    ]

    await kube.patch_status(QUEUE, closed, {"status": {"state": "Open"}})
    await says(cluster, namespace, "held", [pending_line(pg)])


@pytest.mark.usefixtures("job_controller", "enqueued_only")
async def test_why_a_task_waits_on_depends_on(
    cluster: Cluster, namespace: str, kube: KubeClient, queue_name: str
) -> None:
    """worker dependsOn ps (2 pods): while no ps pod runs, why says 0/2; with one bound and
    running, 1/2; once both run the job controller creates the workers and the line is gone."""
    worker = task("worker", 2, dependsOn={"name": ["ps"]})
    ok(await acaldera(cluster, "queue", "create", "-n", queue_name))
    await kube.create(
        JOB, job("dep", [task("ps", 2), worker], queue=queue_name), namespace=namespace
    )

    def waits(running: int) -> list[str]:
        return [
            f"task worker waits for task ps (dependsOn, iteration all): {running}/2 ps pods running"
        ]

    await says(cluster, namespace, "dep", waits(0))
    await kube.bind(namespace, "dep-ps-0", cluster.nodes[0])
    await says(cluster, namespace, "dep", waits(1))
    await kube.bind(namespace, "dep-ps-1", cluster.nodes[1])

    async def worker_pods() -> bool:
        lines = await why(cluster, namespace, "dep")
        return not any("dependsOn" in line for line in lines)

    await eventually(worker_pods, timeout=60, interval=0.5, what="the dependsOn line gone")


@pytest.mark.usefixtures("job_controller", "scheduled")
async def test_why_a_suspended_job(
    cluster: Cluster, namespace: str, kube: KubeClient, queue_name: str
) -> None:
    """A running job says it is not waiting; ``caldera job suspend`` makes it say suspended by a
    Command, when, and how to resume; ``caldera job resume`` makes it run again."""
    ok(await acaldera(cluster, "queue", "create", "-n", queue_name))
    await kube.create(JOB, job("pause", [task("worker", 2)], queue=queue_name), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, "pause", 2), timeout=60)
    await eventually(lambda: in_phase(kube, namespace, "pause", "Running"), timeout=60)
    await says(cluster, namespace, "pause", ["not waiting: 2/2 pods running"])

    ok(await acaldera(cluster, "job", "suspend", "-N", "pause", "-n", namespace))
    aborted = await eventually(lambda: in_phase(kube, namespace, "pause", "Aborted"), timeout=60)
    when = next(c.last_transition_time for c in aborted.status.conditions if c.status == "Aborting")
    [line] = await why(cluster, namespace, "pause")
    pattern = (
        re.escape(f"suspended by a Command (AbortJob) at {when} (")
        + r"\d+s"
        + re.escape(f" ago); `caldera job resume -n {namespace} -N pause` resumes it")
    )
    assert re.fullmatch(pattern, line), line

    ok(await acaldera(cluster, "job", "resume", "-N", "pause", "-n", namespace))
    await says(cluster, namespace, "pause", ["not waiting: 2/2 pods running"])


async def test_why_renders_the_schedulers_record(
    cluster: Cluster, namespace: str, kube: KubeClient, queue_name: str
) -> None:
    """The scheduler's record on the PodGroup (written here as the scheduler writes it) is shown
    with its age and details; a record the PodGroup's phase contradicts is called stale; a
    malformed one falls back to the PodGroup's condition; ``job view`` has the same lines."""
    queue = queue_name
    ok(await acaldera(cluster, "queue", "create", "-n", queue))
    created: Job = await kube.create(
        JOB, job("rec", [task("worker", 3)], queue=queue), namespace=namespace
    )
    pg_name = f"rec-{created.metadata.uid}"
    await kube.create(PODGROUP, _podgroup(created, pg_name, queue), namespace=namespace)
    ten_minutes_ago = format_time(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10, seconds=5))
    summary = (
        f"queue {queue} has 6 of 8 cpu allocated and 4 cpu reserved by inqueue jobs; this job "
        "needs 6 cpu at least; it enqueues when 4 cpu free up"
    )
    await _annotate(kube, namespace, pg_name, bounded("enqueue", summary, [], ten_minutes_ago))
    assert await why(cluster, namespace, "rec") == [f"scheduler (as of 10m ago): {summary}"]

    detail = (
        "task worker (3 pods): 0/40 nodes are available: 31 Insufficient nvidia.com/gpu, "
        "6 node(s) had untolerated taint {gpu: a100}, 3 node(s) didn't match Pod's node "
        "affinity/selector."
    )
    allocate = bounded(
        "allocate",
        "3 of 3 pods of the gang cannot be placed",
        [detail, "preemption: no pod of a lower priority frees enough nvidia.com/gpu"],
        ten_minutes_ago,
    )
    await _annotate(kube, namespace, pg_name, allocate, phase="Inqueue")
    expected = [
        "scheduler (as of 10m ago): 3 of 3 pods of the gang cannot be placed",
        f"  {detail}",
        "  preemption: no pod of a lower priority frees enough nvidia.com/gpu",
    ]
    assert await why(cluster, namespace, "rec") == expected
    view = ok(await acaldera(cluster, "job", "view", "-N", "rec", "-n", namespace)).splitlines()
    start = view.index("Why:")
    assert view[start + 1 : start + 4] == [f"  {line}" for line in expected]

    await _annotate(kube, namespace, pg_name, bounded("enqueue", summary, [], ten_minutes_ago))
    await kube.patch(
        PODGROUP,
        pg_name,
        {
            "status": {
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": "3/3 tasks in gang unschedulable: pod group is not ready",
                    }
                ]
            }
        },
        namespace=namespace,
    )
    unschedulable = (
        f"PodGroup {pg_name} is Inqueue, unschedulable: NotEnoughResources: 3/3 tasks in gang "
        "unschedulable: pod group is not ready"
    )
    assert await why(cluster, namespace, "rec") == [
        f"the scheduler's last finding (enqueue: {summary}) is from an earlier session: the "
        "PodGroup is now Inqueue",
        unschedulable,
    ]

    await kube.patch(
        PODGROUP,
        pg_name,
        {"metadata": {"annotations": {WHY_ANNOTATION: "{not json"}}},
        namespace=namespace,
    )
    assert await why(cluster, namespace, "rec") == [unschedulable]


def _podgroup(owner: Job, name: str, queue: str) -> dict[str, Any]:
    """The PodGroup the job controller would make (controlled by the Job), made here so that no
    controller touches it during the test."""
    return {
        "apiVersion": PODGROUP.api_version,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "ownerReferences": [
                {
                    "apiVersion": JOB.api_version,
                    "kind": "Job",
                    "name": owner.metadata.name,
                    "uid": owner.metadata.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"minMember": 3, "queue": queue},
        "status": {"phase": "Pending"},
    }


async def _annotate(
    kube: KubeClient, namespace: str, name: str, record: Any, phase: str | None = None
) -> None:
    """Write the record as the scheduler does (PodGroup has no status subresource)."""
    patch: dict[str, Any] = {"metadata": {"annotations": {WHY_ANNOTATION: encode_record(record)}}}
    if phase is not None:
        patch["status"] = {"phase": phase}
    await kube.patch(PODGROUP, name, patch, namespace=namespace)


async def test_why_for_a_user_who_may_not_read_queues(
    cluster: Cluster, namespace: str, kube: KubeClient, api: client.ApiClient, tmp_path: Path
) -> None:
    """A namespace's user who may read jobs, pods and PodGroups but not queues (cluster-scoped)
    or Commands still gets an answer, and no claim that the queue does not exist."""
    rbac = client.RbacAuthorizationV1Api(api)
    core = client.CoreV1Api(api)
    rules = [
        client.V1PolicyRule(api_groups=["batch.volcano.sh"], resources=["jobs"], verbs=["get"]),
        client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"]),
        client.V1PolicyRule(
            api_groups=["scheduling.volcano.sh"], resources=["podgroups"], verbs=["list"]
        ),
    ]
    meta = client.V1ObjectMeta(name="reader")
    await rbac.create_namespaced_role(namespace, client.V1Role(metadata=meta, rules=rules))
    await core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=meta))
    await rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=meta,
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="reader"
            ),
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name="reader", namespace=namespace)
            ],
        ),
    )
    token = await core.create_namespaced_service_account_token(
        "reader",
        namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    )
    entry = {"cluster": _admin_entry(cluster)["cluster"], "user": {"token": token.status.token}}
    config = _kubeconfig(tmp_path / "kc", {"reader": entry}, "reader")

    created: Job = await kube.create(
        JOB, job("mine", [task("worker", 1)], queue="nowhere"), namespace=namespace
    )
    pg_name = f"mine-{created.metadata.uid}"
    await kube.create(PODGROUP, _podgroup(created, pg_name, "nowhere"), namespace=namespace)
    await _annotate(
        kube,
        namespace,
        pg_name,
        bounded("enqueue", "held", [], format_time(dt.datetime.now(dt.UTC))),
    )
    as_reader = caldera(None, "job", "why", "mine", "-n", namespace, kubeconfig=config)
    assert re.fullmatch(r"scheduler \(as of \d+s ago\): held\n", ok(as_reader)), as_reader.stdout
    as_admin = ok(await acaldera(cluster, "job", "why", "mine", "-n", namespace))
    assert as_admin.startswith("queue nowhere does not exist"), as_admin


def test_why_of_a_job_that_does_not_exist(cluster: Cluster, namespace: str) -> None:
    """An unknown job is one line naming it, exit code 1."""
    one_error(
        caldera(cluster, "job", "why", "ghost", "-n", namespace), f"job {namespace}/ghost not found"
    )
