"""hcclrank plugin: each pod's rank in an Ascend HCCL job, as the pod annotation
`hccl/rankIndex` (Volcano's pkg/controllers/job/plugins/distributed-framework/hcclrank).

The rank, first found:
1. none at all when the pod template already carries `hccl/rankIndex` (the user's wins);
2. the value of the first `RANK` env entry of the pod's containers, when it has a literal
   value (the pytorch plugin's RANK, which runs before this one, or the user's);
3. for the master task (`--master`, default `master`), the pod's index;
   for the worker task (`--worker`, default `worker`), the master's replicas plus the index;
4. none for pods of other tasks.

Volcano's plugin creates no object and needs no other plugin; neither does this one. Ascend's
device plugin and HCCL tooling read the annotation to build the rank table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from caldera.api.plugins import HCCLRankOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import Plugin, Pod, all_containers, copy_pod, find_task

__all__ = ["HCCL_RANK_KEY", "RANK_ENV", "HCCLRankPlugin", "env_rank"]

HCCL_RANK_KEY: Final = "hccl/rankIndex"
RANK_ENV: Final = "RANK"


def env_rank(pod: Pod) -> str:
    """The literal value of the first `RANK` env entry of the pod's containers ("" for none,
    or when that entry has no literal value), as Volcano's getEnv reads it."""
    for container in all_containers(pod, init=False):
        for entry in container.get("env") or ():
            if isinstance(entry, dict) and entry.get("name") == RANK_ENV:
                return str(entry.get("value") or "")
    return ""


@dataclass(frozen=True)
class HCCLRankPlugin(Plugin):
    """The `hccl/rankIndex` annotation of master and worker pods."""

    name: ClassVar[str] = "hcclrank"
    options: HCCLRankOptions = field(default_factory=HCCLRankOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with its rank annotated (see the module doc for the order of sources)."""
        out = copy_pod(pod)
        meta: dict[str, Any] = out.setdefault("metadata", {})
        annotations: dict[str, str] = dict(meta.get("annotations") or {})
        if annotations.get(HCCL_RANK_KEY):
            return out
        rank = env_rank(out)
        if not rank:
            opts = self.options
            if task_name == opts.master:
                rank = str(index)
            elif task_name == opts.worker:
                master = find_task(job, opts.master)
                rank = str((master.replicas if master is not None else 0) + index)
            else:
                return out
        annotations[HCCL_RANK_KEY] = rank
        meta["annotations"] = annotations
        return out

    def controlled_resources(self, job: Job) -> dict[str, str]:
        """None: Volcano's hcclrank records nothing in `status.controlledResources`."""
        return {}
