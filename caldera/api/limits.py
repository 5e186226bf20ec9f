"""Bounds on every size a tenant writes into a Volcano object, defined once.

A Job's `replicas` is a number the controllers turn into work (pods, pod names, PVCs, host
lists), so one Job of 2,000,000 replicas could make them use gigabytes. These bounds are far above
any real job (docs/reliability.md, "Bounds on what a spec can ask", gives the reasoning) and are
enforced in three places from this one table:

- admission: `job_limit_errors` and friends give Volcano-style messages naming the field
  (`spec.tasks[0].replicas: must be at most 10000 (got 2000000)`), which the webhooks return
  before any other check;
- the CRD schema: `SCHEMA_BOUNDS`, applied by `caldera.api.crdgen` (`maximum`, `maxItems`,
  `maxLength`, `maxProperties`). The models carry no such constraint, so a stored object over a
  bound (created before the CRD changed) still decodes and the controllers can hold it;
- the job controller: a stored Job over a bound is held (no pod, no PodGroup) with its
  `job_limit_errors` in status.

Pure functions over the models; an import-linter contract keeps `caldera.api` free of I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from caldera.api.volcano import JobSpec, PodGroupSpec, TaskSpec

__all__ = [
    "MAX_CLAIM_TEMPLATES",
    "MAX_CONTAINERS",
    "MAX_DEPENDS_ON",
    "MAX_ENV",
    "MAX_FLOWS",
    "MAX_JOB_REPLICAS",
    "MAX_JOB_VOLUMES",
    "MAX_MATCH_LABEL_KEYS",
    "MAX_NODE_NAME",
    "MAX_PLUGINS",
    "MAX_PLUGIN_ARGS",
    "MAX_PLUGIN_ARG_LENGTH",
    "MAX_POD_VOLUMES",
    "MAX_POLICIES",
    "MAX_SHARD_NODES",
    "MAX_SUB_GROUP_POLICIES",
    "MAX_TASKS",
    "MAX_TASK_REPLICAS",
    "SCHEMA_BOUNDS",
    "at_most",
    "job_limit_errors",
    "jobflow_limit_errors",
    "podgroup_limit_errors",
]

MAX_TASK_REPLICAS: Final = 10_000  # pods of one task
MAX_JOB_REPLICAS: Final = 10_000  # pods of one job, every task summed
MAX_TASKS: Final = 128  # tasks of one job
MAX_POLICIES: Final = 64  # lifecycle policies of the job, and of each task
MAX_DEPENDS_ON: Final = MAX_TASKS  # names in one task's dependsOn
MAX_PLUGINS: Final = 16  # entries of spec.plugins (Caldera knows 9 plugins)
MAX_PLUGIN_ARGS: Final = 32  # arguments of one plugin
MAX_PLUGIN_ARG_LENGTH: Final = 8192  # characters of one argument (an ssh key fits)
MAX_JOB_VOLUMES: Final = 64  # spec.volumes
MAX_CLAIM_TEMPLATES: Final = 16  # volumeClaimTemplates of one task (each is a PVC per pod)
MAX_CONTAINERS: Final = 64  # containers, and init containers, of one pod template
MAX_ENV: Final = 1024  # env entries of one container
# PodGroup subGroupPolicy entries (the job controller writes one per partitioned task), and the
# matchLabelKeys of one: the scheduler matches every pod of the job against them.
MAX_SUB_GROUP_POLICIES: Final = MAX_TASKS
MAX_MATCH_LABEL_KEYS: Final = 16
MAX_POD_VOLUMES: Final = 256  # volumes of one pod template
MAX_FLOWS: Final = MAX_TASKS  # flows of a JobFlow, and targets of one flow's dependsOn
# Nodes of one NodeShard list: above Kubernetes' largest tested cluster (15,000 nodes) with room.
# At node names' usual lengths (under 64 characters) the list stays under etcd's 1.5 MiB object
# limit; longer names would meet the API server's own refusal of the write, not a crash.
MAX_SHARD_NODES: Final = 20_000
MAX_NODE_NAME: Final = 253  # a node's name is a DNS subdomain
# A Numatopology (written by a node agent): CPUs of one node (the largest machines have under
# 2,000), its resources, the pods it has assigned (a node runs at most a few hundred) and the
# length of one cpuset string ("0-3,8,...": a few characters per CPU).
MAX_NUMA_CPUS: Final = 4096
MAX_NUMA_RESOURCES: Final = 64
MAX_NUMA_POD_ALLOCATIONS: Final = 1024
MAX_CPUSET_LENGTH: Final = 32768


def at_most(path: str, limit: int, got: int, what: str = "") -> str:
    """`path: must be at most <limit> (got <n>)`; with `what` (``items``): `must have at most`."""
    if what:
        return f"{path}: must have at most {limit} {what} (got {got})"
    return f"{path}: must be at most {limit} (got {got})"


def _count(path: str, items: Sequence[Any] | Mapping[str, Any], limit: int) -> Iterator[str]:
    if len(items) > limit:
        yield at_most(path, limit, len(items), "items")


def _template_errors(path: str, template: Mapping[str, Any]) -> Iterator[str]:
    """The sizes of a raw pod template (its other problems are podtemplate's)."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    if not isinstance(spec, Mapping):
        return
    volumes = spec.get("volumes")
    if isinstance(volumes, list):
        yield from _count(f"{path}.spec.volumes", volumes, MAX_POD_VOLUMES)
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        if not isinstance(containers, list):
            continue
        yield from _count(f"{path}.spec.{key}", containers, MAX_CONTAINERS)
        for k, container in enumerate(containers[: MAX_CONTAINERS + 1]):
            env = container.get("env") if isinstance(container, Mapping) else None
            if isinstance(env, list):
                yield from _count(f"{path}.spec.{key}[{k}].env", env, MAX_ENV)


def _task_errors(path: str, task: TaskSpec) -> Iterator[str]:
    if task.replicas > MAX_TASK_REPLICAS:
        # minAvailable is not said too: the webhook's defaulting copies replicas into it
        yield at_most(f"{path}.replicas", MAX_TASK_REPLICAS, task.replicas)
    elif task.min_available is not None and task.min_available > MAX_TASK_REPLICAS:
        yield at_most(f"{path}.minAvailable", MAX_TASK_REPLICAS, task.min_available)
    yield from _count(f"{path}.policies", task.policies, MAX_POLICIES)
    if task.depends_on is not None:
        yield from _count(f"{path}.dependsOn.name", task.depends_on.name, MAX_DEPENDS_ON)
    yield from _count(
        f"{path}.volumeClaimTemplates", task.volume_claim_templates, MAX_CLAIM_TEMPLATES
    )
    yield from _template_errors(f"{path}.template", task.template)


def _spec_errors(spec: JobSpec, path: str) -> Iterator[str]:
    yield from _count(f"{path}.tasks", spec.tasks, MAX_TASKS)
    total, task_over = 0, False
    for i, task in enumerate(spec.tasks[: MAX_TASKS + 1]):
        yield from _task_errors(f"{path}.tasks[{i}]", task)
        total += max(task.replicas, 0)
        task_over = task_over or task.replicas > MAX_TASK_REPLICAS
    if total > MAX_JOB_REPLICAS and not task_over:  # a task's own bound says it already
        yield (
            f"{path}.tasks: the replicas of all tasks must sum to at most {MAX_JOB_REPLICAS} "
            f"(got {total})"
        )
    for field, value in (("minAvailable", spec.min_available), ("minSuccess", spec.min_success)):
        if value is not None and value > MAX_JOB_REPLICAS:
            yield at_most(f"{path}.{field}", MAX_JOB_REPLICAS, value)
    yield from _count(f"{path}.policies", spec.policies, MAX_POLICIES)
    yield from _count(f"{path}.volumes", spec.volumes, MAX_JOB_VOLUMES)
    yield from _count(f"{path}.plugins", spec.plugins, MAX_PLUGINS)
    for name, args in list(spec.plugins.items())[: MAX_PLUGINS + 1]:
        yield from _count(f"{path}.plugins.{name}", args, MAX_PLUGIN_ARGS)
        for k, arg in enumerate(args[: MAX_PLUGIN_ARGS + 1]):
            if len(arg) > MAX_PLUGIN_ARG_LENGTH:
                yield at_most(
                    f"{path}.plugins.{name}[{k}]", MAX_PLUGIN_ARG_LENGTH, len(arg), "characters"
                )


def job_limit_errors(spec: JobSpec, path: str = "spec") -> list[str]:
    """Every bound a Job spec (or a CronJob's or JobTemplate's) exceeds, as field errors.

    Its cost does not grow with the numbers it checks: lists are only counted, and only the
    first items past a bound are looked into."""
    return list(_spec_errors(spec, path))


def podgroup_limit_errors(spec: PodGroupSpec) -> list[str]:
    """The bounds a PodGroup spec exceeds (a tenant may create PodGroups directly)."""
    errors = []
    if spec.min_member > MAX_JOB_REPLICAS:
        errors.append(at_most("spec.minMember", MAX_JOB_REPLICAS, spec.min_member))
    errors += _count("spec.minTaskMember", spec.min_task_member, MAX_TASKS)
    for task, member in list(spec.min_task_member.items())[: MAX_TASKS + 1]:
        if member > MAX_TASK_REPLICAS:
            errors.append(at_most(f"spec.minTaskMember[{task}]", MAX_TASK_REPLICAS, member))
    policies = spec.sub_group_policy
    errors += _count("spec.subGroupPolicy", policies, MAX_SUB_GROUP_POLICIES)
    for i, policy in enumerate(policies[: MAX_SUB_GROUP_POLICIES + 1]):
        keys = policy.match_label_keys
        errors += _count(f"spec.subGroupPolicy[{i}].matchLabelKeys", keys, MAX_MATCH_LABEL_KEYS)
    return errors


def jobflow_limit_errors(flows: Sequence[Any]) -> list[str]:
    """The bounds a JobFlow's flows exceed: their number and each one's dependsOn targets."""
    errors = list(_count("spec.flows", flows, MAX_FLOWS))
    for i, flow in enumerate(flows[: MAX_FLOWS + 1]):
        if flow.depends_on is not None:
            targets = flow.depends_on.targets
            errors += _count(f"spec.flows[{i}].dependsOn.targets", targets, MAX_FLOWS)
    return errors


# --- the same bounds in the CRDs' schemas --------------------------------------------------------

# Schema node (a dotted path; "[]" steps into array items, "{}" into map values) -> keywords.
_JOB_SPEC_BOUNDS: Final[Mapping[str, Mapping[str, int]]] = {
    "minAvailable": {"maximum": MAX_JOB_REPLICAS},
    "minSuccess": {"maximum": MAX_JOB_REPLICAS},
    "tasks": {"maxItems": MAX_TASKS},
    "tasks.[].replicas": {"maximum": MAX_TASK_REPLICAS},
    "tasks.[].minAvailable": {"maximum": MAX_TASK_REPLICAS},
    "tasks.[].policies": {"maxItems": MAX_POLICIES},
    "tasks.[].dependsOn.name": {"maxItems": MAX_DEPENDS_ON},
    "tasks.[].volumeClaimTemplates": {"maxItems": MAX_CLAIM_TEMPLATES},
    "policies": {"maxItems": MAX_POLICIES},
    "volumes": {"maxItems": MAX_JOB_VOLUMES},
    "plugins": {"maxProperties": MAX_PLUGINS},
    "plugins.{}": {"maxItems": MAX_PLUGIN_ARGS},
    "plugins.{}.[]": {"maxLength": MAX_PLUGIN_ARG_LENGTH},
}


def _prefixed(prefix: str) -> dict[str, Mapping[str, int]]:
    return {f"{prefix}.{path}": keywords for path, keywords in _JOB_SPEC_BOUNDS.items()}


# Kind -> schema node under openAPIV3Schema -> keywords. The per-job sum of replicas has no
# schema keyword: the webhook and the job controller enforce it.
SCHEMA_BOUNDS: Final[Mapping[str, Mapping[str, Mapping[str, int]]]] = {
    "Job": _prefixed("spec"),
    "JobTemplate": _prefixed("spec"),
    "CronJob": _prefixed("spec.jobTemplate.spec"),
    "PodGroup": {
        "spec.minMember": {"maximum": MAX_JOB_REPLICAS},
        "spec.minTaskMember": {"maxProperties": MAX_TASKS},
        "spec.minTaskMember.{}": {"maximum": MAX_TASK_REPLICAS},
        "spec.subGroupPolicy": {"maxItems": MAX_SUB_GROUP_POLICIES},
        "spec.subGroupPolicy.[].matchLabelKeys": {"maxItems": MAX_MATCH_LABEL_KEYS},
    },
    "JobFlow": {
        "spec.flows": {"maxItems": MAX_FLOWS},
        "spec.flows.[].dependsOn.targets": {"maxItems": MAX_FLOWS},
    },
    "Numatopology": {
        "spec.policies": {"maxProperties": 2},
        "spec.resReserved": {"maxProperties": MAX_NUMA_RESOURCES},
        "spec.numares": {"maxProperties": MAX_NUMA_RESOURCES},
        "spec.numares.{}.allocatable": {"maxLength": MAX_CPUSET_LENGTH},
        "spec.cpuDetail": {"maxProperties": MAX_NUMA_CPUS},
        "spec.podAllocations": {"maxItems": MAX_NUMA_POD_ALLOCATIONS},
        "spec.podAllocations.[].containerAllocations": {"maxItems": 2 * MAX_CONTAINERS},
        "spec.podAllocations.[].containerAllocations.[].allocations": {
            "maxProperties": MAX_NUMA_RESOURCES
        },
        "spec.podAllocations.[].containerAllocations.[].allocations.{}": {
            "maxLength": MAX_CPUSET_LENGTH
        },
    },
    "NodeShard": {
        f"{path}{items}": keywords
        for path in (
            "spec.nodesDesired",
            "status.nodesInUse",
            "status.nodesToAdd",
            "status.nodesToRemove",
        )
        for items, keywords in (
            ("", {"maxItems": MAX_SHARD_NODES}),
            (".[]", {"maxLength": MAX_NODE_NAME}),
        )
    },
}
