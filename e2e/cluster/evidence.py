"""What the privilege audit reads from a cluster besides the audit log: Events (scanned for
secrets) and the ssh plugin's private keys (looked for, by value, in logs and Events).

Read with the admin kubeconfig; the pure checks are in ``e2e/audit``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from e2e.cluster.control_plane import run_kubectl

__all__ = ["events", "ssh_private_keys"]

SSH_PRIVATE_KEY = "id_rsa"  # the ssh plugin's Secret key (controllers/job/plugins/ssh.py)


def _get(admin_kubeconfig: Path, resource: str, namespace: str | None) -> list[dict[str, Any]]:
    scope = ["-n", namespace] if namespace else ["--all-namespaces"]
    out = run_kubectl(admin_kubeconfig, "get", resource, *scope, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def events(admin_kubeconfig: Path, namespace: str | None = None) -> list[dict[str, Any]]:
    """The core/v1 Events of ``namespace`` (of every namespace when None)."""
    return _get(admin_kubeconfig, "events", namespace)


def ssh_private_keys(admin_kubeconfig: Path, namespace: str | None = None) -> dict[str, str]:
    """The ssh plugin's private keys in ``namespace`` (every namespace when None), by
    "secret <namespace>/<name>"; Secrets without an ``id_rsa`` key are skipped."""
    keys: dict[str, str] = {}
    for secret in _get(admin_kubeconfig, "secrets", namespace):
        data = secret.get("data") or {}
        if SSH_PRIVATE_KEY in data:
            meta = secret["metadata"]
            label = f"secret {meta['namespace']}/{meta['name']}"
            keys[label] = base64.b64decode(data[SSH_PRIVATE_KEY]).decode()
    return keys
