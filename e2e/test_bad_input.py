"""Bad input that reaches the controllers (no webhook registered): each bad object gets a Warning
Event and a condition or status message naming the field, once; a good Job beside them completes;
no process exits or logs a Traceback; and the processes' request rate stays at its idle level.

Measured on 2026-11-25 (2 shared cores, the local control plane): over 10 s after settling,
`caldera controllers` made 0.0 requests/s and `caldera scheduler` 0.0 requests/s with all the bad
objects present (no leases: --leader-elect=false; events and status are written once). The bound
is 1 request/s per process: one write a second would already be a loop, and 10 s of quiet at 0.0
leaves room for a watch re-established on its timeout or an event flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import COMMAND, EVENT, JOB, PODGROUP, QUEUE
from caldera.api.volcano import PodGroup, Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import Invalid, NotFound
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.job_fixtures import get_job, in_phase, job, task
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

WINDOW = 10.0  # seconds of the request-rate measurement
MAX_RATE = 1.0  # requests/s per process (see the module docstring)
REQUESTS = "caldera_rest_client_requests_total"


async def _ready(proc: CalderaProcess) -> bool:
    return proc.get("/readyz")[0] == 200


@pytest.fixture
async def processes(
    cluster: Cluster, crds: Path, tmp_path: Path, namespace: str
) -> AsyncIterator[list[CalderaProcess]]:
    """`caldera controllers` (every controller; the test's namespace trusted with queue
    Commands, which no webhook stamps here) and `caldera scheduler`, ready; both must exit
    cleanly at the end."""
    procs = [
        CalderaProcess(
            "controllers",
            ["--leader-elect=false", f"--queue-command-namespaces={namespace}"],
            kubeconfig=cluster.kubeconfig,
            log_dir=tmp_path,
        ),
        CalderaProcess(
            "scheduler",
            ["--leader-elect=false"],
            kubeconfig=cluster.kubeconfig,
            log_dir=tmp_path,
        ),
    ]
    for proc in procs:
        await eventually(lambda p=proc: _ready(p), timeout=60, what="readiness")  # type: ignore[misc]
    yield procs
    for proc in procs:
        assert proc.stop() == 0, proc.log()[-3000:]


def _requests(proc: CalderaProcess) -> float:
    """Every API request the process made so far (its client's own counter)."""
    status, text = proc.get("/metrics")
    assert status == 200
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith(REQUESTS + "{")
    )


async def _warning(kube: KubeClient, namespace: str, kind: str, name: str, reason: str) -> Any:
    """The Warning Event of `reason` on the object, if there is exactly one and it happened once."""
    listed = await kube.list(
        EVENT, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    found = [
        e
        for e in listed.items
        if e.reason == reason and e.type == "Warning" and e.involved_object.kind == kind
    ]
    return found[0] if len(found) == 1 else None


def _queue(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _command(name: str, action: str, kind: str, target: str) -> dict[str, Any]:
    api = "batch.volcano.sh/v1alpha1" if kind == "Job" else "scheduling.volcano.sh/v1beta1"
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name},
        "action": action,
        "target": {"apiVersion": api, "kind": kind, "name": target, "uid": "0"},
    }


async def _create_bad_objects(kube: KubeClient, namespace: str, queue: str, missing: str) -> None:
    template = task("w", 1)
    template["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "-1"
    await kube.create(JOB, job("badtemplate", [template]), namespace=namespace)
    policy = {"event": "PodFailed", "action": "Explode"}
    await kube.create(JOB, job("badpolicy", [task("w", 1)], policies=[policy]), namespace=namespace)
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "orphan"},
        "spec": {"minMember": 1, "queue": missing},
    }
    await kube.create(PODGROUP, group, namespace=namespace)
    spec = {"weight": 1, "capability": {"cpu": "1"}, "guarantee": {"resource": {"cpu": "2"}}}
    await kube.create(QUEUE, _queue(queue, spec))
    commands = [
        _command("ghost", "AbortJob", "Job", "nosuch"),
        _command("explode", "Explode", "Job", "badpolicy"),
        _command("ghostq", "OpenQueue", "Queue", missing),
    ]
    for command in commands:
        await kube.create(COMMAND, command, namespace=namespace)


async def test_bad_input_is_reported_once_and_nothing_else_stops(
    kube: KubeClient, namespace: str, processes: list[CalderaProcess]
) -> None:
    """Every bad object is named by field in a Warning Event and a condition or status message;
    the good Job completes; the processes live, log no Traceback and stay near idle."""
    suffix = secrets.token_hex(3)
    queue, missing = f"badspec-{suffix}", f"nosuch-{suffix}"
    good = task("w", 2, run_for="2s", exit_code=0)
    await kube.create(JOB, job("good", [good]), namespace=namespace)
    try:
        await _create_bad_objects(kube, namespace, queue, missing)
        await _check_reports(kube, namespace, queue, missing)
        await eventually(
            lambda: in_phase(kube, namespace, "good", "Completed"), timeout=90, what="good Job"
        )
        await asyncio.sleep(3)  # settle: the last status writes and events
        before = [_requests(p) for p in processes]
        await asyncio.sleep(WINDOW)
        rates = [(_requests(p) - b) / WINDOW for p, b in zip(processes, before, strict=True)]
        print(
            f"requests/s over {WINDOW:.0f}s: controllers {rates[0]:.2f}, scheduler {rates[1]:.2f}"
        )
        assert all(rate <= MAX_RATE for rate in rates), rates
        # Once: no Event was repeated by a resync or a retry.
        await _check_reports(kube, namespace, queue, missing)
        for proc in processes:
            assert proc.proc.poll() is None, proc.log()[-3000:]
            assert "Traceback" not in proc.log(), proc.log()[-3000:]
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(QUEUE, queue)


async def _check_reports(kube: KubeClient, namespace: str, queue: str, missing: str) -> None:
    """Each bad object has exactly one Warning Event (count 1) and its condition/message."""

    async def once(kind: str, name: str, reason: str, ns: str = namespace) -> str:
        event = await eventually(
            lambda: _warning(kube, ns, kind, name, reason), timeout=60, what=f"{reason} on {name}"
        )
        assert event.count in (0, 1), event
        return str(event.message)

    # 1. template: terminated once, the field in the Event and status.state.
    field = "spec.task[0].template.spec.containers[0].resources.requests[cpu]"
    assert field in await once("Job", "badtemplate", "FailedCreate")
    done = await eventually(
        lambda: in_phase(kube, namespace, "badtemplate", "Terminated"), timeout=60, what="term"
    )
    assert field in done.status.state.message
    # 2. unknown policy action: the Job runs on, told once.
    action = 'spec.policies[0].action: Unsupported value: "Explode"'
    assert action in await once("Job", "badpolicy", "InvalidPolicy")
    assert action in (await get_job(kube, namespace, "badpolicy")).status.state.message
    # 5. Commands: the unknown action on the Job, the missing Job and the missing Queue.
    assert 'action: Unsupported value: "Explode"' in await once("Job", "badpolicy", "CommandIssued")
    assert 'target.name: Not found: "nosuch"' in await once("Command", "ghost", "UnknownTarget")
    assert f'target.name: Not found: "{missing}"' in await once(
        "Command", "ghostq", "UnknownTarget"
    )
    for name in ("ghost", "explode", "ghostq"):
        with pytest.raises(NotFound):
            await kube.get(COMMAND, name, namespace=namespace)
    # 3. PodGroup of a missing queue.
    want = f'spec.queue: Not found: "{missing}"'
    assert want in await once("PodGroup", "orphan", "Unschedulable")
    group: PodGroup = await kube.get(PODGROUP, "orphan", namespace=namespace)
    assert [(c.reason, c.message) for c in group.status.conditions] == [("QueueNotFound", want)]
    # 4. Queue with a guarantee above its capability (Events of cluster objects go to default).
    cap = "spec.guarantee.resource.cpu: Invalid value: 2: must be less than or equal to"
    assert cap in await once("Queue", queue, "InvalidSpec", "default")
    stored: Queue = await kube.get(QUEUE, queue)
    assert [c.type for c in stored.status.conditions] == ["InvalidSpec"]
    assert cap in stored.status.conditions[0].message


@pytest.mark.usefixtures("crds")
async def test_the_crd_refuses_what_it_can(kube: KubeClient, namespace: str) -> None:
    """An unknown policy event and a negative queue weight never reach the controllers: the CRD's
    enum and minimum refuse them (only objects stored before such a CRD can carry them)."""
    policy = {"event": "Boom", "action": "AbortJob"}
    with pytest.raises(Invalid, match="Boom"):
        await kube.create(JOB, job("badevent", [task("w")], policies=[policy]), namespace=namespace)
    with pytest.raises(Invalid, match="weight"):
        await kube.create(QUEUE, _queue(f"neg-{secrets.token_hex(3)}", {"weight": -1}))
