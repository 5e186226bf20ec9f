"""Run Caldera's own processes (``caldera controllers`` ...) as subprocesses in e2e tests, the way
a Deployment would, and read their /metrics and /readyz."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from e2e.cluster.control_plane import free_port


class CalderaProcess:
    """One ``caldera <command>`` process with its own metrics port and log file."""

    def __init__(self, command: str, args: list[str], *, kubeconfig: Path, log_dir: Path) -> None:
        self.port = free_port()
        self.log_path = log_dir / f"{command}-{self.port}.log"
        exe = Path(sys.prefix) / "bin" / "caldera"
        argv = [str(exe), command, f"--kubeconfig={kubeconfig}", f"--metrics-port={self.port}"]
        argv += ["--listen-address=127.0.0.1", "--log-format=json", *args]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def get(self, path: str) -> tuple[int, str]:
        """(status, body) of GET ``path`` on the metrics port; (0, error) if unreachable."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()
        except (urllib.error.URLError, OSError) as err:
            return 0, str(err)

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The value of one sample in /metrics, or None if absent."""
        status, text = self.get("/metrics")
        if status != 200:
            return None
        want = ",".join(f'{k}="{v}"' for k, v in sorted((labels or {}).items()))
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            series, _, value = line.rpartition(" ")
            metric, _, label_text = series.partition("{")
            got = ",".join(sorted(label_text.rstrip("}").split(","))) if label_text else ""
            if metric == name and got == want:
                return float(value)
        return None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: a crash, no clean-up."""
        self.proc.kill()
        self.proc.wait()
        self._log.close()

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
