"""The cluster scripts themselves: ``up`` is idempotent, ``down`` leaves no process behind, ``up``
after ``down`` brings the same cluster back, and kube-scheduler runs when asked for."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

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
