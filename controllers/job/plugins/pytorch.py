"""pytorch plugin: torch.distributed's env:// variables for a master task and a worker task.

Every container gets `MASTER_ADDR` (the master task's pod 0, `<job>-<master>-0.<job>` unless the
template sets hostname/subdomain), `MASTER_PORT` (`--port`, 23456) and `WORLD_SIZE` (master plus
worker replicas); master pods get `RANK=0`, worker pod i gets `RANK=i+1`; pods of other tasks get
no RANK. Containers declare port `pytorchjob-port`. With `--wait-master-enabled`, worker pods
start with an init container `wait-for-master` that waits (up to `--wait-master-timeout`
seconds) until the master's DNS name resolves, which the headless Service publishes once the
master pod is ready. A job without the master task gets nothing (Volcano's
pkg/controllers/job/plugins/distributed-framework/pytorch/pytorch.go).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from caldera.api.plugins import PytorchOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import (
    Plugin,
    Pod,
    add_port,
    all_containers,
    copy_pod,
    find_task,
    host_name,
    pod_spec,
    set_env,
)

__all__ = ["PORT_NAME", "WAIT_MASTER_CONTAINER", "PytorchPlugin", "wait_master_container"]

PORT_NAME: Final = "pytorchjob-port"
WAIT_MASTER_CONTAINER: Final = "wait-for-master"


def wait_master_container(address: str, options: PytorchOptions) -> dict[str, Any]:
    """The init container that holds a worker back until the master's name resolves."""
    loop = f"until nslookup {shlex.quote(address)} >/dev/null 2>&1; do sleep 2; done"
    script = (
        f"timeout {options.wait_master_timeout} sh -c {shlex.quote(loop)} || "
        f"{{ echo {shlex.quote(f'master {address} not reachable')} >&2; exit 1; }}"
    )
    return {
        "name": WAIT_MASTER_CONTAINER,
        "image": options.wait_master_image,
        "command": ["sh", "-c", script],
    }


@dataclass(frozen=True)
class PytorchPlugin(Plugin):
    """MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK."""

    name: ClassVar[str] = "pytorch"
    options: PytorchOptions = field(default_factory=PytorchOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with the torch.distributed variables and port."""
        out = copy_pod(pod)
        opts = self.options
        master = find_task(job, opts.master)
        if master is None:
            return out
        address = host_name(job, master, 0)
        world = sum(t.replicas for t in job.spec.tasks if t.name in (opts.master, opts.worker))
        entries: list[dict[str, Any]] = [
            {"name": "MASTER_ADDR", "value": address},
            {"name": "MASTER_PORT", "value": str(opts.port)},
            {"name": "WORLD_SIZE", "value": str(world)},
        ]
        if task_name == opts.master:
            entries.append({"name": "RANK", "value": "0"})
        elif task_name == opts.worker:
            entries.append({"name": "RANK", "value": str(index + 1)})
        for container in all_containers(out, init=False):
            add_port(container, PORT_NAME, opts.port)
            set_env(container, entries)
        if opts.wait_master_enabled and task_name == opts.worker:
            spec = pod_spec(out)
            inits = [
                c
                for c in spec.get("initContainers") or []
                if c.get("name") != WAIT_MASTER_CONTAINER
            ]
            spec["initContainers"] = [wait_master_container(address, opts), *inits]
        return out
