"""tensorflow plugin: `TF_CONFIG` for every container of a distributed TensorFlow job.

`TF_CONFIG` is the JSON `{"cluster": {"ps": [...], "worker": [...], "chief": [...], "evaluator":
[...]}, "task": {"type": <role>, "index": <i>}}` (Volcano's
plugins/distributed-framework/tensorflow/tensorflow.go). The cluster lists `<host>:<port>` for every
replica of each role's task (`--ps`, `--worker`, `--chief`, `--evaluator` name the tasks; a role
without a task is left out); the task type is the pod's role, or its task name when the task has no
role. A job of a single task with one replica is not distributed and gets nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from caldera.api.plugins import TensorflowOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import Plugin, Pod, all_containers, copy_pod, host_name, set_env

__all__ = ["TF_CONFIG", "TensorflowPlugin", "tf_config"]

TF_CONFIG: Final = "TF_CONFIG"


def tf_config(job: Job, options: TensorflowOptions, task_name: str, index: int) -> str:
    """The TF_CONFIG value of pod `index` of `task_name`, compact JSON as Go encodes it."""
    roles = {
        options.ps: "ps",
        options.worker: "worker",
        options.chief: "chief",
        options.evaluator: "evaluator",
    }
    task = {"type": roles.get(task_name, task_name), "index": index}
    return f'{{"cluster":{_cluster_json(job, options, roles)},"task":{_compact(task)}}}'


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


# The cluster part is the same for every pod of a Job and lists every replica: made once per
# Job shape, not per pod (a pod per replica would make a sync's cost grow with replicas^2).
_CLUSTERS: dict[tuple[Any, ...], str] = {}


def _cluster_json(job: Job, options: TensorflowOptions, roles: dict[str, str]) -> str:
    # A task's hosts follow from its first two (a fixed hostname gives the same host for both).
    key = (
        options,
        *(
            (t.name, t.replicas, host_name(job, t, 0), host_name(job, t, 1))
            for t in job.spec.tasks
            if t.name in roles
        ),
    )
    cached = _CLUSTERS.get(key)
    if cached is not None:
        return cached
    found: dict[str, list[str]] = {}
    for task in job.spec.tasks:
        role = roles.get(task.name)
        if role is None:
            continue
        found[role] = [f"{host_name(job, task, i)}:{options.port}" for i in range(task.replicas)]
    # Fixed key order (ps, worker, chief, evaluator); empty roles are omitted, as Go's omitempty.
    cluster: dict[str, Any] = {
        role: found[role] for role in ("ps", "worker", "chief", "evaluator") if found.get(role)
    }
    if len(_CLUSTERS) >= 16:
        _CLUSTERS.clear()
    _CLUSTERS[key] = cached = _compact(cluster)
    return cached


@dataclass(frozen=True)
class TensorflowPlugin(Plugin):
    """TF_CONFIG for ps/worker/chief/evaluator tasks."""

    name: ClassVar[str] = "tensorflow"
    options: TensorflowOptions = field(default_factory=TensorflowOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with TF_CONFIG in its containers (not init containers, as in Volcano)."""
        out = copy_pod(pod)
        tasks = job.spec.tasks
        if len(tasks) == 1 and tasks[0].replicas == 1:
            return out
        entry = {"name": TF_CONFIG, "value": tf_config(job, self.options, task_name, index)}
        for container in all_containers(out, init=False):
            set_env(container, [entry])
        return out
