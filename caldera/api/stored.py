"""What the controllers check on objects that may have reached the API server without the webhook
(it was not registered, or the object was stored before an upgrade).

Each function names the field in Kubernetes' ``field: Unsupported value`` / ``Not found`` form, so
the Event and the status message tell the user what to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from caldera.api.fielderrors import unsupported
from caldera.api.quantity import QuantityError
from caldera.api.resources import to_milli
from caldera.api.volcano import (
    POLICY_ACTIONS,
    POLICY_EVENTS,
    JobSpec,
    LifecyclePolicy,
    QueueSpec,
    policy_events,
)

UNKNOWN_TARGET: Final = "UnknownTarget"  # the reason of a removed Command that names nothing
WEIGHT_MIN: Final = 1
WEIGHT_MAX: Final = 65535  # the CRD's bounds of spec.weight


def not_found(path: str, value: str) -> str:
    """`field: Not found: "v"` (k8s field.NotFound)."""
    return f'{path}: Not found: "{value}"'


def _policy_errors(path: str, policies: Sequence[LifecyclePolicy]) -> list[str]:
    errors: list[str] = []
    for j, policy in enumerate(policies):
        p = f"{path}[{j}]"
        if policy.action not in POLICY_ACTIONS:
            errors.append(unsupported(f"{p}.action", policy.action, POLICY_ACTIONS))
        for event in policy_events(policy):
            if event not in POLICY_EVENTS:
                errors.append(unsupported(f"{p}.event", event, POLICY_EVENTS))
    return errors


def policy_errors(spec: JobSpec) -> list[str]:
    """The Job's and its tasks' policies whose action or event no controller runs."""
    errors = _policy_errors("spec.policies", spec.policies)
    for i, task in enumerate(spec.tasks):
        errors += _policy_errors(f"spec.tasks[{i}].policies", task.policies)
    return errors


def queue_spec_errors(spec: QueueSpec) -> list[str]:
    """A Queue spec the webhook (and the CRD's bounds) would refuse: a weight outside 1..65535, a
    guarantee or deserved above the capability, a quantity that does not parse."""
    errors: list[str] = []
    if not WEIGHT_MIN <= spec.weight <= WEIGHT_MAX:
        # The scheduler's proportion plugin reads a weight below 1 as 1 (never divides by it).
        used = f"; the scheduler uses {WEIGHT_MIN}" if spec.weight < WEIGHT_MIN else ""
        errors.append(
            f"spec.weight: Invalid value: {spec.weight}: must be between {WEIGHT_MIN} and "
            f"{WEIGHT_MAX}{used}"
        )
    try:
        capability = {r: to_milli(r, q) for r, q in spec.capability.items()}
        for path, limits in (
            ("spec.guarantee.resource", spec.guarantee.resource),
            ("spec.deserved", spec.deserved),
        ):
            for r, q in limits.items():
                if r in capability and to_milli(r, q) > capability[r]:
                    errors.append(
                        f"{path}.{r}: Invalid value: {q!s}: must be less than or equal to "
                        f"spec.capability.{r} ({spec.capability[r]!s})"
                    )
    except QuantityError as exc:
        errors.append(f"spec: {exc}")
    return errors


def command_target_error(target_name: str, *, exists: bool, age: float, grace: float) -> str | None:
    """Why a Command aimed at a Job is removed unrun: its target does not exist and the Command is
    older than `grace` seconds (a Job created with its Command can reach the cache later). None:
    keep it (it exists, or wait). Volcano deletes such a Command without a word."""
    if exists or age < grace:
        return None
    return not_found("target.name", target_name)
