"""Caldera's own processes on the local control plane, started like the control plane's (pid
files, logs, detached) so that ``down`` stops them too, and the demo: Caldera runs an example
job to completion on fake nodes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from e2e.cluster.control_plane import REPO, ClusterError, ControlPlane, free_port

CALDERA_PROCESSES = ("caldera-controllers", "caldera-scheduler")
CRD_DIR = REPO / "charts" / "caldera" / "crds"
DEMO_JOB = REPO / "examples" / "tensorflow-job.yaml"


def caldera_exe() -> str:
    exe = Path(sys.prefix) / "bin" / "caldera"
    if not exe.exists():
        raise ClusterError("the caldera command is not installed: run make install")
    return str(exe)


def start_caldera(plane: ControlPlane) -> dict[str, int]:
    """Apply the CRDs and start the controllers and the scheduler (those not running yet);
    returns each process's metrics port."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR))
    ports: dict[str, int] = {}
    for name in CALDERA_PROCESSES:
        if plane.procs.pid(name) is not None:
            continue
        port = free_port()
        command = name.removeprefix("caldera-")
        plane.procs.start(
            name,
            [
                caldera_exe(),
                command,
                f"--kubeconfig={plane.kubeconfig}",
                "--leader-elect=false",
                "--listen-address=127.0.0.1",
                f"--metrics-port={port}",
                "--log-format=json",
            ],
        )
        ports[name] = port
    time.sleep(1.0)
    for name in CALDERA_PROCESSES:
        if plane.procs.pid(name) is None:
            raise ClusterError(f"{name} exited at start:\n{plane.procs.tail(name)}")
    return ports


def stop_caldera(plane: ControlPlane) -> list[str]:
    return [name for name in reversed(CALDERA_PROCESSES) if plane.procs.stop(name)]


def run_demo_job(plane: ControlPlane, manifest: Path = DEMO_JOB, timeout: float = 180) -> str:
    """Apply the example job (again, if it ran before) and follow it to a final phase."""
    plane.kubectl("delete", "-f", str(manifest), "--ignore-not-found", "--wait=true")
    plane.kubectl("apply", "-f", str(manifest))
    name = "tf-mnist"
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        job = json.loads(plane.kubectl("get", "jobs.batch.volcano.sh", name, "-o", "json"))
        phase: str = job.get("status", {}).get("state", {}).get("phase", "")
        if phase != last:
            running = job.get("status", {}).get("running", 0)
            print(f"  job {name}: {phase or 'created'} (running pods: {running})", file=sys.stderr)
            last = phase
        if phase in ("Completed", "Failed", "Aborted", "Terminated"):
            return phase
        time.sleep(1)
    raise ClusterError(f"job {name} did not finish in {timeout:.0f}s (last phase {last or 'none'})")
