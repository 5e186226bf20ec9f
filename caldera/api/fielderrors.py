"""Kubernetes field errors, worded as the API server words them, and the check of a resource list.

Each helper returns one message in the form of apimachinery's `field.Error`
(`k8s.io/apimachinery/pkg/util/validation/field/errors.go`): `field: Invalid value: "v": detail`,
`field: Required value`, `field: Duplicate value: "v"`, `field: Unsupported value: "v": supported
values: ...`, `field: Not found: "v"`. Strings are shown quoted and escaped, other values as
written, long ones cut, so a message stays one readable line. The job and queue webhooks, the pod
template rules and the controllers' reports of stored objects all build their messages here.

`quantity_errors` checks a resource list (requests, limits, a queue's capability): every value a
quantity, and, for containers, >= 0 and whole for extended resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from caldera.api.quantity import QuantityError, parse_quantity

__all__ = [
    "NEGATIVE",
    "duplicate",
    "extended_resource",
    "invalid",
    "not_found",
    "quantity_errors",
    "required",
    "show",
    "type_error",
    "unsupported",
]

NEGATIVE: Final = "must be greater than or equal to 0"


def show(value: object) -> str:
    """A value as a field error shows it: a string quoted and escaped, anything else as written
    (cut to 80 characters)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def invalid(path: str, value: object, detail: str) -> str:
    """`field: Invalid value: "v": detail` (k8s field.Invalid)."""
    return f"{path}: Invalid value: {show(value)}: {detail}"


def required(path: str, detail: str = "") -> str:
    """`field: Required value` (k8s field.Required)."""
    return f"{path}: Required value: {detail}" if detail else f"{path}: Required value"


def duplicate(path: str, value: object) -> str:
    """`field: Duplicate value: "v"` (k8s field.Duplicate)."""
    return f"{path}: Duplicate value: {show(value)}"


def not_found(path: str, value: object) -> str:
    """`field: Not found: "v"` (k8s field.NotFound)."""
    return f"{path}: Not found: {show(value)}"


def unsupported(path: str, value: object, supported: tuple[str, ...]) -> str:
    """`field: Unsupported value: "v": supported values: ...` (k8s field.NotSupported)."""
    shown = ", ".join(f'"{s}"' for s in supported)
    return f"{path}: Unsupported value: {show(value)}: supported values: {shown}"


def type_error(path: str, value: object, expected: str) -> str:
    """`field: Invalid value: v: must be <expected>`: a value of the wrong JSON type."""
    return invalid(path, value, f"must be {expected}")


def extended_resource(resource: str) -> bool:
    """Kubernetes' IsExtendedResourceName: `domain/name` outside the kubernetes.io domains (and
    not a `requests.` quota name): never overcommitted, counted in whole units."""
    if "/" not in resource or resource.startswith("requests."):
        return False
    domain = resource.split("/", 1)[0]
    return domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def quantity_errors(
    path: str, resources: object, *, container: bool = True, dotted: bool = False
) -> list[str]:
    """Problems of a resource list at `path` (e.g. `...resources.requests`): an object whose
    values are quantities. With `container` (a container's requests and limits), each is also
    >= 0, and whole for extended resources; a queue's lists are only parsed, as Volcano's queue
    webhook does. An entry is named `path[name]`, as the API server names it, or with `dotted`
    `path.name`, as Volcano's queue webhook does."""
    if resources is None:
        return []
    if not isinstance(resources, Mapping):
        return [type_error(path, resources, "an object of resource quantities")]
    errors = []
    for name, value in resources.items():
        where = f"{path}.{name}" if dotted else f"{path}[{name}]"
        try:
            amount = parse_quantity(value)
        except QuantityError as exc:
            errors.append(invalid(where, value, str(exc)))
            continue
        if not container:
            continue
        if amount < 0:
            errors.append(invalid(where, value, NEGATIVE))
        elif extended_resource(str(name)) and amount.denominator != 1:
            errors.append(invalid(where, value, "must be an integer"))
    return errors
