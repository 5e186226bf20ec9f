"""Volcano's feature gates (pkg/features/volcano_features.go): the ``--feature-gates`` flag of
the webhook and the scheduler, read as Kubernetes' components read theirs
(``Name=true,Other=false``); only Volcano's gate names are accepted.

Kept apart from the models (no msgspec): the settings of every process import it, and the
CLI's light commands must not load the models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

SCHEDULING_GATES_QUEUE_ADMISSION: Final = "SchedulingGatesQueueAdmission"

# Volcano's feature gates (pkg/features/volcano_features.go) and their defaults. Caldera acts on
# SchedulingGatesQueueAdmission; the others name behaviour Caldera always has (or, CSIStorage,
# never reads) and are accepted so that Volcano's flags carry over.
FEATURE_GATES: Final[Mapping[str, bool]] = {
    "WorkLoadSupport": True,
    "VolcanoJobSupport": True,
    "PodDisruptionBudgetsSupport": True,
    "QueueCommandSync": True,
    "PriorityClass": True,
    "CSIStorage": False,
    "ResourceTopology": True,
    "CronVolcanoJobSupport": True,
    SCHEDULING_GATES_QUEUE_ADMISSION: False,
}


class FeatureGateError(ValueError):
    """A ``--feature-gates`` value that cannot be read; the message names the part."""


def parse_feature_gates(text: str) -> dict[str, bool]:
    """Every feature gate's setting: Volcano's defaults, overridden by ``text``
    (``Name=true,Other=false``; blanks ignored)."""
    gates = dict(FEATURE_GATES)
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep:
            raise FeatureGateError(f"feature_gates: {part!r}: write Name=true or Name=false")
        if name not in FEATURE_GATES:
            known = ", ".join(sorted(FEATURE_GATES))
            raise FeatureGateError(f"feature_gates: unknown feature gate {name!r} (known: {known})")
        if value not in ("true", "false"):
            raise FeatureGateError(f"feature_gates: {name}={value!r}: the value is true or false")
        gates[name] = value == "true"
    return gates
