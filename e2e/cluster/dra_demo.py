"""The demo's Dynamic Resource Allocation step: the fake DRA driver (``e2e/fake_dra_driver.py``)
runs as one of the cluster's processes (``down`` stops it, and it deletes its ResourceSlices),
and ``examples/dra-gpu-job.yaml`` runs: two workers, each with a claim of one GPU.

The step switches itself on: a scheduler that does not allocate claims binds the workers all
the same, onto nodes whose devices nobody reserved (a kubelet would never start them). So the
job is applied, and once its pods are bound their claims are looked at: allocated, the job is
followed to its end and the claims shown with their devices and the driver's Ready; not
allocated, the job is deleted and the demo says this checkout's scheduler does not do DRA,
without failing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from typing import Any, Final, Literal

from e2e.cluster.control_plane import REPO, ClusterError, ControlPlane
from e2e.fake_dra_driver import DRIVER

DRA_JOB: Final = REPO / "examples" / "dra-gpu-job.yaml"
DRA_JOB_NAME: Final = "dra-gpu-job"
DRIVER_PROCESS: Final = "fake-dra-driver"
JOB_LABEL: Final = "volcano.sh/job-name"
Outcome = Literal["allocated", "unallocated", "waiting"]


def start_driver(plane: ControlPlane, timeout: float = 60) -> None:
    """Start the fake driver for every kwok node (unless it runs) and wait for its DeviceClass."""
    if plane.procs.pid(DRIVER_PROCESS) is None:
        argv = [sys.executable, "-m", "e2e.fake_dra_driver", f"--kubeconfig={plane.kubeconfig}"]
        plane.procs.start(DRIVER_PROCESS, argv, env={"PYTHONPATH": str(REPO)})
    try:
        plane.kubectl("wait", "--for=create", f"--timeout={timeout:.0f}s", f"deviceclass/{DRIVER}")
    except ClusterError as exc:
        raise ClusterError(
            f"{exc}\nthe fake DRA driver's log:\n{plane.procs.tail(DRIVER_PROCESS)}"
        ) from None


def stop_driver(plane: ControlPlane) -> bool:
    return plane.procs.stop(DRIVER_PROCESS)


def outcome(pods: Iterable[dict[str, Any]], claims: Iterable[dict[str, Any]]) -> Outcome:
    """Whether a job's pods are all bound with their claims allocated, bound without (a
    scheduler that ignores claims), or still waiting."""
    allocated = {
        c["metadata"]["name"]
        for c in claims
        if ((c.get("status") or {}).get("allocation") or {}).get("devices")
    }
    pods = list(pods)
    if not pods or not all((p.get("spec") or {}).get("nodeName") for p in pods):
        return "waiting"
    names = [
        s.get("resourceClaimName")
        for p in pods
        for s in (p.get("status") or {}).get("resourceClaimStatuses") or []
    ]
    return "allocated" if names and all(n in allocated for n in names) else "unallocated"


def _ready_devices(claim: dict[str, Any]) -> list[str]:
    return [
        e["device"]
        for e in (claim.get("status") or {}).get("devices") or []
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in e.get("conditions") or []
        )
    ]


def prepared(claim: dict[str, Any]) -> bool:
    """Whether the driver reports every allocated device of the claim Ready."""
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return set(_ready_devices(claim)) >= {r["device"] for r in results}


def claim_lines(claims: Iterable[dict[str, Any]]) -> list[str]:
    """One line per claim: its pod, its devices and whether the driver reports them Ready."""
    lines = []
    for claim in sorted(claims, key=lambda c: str(c["metadata"]["name"])):
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        devices = ", ".join(f"{r['pool']}/{r['device']}" for r in results) or "-"
        ready = _ready_devices(claim)
        pods = ", ".join(r.get("name", "?") for r in status.get("reservedFor") or []) or "-"
        lines.append(
            f"  claim {claim['metadata']['name']}: for {pods}; devices {devices}; "
            f"prepared by the driver: {', '.join(ready) or 'not yet'}"
        )
    return lines


def _json(plane: ControlPlane, *args: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(plane.kubectl("get", *args, "-o", "json"))["items"]
    return items


def run_dra_demo(plane: ControlPlane, timeout: float = 120) -> str:
    """Run the example job (again, if it ran before); its final phase, or "skipped" when the
    scheduler does not allocate claims."""
    say = sys.stderr.write
    plane.kubectl("delete", "-f", str(DRA_JOB), "--ignore-not-found", "--wait=true")
    plane.kubectl("apply", "-f", str(DRA_JOB))
    deadline = time.monotonic() + timeout
    selector = f"{JOB_LABEL}={DRA_JOB_NAME}"
    seen: Outcome = "waiting"
    while time.monotonic() < deadline:
        pods = _json(plane, "pods", "-l", selector)
        seen = outcome(pods, _json(plane, "resourceclaims"))
        if seen != "waiting":
            break
        time.sleep(1)
    if seen == "unallocated":
        plane.kubectl("delete", "-f", str(DRA_JOB), "--ignore-not-found", "--wait=false")
        say(
            "  skipped: this checkout's scheduler bound the workers without allocating their "
            "claims (it does not do DRA yet); the job is deleted\n"
        )
        return "skipped"
    if seen == "waiting":
        raise ClusterError(f"the workers of {DRA_JOB_NAME} were not scheduled in {timeout:.0f}s")
    # Shown while the workers run: a claim made for a pod goes when the pod is done.
    claims: list[dict[str, Any]] = []
    for _ in range(10):
        claims = _json(plane, "resourceclaims")
        if all(prepared(c) for c in claims):
            break
        time.sleep(0.5)
    say("  the workers' claims, allocated by the scheduler and prepared by the fake driver:\n")
    say("\n".join(claim_lines(claims)) + "\n")
    phase = ""
    while time.monotonic() < deadline:
        job = json.loads(plane.kubectl("get", "jobs.batch.volcano.sh", DRA_JOB_NAME, "-o", "json"))
        phase = job.get("status", {}).get("state", {}).get("phase", "")
        if phase in ("Completed", "Failed", "Aborted", "Terminated"):
            break
        time.sleep(1)
    say(f"  job {DRA_JOB_NAME}: {phase or 'not finished'}\n")
    return phase
