"""Admission of pods (Volcano's pkg/webhooks/admission/pods/validate/admit_pod.go): the job
disruption budget annotations of pods scheduled by a Caldera/Volcano scheduler; and, on
``/pods/mutate`` with the SchedulingGatesQueueAdmission feature gate on (Volcano's
mutate_pod.go), the queue admission gate for a new pod that opts in with the annotation
``scheduling.volcano.sh/queue-allocation-gate: "true"`` (``caldera.api.gates``). The gate goes
only on pods of Caldera's schedulers, the only ones whose gate Caldera removes (Volcano gates
any pod with the annotation).

`volcano.sh/jdb-min-available` and `volcano.sh/jdb-max-unavailable` must each be a positive
integer or a percentage from 1% to 99%, and at most one of them may be set. Pods of other
schedulers are always admitted.

Functions over models. An import-linter contract keeps this module free of I/O
(docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Final

from caldera.api.core import Pod
from caldera.api.gates import gate_patch
from caldera.api.volcano import JDB_MAX_UNAVAILABLE_KEY, JDB_MIN_AVAILABLE_KEY

__all__ = ["mutate_pod", "validate_pod"]

_PERCENT: Final = re.compile(r"([0-9]+)%")
_INTEGER: Final = re.compile(r"[0-9]+")


def _jdb_value_error(key: str, value: str) -> str:
    match = _PERCENT.fullmatch(value)
    if match is not None:
        if 1 <= int(match[1]) <= 99:
            return ""
    elif _INTEGER.fullmatch(value) is not None and int(value) > 0:
        return ""
    return (
        f"metadata.annotations[{key}]: invalid value {value!r}: "
        "it must be a positive integer or a percentage between 1% and 99%"
    )


def validate_pod(pod: Pod, scheduler_names: Collection[str]) -> str:
    """Why a new pod is refused, or "" when it is admitted."""
    if pod.spec.scheduler_name not in scheduler_names:
        return ""
    ann = pod.metadata.annotations
    keys = [k for k in (JDB_MIN_AVAILABLE_KEY, JDB_MAX_UNAVAILABLE_KEY) if k in ann]
    if len(keys) > 1:
        return (
            "metadata.annotations: not allow configure multiple annotations "
            f"<[{' '.join(keys)}]> at same time"
        )
    for key in keys:
        error = _jdb_value_error(key, ann[key])
        if error:
            return error
    return ""


def mutate_pod(
    pod: Pod, scheduler_names: Collection[str], *, queue_admission_gates: bool
) -> list[dict[str, Any]]:
    """The JSON patch for a new pod: the queue admission gate when the feature is on, the pod
    is Caldera's to schedule and opted in; else nothing."""
    if not queue_admission_gates or pod.spec.scheduler_name not in scheduler_names:
        return []
    return gate_patch(pod)
