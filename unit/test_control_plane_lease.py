"""e2e/cluster/control_plane.py: a cluster's node Lease and kwok configuration reach kwok and
kube-controller-manager; the default cluster starts them as before."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.cluster.control_plane import STAGES, ControlPlane

BINS = {name: Path(f"/bin/{name}") for name in ("kwok", "kube-controller-manager")}


def argv(plane: ControlPlane, name: str) -> list[str]:
    plane.dir.mkdir(parents=True, exist_ok=True)
    ports = {"etcd": 1, "etcd_peer": 2, "apiserver": 3, "kcm": 4, "kwok": 5, "scheduler": 6}
    (plane.dir / "state.json").write_text(json.dumps({"ports": ports}))
    return plane._argv(name, BINS)


def test_the_default_cluster_keeps_kwoks_lease_and_the_controllers_grace(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "c")
    assert "--node-lease-duration-seconds=40" in argv(plane, "kwok")
    assert f"--config={STAGES}" in argv(plane, "kwok")
    assert not [a for a in argv(plane, "kube-controller-manager") if "grace-period" in a]


def test_a_longer_lease_reaches_kwok_and_the_node_lifecycle_grace(tmp_path: Path) -> None:
    stages = tmp_path / "stages.yaml"
    plane = ControlPlane(tmp_path / "c", stages=stages, node_lease_seconds=1200)
    assert "--node-lease-duration-seconds=1200" in argv(plane, "kwok")
    assert f"--config={stages}" in argv(plane, "kwok")
    kcm = argv(plane, "kube-controller-manager")
    assert "--node-monitor-grace-period=1200s" in kcm
    assert "--node-startup-grace-period=1200s" in kcm
