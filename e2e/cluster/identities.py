"""Caldera's processes as their chart ServiceAccounts on a cluster, without installing the chart.

``create_identities`` renders the chart (``helm template``), applies only its RBAC objects
(ServiceAccounts, ClusterRoles, ClusterRoleBindings, Roles, RoleBindings) into a namespace,
mints a TokenRequest token for each process's ServiceAccount and writes one kubeconfig per
process with the admin kubeconfig's cluster (CA, server). A process started with that
kubeconfig holds exactly the rights the chart gives it, which the privilege audit
(``e2e/audit``, ``bench/privilege.py``) compares with what it used.

The chart's Deployments, Services and webhook configurations are left out: the processes run
locally, and a webhook configuration pointing at a Service without pods would refuse writes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.audit.rbac import service_accounts
from e2e.cluster.control_plane import REPO, ClusterError, run_kubectl

__all__ = [
    "CHART",
    "RBAC_KINDS",
    "TEMPLATE_KUBE_VERSION",
    "Identities",
    "create_identities",
    "delete_identities",
    "helm_binary",
    "render_chart",
    "write_token_kubeconfig",
]

CHART = REPO / "charts" / "caldera"
RBAC_KINDS = frozenset(
    {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
)
# The Kubernetes of the local control plane (e2e/cluster/build.sh KUBE_VERSION): without it
# `helm template` assumes v1.20, older than the chart's kubeVersion allows.
TEMPLATE_KUBE_VERSION = "1.36.3"
TOKEN_SECONDS = 3 * 3600
"""Lifetime of the minted tokens: a one-hour run with room to spare (they are not renewed)."""


@dataclass(frozen=True)
class Identities:
    """The ServiceAccounts of one rendered release, with a kubeconfig and token per process."""

    release: str
    namespace: str
    kubeconfigs: dict[str, Path]
    """Process ("controllers", "scheduler", "webhook") to its kubeconfig."""
    tokens: dict[str, str]
    usernames: dict[str, str]
    """Process to ``system:serviceaccount:<namespace>:<name>``, as the audit log names it."""
    rbac: list[dict[str, Any]]
    """The rendered RBAC objects that were applied."""
    rbac_file: Path
    """The same, as YAML (``bench/privilege.py --rbac``)."""


def helm_binary() -> str:
    """The helm binary built (or found cached) by ``e2e/cluster/build.sh helm``."""
    out = subprocess.run(
        ["bash", str(REPO / "e2e" / "cluster" / "build.sh"), "helm"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    return str(Path(out.split()[-1]) / "helm")


def render_chart(
    helm: str,
    values_file: Path,
    *,
    release: str,
    namespace: str,
    kube_version: str = TEMPLATE_KUBE_VERSION,
) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``values_file``: the parsed objects."""
    result = subprocess.run(
        [
            helm,
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            f"--kube-version={kube_version}",
            "-f",
            str(values_file),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ClusterError(f"helm template failed:\n{result.stderr}{result.stdout}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def write_token_kubeconfig(
    admin_kubeconfig: Path, path: Path, *, user: str, token: str, server: str | None = None
) -> Path:
    """A kubeconfig at ``path`` authenticating with ``token`` as ``user`` (the entry's name)
    to the admin kubeconfig's current cluster (its CA), at ``server`` if given (a proxy in
    front of the API server; its certificate must be valid for that address)."""
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    if server is not None:
        cluster = {**cluster, "cluster": {**cluster["cluster"], "server": server}}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    # JSON is valid YAML, and every kubeconfig reader accepts it.
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def bound_account_kubeconfig(
    admin_kubeconfig: Path, namespace: str, account: str, cluster_role: str, path: Path
) -> Path:
    """A ServiceAccount ``account`` in ``namespace``, bound there (a RoleBinding of its name) to
    ``cluster_role`` (``edit``, ``view``, ...), and a kubeconfig at ``path`` with a one-hour
    token of it: a tenant as the API server sees one. Aggregated rules reach the role a moment
    later; callers wait for what they need."""
    run_kubectl(admin_kubeconfig, "-n", namespace, "create", "serviceaccount", account)
    run_kubectl(
        admin_kubeconfig,
        "-n",
        namespace,
        "create",
        "rolebinding",
        account,
        f"--clusterrole={cluster_role}",
        f"--serviceaccount={namespace}:{account}",
    )
    token = run_kubectl(
        admin_kubeconfig, "-n", namespace, "create", "token", account, "--duration=1h"
    ).strip()
    return write_token_kubeconfig(admin_kubeconfig, path, user=account, token=token)


def _apply(admin_kubeconfig: Path, objects: Sequence[Mapping[str, Any]]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    run_kubectl(admin_kubeconfig, "apply", "-f", "-", input=json.dumps(items))


def create_identities(
    admin_kubeconfig: Path,
    directory: Path,
    *,
    release: str = "caldera",
    namespace: str = "caldera-system",
    server: str | None = None,
    values: Mapping[str, Any] | None = None,
    helm: str | None = None,
    token_seconds: int = TOKEN_SECONDS,
) -> Identities:
    """Apply the chart's RBAC for ``release`` in ``namespace`` (created if missing) and write
    a kubeconfig per process under ``directory``; see the module docstring.

    ``values`` are chart values (the defaults give controllers and scheduler leader election,
    so their Lease Roles are in ``namespace``); ``helm`` is the binary, built if not given.
    """
    directory.mkdir(parents=True, exist_ok=True)
    values_file = directory / "values.yaml"
    values_file.write_text(yaml.safe_dump(dict(values or {})))
    rendered = render_chart(
        helm or helm_binary(), values_file, release=release, namespace=namespace
    )
    rbac = [o for o in rendered if o.get("kind") in RBAC_KINDS]
    rbac_file = directory / "rbac.yaml"
    rbac_file.write_text(yaml.safe_dump_all(rbac))
    namespace_object = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    _apply(admin_kubeconfig, [namespace_object])
    _apply(admin_kubeconfig, rbac)

    usernames = {process: user for user, process in service_accounts(rbac).items()}
    kubeconfigs: dict[str, Path] = {}
    tokens: dict[str, str] = {}
    for process, user in sorted(usernames.items()):
        sa_namespace, sa_name = user.split(":")[2:]
        tokens[process] = run_kubectl(
            admin_kubeconfig,
            "-n",
            sa_namespace,
            "create",
            "token",
            sa_name,
            f"--duration={token_seconds}s",
        ).strip()
        kubeconfigs[process] = write_token_kubeconfig(
            admin_kubeconfig,
            directory / f"{process}.kubeconfig",
            user=sa_name,
            token=tokens[process],
            server=server,
        )
    return Identities(
        release=release,
        namespace=namespace,
        kubeconfigs=kubeconfigs,
        tokens=tokens,
        usernames=usernames,
        rbac=rbac,
        rbac_file=rbac_file,
    )


def delete_identities(admin_kubeconfig: Path, identities: Identities) -> None:
    """Delete the cluster-scoped RBAC objects and the namespace (with the rest); not awaited."""
    cluster_scoped = [
        f"{o['kind'].lower()}/{o['metadata']['name']}"
        for o in identities.rbac
        if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
    ]
    if cluster_scoped:
        run_kubectl(
            admin_kubeconfig, "delete", "--ignore-not-found", "--wait=false", *cluster_scoped
        )
    run_kubectl(
        admin_kubeconfig,
        "delete",
        "namespace",
        identities.namespace,
        "--ignore-not-found",
        "--wait=false",
    )
