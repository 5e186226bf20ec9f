"""``caldera version``: this client's version, the API server's Kubernetes version, and the
version each Caldera Deployment of the cluster runs.

The server side is read from ``/version`` and from the Deployments the chart labels
``app.kubernetes.io/part-of=caldera`` (their ``app.kubernetes.io/version`` label and image), in
every namespace; a user who may not list Deployments cluster-wide sees that said instead of the
Caldera line. ``--client`` prints the client's version without connecting.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from caldera import __version__

if TYPE_CHECKING:
    from caldera.kube.client import KubeClient

PART_OF = "app.kubernetes.io/part-of=caldera"
DEPLOYMENTS = "/apis/apps/v1/deployments"


def caldera_deployments(listing: dict[str, Any]) -> list[dict[str, str]]:
    """Namespace, name, component, version label and image of each Deployment listed."""
    found = []
    for item in listing.get("items") or []:
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        containers = (((item.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers"
        ) or [{}]
        found.append(
            {
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name", ""),
                "component": labels.get("app.kubernetes.io/component", ""),
                "version": labels.get("app.kubernetes.io/version", ""),
                "image": containers[0].get("image", ""),
            }
        )
    return sorted(found, key=lambda d: (d["namespace"], d["name"]))


def render_version(report: dict[str, Any]) -> str:
    """The text form: one line per version."""
    lines = [f"Client Version: {report['client']}"]
    if "kubernetes" in report:
        lines.append(f"Kubernetes Version: {report['kubernetes']}")
    if "calderaError" in report:
        lines.append(f"Caldera Server Version: unknown ({report['calderaError']})")
    elif report.get("caldera") == []:
        lines.append("Caldera Server Version: none found (no Deployment labelled " + PART_OF + ")")
    for d in report.get("caldera") or []:
        lines.append(
            f"Caldera Server Version: {d['version'] or 'unlabelled'} "
            f"({d['component'] or d['name']} in {d['namespace']}, image {d['image']})"
        )
    return "".join(line + "\n" for line in lines)


def show_version(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {"client": __version__}
    if args.client:
        _write(report, args.output)
        return 0
    # Only a command that connects loads the API client (`--client` answers at once).
    from caldera.kube.errors import ApiError
    from cli.cluster import describe_error, run

    async def go(client: KubeClient) -> int:
        server = json.loads(await client.request("GET", "/version"))
        report["kubernetes"] = server.get("gitVersion", "")
        try:
            listing = await client.request("GET", DEPLOYMENTS, params={"labelSelector": PART_OF})
        except ApiError as exc:
            report["calderaError"] = f"cannot list Deployments: {describe_error(exc)}"
        else:
            report["caldera"] = caldera_deployments(json.loads(listing))
        _write(report, args.output)
        return 0

    return run(args, go)


def _write(report: dict[str, Any], fmt: str | None) -> None:
    if fmt in ("json", "yaml"):
        from cli import output

        sys.stdout.write(output.dump(report, fmt))
    else:
        sys.stdout.write(render_version(report))
