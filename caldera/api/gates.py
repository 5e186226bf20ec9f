"""Volcano's feature gates and its queue admission scheduling gate (v1.15
``SchedulingGatesQueueAdmission``), shared by the webhook, which adds the gate, and the
scheduler, which removes it.

A pod opts in with the annotation ``scheduling.volcano.sh/queue-allocation-gate: "true"``. With
the feature gate on, the webhook gives such a pod the scheduling gate of the same name when it
is created (``gate_patch``); Kubernetes does not schedule a gated pod and gives it the
``PodScheduled=False`` reason ``SchedulingGated``, which cluster autoscalers ignore. The
scheduler removes the gate (``REMOVE_GATE_PATCH``) once the pod's queue may take it; from then on
the pod is scheduled as any other, and marked ``Unschedulable`` only when no node fits it.

``parse_feature_gates`` reads the ``--feature-gates`` flag as Kubernetes' components do
(``Name=true,Other=false``); only Volcano's gate names are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from caldera.api.core import Pod
from caldera.api.volcano import QUEUE_ALLOCATION_GATE

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

# The strategic merge patch that removes the gate and leaves any other gate in place (Volcano's
# RemoveVolcanoSchGate); a pod without the gate is left as it is.
REMOVE_GATE_PATCH: Final[Mapping[str, Any]] = {
    "spec": {"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE, "$patch": "delete"}]}
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


def opted_in(pod: Pod) -> bool:
    """The pod asks for queue admission gating (Volcano's HasQueueAllocationGateAnnotation)."""
    return pod.metadata.annotations.get(QUEUE_ALLOCATION_GATE) == "true"


def only_queue_gate(pod: Pod) -> bool:
    """The queue admission gate is the pod's only scheduling gate (Volcano's
    HasOnlyVolcanoSchedulingGate): once the queue takes the pod, nothing else holds it."""
    gates = pod.spec.scheduling_gates
    return len(gates) == 1 and gates[0].name == QUEUE_ALLOCATION_GATE


def gate_patch(pod: Pod) -> list[dict[str, Any]]:
    """The JSON patch giving a new pod that opted in the queue admission gate; empty when it
    did not opt in or has the gate already."""
    if not opted_in(pod):
        return []
    gates = pod.spec.scheduling_gates
    if any(gate.name == QUEUE_ALLOCATION_GATE for gate in gates):
        return []
    if not gates:
        value: Any = [{"name": QUEUE_ALLOCATION_GATE}]
        return [{"op": "add", "path": "/spec/schedulingGates", "value": value}]
    # Appended, so that gates other webhooks added stay.
    return [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": QUEUE_ALLOCATION_GATE}}
    ]
