"""mpi plugin: the master learns its workers' hosts; every container opens the ssh port.

The master task's containers and init containers get `MPI_HOST`, the worker task's hosts
comma-joined (`<job>-<worker>-<i>.<job>`, as Volcano's plugins/distributed-framework/mpi/mpi.go);
every container and init container of the job declares port `mpijob-port` (`--port`, 22). A job
without the worker task gives the master an empty MPI_HOST (Volcano fails there). The job also needs
the svc plugin (the hosts resolve through its Service) and the ssh plugin (mpirun logs in with its
keys); the webhook and `build_plugins` add both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final

from caldera.api.plugins import MPIOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import (
    Plugin,
    Pod,
    add_port,
    all_containers,
    copy_pod,
    find_task,
    set_env,
    task_hosts,
)

__all__ = ["MPI_HOST", "PORT_NAME", "MPIPlugin", "mpi_hosts"]

MPI_HOST: Final = "MPI_HOST"
PORT_NAME: Final = "mpijob-port"


def mpi_hosts(job: Job, options: MPIOptions) -> str:
    """The worker task's hosts, comma-joined; empty without a worker task."""
    worker = find_task(job, options.worker)
    return ",".join(task_hosts(job, worker)) if worker is not None else ""


@dataclass(frozen=True)
class MPIPlugin(Plugin):
    """MPI_HOST on the master, the ssh port on everyone."""

    name: ClassVar[str] = "mpi"
    options: MPIOptions = field(default_factory=MPIOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with the port opened and, on the master, MPI_HOST."""
        out = copy_pod(pod)
        is_master = task_name == self.options.master
        entry = {"name": MPI_HOST, "value": mpi_hosts(job, self.options)} if is_master else None
        for container in all_containers(out):
            add_port(container, PORT_NAME, self.options.port)
            if entry is not None:
                set_env(container, [entry])
        return out
