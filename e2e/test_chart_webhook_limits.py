"""The chart's webhook NetworkPolicy and shutdown timing, rendered with ``helm template`` and
the policy applied to the real API server (which checks its schema; the local control plane
has no network plugin to enforce it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.control_plane import run_kubectl
from e2e.conftest import Cluster
from e2e.test_chart import RELEASE, helm, of_kind, render  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e
CHART = Path(__file__).resolve().parent.parent / "charts" / "caldera"


def _refusal(helm: str, tmp_path: Path, values: dict[str, Any]) -> str:  # noqa: F811
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = subprocess.run(
        [helm, "template", RELEASE, str(CHART), "--kube-version=1.30.0", "-f", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    return done.stderr


def test_no_network_policy_by_default(helm: str, tmp_path: Path) -> None:  # noqa: F811
    """Off by default: where the API server's calls come from depends on the cluster."""
    assert of_kind(render(helm, tmp_path), "NetworkPolicy") == []


def test_network_policy_admits_the_api_server_and_monitoring_only(
    helm: str,  # noqa: F811
    tmp_path: Path,
    cluster: Cluster,
) -> None:
    """Enabled: the HTTPS port from the given peers, the metrics port from the monitoring
    namespace, nothing else; the API server accepts the object."""
    values = {
        "webhook": {
            "networkPolicy": {
                "enabled": True,
                "apiServer": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
            }
        }
    }
    (policy,) = of_kind(render(helm, tmp_path, values), "NetworkPolicy")
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "webhook"
    https, metrics = spec["ingress"]
    assert https == {
        "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
        "ports": [{"port": "https", "protocol": "TCP"}],
    }
    assert metrics["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    policy["metadata"]["namespace"] = "default"
    applied = run_kubectl(
        cluster.kubeconfig, "apply", "--dry-run=server", "-o", "json", "-f", "-",
        input=json.dumps(policy),
    )  # fmt: skip
    assert json.loads(applied)["kind"] == "NetworkPolicy"


def test_network_policy_without_peers_is_refused(helm: str, tmp_path: Path) -> None:  # noqa: F811
    """An empty peer list would admit every source: the chart refuses it, naming the value."""
    stderr = _refusal(helm, tmp_path, {"webhook": {"networkPolicy": {"enabled": True}}})
    assert "webhook.networkPolicy.apiServer must name" in stderr


def test_shutdown_delay_and_grace_must_fit_the_termination_period(
    helm: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """shutdown_delay plus shutdown_grace_period at or past terminationGracePeriodSeconds is
    refused; the defaults (5 + 20 < 30) render."""
    values = {"webhook": {"settings": {"shutdown_delay": 15}}}
    assert "must be below webhook.terminationGracePeriodSeconds" in _refusal(helm, tmp_path, values)
    assert of_kind(render(helm, tmp_path), "Deployment")
