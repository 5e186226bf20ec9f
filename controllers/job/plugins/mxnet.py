"""mxnet plugin (Caldera addition; Volcano has none): ps-lite's DMLC_* variables.

Set as Kubeflow's MXJob operator set them, for the tasks named by `--scheduler`, `--server` and
`--worker` (containers only):

- `DMLC_ROLE`: `scheduler`, `server` or `worker`;
- `DMLC_PS_ROOT_URI`: the scheduler task's pod 0, `<job>-<scheduler>-0.<job>` (Kubeflow gave a
  per-replica Service name; here the svc plugin's headless Service resolves the pod);
- `DMLC_PS_ROOT_PORT`: `--port` (9091, MXJob's default port);
- `DMLC_NUM_SERVER` / `DMLC_NUM_WORKER`: the server and worker replica counts;
- `DMLC_USE_KUBERNETES`: `1` (the scheduler then binds 0.0.0.0);
- `DMLC_WORKER_ID`: the pod index, on workers only (BytePS needs it).

The scheduler's containers declare port `mxjob-port`. Pods of other tasks, and every pod of a
job without the scheduler task, get nothing: ps-lite cannot start without a scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from caldera.api.plugins import MXNetOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import (
    Plugin,
    Pod,
    add_port,
    all_containers,
    copy_pod,
    find_task,
    host_name,
    set_env,
)

__all__ = ["PORT_NAME", "MXNetPlugin", "dmlc_env"]

PORT_NAME: Final = "mxjob-port"


def _replicas(job: Job, name: str) -> int:
    task = find_task(job, name)
    return task.replicas if task is not None else 0


def dmlc_env(job: Job, options: MXNetOptions, task_name: str, index: int) -> dict[str, str]:
    """The DMLC_* variables of pod `index` of `task_name`, in order; empty if it has no role."""
    roles = {options.scheduler: "scheduler", options.server: "server", options.worker: "worker"}
    role = roles.get(task_name)
    scheduler = find_task(job, options.scheduler)
    if role is None or scheduler is None:
        return {}
    env = {
        "DMLC_ROLE": role,
        "DMLC_PS_ROOT_URI": host_name(job, scheduler, 0),
        "DMLC_PS_ROOT_PORT": str(options.port),
        "DMLC_NUM_SERVER": str(_replicas(job, options.server)),
        "DMLC_NUM_WORKER": str(_replicas(job, options.worker)),
        "DMLC_USE_KUBERNETES": "1",
    }
    if role == "worker":
        env["DMLC_WORKER_ID"] = str(index)
    return env


@dataclass(frozen=True)
class MXNetPlugin(Plugin):
    """ps-lite scheduler/server/worker wiring."""

    name: ClassVar[str] = "mxnet"
    options: MXNetOptions = field(default_factory=MXNetOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with the DMLC_* variables and, on the scheduler, the root port."""
        out = copy_pod(pod)
        env = dmlc_env(job, self.options, task_name, index)
        if not env:
            return out
        entries: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
        for container in all_containers(out, init=False):
            set_env(container, entries)
            if task_name == self.options.scheduler:
                add_port(container, PORT_NAME, self.options.port)
        return out
