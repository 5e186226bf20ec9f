"""Checks of a task's pod template: the rules of Kubernetes' ``ValidatePodTemplate`` that a job
manifest breaks in practice, with the API server's field paths and wording.

Volcano's job webhook runs the whole of Kubernetes' in-process ``ValidatePodTemplate`` on each
task's template and refuses the Job with its field errors, prefixed ``spec.task[i].``
(``pkg/webhooks/admission/jobs/validate/admit_job.go``); the job controller of Caldera runs the
same checks before creating pods, so a Job stored before the webhook was installed is reported
once instead of failing every pod create (docs/webhook.md).

Covered, as the API server words them (``field: Invalid value: "v": detail``, ``field: Required
value``, ``field: Duplicate value: "v"``, ``field: Unsupported value: ...``, ``field: Not found:
"v"``, ``field: Forbidden: ...``):

- containers present; container and init-container names (DNS-1123 labels, unique across both
  lists) and images; ports (numbers 1-65535, protocol, IANA port names unique per container);
  environment variable names (present, no ``=``); volume mounts (name of a volume, mountPath);
- resource quantities: each parses, is >= 0, requests <= limits; extended resources (a
  ``domain/name`` outside ``kubernetes.io``) are whole numbers with requests equal to limits;
- restartPolicy and dnsPolicy values; volume names (DNS-1123 labels, unique) and at most one
  volume source each.

Not covered (the API server still refuses them at pod create, and the job controller then
reports the 422 once, the same way): probes, lifecycle hooks, security contexts, affinity,
tolerations, topology spread, environment variable sources, and the rest of the pod spec.

The template is the raw JSON the user wrote (passed to the pods whole), so every access checks
the type first: a string where an object belongs is reported, never raised.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from fractions import Fraction
from typing import Any, Final

from caldera.api.fielderrors import (
    duplicate,
    extended_resource,
    invalid,
    not_found,
    quantity_errors,
    required,
    type_error,
    unsupported,
)
from caldera.api.names import dns1123_label
from caldera.api.quantity import milli_value, parse_quantity
from caldera.api.volcano import Job

__all__ = [
    "DNS_POLICIES",
    "PORT_PROTOCOLS",
    "RESTART_POLICIES",
    "job_template_errors",
    "template_errors",
    "template_volume_names",
]

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
DNS_POLICIES: Final = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PORT_PROTOCOLS: Final = ("SCTP", "TCP", "UDP")  # sorted, as the API server lists them
_PORT_RANGE: Final = "must be between 1 and 65535, inclusive"
_PORT_NAME_MAX: Final = 15
_PORT_NAME_CHARS: Final = re.compile(r"[-a-z0-9]+")
_PORT_NAME_LETTER: Final = re.compile(r"[a-z]")
# Volume sources in the order Kubernetes' validateVolumeSource checks them: every source after
# the first is the one reported.
_VOLUME_SOURCES: Final = (
    *("emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore", "secret"),
    *("nfs", "iscsi", "glusterfs", "flexVolume", "persistentVolumeClaim", "rbd", "cinder"),
    *("cephfs", "flocker", "downwardAPI", "fc", "azureFile", "vsphereVolume", "quobyte"),
    *("azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos"),
    *("configMap", "projected", "csi", "ephemeral", "image"),
)


def _resources_errors(path: str, res: object, numa: bool) -> tuple[list[str], Mapping[str, Any]]:
    """Problems of a container's ``resources``, and its effective requests (for the NUMA rule:
    a limit without a request is the request)."""
    if res is None:
        return [], {}
    if not isinstance(res, Mapping):
        return [type_error(path, res, "an object")], {}
    errors = quantity_errors(f"{path}.requests", res.get("requests"))
    errors += quantity_errors(f"{path}.limits", res.get("limits"))
    if errors:
        return errors, {}
    requests: Mapping[str, Any] = res.get("requests") or {}
    limits: Mapping[str, Any] = res.get("limits") or {}
    for key, want in requests.items():
        if key not in limits:
            if extended_resource(str(key)):
                errors.append(
                    required(f"{path}.limits", "Limit must be set for non overcommitable resources")
                )
            continue
        want_q, limit_q = parse_quantity(want), parse_quantity(limits[key])
        # The API server names the requests list here, not the resource.
        if extended_resource(str(key)) and want_q != limit_q:
            detail = f"must be equal to {key} limit of {_canonical(limits[key], limit_q)}"
            errors.append(invalid(f"{path}.requests", want, detail))
        elif want_q > limit_q:
            detail = f"must be less than or equal to {key} limit of {limits[key]}"
            errors.append(invalid(f"{path}.requests", want, detail))
    if numa and "cpu" not in requests and "cpu" in limits:
        requests = {**requests, "cpu": limits["cpu"]}
    return errors, requests


def _canonical(raw: object, value: Fraction) -> str:
    """A whole quantity as the API server prints it ("2"); anything else as written."""
    return str(value.numerator) if value.denominator == 1 else str(raw)


def _port_name_errors(name: str) -> list[str]:
    """IsValidPortName: an IANA service name."""
    errors = []
    if len(name) > _PORT_NAME_MAX:
        errors.append(f"must be no more than {_PORT_NAME_MAX} characters")
    if not _PORT_NAME_CHARS.fullmatch(name):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errors.append("must not contain consecutive hyphens")
    if not _PORT_NAME_LETTER.search(name):
        errors.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _port_number(path: str, value: object, *, zero_ok: bool) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int):
        if value is None and zero_ok:
            return []
        return [required(path)] if value is None else [type_error(path, value, "an integer")]
    if value == 0:
        return [] if zero_ok else [required(path)]
    return [] if 1 <= value <= 65535 else [invalid(path, value, _PORT_RANGE)]


def _objects(path: str, value: object) -> tuple[list[str], list[tuple[str, Mapping[str, Any]]]]:
    """A list of objects: the type errors, and each object with its path."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [type_error(path, value, "a list")], []
    errors: list[str] = []
    items: list[tuple[str, Mapping[str, Any]]] = []
    for k, item in enumerate(value):
        if isinstance(item, Mapping):
            items.append((f"{path}[{k}]", item))
        else:
            errors.append(type_error(f"{path}[{k}]", item, "an object"))
    return errors, items


def _ports_errors(path: str, ports: object) -> list[str]:
    errors, items = _objects(path, ports)
    names: set[str] = set()
    for p, port in items:
        errors += _port_number(f"{p}.containerPort", port.get("containerPort"), zero_ok=False)
        errors += _port_number(f"{p}.hostPort", port.get("hostPort"), zero_ok=True)
        protocol = port.get("protocol")
        if protocol is not None and protocol not in PORT_PROTOCOLS:
            errors.append(unsupported(f"{p}.protocol", protocol, PORT_PROTOCOLS))
        name = port.get("name")
        if isinstance(name, str) and name:
            errors += [invalid(f"{p}.name", name, e) for e in _port_name_errors(name)]
            if name in names:
                errors.append(duplicate(f"{p}.name", name))
            names.add(name)
    return errors


def _env_errors(path: str, env: object) -> list[str]:
    errors, items = _objects(path, env)
    for p, var in items:
        name = var.get("name")
        if not isinstance(name, str) or not name:
            errors.append(required(f"{p}.name"))
        elif not name.isprintable() or not name.isascii() or "=" in name:
            detail = "a valid environment variable name must consist only of printable ASCII "
            detail += "characters other than '='"
            errors.append(invalid(f"{p}.name", name, detail))
    return errors


def _mounts_errors(path: str, mounts: object, volumes: Collection[str]) -> list[str]:
    errors, items = _objects(path, mounts)
    for p, mount in items:
        name = mount.get("name")
        if not isinstance(name, str) or not name:
            errors.append(required(f"{p}.name"))
        elif name not in volumes:
            errors.append(not_found(f"{p}.name", name))
        mount_path = mount.get("mountPath")
        if not isinstance(mount_path, str) or not mount_path:
            errors.append(required(f"{p}.mountPath"))
    return errors


def _container_errors(
    path: str, c: object, names: set[str], volumes: Collection[str], numa: bool
) -> list[str]:
    if not isinstance(c, Mapping):
        return [type_error(path, c, "an object")]
    errors: list[str] = []
    name = c.get("name")
    if not isinstance(name, str) or not name:
        errors.append(required(f"{path}.name"))
    else:
        errors += [invalid(f"{path}.name", name, e) for e in dns1123_label(name)]
        if name in names:
            errors.append(duplicate(f"{path}.name", name))
        names.add(name)
    image = c.get("image")
    if image is None or image == "":
        errors.append(required(f"{path}.image"))
    elif not isinstance(image, str):
        errors.append(type_error(f"{path}.image", image, "a string"))
    errors += _ports_errors(f"{path}.ports", c.get("ports"))
    errors += _env_errors(f"{path}.env", c.get("env"))
    errors += _mounts_errors(f"{path}.volumeMounts", c.get("volumeMounts"), volumes)
    res_errors, requests = _resources_errors(f"{path}.resources", c.get("resources"), numa)
    errors += res_errors
    if numa and not res_errors and ("cpu" not in requests or milli_value(requests["cpu"]) % 1000):
        errors.append("numa")  # replaced by the caller, who knows the task and container index
    return errors


def _volumes_errors(path: str, volumes: object) -> list[str]:
    errors, items = _objects(path, volumes)
    seen: set[str] = set()
    for vpath, v in items:
        vname = v.get("name")
        if not isinstance(vname, str) or not vname:
            errors.append(required(f"{vpath}.name"))
            continue
        errors += [invalid(f"{vpath}.name", vname, e) for e in dns1123_label(vname)]
        if vname in seen:
            errors.append(duplicate(f"{vpath}.name", vname))
        seen.add(vname)
        sources = [k for k in _VOLUME_SOURCES if v.get(k) is not None]
        errors += [
            f"{vpath}.{k}: Forbidden: may not specify more than 1 volume type" for k in sources[1:]
        ]
    return errors


def template_errors(
    path: str,
    template: Mapping[str, Any],
    *,
    numa: bool,
    task_index: int,
    extra_volumes: Collection[str] = (),
) -> list[str]:
    """Problems of one task's pod template, each naming its field under `path`.

    `numa`: the task sets a topologyPolicy other than none, so every container needs an integer
    CPU request ("the cpu request isn't an integer in spec.task[i] container[j]."), a Volcano
    rule, not a Kubernetes one. `extra_volumes`: volumes the job controller adds to the pod
    (Caldera's volumeClaimTemplates) that mounts may name.
    """
    spec = template.get("spec")
    if spec is None:
        return [required(f"{path}.spec.containers")]
    if not isinstance(spec, Mapping):
        return [type_error(f"{path}.spec", spec, "an object")]
    errors: list[str] = []
    names: set[str] = set()
    volumes = template_volume_names(template) | set(extra_volumes)
    containers = spec.get("containers")
    if not containers:
        errors.append(required(f"{path}.spec.containers"))
    elif not isinstance(containers, list):
        errors.append(type_error(f"{path}.spec.containers", containers, "a list"))
    else:
        for j, c in enumerate(containers):
            cpath = f"{path}.spec.containers[{j}]"
            for e in _container_errors(cpath, c, names, volumes, numa):
                if e == "numa":
                    e = (
                        f"{cpath}.resources.requests.cpu: the cpu request "
                        f"isn't an integer in spec.task[{task_index}] container[{j}]."
                    )
                errors.append(e)
    init = spec.get("initContainers")
    if init is not None:
        if not isinstance(init, list):
            errors.append(type_error(f"{path}.spec.initContainers", init, "a list"))
        else:
            for j, c in enumerate(init):
                ipath = f"{path}.spec.initContainers[{j}]"
                errors += _container_errors(ipath, c, names, volumes, False)
    errors += _volumes_errors(f"{path}.spec.volumes", spec.get("volumes"))
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in RESTART_POLICIES:
        errors.append(unsupported(f"{path}.spec.restartPolicy", restart, RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in DNS_POLICIES:
        errors.append(unsupported(f"{path}.spec.dnsPolicy", dns, DNS_POLICIES))
    host_network = spec.get("hostNetwork")
    if host_network is not None and not isinstance(host_network, bool):
        errors.append(type_error(f"{path}.spec.hostNetwork", host_network, "a boolean"))
    return errors


def template_volume_names(template: Mapping[str, Any]) -> set[str]:
    """Names of the volumes a pod template declares (for volumeClaimTemplates overrides)."""
    spec = template.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("volumes"), list):
        return set()
    return {
        v["name"]
        for v in spec["volumes"]
        if isinstance(v, Mapping) and isinstance(v.get("name"), str)
    }


def job_template_errors(job: Job) -> list[str]:
    """The errors of every task's template that the API server would refuse its pods for, named
    as the webhook names them (``spec.task[i].template...``). The job controller's check: only
    Kubernetes' rules, not Volcano's NUMA rule, which refuses no pod."""
    errors: list[str] = []
    for i, task in enumerate(job.spec.tasks):
        claims = [t.metadata.name for t in task.volume_claim_templates]
        path = f"spec.task[{i}].template"
        errors += template_errors(
            path, task.template, numa=False, task_index=i, extra_volumes=claims
        )
    return errors
