"""Admission of Volcano Jobs: defaulting (`mutate_job`) and validation (`validate_job_create`,
`validate_job_update`), as Volcano's pkg/webhooks/admission/jobs/mutate/mutate_job.go and
jobs/validate/admit_job.go do.

Messages. Volcano builds a job's refusal by concatenating `" <problem>;"` fragments; so does this
module, with Volcano's wording, and each fragment starts with the field it is about
(`spec.tasks[1].replicas: 'replicas' < 0 in task: worker, job: train;`) so the user knows where to
look. The first four checks (minAvailable, maxRetry, ttlSecondsAfterFinished, no task) and the mpi
master check return at once, as in Volcano.

Deliberate differences from Volcano, all stricter or more precise, none refusing a job Volcano
runs correctly:
- a queue with no `status.state` yet counts as Open (a queue just created, before the queue
  controller has opened it); Volcano refuses jobs to it;
- a policy's action is checked for exit-code policies too, and its timeout must be a duration;
- plugin arguments are parsed with `caldera.api.plugins` and a bad one refused, exactly as the
  job controller would fail on it (Volcano's plugins ignore parse errors); so is a ray job
  without its head task (Volcano admits it and then fails every pod) or with a name too long
  for ray's Service `<job>-head-svc`;
- the pod-name check uses the task's last pod index (Volcano uses the task's position);
- dependsOn must name tasks of the job; task maxRetry, minSuccess and networkTopology are checked;
- sizes are bounded (`caldera.api.limits`: replicas per task and per job, tasks, policies,
  plugins, volumes, containers, env): a job over a bound is refused before any other check, on
  create and on update, with `<field>: must be at most <limit> (got <n>)`; Volcano has no bounds;
- a job that runs the svc plugin (named, or added for a framework plugin) must have a name the
  plugin's Service can take, a DNS-1035 label (`1train` and `a.b` are refused);
- Caldera's `volumeClaimTemplates` are checked (docs/concepts.md): unique DNS-1123 label names,
  quantity values, and `<template>-<job>-<task>-<index>` a DNS subdomain of at most 253 characters.

Mutation patches field by field (never replacing whole tasks), so fields of a newer Volcano that
the models do not know survive defaulting.

Functions over models and a `ClusterView`. An import-linter contract keeps this module free of I/O
(docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from caldera.api.duration import DurationError, parse_duration
from caldera.api.fielderrors import invalid, quantity_errors
from caldera.api.jobspec import (
    PLUGINS,
    default_max_retry,
    default_task_min_available,
    default_task_name,
    job_min_available,
    required_plugins,
    service_name_error,
    uses_svc,
)
from caldera.api.limits import job_limit_errors
from caldera.api.names import (
    dns1123_label,
    dns1123_subdomain,
    go_list,
    pod_name,
    pvc_name,
    qualified_name,
)
from caldera.api.plugins import (
    SSH_PRIVATE_KEY_REFUSED,
    MPIOptions,
    PluginArgumentError,
    SSHOptions,
    parse_plugin_args,
    plugin_job_errors,
)
from caldera.api.podtemplate import template_errors, template_volume_names
from caldera.api.volcano import (
    DEFAULT_QUEUE,
    POLICY_ACTIONS,
    POLICY_EVENTS,
    ROOT_QUEUE,
    Event,
    Job,
    LifecyclePolicy,
    NetworkTopologySpec,
    NumaPolicy,
    QueueState,
    TaskSpec,
    policy_events,
)
from webhooks.admission import PatchOp, add, apply_patch
from webhooks.view import ClusterView

__all__ = [
    "UPDATE_FORBIDDEN",
    "defaulted_job",
    "mutate_job",
    "network_topology_error",
    "validate_job_create",
    "validate_job_update",
    "validate_policies",
]

_VALID_EVENTS: Final = go_list([str(e) for e in POLICY_EVENTS])
_VALID_ACTIONS: Final = go_list([str(a) for a in POLICY_ACTIONS])
_POLICY_HINT: Final = f" valid events are {_VALID_EVENTS}, valid actions are {_VALID_ACTIONS};"
_NUMA_POLICIES: Final = tuple(p.value for p in NumaPolicy)
UPDATE_FORBIDDEN: Final = (
    "job updates may not change fields other than `minAvailable`, "
    "`tasks[*].replicas under spec` and `PriorityClassName`"
)


# --- mutation -----------------------------------------------------------------------------------


def mutate_job(job: Job, *, scheduler_name: str) -> list[PatchOp]:
    """The JSON patch that completes a new job with Volcano's defaults (mutate_job.go).

    queue "default", schedulerName, maxRetry 3 (job and tasks), task names `default<i>`, task
    minAvailable, job minAvailable (the sum of the defaulted tasks'), dnsPolicy
    ClusterFirstWithHostNet for hostNetwork pods, and the svc/ssh plugins a framework plugin
    needs. A job without tasks gets no patch: validation refuses it.
    """
    spec = job.spec
    if not spec.tasks:
        return []
    ops: list[PatchOp] = []
    if not spec.queue:
        ops.append(add("/spec/queue", DEFAULT_QUEUE))
    if not spec.scheduler_name:
        ops.append(add("/spec/schedulerName", scheduler_name))
    if spec.max_retry == 0:
        ops.append(add("/spec/maxRetry", default_max_retry(0)))
    for i, task in enumerate(spec.tasks):
        base = f"/spec/tasks/{i}"
        if not task.name:
            ops.append(add(f"{base}/name", default_task_name(i)))
        if task.min_available is None:
            ops.append(add(f"{base}/minAvailable", default_task_min_available(task)))
        if task.max_retry == 0:
            ops.append(add(f"{base}/maxRetry", default_max_retry(0)))
        pod_spec = task.template.get("spec")
        if (
            isinstance(pod_spec, dict)
            and pod_spec.get("hostNetwork") is True
            and not pod_spec.get("dnsPolicy")
        ):
            ops.append(add(f"{base}/template/spec/dnsPolicy", "ClusterFirstWithHostNet"))
    if spec.min_available == 0:
        ops.append(add("/spec/minAvailable", job_min_available(spec.tasks)))
    missing = required_plugins(spec.plugins)
    if missing:
        merged = {name: list(args) for name, args in spec.plugins.items()}
        merged.update({name: list(args) for name, args in missing.items()})
        ops.append(add("/spec/plugins", merged))
    return ops


def defaulted_job(job: Job, *, scheduler_name: str) -> Job:
    """`job` as the API server stores it once `mutate_job`'s patch is applied (a CronJob's
    template is checked so, and the simulator admits a trace's Jobs so)."""
    ops = mutate_job(job, scheduler_name=scheduler_name)
    if not ops:
        return job
    document = msgspec.json.decode(msgspec.json.encode(job))
    return msgspec.convert(apply_patch(document, ops), Job)


# --- policies -----------------------------------------------------------------------------------


def _timeout_error(path: str, policy: LifecyclePolicy) -> str | None:
    if policy.timeout is None:
        return None
    try:
        seconds = parse_duration(policy.timeout)
    except DurationError as exc:
        return invalid(f"{path}.timeout", policy.timeout, str(exc))
    if seconds < 0:
        return invalid(f"{path}.timeout", policy.timeout, "must not be negative")
    return None


def validate_policies(policies: Sequence[LifecyclePolicy], path: str) -> list[str]:
    """Problems of a list of lifecycle policies (Volcano's `validatePolicies`), field by field.

    The scan stops at the first bad policy, as Volcano's does; the `*` rule is checked last.
    """
    errors: list[str] = []
    events_seen: set[str] = set()
    exit_codes: set[int] = set()
    for j, policy in enumerate(policies):
        p = f"{path}[{j}]"
        has_event = bool(policy.event or policy.events)
        if has_event and policy.exit_code is not None:
            errors.append(f"{p}: must not specify event and exitCode simultaneously")
            break
        if not has_event and policy.exit_code is None:
            errors.append(f"{p}: either event and exitCode should be specified")
            break
        if policy.action not in POLICY_ACTIONS:
            errors.append(invalid(f"{p}.action", policy.action, "invalid policy action"))
            break
        timeout = _timeout_error(p, policy)
        if timeout:
            errors.append(timeout)
            break
        if has_event:
            bad = ""
            # Volcano merges `event` into `events` and drops repeats within one policy.
            for event in dict.fromkeys(policy_events(policy)):
                if event not in POLICY_EVENTS:
                    bad = invalid(f"{p}.event", event, "invalid policy event")
                elif event in events_seen:
                    bad = f"{p}.event: duplicate event {event}  across different policy"
                if bad:
                    break
                events_seen.add(event)
            if bad:
                errors.append(bad)
                break
        else:
            code = policy.exit_code
            assert code is not None  # has_event is False and the both-unset case broke above
            if code == 0:
                errors.append(f"{p}.exitCode: 0 is not a valid error code")
                break
            if code in exit_codes:
                errors.append(f"{p}.exitCode: duplicate exitCode {code}")
                break
            exit_codes.add(code)
    if Event.ANY in events_seen and len(events_seen) > 1:
        errors.append(f"{path}: if there's * here, no other policy should be here")
    return errors


def _policy_fragment(policies: Sequence[LifecyclePolicy], path: str) -> str:
    errors = validate_policies(policies, path)
    if not errors:
        return ""
    return " " + "; ".join(errors) + ";" + _POLICY_HINT


# --- create -------------------------------------------------------------------------------------


def network_topology_error(path: str, nt: NetworkTopologySpec | None) -> str:
    """The networkTopology rule: highestTierAllowed and highestTierName are exclusive."""
    if nt is None:
        return ""
    if nt.highest_tier_allowed is not None and nt.highest_tier_name:
        return (
            f" {path}: must not specify 'highestTierAllowed' and 'highestTierName' in "
            "networkTopology simultaneously;"
        )
    if nt.highest_tier_allowed is not None and nt.highest_tier_allowed < 0:
        return f" {invalid(path + '.highestTierAllowed', nt.highest_tier_allowed, 'must be >= 0')};"
    if nt.mode not in ("hard", "soft"):
        return f' {path}.mode: Unsupported value: "{nt.mode}": supported values: "hard", "soft";'
    return ""


def _task_fragment(job: Job, i: int, task: TaskSpec) -> str:
    """Every problem of one task except the duplicate-name rule (the caller's loop)."""
    p = f"spec.tasks[{i}]"
    jn = job.metadata.name
    msg = ""
    if task.replicas < 0:
        msg += f" {p}.replicas: 'replicas' < 0 in task: {task.name}, job: {jn};"
    if task.min_available is not None:
        if task.min_available < 0:
            msg += f" {p}.minAvailable: 'minAvailable' < 0 in task: {task.name}, job: {jn};"
        elif task.min_available > task.replicas:
            msg += (
                f" {p}.minAvailable: 'minAvailable' is greater than 'replicas' in task: "
                f"{task.name}, job: {jn};"
            )
    if task.max_retry < 0:
        msg += f" {p}.maxRetry: 'maxRetry' cannot be less than zero.;"
    errs = dns1123_label(task.name)
    if errs:
        msg += f" {p}.name: {go_list(errs)};"
    msg += _policy_fragment(task.policies, f"{p}.policies")
    last = pod_name(jn, task.name, max(task.replicas - 1, 0))
    errs = qualified_name(last)
    if errs and task.name and jn:
        msg += f" {p}.name: create pod with name {last} validate failed {go_list(errs)};"
    if task.topology_policy and task.topology_policy not in _NUMA_POLICIES:
        supported = ", ".join(f'"{v}"' for v in _NUMA_POLICIES)
        msg += (
            f' {p}.topologyPolicy: Unsupported value: "{task.topology_policy}": '
            f"supported values: {supported};"
        )
    numa = task.topology_policy not in ("", NumaPolicy.NONE.value)
    # Volcano prefixes Kubernetes' field errors of the template with "spec.task[i]."
    claims = [t.metadata.name for t in task.volume_claim_templates]
    for e in template_errors(
        f"spec.task[{i}].template", task.template, numa=numa, task_index=i, extra_volumes=claims
    ):
        msg += f" {e};"
    msg += _partition_fragment(p, task, jn)
    msg += _claim_templates_fragment(job, p, task)
    return msg


def _partition_fragment(p: str, task: TaskSpec, job: str) -> str:
    """Volcano's validatePartitionPolicy: its messages and its order, the first problem only,
    then the networkTopology check. ``minPartitions < 0`` is Caldera's (Volcano's schema has no
    minimum for it, and a negative count would make minAvailable negative)."""
    pp = task.partition_policy
    if pp is None:
        return ""
    where = f"in task: {task.name}, job: {job};"
    if pp.total_partitions <= 0:
        msg = f" {p}.partitionPolicy.totalPartitions: 'TotalPartitions' must be greater than 0"
        msg += f" {where}"
    elif pp.partition_size <= 0:
        msg = f" {p}.partitionPolicy.partitionSize: 'PartitionSize' must be greater than 0 {where}"
    elif pp.min_partitions < 0:
        msg = f" {p}.partitionPolicy.minPartitions: 'MinPartitions' must be >= 0 {where}"
    elif task.replicas != pp.total_partitions * pp.partition_size:
        msg = f" {p}.replicas: 'Replicas' are not equal to TotalPartitions*PartitionSize {where}"
    elif (
        task.min_available is not None
        and pp.min_partitions > 0
        and task.min_available != pp.min_partitions * pp.partition_size
    ):
        # Only when minPartitions is set: without it minAvailable defaults to replicas.
        msg = (
            f" {p}.minAvailable: 'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"
        )
    else:
        msg = ""
    return msg + network_topology_error(f"{p}.partitionPolicy.networkTopology", pp.network_topology)


def _claim_templates_fragment(job: Job, p: str, task: TaskSpec) -> str:
    """Caldera's volumeClaimTemplates: each pod gets PVC `<template>-<job>-<task>-<index>`."""
    msg = ""
    seen: set[str] = set()
    overridden = template_volume_names(task.template)
    last = max(task.replicas - 1, 0)
    for k, vct in enumerate(task.volume_claim_templates):
        vp = f"{p}.volumeClaimTemplates[{k}]"
        name = vct.metadata.name
        if not name:
            msg += f" {vp}.metadata.name: Required value;"
            continue
        errs = dns1123_label(name)
        if errs:
            msg += f" {vp}.metadata.name: the name is the pod's volume name: {go_list(errs)};"
            continue
        if name in seen:
            msg += f' {vp}.metadata.name: Duplicate value: "{name}";'
        seen.add(name)
        if name in overridden:
            continue  # the template's own volume wins; no PVC is made
        claim = pvc_name(name, pod_name(job.metadata.name, task.name, last))
        errs = dns1123_subdomain(claim)
        if errs and job.metadata.name and task.name:
            msg += (
                f" {vp}.metadata.name: the PVC {claim} of pod {last} would be invalid: "
                f"{go_list(errs)};"
            )
        res = vct.spec.get("resources")
        if isinstance(res, dict):
            for e in quantity_errors(f"{vp}.spec.resources.requests", res.get("requests")):
                msg += f" {e};"
        elif res is not None:
            msg += f" {invalid(vp + '.spec.resources', res, 'must be an object')};"
    return msg


def _volumes_fragment(job: Job) -> str:
    """Volcano's `validateIO`: stops at the first bad volume."""
    seen: set[str] = set()
    for i, v in enumerate(job.spec.volumes):
        p = f"spec.volumes[{i}]"
        if not v.mount_path:
            return f" {p}.mountPath: mountPath is required;"
        if v.mount_path in seen:
            return f" {p}.mountPath: duplicated mountPath: {v.mount_path};"
        if v.volume_claim is None and not v.volume_claim_name:
            return f" {p}: either VolumeClaim or VolumeClaimName must be specified;"
        if v.volume_claim_name:
            if v.volume_claim is not None:
                return (
                    f" {p}: conflict: If you want to use an existing PVC, just specify "
                    "VolumeClaimName.If you want to create a new PVC, you do not need to specify "
                    "VolumeClaimName;"
                )
            errs = dns1123_subdomain(v.volume_claim_name)
            if errs:
                return (
                    f" {p}.volumeClaimName: invalid VolumeClaimName {v.volume_claim_name} : "
                    f"{go_list(errs)};"
                )
        seen.add(v.mount_path)
    return ""


def _queue_fragment(job: Job, cluster: ClusterView) -> str:
    name = job.spec.queue or DEFAULT_QUEUE
    queue = cluster.queue(name)
    if queue is None:
        return (
            f' spec.queue: unable to find job queue: queue.scheduling.volcano.sh "{name}" '
            "not found;"
        )
    state = queue.status.state or QueueState.OPEN.value
    if state != QueueState.OPEN:
        return (
            " spec.queue: can only submit job to queue with state `Open`, "
            f"queue `{name}` status is `{state}`;"
        )
    if name == ROOT_QUEUE:
        return " spec.queue: can not submit job to root queue;"
    children = cluster.child_queues(name)
    if children:
        return (
            f" spec.queue: can only submit job to leaf queue, queue `{name}` has "
            f"{len(children)} child queues;"
        )
    return ""


def _dependencies_fragment(job: Job) -> str:
    tasks = job.spec.tasks
    names = {t.name for t in tasks}
    edges: dict[str, set[str]] = {t.name: set() for t in tasks}
    msg = ""
    any_deps = False
    for i, t in enumerate(tasks):
        if t.depends_on is None:
            continue
        any_deps = True
        if t.depends_on.iteration not in ("", "any", "all"):
            msg += (
                f" spec.tasks[{i}].dependsOn.iteration: Unsupported value: "
                f'"{t.depends_on.iteration}": supported values: "any", "all";'
            )
        for dep in t.depends_on.name:
            if dep not in names:
                msg += f" spec.tasks[{i}].dependsOn.name: task {dep} is not a task of this job;"
            else:
                edges[t.name].add(dep)
    if not any_deps:
        return msg
    # Kahn's algorithm: the graph is a DAG iff every task can be ordered.
    indegree = {n: len(d) for n, d in edges.items()}
    ready = [n for n, d in indegree.items() if d == 0]
    dependents: dict[str, list[str]] = {n: [] for n in edges}
    for n, deps in edges.items():
        for d in deps:
            dependents[d].append(n)
    ordered = 0
    while ready:
        n = ready.pop()
        ordered += 1
        for m in dependents[n]:
            indegree[m] -= 1
            if indegree[m] == 0:
                ready.append(m)
    if ordered < len(edges):
        msg += (
            " spec.tasks: job has dependencies between tasks, but doesn't form a directed "
            "acyclic graph(DAG);"
        )
    return msg


def _plugins_fragment(job: Job) -> str:
    msg = ""
    for name, args in job.spec.plugins.items():
        if name not in PLUGINS:
            msg += f" spec.plugins: unable to find job plugin: {name};"
            continue
        try:
            options = parse_plugin_args(name, args)
        except PluginArgumentError as exc:
            msg += f" spec.plugins.{name}: {exc};"
            continue
        if isinstance(options, SSHOptions) and options.private_key:
            msg += f" spec.plugins.ssh: {SSH_PRIVATE_KEY_REFUSED};"
        for problem in plugin_job_errors(options, job):
            msg += f" {problem};"
    return msg


def _mpi_master(job: Job) -> str:
    try:
        options = parse_plugin_args("mpi", job.spec.plugins["mpi"])
    except PluginArgumentError:
        return "master"  # the bad argument is reported with the plugins
    return options.master if isinstance(options, MPIOptions) else "master"


def validate_job_create(job: Job, cluster: ClusterView | None) -> str:
    """Why a new job is refused (Volcano's `validateJobCreate`), or "" when it is admitted.

    With no `cluster`, only the checks of the job itself run, not the queue's: a CronJob's
    template is checked so, its queue being looked up when each of its Jobs is created."""
    spec = job.spec
    bounds = job_limit_errors(spec)
    if bounds:
        # First and alone: the other checks' cost grows with the sizes refused here.
        return "; ".join(bounds)
    if spec.min_available < 0:
        return "spec.minAvailable: job 'minAvailable' must be >= 0."
    if spec.max_retry < 0:
        return "spec.maxRetry: 'maxRetry' cannot be less than zero."
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        return "spec.ttlSecondsAfterFinished: 'ttlSecondsAfterFinished' cannot be less than zero."
    if not spec.tasks:
        return "spec.tasks: No task specified in job spec"
    if "mpi" in spec.plugins:
        master = _mpi_master(job)
        if all(t.name != master for t in spec.tasks):
            return (
                f"spec.plugins.mpi: The specified mpi master task was not found (--master={master})"
            )

    msg = ""
    names: set[str] = set()
    total_replicas = 0
    for i, task in enumerate(spec.tasks):
        msg += _task_fragment(job, i, task)
        total_replicas += task.replicas
        if task.name in names:
            msg += f" spec.tasks[{i}].name: duplicated task name {task.name};"
            break
        names.add(task.name)

    errs = qualified_name(job.metadata.name)
    if errs:
        msg += (
            f" metadata.name: create job with name {job.metadata.name} validate failed "
            f"{go_list(errs)};"
        )
    if not errs and uses_svc(spec.plugins):
        svc = service_name_error(job.metadata.name)
        if svc:
            msg += f" {svc};"
    if total_replicas < spec.min_available:
        msg += (
            " spec.minAvailable: job 'minAvailable' should not be greater than total replicas "
            "in tasks;"
        )
    if spec.min_success is not None:
        if spec.min_success < 1:
            msg += " spec.minSuccess: 'minSuccess' must be >= 1;"
        elif spec.min_success > total_replicas:
            msg += (
                " spec.minSuccess: job 'minSuccess' should not be greater than total replicas "
                "in tasks;"
            )
    msg += _policy_fragment(spec.policies, "spec.policies")
    msg += _plugins_fragment(job)
    msg += _volumes_fragment(job)
    if cluster is not None:
        msg += _queue_fragment(job, cluster)
    msg += _dependencies_fragment(job)
    msg += network_topology_error("spec.networkTopology", spec.network_topology)
    return msg.strip()


# --- update -------------------------------------------------------------------------------------


def _comparable(job: Job) -> Job:
    """The spec with the fields an update may change blanked out."""
    spec = job.spec
    tasks = tuple(msgspec.structs.replace(t, replicas=0, min_available=None) for t in spec.tasks)
    # The job controller fills in volumeClaimName for the PVCs it creates.
    volumes = tuple(
        msgspec.structs.replace(v, volume_claim_name="") if v.volume_claim is not None else v
        for v in spec.volumes
    )
    blank = msgspec.structs.replace(
        spec, min_available=0, priority_class_name="", tasks=tasks, volumes=volumes
    )
    return msgspec.structs.replace(job, spec=blank)


def validate_job_update(old: Job, new: Job) -> str:
    """Why a job update is refused (Volcano's `validateJobUpdate`), or "" when it is admitted.

    Only spec.minAvailable, tasks[*].replicas, tasks[*].minAvailable and spec.priorityClassName
    may change (scaling); volumeClaimName differences are ignored where volumeClaim is set.
    """
    bounds = job_limit_errors(new.spec)
    if bounds:
        return "; ".join(bounds)  # scaling up is an update: the same bounds
    total = 0
    for i, task in enumerate(new.spec.tasks):
        p = f"spec.tasks[{i}]"
        if task.replicas < 0:
            return f"{p}.replicas: 'replicas' must be >= 0 in task: {task.name}"
        if task.min_available is not None and task.min_available < 0:
            return f"{p}.minAvailable: 'minAvailable' must be >= 0 in task: {task.name}"
        if task.min_available is not None and task.min_available > task.replicas:
            return f"{p}.minAvailable: 'minAvailable' must be <= 'replicas' in task: {task.name}"
        partitions = _partition_fragment(p, task, new.metadata.name)
        if partitions:  # a partitioned task scales by whole partitions, as Volcano checks
            return partitions.strip().removesuffix(";")
        total += task.replicas
    if new.spec.min_available > total:
        return "spec.minAvailable: job 'minAvailable' must not be greater than total replicas"
    if new.spec.min_available < 0:
        return "spec.minAvailable: job 'minAvailable' must be >= 0"
    if len(old.spec.tasks) != len(new.spec.tasks):
        return "spec.tasks: job updates may not add or remove tasks"
    if _comparable(old).spec != _comparable(new).spec:
        changed = _changed_fields(_comparable(old), _comparable(new))
        return f"spec: {UPDATE_FORBIDDEN} (changed: {', '.join(changed)})"
    return ""


def _changed_fields(old: Job, new: Job) -> list[str]:
    """The spec fields (and task fields) that differ, for the refusal message."""
    changed = []
    for field in msgspec.structs.fields(old.spec):
        a, b = getattr(old.spec, field.name), getattr(new.spec, field.name)
        if a == b:
            continue
        if field.name == "tasks":
            for i, (ta, tb) in enumerate(zip(a, b, strict=True)):
                for tf in msgspec.structs.fields(ta):
                    if getattr(ta, tf.name) != getattr(tb, tf.name):
                        changed.append(f"spec.tasks[{i}].{tf.encode_name}")
        else:
            changed.append(f"spec.{field.encode_name}")
    return changed
