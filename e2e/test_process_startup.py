"""A Caldera process started while the API server does not answer (found by the chaos run: the
processes restarted during a kube-apiserver restart exited at once, and a Deployment would have
crash-looped them into the kubelet's backoff) waits for it, then starts; a refusal still ends it
at once with one line (caldera/process.py, ``connect``)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from e2e.caldera_process import CalderaProcess
from e2e.chaos.fleet import Proxies
from e2e.cluster.control_plane import ControlPlane
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


def _kubeconfig(plane: ControlPlane, server: str, dest: Path, *, token: str | None = None) -> Path:
    config = json.loads(plane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    if token is not None:
        config["users"] = [{"name": "caldera-admin", "user": {"token": token}}]
    dest.write_text(json.dumps(config))
    return dest


async def test_a_process_waits_for_an_api_server_that_does_not_answer_yet(
    plane: ControlPlane, crds: Path, tmp_path: Path
) -> None:
    # Below the ephemeral range, so the process's own connection attempts cannot take it (a
    # loopback connect may pick the target port as its source and connect to itself), and held
    # (bound, not listening: connections are refused) so no free_port() returns it meanwhile.
    held = _held_port()
    port = held.getsockname()[1]
    kubeconfig = _kubeconfig(plane, f"https://127.0.0.1:{port}", tmp_path / "kubeconfig")
    proc = CalderaProcess(
        "scheduler", ["--leader-elect=false"], kubeconfig=kubeconfig, log_dir=tmp_path
    )
    proxies = Proxies(f"127.0.0.1:{plane.ports['apiserver']}", tmp_path)
    try:
        # Past the client's own retries (about 3.5 s after the process's start, which takes
        # seconds on a loaded machine), the process says it waits, and keeps running.
        await eventually(
            lambda: _says(proc, "the API server does not answer yet; waiting"),
            timeout=60,
            what="the process saying it waits",
        )
        assert proc.proc.poll() is None, proc.log()[-2000:]
        held.close()
        proxies.start(("scheduler",), port=port)  # the API server "comes back" at that address
        await eventually(
            lambda: _ready(proc), timeout=60, what="the scheduler ready once the server answers"
        )
    finally:
        code = proc.stop()
        proxies.stop()
        held.close()
    assert code == 0, proc.log()[-2000:]


def _held_port() -> socket.socket:
    for port in range(20000, 30000, 7):
        held = socket.socket()
        try:
            held.bind(("127.0.0.1", port))
        except OSError:
            held.close()
            continue
        return held
    raise RuntimeError("no free port below the ephemeral range")


async def _says(proc: CalderaProcess, line: str) -> bool:
    return line in proc.log()


async def _ready(proc: CalderaProcess) -> bool | None:
    status, _ = await asyncio.to_thread(proc.get, "/readyz")
    return True if status == 200 else None


async def test_a_refusal_at_start_still_ends_the_process_at_once(
    plane: ControlPlane, tmp_path: Path
) -> None:
    kubeconfig = _kubeconfig(
        plane,
        plane.server,
        tmp_path / "kubeconfig",
        token="not-a-token",
    )
    proc = CalderaProcess(
        "scheduler", ["--leader-elect=false"], kubeconfig=kubeconfig, log_dir=tmp_path
    )
    code = await asyncio.to_thread(proc.proc.wait, 30)
    proc.stop()
    assert code != 0
    assert "cannot reach the API server" in proc.log()
    assert "401" in proc.log()
