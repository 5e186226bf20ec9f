"""The job-plugin interface and the pure helpers the plugins share.

A plugin is a frozen object built from its parsed options (`caldera.api.plugins`). Everything
it does is a pure function of the Job (and, for `on_pod_create`, of the pod being built):

- `on_pod_create(job, pod, task_name, index)` returns a NEW pod dict; the input is never changed.
  Applying a plugin twice gives the same pod as applying it once (env vars and ports are set by
  name, volumes and mounts replaced by name/path), so a rebuilt pod is identical.
- `resources(job)` lists the objects the plugin wants to exist (Service, ConfigMap, Secret,
  NetworkPolicy), as plain dicts with deterministic names and a controller ownerReference to the
  Job, ready to POST. The I/O layer creates them when absent on every sync of the Job; it uses
  an existing object only if the Job controls it (`caldera.api.ownership`), and updates the
  ones whose `UPDATE_ON_CHANGE` says so.
- `resource_refs(job)` names the same objects without building them (no key material needed),
  for the delete on job kill, once, of the Job's own objects only; a 404 there is success.
- `controlled_resources(job)` is the `status.controlledResources` entry, `plugin-<name>: <name>`.

Where a pod's env var, port, volume or mount already exists by name, the plugin's value replaces
it: Volcano appends, and Kubernetes lets the later duplicate win, so the effect is the same
without duplicate entries.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from caldera.api.names import pod_name
from caldera.api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, Job, TaskSpec
from controllers.job.pods import owner_dict

__all__ = [
    "CONTROLLED_RESOURCE_PREFIX",
    "Obj",
    "Plugin",
    "Pod",
    "ResourceRef",
    "add_mount",
    "add_port",
    "add_volume",
    "all_containers",
    "copy_pod",
    "find_task",
    "host_name",
    "object_meta",
    "owner_reference",
    "pod_spec",
    "set_env",
    "task_hosts",
    "task_index_of",
]

Pod = dict[str, Any]
Obj = dict[str, Any]

CONTROLLED_RESOURCE_PREFIX: Final = "plugin-"


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """Where a plugin's object lives: enough to GET or DELETE it."""

    api_version: str
    kind: str
    namespace: str
    name: str


class Plugin:
    """Base of the job plugins: every hook is a pure function; the defaults do nothing."""

    name: ClassVar[str] = ""
    # Kinds whose existing object the I/O layer should overwrite with `resources()` on job update
    # (the svc hosts ConfigMap follows scaling); anything else is create-if-absent.
    UPDATE_ON_CHANGE: ClassVar[frozenset[str]] = frozenset()

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with this plugin's changes, as a new dict; `pod` is left untouched."""
        return copy_pod(pod)

    def resources(self, job: Job) -> list[Obj]:
        """The objects this plugin wants to exist for `job`, ready to create."""
        return []

    def resource_refs(self, job: Job) -> list[ResourceRef]:
        """The names of the objects `resources` builds, for deletion."""
        return []

    def controlled_resources(self, job: Job) -> dict[str, str]:
        """This plugin's entries of `status.controlledResources`."""
        return {CONTROLLED_RESOURCE_PREFIX + self.name: self.name}


# --- objects ------------------------------------------------------------------------------------


def owner_reference(job: Job) -> Obj:
    """The controller ownerReference to the Job, so that GC deletes the object with it."""
    return owner_dict(job)


def object_meta(job: Job, name: str) -> Obj:
    """Metadata of an object a plugin creates for `job`.

    Volcano sets no labels on these objects; Caldera adds the job's name and namespace labels so
    that they can be listed per job.
    """
    return {
        "name": name,
        "namespace": job.metadata.namespace,
        "labels": {JOB_NAME_KEY: job.metadata.name, JOB_NAMESPACE_KEY: job.metadata.namespace},
        "ownerReferences": [owner_reference(job)],
    }


# --- the job's tasks and hosts ------------------------------------------------------------------


def find_task(job: Job, name: str) -> TaskSpec | None:
    """The task called `name`, or None."""
    for task in job.spec.tasks:
        if task.name == name:
            return task
    return None


def task_index_of(job: Job, name: str) -> int:
    """The position of task `name` in `spec.tasks`, or -1."""
    for i, task in enumerate(job.spec.tasks):
        if task.name == name:
            return i
    return -1


def _template_spec(task: TaskSpec) -> Mapping[str, Any]:
    spec = task.template.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def host_name(job: Job, task: TaskSpec, index: int) -> str:
    """The DNS name of pod `index` of `task`: `<hostname>.<subdomain>` relative to the namespace.

    The template's hostname and subdomain win; otherwise the pod name `<job>-<task>-<index>` and
    the job's headless Service `<job>`.
    """
    spec = _template_spec(task)
    hostname = str(spec.get("hostname") or "") or pod_name(job.metadata.name, task.name, index)
    subdomain = str(spec.get("subdomain") or "") or job.metadata.name
    return f"{hostname}.{subdomain}"


def task_hosts(job: Job, task: TaskSpec) -> list[str]:
    """The hosts of a task's pods, one per replica; a template with a fixed hostname gives one."""
    if task.replicas <= 0:
        return []
    if _template_spec(task).get("hostname"):
        return [host_name(job, task, 0)]
    return [host_name(job, task, i) for i in range(task.replicas)]


# --- pod surgery (on a private copy) ------------------------------------------------------------


def copy_pod(pod: Pod) -> Pod:
    """A deep copy of `pod`, the only thing a plugin ever changes."""
    return copy.deepcopy(pod)


def pod_spec(pod: Pod) -> dict[str, Any]:
    """`pod["spec"]`, created when absent (on a copy)."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = {}
        pod["spec"] = spec
    return spec


def all_containers(pod: Pod, *, init: bool = True) -> Iterator[dict[str, Any]]:
    """The containers of the pod, then its init containers when `init`."""
    spec = pod_spec(pod)
    keys = ("containers", "initContainers") if init else ("containers",)
    for key in keys:
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                yield container


def set_env(container: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Set env vars by name: an existing entry is replaced in place, a new one appended."""
    env: list[dict[str, Any]] = list(container.get("env") or [])
    position = {e.get("name"): i for i, e in enumerate(env)}
    for entry in entries:
        i = position.get(entry["name"])
        if i is None:
            position[entry["name"]] = len(env)
            env.append(copy.deepcopy(entry))
        else:
            env[i] = copy.deepcopy(entry)
    container["env"] = env


def add_port(container: dict[str, Any], name: str, port: int) -> None:
    """Declare `port` on the container unless it already declares that number or that name."""
    ports: list[dict[str, Any]] = list(container.get("ports") or [])
    if any(p.get("containerPort") == port or p.get("name") == name for p in ports):
        return
    ports.append({"name": name, "containerPort": port})
    container["ports"] = ports


def add_volume(pod: Pod, volume: dict[str, Any]) -> None:
    """Add a pod volume, replacing one of the same name."""
    spec = pod_spec(pod)
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != volume["name"]]
    volumes.append(volume)
    spec["volumes"] = volumes


def add_mount(container: dict[str, Any], mount: dict[str, Any]) -> None:
    """Add a volume mount, replacing one at the same mount path."""
    mounts = [
        m for m in container.get("volumeMounts") or [] if m.get("mountPath") != mount["mountPath"]
    ]
    mounts.append(dict(mount))
    container["volumeMounts"] = mounts
