"""Tests of e2e.cluster.identities.write_token_kubeconfig: the admin kubeconfig's current
cluster (CA and server, or a server of one's choice) with a bearer token."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from e2e.cluster.identities import write_token_kubeconfig

ADMIN = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [
        {"name": "other", "cluster": {"server": "https://10.0.0.1:6443"}},
        {
            "name": "local",
            "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": "/pki/ca.crt"},
        },
    ],
    "users": [{"name": "admin", "user": {"client-certificate": "/pki/admin.crt"}}],
    "contexts": [{"name": "ctx", "context": {"cluster": "local", "user": "admin"}}],
    "current-context": "ctx",
}


def test_token_kubeconfig_keeps_the_cluster_and_only_the_token(tmp_path: Path) -> None:
    """The current context's cluster and CA, a token user, no admin credentials; private."""
    admin = tmp_path / "admin"
    admin.write_text(yaml.safe_dump(ADMIN))
    path = write_token_kubeconfig(admin, tmp_path / "sa", user="rel-caldera-webhook", token="t0k")
    config = json.loads(path.read_text())
    (cluster,) = config["clusters"]
    assert cluster == ADMIN["clusters"][1]
    assert config["users"] == [{"name": "rel-caldera-webhook", "user": {"token": "t0k"}}]
    assert config["current-context"] == "rel-caldera-webhook"
    assert "admin.crt" not in path.read_text()
    assert path.stat().st_mode & 0o077 == 0


def test_a_server_override_keeps_the_ca(tmp_path: Path) -> None:
    """A proxy's address replaces the server; the CA stays (the proxy passes TLS through)."""
    admin = tmp_path / "admin"
    admin.write_text(json.dumps(ADMIN))
    path = write_token_kubeconfig(
        admin, tmp_path / "sa", user="u", token="t", server="https://127.0.0.1:7000"
    )
    (cluster,) = json.loads(path.read_text())["clusters"]
    assert cluster["cluster"] == {
        "server": "https://127.0.0.1:7000",
        "certificate-authority": "/pki/ca.crt",
    }
