"""The cluster scripts themselves: ``up`` is idempotent, ``down`` leaves no process behind, ``up``
after ``down`` brings the same cluster back, kube-scheduler runs when asked for, and Caldera's
processes as ``make demo`` starts them serve the visibility API."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.caldera_processes import start_caldera, stop_caldera
from e2e.cluster.control_plane import ORDER, ControlPlane, NodeSpec

pytestmark = pytest.mark.e2e


def _pods(plane: ControlPlane) -> dict[str, dict[str, str]]:
    items = json.loads(plane.kubectl("get", "pods", "-n", "default", "-o", "json"))["items"]
    return {
        p["metadata"]["name"]: {
            "node": p["spec"].get("nodeName", ""),
            "phase": p.get("status", {}).get("phase", ""),
        }
        for p in items
    }


def _wait_pod(plane: ControlPlane, name: str, phase: str, timeout: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pod = _pods(plane).get(name)
        if pod and pod["phase"] == phase:
            return pod
        time.sleep(0.3)
    raise AssertionError(f"pod {name} not {phase} after {timeout}s: {_pods(plane)}")


def test_up_down_up_with_scheduler(tmp_path: Path) -> None:
    """A second cluster: scheduler binds a pod, up twice keeps pids, down stops all, up restores."""
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip("exercises the local control plane scripts")
    plane = ControlPlane(tmp_path / "second")
    try:
        plane.up(scheduler=True)
        pids = plane.running()
        assert all(pids.values()), f"every component runs: {pids}"
        plane.create_nodes(1, NodeSpec(cpu="4", memory="8Gi"), prefix="life-")

        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sched", "annotations": {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        plane.kubectl("apply", "-f", "-", input=json.dumps(pod))
        assert _wait_pod(plane, "sched", "Running")["node"] == "life-0", "kube-scheduler bound it"

        plane.up(scheduler=True)
        assert plane.running() == pids, "a second up starts no second copy"

        stopped = plane.down()
        assert set(stopped) == set(ORDER)
        assert not any(plane.running().values())
        for pid in pids.values():
            assert pid is not None
            if Path(f"/proc/{pid}").exists():
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()[:100]
                raise AssertionError(f"pid {pid} left behind: {stat[:80]} {cmd!r}")

        plane.up()
        assert _pods(plane)["sched"]["node"] == "life-0", "data survives down and up"
        assert plane.running()["kube-scheduler"] is None, "scheduler only on request"
    finally:
        plane.down(purge=True)
    assert not (tmp_path / "second").exists()


def test_caldera_on_the_local_plane_serves_the_visibility_api(tmp_path: Path) -> None:
    """What ``make demo`` starts: the scheduler answers the visibility API through the API
    server (an APIService), with a waiting job in its queue's order; stopping Caldera removes
    the registration first, so namespaces can still be deleted afterwards."""
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip("exercises the local control plane scripts")
    plane = ControlPlane(tmp_path / "demo")
    try:
        plane.up()
        start_caldera(plane)
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "waits", "namespace": "default"},
            "spec": {
                "minAvailable": 1,
                "schedulerName": "volcano",
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "c",
                                        "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
        plane.kubectl("apply", "-f", "-", input=json.dumps(job))  # no node: it waits
        path = "/apis/visibility.caldera.dev/v1alpha1/queues/default/pendingjobs"
        deadline = time.monotonic() + 60
        jobs: list[str] = []
        listed: dict[str, Any] = {}
        while time.monotonic() < deadline and jobs != ["waits"]:
            listed = json.loads(plane.kubectl("get", "--raw", path))
            jobs = [item["job"] for item in listed.get("items", [])]
            time.sleep(0.5)
        assert jobs == ["waits"], listed

        stopped = stop_caldera(plane)
        assert "caldera-scheduler" in stopped
        left = plane.kubectl("get", "apiservice", "-o", "name")
        assert "visibility.caldera.dev" not in left, left
    finally:
        plane.down(purge=True)


def test_kwok_gets_another_port_when_its_own_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process binds kwok's port between ``free_port`` and kwok's start (parallel test
    workers did in CI): kwok exits at once, so ``up`` picks it a new port and its nodes turn
    Ready."""
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip("exercises the local control plane scripts")
    import socket

    from e2e.cluster import control_plane

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    picks = iter([None, None, None, None, taken])  # etcd, etcd_peer, apiserver, kcm, kwok
    real = control_plane.free_port
    monkeypatch.setattr(control_plane, "free_port", lambda: next(picks, None) or real())
    plane = ControlPlane(tmp_path / "squatted")
    try:
        plane.up()
        assert plane.ports["kwok"] != taken
        assert "address already in use" in plane.procs.tail("kwok")
        plane.create_nodes(1, NodeSpec(cpu="4", memory="8Gi"), prefix="squat-")  # waits Ready
    finally:
        plane.down(purge=True)
        squatter.close()
