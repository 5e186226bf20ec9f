"""A user's mistake at start-up ends ``caldera controllers`` with one clear line and a non-zero
exit code, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CALDERA = str(Path(sys.prefix) / "bin" / "caldera")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CALDERA, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def _unreachable_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--kubeconfig=/nonexistent/kubeconfig"],
            1,
            "kubeconfig /nonexistent/kubeconfig not found",
        ),
        (["--controllers=gc,nope"], 2, "unknown controller nope"),
        (["--kube-qps=fast"], 2, "kube_qps: 'fast' is not a valid float"),
        (["--leader-elect=maybe"], 2, "leader_elect: 'maybe' is not a boolean"),
        (["--lease-duration=1"], 2, "retry_period < renew_deadline < lease_duration"),
    ],
)
def test_bad_settings_give_one_line(args: list[str], code: int, message: str) -> None:
    """Each bad setting exits with its code and one line naming the setting."""
    result = _run("controllers", *args)
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("caldera: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_unreachable_api_server_gives_one_error_line(tmp_path: Path) -> None:
    """An API server that does not answer ends the process with exit 1 and a line naming it,
    once ``--startup-timeout`` has passed."""
    result = _run(
        "controllers",
        f"--kubeconfig={_unreachable_kubeconfig(tmp_path)}",
        "--log-level=error",
        "--startup-timeout=3",
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("caldera: error: cannot reach the API server at http://127.0.0.1:9")


def test_no_command_prints_help_and_exits_2() -> None:
    """``caldera`` alone prints its usage and exits 2."""
    result = _run()
    assert result.returncode == 2
    assert "controllers" in result.stderr
