"""env plugin: every container and init container learns its pod's index within the task.

Sets `VK_TASK_INDEX` (the old name) and `VC_TASK_INDEX`, both the index of the pod, as Volcano
does (pkg/controllers/job/plugins/env/env.go). No arguments, no objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final

from caldera.api.plugins import EnvOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import Plugin, Pod, all_containers, copy_pod, set_env

__all__ = ["TASK_INDEX_ENVS", "EnvPlugin"]

TASK_INDEX_ENVS: Final = ("VK_TASK_INDEX", "VC_TASK_INDEX")


@dataclass(frozen=True)
class EnvPlugin(Plugin):
    """Task index env vars."""

    name: ClassVar[str] = "env"
    options: EnvOptions = field(default_factory=EnvOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with VK_TASK_INDEX and VC_TASK_INDEX in every container."""
        out = copy_pod(pod)
        entries = [{"name": name, "value": str(index)} for name in TASK_INDEX_ENVS]
        for container in all_containers(out):
            set_env(container, entries)
        return out
