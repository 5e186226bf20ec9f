"""ray plugin: a Ray cluster of a head task and a worker task (Volcano's
pkg/controllers/job/plugins/distributed-framework/ray/ray.go).

- The head task's container `--headContainer` (default `head`) runs
  `sh -c "ray start --head --block --dashboard-host=0.0.0.0 --port=<port>
  --dashboard-port=<dashboardPort> --ray-client-server-port=<clientPort>"` and declares the
  ports `gcs` (6379), `dashboard` (8265) and `client-server` (10001), each unless the container
  already declares that number (or that name: a second port of one name is refused by the API
  server).
- The worker task's container `--workerContainer` (default `worker`) runs
  `sh -c "ray start --block --address=<head>:<port>"`, `<head>` being the head's pod 0 host name
  (`<job>-<head>-0.<job>` unless the head's template sets hostname/subdomain).
- Service `<job>-head-svc` (a ClusterIP Service, owned by the Job) selects the head's pods by
  job name, namespace and `volcano.sh/task-spec`, with the three ports by name.

The command replaces the container's `command` (its `args` are kept), as Volcano's does. The
webhook adds the svc plugin, whose headless Service resolves the head's host name. A job without
the head task gets no pods: `caldera.api.plugins.plugin_job_errors` says why.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import ClassVar, Final

from caldera.api.plugins import RayOptions, ray_service_name
from caldera.api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, TASK_SPEC_KEY, Job
from controllers.job.plugins.base import (
    Obj,
    Plugin,
    Pod,
    ResourceRef,
    add_port,
    all_containers,
    copy_pod,
    find_task,
    host_name,
    object_meta,
)

__all__ = [
    "CLIENT_SERVER_PORT_NAME",
    "DASHBOARD_PORT_NAME",
    "GCS_PORT_NAME",
    "RayPlugin",
    "head_command",
    "worker_command",
]

GCS_PORT_NAME: Final = "gcs"
DASHBOARD_PORT_NAME: Final = "dashboard"
CLIENT_SERVER_PORT_NAME: Final = "client-server"


def head_command(options: RayOptions) -> list[str]:
    """The head container's command, Volcano's word for word."""
    return [
        "sh",
        "-c",
        "ray start --head --block --dashboard-host=0.0.0.0 "
        f"--port={options.port} --dashboard-port={options.dashboard_port} "
        f"--ray-client-server-port={options.client_port}",
    ]


def worker_command(head_address: str, options: RayOptions) -> list[str]:
    """A worker container's command; the address is quoted for the shell (a host name needs
    no quoting, so it reads as Volcano's)."""
    endpoint = shlex.quote(f"{head_address}:{options.port}")
    return ["sh", "-c", f"ray start --block --address={endpoint}"]


def _ports(options: RayOptions) -> tuple[tuple[str, int], ...]:
    return (
        (GCS_PORT_NAME, options.port),
        (DASHBOARD_PORT_NAME, options.dashboard_port),
        (CLIENT_SERVER_PORT_NAME, options.client_port),
    )


@dataclass(frozen=True)
class RayPlugin(Plugin):
    """The head's and workers' `ray start` commands, the head's ports and its Service."""

    name: ClassVar[str] = "ray"
    options: RayOptions = field(default_factory=RayOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with its role's command (and the head's ports)."""
        out = copy_pod(pod)
        opts = self.options
        head = find_task(job, opts.head)
        if head is None:  # refused at admission; the controller makes no pods (see module doc)
            return out
        for container in all_containers(out, init=False):
            if task_name == opts.head and container.get("name") == opts.head_container:
                for port_name, port in _ports(opts):
                    add_port(container, port_name, port)
                container["command"] = head_command(opts)
            if task_name == opts.worker and container.get("name") == opts.worker_container:
                container["command"] = worker_command(host_name(job, head, 0), opts)
        return out

    def resources(self, job: Job) -> list[Obj]:
        """Service `<job>-head-svc` to the head's pods."""
        ns, name = job.metadata.namespace, job.metadata.name
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_meta(job, ray_service_name(name)),
                "spec": {
                    "selector": {
                        JOB_NAME_KEY: name,
                        JOB_NAMESPACE_KEY: ns,
                        TASK_SPEC_KEY: self.options.head,
                    },
                    "ports": [
                        {
                            "name": port_name,
                            "port": port,
                            "targetPort": port_name,
                            "protocol": "TCP",
                        }
                        for port_name, port in _ports(self.options)
                    ],
                },
            }
        ]

    def resource_refs(self, job: Job) -> list[ResourceRef]:
        """Service `<job>-head-svc`."""
        return [
            ResourceRef(
                "v1", "Service", job.metadata.namespace, ray_service_name(job.metadata.name)
            )
        ]
