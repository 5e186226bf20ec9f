"""Checks of a task's pod template: the part of Kubernetes' `ValidatePodTemplate` that catches
the mistakes users make in job manifests, with Kubernetes' field-error wording.

The template is the raw JSON the user wrote (a dict passed to the pods whole), so every access
checks the type first: a string where an object belongs is reported, never raised.

Covered: containers present; container and volume names (DNS-1123 labels, unique); resource
quantities and requests <= limits; restartPolicy and dnsPolicy values; an integer CPU request in
every container when the task asks for a NUMA topology policy (Volcano's rule). Not covered (the
API server checks them when the pod is created, and the job then reports it in an Event):
probes, security contexts, environment variable sources, and the other fields of a pod spec.

Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from caldera.api.quantity import QuantityError, milli_value, parse_quantity
from webhooks.names import dns1123_label

__all__ = [
    "DNS_POLICIES",
    "RESTART_POLICIES",
    "invalid",
    "quantity_errors",
    "required",
    "template_errors",
]

RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
DNS_POLICIES: Final = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


def _show(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def invalid(path: str, value: object, detail: str) -> str:
    """`field: Invalid value: "v": detail` (k8s field.Invalid)."""
    return f"{path}: Invalid value: {_show(value)}: {detail}"


def required(path: str) -> str:
    """`field: Required value` (k8s field.Required)."""
    return f"{path}: Required value"


def _unsupported(path: str, value: object, supported: tuple[str, ...]) -> str:
    shown = ", ".join(f'"{s}"' for s in supported)
    return f"{path}: Unsupported value: {_show(value)}: supported values: {shown}"


def _type_error(path: str, value: object, expected: str) -> str:
    return invalid(path, value, f"must be {expected}")


def quantity_errors(path: str, resources: object) -> list[str]:
    """Problems of a resource list: an object whose values are valid quantities."""
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [_type_error(path, resources, "an object of resource quantities")]
    errors = []
    for name, value in resources.items():
        try:
            parse_quantity(value)
        except QuantityError as exc:
            errors.append(invalid(f"{path}.{name}", value, str(exc)))
    return errors


def _container_errors(path: str, c: object, names: set[str], numa: bool) -> list[str]:
    if not isinstance(c, Mapping):
        return [_type_error(path, c, "an object")]
    errors: list[str] = []
    name = c.get("name")
    if not isinstance(name, str) or not name:
        errors.append(required(f"{path}.name"))
    else:
        errors += [invalid(f"{path}.name", name, e) for e in dns1123_label(name)]
        if name in names:
            errors.append(f"{path}.name: Duplicate value: {_show(name)}")
        names.add(name)
    image = c.get("image")
    if image is not None and not isinstance(image, str):
        errors.append(_type_error(f"{path}.image", image, "a string"))
    res = c.get("resources")
    requests: Mapping[str, Any] = {}
    if res is not None and not isinstance(res, Mapping):
        errors.append(_type_error(f"{path}.resources", res, "an object"))
    elif res is not None:
        req_errors = quantity_errors(f"{path}.resources.requests", res.get("requests"))
        lim_errors = quantity_errors(f"{path}.resources.limits", res.get("limits"))
        errors += req_errors + lim_errors
        if not req_errors and not lim_errors:
            requests = res.get("requests") or {}
            limits = res.get("limits") or {}
            for key, want in requests.items():
                if key in limits and parse_quantity(want) > parse_quantity(limits[key]):
                    errors.append(
                        invalid(
                            f"{path}.resources.requests[{key}]",
                            want,
                            f"must be less than or equal to {key} limit of {limits[key]}",
                        )
                    )
            if numa and "cpu" not in requests and "cpu" in limits:
                requests = {**requests, "cpu": limits["cpu"]}
    if numa and ("cpu" not in requests or milli_value(requests["cpu"]) % 1000 != 0):
        errors.append("numa")  # replaced by the caller, who knows the task and container index
    return errors


def template_errors(
    path: str, template: Mapping[str, Any], *, numa: bool, task_index: int
) -> list[str]:
    """Problems of one task's pod template, each naming its field under `path`.

    `numa`: the task sets a topologyPolicy other than none, so every container needs an integer
    CPU request ("the cpu request isn't an integer in spec.task[i] container[j].").
    """
    spec = template.get("spec")
    if spec is None:
        return [required(f"{path}.spec.containers")]
    if not isinstance(spec, Mapping):
        return [_type_error(f"{path}.spec", spec, "an object")]
    errors: list[str] = []
    names: set[str] = set()
    containers = spec.get("containers")
    if not containers:
        errors.append(required(f"{path}.spec.containers"))
    elif not isinstance(containers, list):
        errors.append(_type_error(f"{path}.spec.containers", containers, "a list"))
    else:
        for j, c in enumerate(containers):
            for e in _container_errors(f"{path}.spec.containers[{j}]", c, names, numa):
                if e == "numa":
                    e = (
                        f"{path}.spec.containers[{j}].resources.requests.cpu: the cpu request "
                        f"isn't an integer in spec.task[{task_index}] container[{j}]."
                    )
                errors.append(e)
    init = spec.get("initContainers")
    if init is not None:
        if not isinstance(init, list):
            errors.append(_type_error(f"{path}.spec.initContainers", init, "a list"))
        else:
            for j, c in enumerate(init):
                errors += [
                    e
                    for e in _container_errors(f"{path}.spec.initContainers[{j}]", c, names, False)
                    if e != "numa"
                ]
    volumes = spec.get("volumes")
    if volumes is not None:
        if not isinstance(volumes, list):
            errors.append(_type_error(f"{path}.spec.volumes", volumes, "a list"))
        else:
            seen: set[str] = set()
            for j, v in enumerate(volumes):
                vpath = f"{path}.spec.volumes[{j}]"
                vname = v.get("name") if isinstance(v, Mapping) else None
                if not isinstance(vname, str) or not vname:
                    errors.append(required(f"{vpath}.name"))
                    continue
                errors += [invalid(f"{vpath}.name", vname, e) for e in dns1123_label(vname)]
                if vname in seen:
                    errors.append(f"{vpath}.name: Duplicate value: {_show(vname)}")
                seen.add(vname)
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in RESTART_POLICIES:
        errors.append(_unsupported(f"{path}.spec.restartPolicy", restart, RESTART_POLICIES))
    dns = spec.get("dnsPolicy")
    if dns is not None and dns not in DNS_POLICIES:
        errors.append(_unsupported(f"{path}.spec.dnsPolicy", dns, DNS_POLICIES))
    host_network = spec.get("hostNetwork")
    if host_network is not None and not isinstance(host_network, bool):
        errors.append(_type_error(f"{path}.spec.hostNetwork", host_network, "a boolean"))
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
