"""The scheduler process on the real API server with kwok nodes: gangs bind whole or not at all,
PodGroup status and events say why, the default queues exist, and a bad configuration is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import EVENT, POD, PODGROUP, QUEUE
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.kwok_tasks import gang_pod
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
async def scheduler(cluster: Cluster, crds: Path, tmp_path: Path) -> AsyncIterator[CalderaProcess]:
    proc = CalderaProcess(
        "scheduler",
        ["--leader-elect=false", "--schedule-period=0.5"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    await eventually(
        lambda: _value(proc.get("/readyz")[0] == 200), timeout=READY_TIMEOUT, what="readiness"
    )
    yield proc
    assert proc.stop() == 0, proc.log()[-3000:]


def _podgroup(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, "queue": "default"},
    }


def _pod(name: str, group: str, cpu: str, node_label: str) -> dict[str, Any]:
    return gang_pod(name, group, cpu, {"e2e-gang": node_label})


async def _bound(kube: KubeClient, namespace: str) -> list[str]:
    pods = (await kube.list(POD, namespace=namespace)).items
    return sorted(p.metadata.name for p in pods if p.spec.node_name)


async def test_gang_binds_whole_or_nothing(
    kube: KubeClient, namespace: str, cluster: Cluster, scheduler: CalderaProcess
) -> None:
    """Six 1-cpu pods of a gang of 6 on a node with room for 5 bind nothing and the PodGroup
    says why; the sessions that would repeat that are skipped; once room for 6 exists, all
    six bind in one go; the pods carry FailedScheduling, then Scheduled events."""
    if cluster.plane is None:
        pytest.skip("creates and relabels fake nodes")
    label = namespace
    node = f"gang-{namespace}"
    # A node of 5 cpu that only this test's pods select.
    cluster.plane.create_nodes(1, _node_spec(cpu="5", label=label), prefix=f"{node}-")
    node_name = f"{node}-0"
    await kube.create(PODGROUP, _podgroup("gang", 6), namespace=namespace)
    for i in range(6):
        await kube.create(POD, _pod(f"gang-{i}", "gang", "1", label), namespace=namespace)

    async def unschedulable() -> bool:
        pg = await kube.get(PODGROUP, "gang", namespace=namespace)
        return any(c.type == "Unschedulable" for c in pg.status.conditions)

    await eventually(unschedulable, timeout=30, what="an Unschedulable condition")
    await asyncio.sleep(2)  # several sessions
    assert await _bound(kube, namespace) == [], "no pod of an incomplete gang is bound"
    # Once its writes are in, a session that would change nothing is skipped (until the
    # cluster changes: the node growing below wakes it). Other test files' objects on the
    # worker's control plane also wake it, so the skips are waited for, not read once.

    async def skipping() -> float | None:
        skipped = scheduler.metric("caldera_sessions_skipped_total")
        return skipped if skipped is not None and skipped > 0 else None

    skipped = await eventually(skipping, timeout=30, what="a skipped session")
    assert skipped > 0, scheduler.log()[-2000:]
    events = (await kube.list(EVENT, namespace=namespace)).items
    messages = [e.message for e in events if e.reason == "Unschedulable"]
    assert any(
        "6/6 tasks in gang unschedulable" in m or "tasks in gang unschedulable" in m
        for m in messages
    ), messages

    # Room for the sixth pod: the node grows to 6 cpu.
    status = json.dumps(
        {
            "status": {
                "allocatable": {"cpu": "6", "memory": "64Gi", "pods": "110"},
                "capacity": {"cpu": "6", "memory": "64Gi", "pods": "110"},
            }
        }
    )
    cluster.plane.kubectl(
        "patch", "node", node_name, "--subresource=status", "--type=merge", "-p", status
    )

    async def all_bound() -> list[str] | None:
        bound = await _bound(kube, namespace)
        return bound if len(bound) == 6 else None

    bound = await eventually(all_bound, timeout=30, what="all six pods bound")
    assert bound == [f"gang-{i}" for i in range(6)]
    pods = (await kube.list(POD, namespace=namespace)).items
    assert {p.spec.node_name for p in pods} == {node_name}

    async def running() -> bool:
        pg = await kube.get(PODGROUP, "gang", namespace=namespace)
        return pg.status.phase == "Running"

    await eventually(running, timeout=30, what="the PodGroup to run")

    # drf's share of the running gang reaches the metrics: every job's figures are reported by
    # one session every JOB_FIGURES_PERIOD (5 s), and sessions are not skipped as quiet until
    # one has, so the series catches up even if the cluster falls quiet right after the bind.
    share_labels = {"job_ns": namespace, "job_id": "gang"}

    async def share_exported() -> float | None:
        share = scheduler.metric("caldera_job_share", share_labels)
        return share if share is not None and share > 0 else None

    share = await eventually(share_exported, timeout=30, what="the gang's job share exported")
    assert 0 < share <= 1

    # The pod events Volcano's scheduler records: FailedScheduling with the condition's message
    # while the gang waited, Scheduled once bound.
    async def pod_events() -> dict[str, list[str]] | None:
        by_reason: dict[str, list[str]] = {}
        for event in (await kube.list(EVENT, namespace=namespace)).items:
            if event.involved_object.kind == "Pod" and event.involved_object.name == "gang-0":
                by_reason.setdefault(event.reason, []).append(event.message)
        return by_reason if "Scheduled" in by_reason else None

    events_of_pod = await eventually(pod_events, timeout=30, what="gang-0's events")
    assert events_of_pod["Scheduled"] == [
        f"Successfully assigned {namespace}/gang-0 to {node_name}"
    ]
    assert events_of_pod.get("FailedScheduling"), events_of_pod


async def test_default_queues_exist(kube: KubeClient, scheduler: CalderaProcess) -> None:
    """The scheduler creates the root and default queues when they are missing."""

    async def present() -> bool:
        names = {q.metadata.name for q in (await kube.list(QUEUE)).items}
        return {"root", "default"} <= names

    await eventually(present, timeout=30, what="root and default queues")
    root = await kube.get(QUEUE, "root")
    assert root.spec.reclaimable is False


def test_bad_configuration_is_refused_at_start(cluster: Cluster, tmp_path: Path) -> None:
    """An unknown plugin in the configuration file stops the scheduler with the line and key."""
    conf = tmp_path / "scheduler.conf"
    conf.write_text(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n'
    )
    proc = CalderaProcess(
        "scheduler",
        [f"--scheduler-conf={conf}", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    code = proc.proc.wait(timeout=30)
    proc.stop()
    assert code == 1
    assert "line 5: unknown plugin gnag" in proc.log()


async def _value(value: bool) -> bool:
    return value


def _node_spec(cpu: str, label: str) -> Any:
    from e2e.cluster.control_plane import NodeSpec

    return NodeSpec(cpu=cpu, memory="64Gi", labels={"e2e-gang": label})
