"""Start and stop the control plane's long-running processes by pid file.

Each process runs in its own session (so a Ctrl-C in the shell that ran ``up`` does not reach it),
logs to ``logs/<name>.log`` and is remembered in ``pids/<name>.pid``. A pid file is trusted only
while ``/proc/<pid>/cmdline`` still names the same binary, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

# Children started by this Python process, by pid: we own their exit status, so we reap them
# (no zombies) and Popen never warns that one was garbage-collected while still running.
_children: dict[int, subprocess.Popen[bytes]] = {}


class ProcessTable:
    """The processes of one cluster directory."""

    def __init__(self, directory: Path) -> None:
        self.pids = directory / "pids"
        self.logs = directory / "logs"

    def log_path(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def pid(self, name: str) -> int | None:
        """The pid of ``name`` if it is alive and still the binary we started, else None."""
        path = self.pids / f"{name}.pid"
        try:
            pid_text, binary = path.read_text().split("\n", 1)
            pid = int(pid_text)
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid, binary.strip()) else None

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
        """Start ``argv`` detached, appending to its log; record and return its pid."""
        self.pids.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        with self.log_path(name).open("ab") as log:
            log.write(f"\n==== {time.strftime('%F %T')} {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        _children[proc.pid] = proc
        (self.pids / f"{name}.pid").write_text(f"{proc.pid}\n{argv[0]}\n")
        return proc.pid

    def stop(self, name: str, timeout: float = 15.0) -> bool:
        """SIGTERM ``name``, SIGKILL it after ``timeout``; True if it was running."""
        pid = self.pid(name)
        (self.pids / f"{name}.pid").unlink(missing_ok=True)
        if pid is None:
            return False
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid, None):
                return True
            time.sleep(0.1)
        _signal(pid, signal.SIGKILL)
        while _alive(pid, None):
            time.sleep(0.05)
        return True

    def kill(self, name: str) -> None:
        """SIGKILL without grace, for tests that simulate a crash."""
        pid = self.pid(name)
        if pid is not None:
            _signal(pid, signal.SIGKILL)
            while _alive(pid, None):
                time.sleep(0.05)

    def tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path(name).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _alive(pid: int, binary: str | None) -> bool:
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]  # reaped by poll(): its /proc entry is gone
        return False
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    if status.rsplit(")", 1)[-1].split()[0] == "Z":
        if child is not None:  # it exited after poll() looked: reap it now
            child.wait()
            del _children[pid]
        return False
    if binary is None or cmdline == [b""]:
        return True  # an empty cmdline is a process in the middle of exec: ours, just started
    # A script's cmdline starts with its interpreter; the script is the next argument.
    return any(arg.decode(errors="replace") == binary for arg in cmdline[:2])
