"""svc plugin: a headless Service, a hosts ConfigMap and a NetworkPolicy per job.

Objects (Volcano's pkg/controllers/job/plugins/svc/svc.go):
- ConfigMap `<job>-svc`: for each task T (task name with `-` turned into `_`), key `T.host` with
  one host per line, `VC_<UPPER(T)>_HOSTS` with the hosts comma-joined and `VC_<UPPER(T)>_NUM`
  with their count. A host is `<hostname>.<subdomain>` (see `base.host_name`). Rewritten on
  every sync of the Job, so scaling shows up in new pods.
- Service `<job>`: headless (clusterIP None), selecting the job's pods by
  `volcano.sh/job-name` and `volcano.sh/job-namespace`, `publishNotReadyAddresses` from the flag.
- NetworkPolicy `<job>` (unless `--disable-network-policy`): ingress to the job's pods only from
  pods of the same job.

Pods get `hostname` = pod name and `subdomain` = job name when their template sets neither, the
ConfigMap mounted at `/etc/volcano` (so `/etc/volcano/<T>.host`), and, with `--inject-hosts-env`
(the default), `VC_<T>_HOSTS` and `VC_<T>_NUM` of every task from the ConfigMap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from caldera.api.names import pod_name
from caldera.api.plugins import SvcOptions
from caldera.api.volcano import JOB_NAME_KEY, JOB_NAMESPACE_KEY, Job
from controllers.job.plugins.base import (
    Obj,
    Plugin,
    Pod,
    ResourceRef,
    add_mount,
    add_volume,
    all_containers,
    copy_pod,
    object_meta,
    pod_spec,
    set_env,
    task_hosts,
)

__all__ = [
    "CONFIGMAP_MOUNT_PATH",
    "SvcPlugin",
    "configmap_name",
    "hosts_data",
    "hosts_env_names",
    "task_key",
]

CONFIGMAP_MOUNT_PATH: Final = "/etc/volcano"
NETWORK_POLICY_API_VERSION: Final = "networking.k8s.io/v1"


def configmap_name(job: Job) -> str:
    """`<job>-svc`, also the name of the pod volume."""
    return f"{job.metadata.name}-svc"


def task_key(task_name: str) -> str:
    """The task name as it appears in ConfigMap keys and env names: `-` becomes `_`."""
    return task_name.replace("-", "_")


def hosts_env_names(task_name: str) -> tuple[str, str]:
    """`VC_<T>_HOSTS` and `VC_<T>_NUM` for a task."""
    upper = task_key(task_name).upper()
    return f"VC_{upper}_HOSTS", f"VC_{upper}_NUM"


def hosts_data(job: Job) -> dict[str, str]:
    """The ConfigMap data: per task, the hosts file and the two env values."""
    data: dict[str, str] = {}
    for task in job.spec.tasks:
        hosts = task_hosts(job, task)
        hosts_env, num_env = hosts_env_names(task.name)
        data[f"{task_key(task.name)}.host"] = "\n".join(hosts)
        data[hosts_env] = ",".join(hosts)
        data[num_env] = str(len(hosts))
    return data


def _job_selector(job: Job) -> dict[str, str]:
    return {JOB_NAME_KEY: job.metadata.name, JOB_NAMESPACE_KEY: job.metadata.namespace}


@dataclass(frozen=True)
class SvcPlugin(Plugin):
    """Headless Service, hosts ConfigMap and NetworkPolicy."""

    name: ClassVar[str] = "svc"
    UPDATE_ON_CHANGE: ClassVar[frozenset[str]] = frozenset({"ConfigMap"})
    options: SvcOptions = field(default_factory=SvcOptions)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with hostname/subdomain, the hosts volume and (by default) the hosts env."""
        out = copy_pod(pod)
        spec = pod_spec(out)
        if not spec.get("hostname"):
            name = out.get("metadata", {}).get("name") or pod_name(
                job.metadata.name, task_name, index
            )
            spec["hostname"] = name
        if not spec.get("subdomain"):
            spec["subdomain"] = job.metadata.name

        cm = configmap_name(job)
        if self.options.inject_hosts_env:
            entries: list[dict[str, Any]] = []
            for task in job.spec.tasks:
                for env_name in hosts_env_names(task.name):
                    ref = {"configMapKeyRef": {"name": cm, "key": env_name}}
                    entries.append({"name": env_name, "valueFrom": ref})
            for container in all_containers(out):
                set_env(container, entries)

        add_volume(out, {"name": cm, "configMap": {"name": cm}})
        for container in all_containers(out):
            add_mount(container, {"name": cm, "mountPath": CONFIGMAP_MOUNT_PATH})
        return out

    def resources(self, job: Job) -> list[Obj]:
        """The hosts ConfigMap, the headless Service and, unless disabled, the NetworkPolicy."""
        objects: list[Obj] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(job, configmap_name(job)),
                "data": hosts_data(job),
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_meta(job, job.metadata.name),
                "spec": {
                    "clusterIP": "None",
                    "selector": _job_selector(job),
                    "publishNotReadyAddresses": self.options.publish_not_ready_addresses,
                },
            },
        ]
        if not self.options.disable_network_policy:
            objects.append(
                {
                    "apiVersion": NETWORK_POLICY_API_VERSION,
                    "kind": "NetworkPolicy",
                    "metadata": object_meta(job, job.metadata.name),
                    "spec": {
                        "podSelector": {"matchLabels": _job_selector(job)},
                        "ingress": [
                            {"from": [{"podSelector": {"matchLabels": _job_selector(job)}}]}
                        ],
                        "policyTypes": ["Ingress"],
                    },
                }
            )
        return objects

    def resource_refs(self, job: Job) -> list[ResourceRef]:
        """ConfigMap `<job>-svc`, Service `<job>`, NetworkPolicy `<job>` unless disabled."""
        ns, name = job.metadata.namespace, job.metadata.name
        refs = [
            ResourceRef("v1", "ConfigMap", ns, configmap_name(job)),
            ResourceRef("v1", "Service", ns, name),
        ]
        if not self.options.disable_network_policy:
            refs.append(ResourceRef(NETWORK_POLICY_API_VERSION, "NetworkPolicy", ns, name))
        return refs
