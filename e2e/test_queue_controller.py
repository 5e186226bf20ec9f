"""The queue controller against the real API server: built-in queues, the root parent, Open/Close
commands with PodGroups, hierarchical closing and reopening, and the PodGroup phase gauges.

The controller runs in-process on its own informers, wired as ``caldera controllers`` wires it.
Queues are cluster-scoped: each test names its queues uniquely and deletes them afterwards.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import COMMAND, EVENT, PODGROUP, QUEUE
from caldera.api.volcano import Queue
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from caldera.settings import ControllersSettings
from controllers.queue.controller import QueueController
from controllers.runtime import ControllerContext
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.controller_harness import run_controllers
from e2e.waiting import eventually, gone

pytestmark = pytest.mark.e2e

CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"


@pytest.fixture
async def queues(kube: KubeClient, crds: Path) -> AsyncIterator[list[str]]:
    """Names of the queues a test creates; deleted after it."""
    names: list[str] = []
    yield names
    for name in reversed(names):
        with contextlib.suppress(NotFound):
            await kube.delete(QUEUE, name)


@pytest.fixture
async def controller(
    kube: KubeClient, crds: Path, namespace: str
) -> AsyncIterator[ControllerContext]:
    """The queue controller, trusting the test's namespace with queue Commands (no webhook
    stamps them here)."""
    settings = ControllersSettings(leader_elect=False, queue_command_namespaces=(namespace,))
    async with run_controllers(kube, QueueController, settings=settings) as ctx:
        yield ctx


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


async def _create_queue(kube: KubeClient, queues: list[str], name: str, parent: str = "") -> Queue:
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if parent:
        spec["parent"] = parent
    body = {
        "apiVersion": QUEUE.api_version,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }
    queues.append(name)
    return await kube.create(QUEUE, body)


async def _command(kube: KubeClient, namespace: str, queue: str, action: str) -> str:
    target = await kube.get(QUEUE, queue)
    ref = {
        "apiVersion": QUEUE.api_version,
        "kind": "Queue",
        "name": queue,
        "uid": target.metadata.uid,
    }
    body = {
        "apiVersion": COMMAND.api_version,
        "kind": "Command",
        "metadata": {"generateName": f"{queue}-{action.lower()}-", "namespace": namespace},
        "action": action,
        "target": ref,
    }
    created = await kube.create(COMMAND, body, namespace=namespace)
    return created.metadata.name


async def _podgroup(
    kube: KubeClient, namespace: str, name: str, queue: str, phase: str = "Pending"
) -> None:
    body = {
        "apiVersion": PODGROUP.api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": 1, "queue": queue},
        "status": {"phase": phase},
    }
    await kube.create(PODGROUP, body, namespace=namespace)


async def _state_is(kube: KubeClient, name: str, state: str) -> Queue | None:
    try:
        queue = await kube.get(QUEUE, name)
    except NotFound:
        return None
    return queue if queue.status.state == state else None


async def _wait_state(kube: KubeClient, name: str, state: str) -> Queue:
    return await eventually(lambda: _state_is(kube, name, state), what=f"queue {name} {state}")


async def _event(kube: KubeClient, queue: str, type_: str, reason: str) -> str | None:
    events = await kube.list(
        EVENT, namespace="default", field_selector=f"involvedObject.name={queue}"
    )
    for event in events.items:
        if event.type == type_ and event.reason == reason:
            return event.message
    return None


async def test_builtin_queues_exist_and_new_queues_get_root_as_parent(
    kube: KubeClient, controller: ControllerContext, queues: list[str]
) -> None:
    """root (not reclaimable) and default (reclaimable, under root) exist and are Open; a queue
    created without a parent gets spec.parent=root and state Open; a deleted default queue is
    created again."""
    root = await _wait_state(kube, "root", "Open")
    default = await _wait_state(kube, "default", "Open")
    assert root.spec.reclaimable is False
    assert root.spec.weight == 1
    assert root.spec.parent == ""
    assert default.spec.reclaimable is True
    assert default.spec.parent == "root"

    name = _name("q")
    await _create_queue(kube, queues, name)
    queue = await _wait_state(kube, name, "Open")
    assert queue.spec.parent == "root"

    await kube.delete(QUEUE, "default")

    async def recreated() -> bool:
        try:
            again = await kube.get(QUEUE, "default")
        except NotFound:
            return False
        return again.metadata.uid != default.metadata.uid

    await eventually(recreated, what="default queue created again")


async def test_close_waits_for_podgroups_then_open(
    kube: KubeClient, controller: ControllerContext, queues: list[str], namespace: str
) -> None:
    """CloseQueue on a queue with a PodGroup: the Command is deleted and the queue is Closing;
    once the PodGroup is deleted it is Closed; OpenQueue opens it. Each command leaves an
    Event."""
    name = _name("q")
    await _create_queue(kube, queues, name)
    await _wait_state(kube, name, "Open")
    await _podgroup(kube, namespace, "pg", name)

    command = await _command(kube, namespace, name, "CloseQueue")
    await eventually(lambda: gone(kube, COMMAND, command, namespace), what="the command deleted")
    await _wait_state(kube, name, "Closing")
    message = await eventually(
        lambda: _event(kube, name, "Normal", "CloseQueue"), what="CloseQueue event"
    )
    assert message == "Close queue succeed"

    await kube.delete(PODGROUP, "pg", namespace=namespace)
    await _wait_state(kube, name, "Closed")

    await _command(kube, namespace, name, "OpenQueue")
    await _wait_state(kube, name, "Open")


async def test_unknown_action_is_removed_with_a_warning(
    kube: KubeClient, controller: ControllerContext, queues: list[str], namespace: str
) -> None:
    """A Command with an unknown action is deleted, changes nothing, and says why."""
    name = _name("q")
    await _create_queue(kube, queues, name)
    await _wait_state(kube, name, "Open")
    command = await _command(kube, namespace, name, "RestartQueue")
    await eventually(lambda: gone(kube, COMMAND, command, namespace), what="the command deleted")
    message = await eventually(
        lambda: _event(kube, name, "Warning", "RestartQueue"), what="a Warning event"
    )
    assert "unknown action" in message
    assert (await kube.get(QUEUE, name)).status.state == "Open"


async def test_closing_a_parent_closes_children_and_reopening_reopens_them(
    kube: KubeClient, controller: ControllerContext, queues: list[str], namespace: str
) -> None:
    """Closing a parent closes its open children and grandchildren, marked closed-by-parent; a
    child cannot be opened under the closed parent; reopening the parent reopens exactly the
    marked children, not one the user had closed."""
    parent, child, grandchild, closed_child = (
        _name("parent"),
        _name("child"),
        _name("grandchild"),
        _name("closed"),
    )
    await _create_queue(kube, queues, parent)
    await _create_queue(kube, queues, child, parent=parent)
    await _create_queue(kube, queues, grandchild, parent=child)
    await _create_queue(kube, queues, closed_child, parent=parent)
    for name in (parent, child, grandchild, closed_child):
        await _wait_state(kube, name, "Open")
    await _command(kube, namespace, closed_child, "CloseQueue")
    await _wait_state(kube, closed_child, "Closed")

    await _command(kube, namespace, parent, "CloseQueue")
    await _wait_state(kube, parent, "Closed")
    for name in (child, grandchild):
        closed = await _wait_state(kube, name, "Closed")
        assert closed.metadata.annotations.get(CLOSED_BY_PARENT) == "true"
    assert CLOSED_BY_PARENT not in (await kube.get(QUEUE, closed_child)).metadata.annotations

    await _command(kube, namespace, child, "OpenQueue")
    message = await eventually(
        lambda: _event(kube, child, "Warning", "OpenQueue"), what="the refusal event"
    )
    assert parent in message or "parent" in message
    assert (await kube.get(QUEUE, child)).status.state == "Closed"

    await _command(kube, namespace, parent, "OpenQueue")

    async def reopened(name: str) -> bool:
        # The state is written before the mark is removed: wait for both.
        queue = await kube.get(QUEUE, name)
        return queue.status.state == "Open" and CLOSED_BY_PARENT not in queue.metadata.annotations

    for name in (parent, child, grandchild):
        await eventually(lambda: reopened(name), what=f"{name} reopened and unmarked")  # noqa: B023 - awaited at once
    assert (await kube.get(QUEUE, closed_child)).status.state == "Closed"


async def test_podgroup_phases_are_gauges_not_status(
    kube: KubeClient, controller: ControllerContext, queues: list[str], namespace: str
) -> None:
    """caldera_queue_pod_group_<phase>_count{queue_name} follows the PodGroups of the queue;
    the counts are not written to the queue's status."""
    name = _name("q")
    await _create_queue(kube, queues, name)
    await _wait_state(kube, name, "Open")
    for i, phase in enumerate(["Running", "Running", "Inqueue", "Pending", "Completed"]):
        await _podgroup(kube, namespace, f"pg-{i}", name, phase)
    registry = controller.registry

    def gauge(phase: str) -> float | None:
        return registry.get_sample_value(
            f"caldera_queue_pod_group_{phase}_count", {"queue_name": name}
        )

    async def counts_are(expected: dict[str, float]) -> bool:
        return all(gauge(phase) == value for phase, value in expected.items())

    expected: dict[str, float] = {
        "running": 2,
        "inqueue": 1,
        "pending": 1,
        "completed": 1,
        "unknown": 0,
    }
    await eventually(lambda: counts_are(expected), what=f"gauges {expected}")

    await kube.patch(PODGROUP, "pg-3", {"status": {"phase": "Running"}}, namespace=namespace)
    await kube.delete(PODGROUP, "pg-4", namespace=namespace)
    expected = {"running": 3, "inqueue": 1, "pending": 0, "completed": 0, "unknown": 0}
    await eventually(lambda: counts_are(expected), what=f"gauges {expected}")

    status = (await kube.get(QUEUE, name)).status
    assert (status.running, status.pending, status.inqueue) == (0, 0, 0)


async def test_controller_process_runs_queue_and_podgroup(
    kube: KubeClient,
    cluster: Cluster,
    crds: Path,
    queues: list[str],
    namespace: str,
    tmp_path: Path,
) -> None:
    """``caldera controllers --controllers=queue,podgroup`` runs both from the registry: a new
    queue gets its parent and state, and /metrics shows its PodGroup gauges."""
    proc = CalderaProcess(
        "controllers",
        ["--controllers=queue,podgroup", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    try:
        name = _name("q")
        await _create_queue(kube, queues, name)
        queue = await _wait_state(kube, name, "Open")
        assert queue.spec.parent == "root"
        await _podgroup(kube, namespace, "pg", name, "Running")

        async def running() -> bool:
            labels = {"queue_name": name}
            return proc.metric("caldera_queue_pod_group_running_count", labels) == 1.0

        await eventually(running, what="the running gauge on /metrics")
    finally:
        assert proc.stop() == 0, proc.log()[-2000:]
