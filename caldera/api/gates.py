"""Volcano's queue admission scheduling gate (v1.15
``SchedulingGatesQueueAdmission``), shared by the webhook, which adds the gate, and the
scheduler, which removes it.

A pod opts in with the annotation ``scheduling.volcano.sh/queue-allocation-gate: "true"``. With
the feature gate on, the webhook gives such a pod the scheduling gate of the same name when it
is created (``gate_patch``); Kubernetes does not schedule a gated pod and gives it the
``PodScheduled=False`` reason ``SchedulingGated``, which cluster autoscalers ignore. The
scheduler removes the gate (``REMOVE_GATE_PATCH``) once the pod's queue may take it; from then on
the pod is scheduled as any other, and marked ``Unschedulable`` only when no node fits it.

The feature gate itself is read by ``caldera.api.features``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from caldera.api.core import Pod
from caldera.api.volcano import QUEUE_ALLOCATION_GATE

# The strategic merge patch that removes the gate and leaves any other gate in place (Volcano's
# RemoveVolcanoSchGate); a pod without the gate is left as it is.
REMOVE_GATE_PATCH: Final[Mapping[str, Any]] = {
    "spec": {"schedulingGates": [{"name": QUEUE_ALLOCATION_GATE, "$patch": "delete"}]}
}


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
