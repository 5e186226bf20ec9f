"""Volcano's feature gates flag (caldera.api.features) and the queue admission gate's patches
(caldera.api.gates)."""

from __future__ import annotations

import pytest

from caldera.api.core import Pod, PodSchedulingGate, PodSpec
from caldera.api.features import (
    SCHEDULING_GATES_QUEUE_ADMISSION,
    FeatureGateError,
    parse_feature_gates,
)
from caldera.api.gates import gate_patch, only_queue_gate, opted_in
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import QUEUE_ALLOCATION_GATE
from caldera.settings import SchedulerSettings, SettingsError, WebhookSettings


def pod(*gates: str, annotation: str | None = "true") -> Pod:
    annotations = {} if annotation is None else {QUEUE_ALLOCATION_GATE: annotation}
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", annotations=annotations),
        spec=PodSpec(scheduling_gates=tuple(PodSchedulingGate(name=g) for g in gates)),
    )


def test_feature_gates_default_and_override() -> None:
    """Volcano's defaults (SchedulingGatesQueueAdmission off), overridden name by name."""
    assert parse_feature_gates("")[SCHEDULING_GATES_QUEUE_ADMISSION] is False
    gates = parse_feature_gates(" SchedulingGatesQueueAdmission=true , CSIStorage=False")
    assert gates[SCHEDULING_GATES_QUEUE_ADMISSION] is True
    assert gates["CSIStorage"] is False
    assert gates["WorkLoadSupport"] is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Nope=true", "feature_gates: unknown feature gate 'Nope'"),
        ("SchedulingGatesQueueAdmission", "write Name=true or Name=false"),
        ("SchedulingGatesQueueAdmission=yes", "the value is true or false"),
    ],
)
def test_bad_feature_gates_are_refused_with_the_part(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        parse_feature_gates(text)


def test_settings_take_the_flag() -> None:
    """Both processes read --feature-gates; a bad value is a settings error."""
    on = "SchedulingGatesQueueAdmission=true"
    assert SchedulerSettings(feature_gates=on).queue_admission_gates
    assert WebhookSettings(feature_gates=on).queue_admission_gates
    assert not SchedulerSettings().queue_admission_gates
    with pytest.raises(SettingsError, match="unknown feature gate"):
        SchedulerSettings(feature_gates="Bogus=true").validate()
    with pytest.raises(SettingsError, match="gate_removal_worker_num"):
        SchedulerSettings(gate_removal_worker_num=0).validate()


def test_opt_in_and_only_gate() -> None:
    assert opted_in(pod())
    assert not opted_in(pod(annotation="false"))
    assert not opted_in(pod(annotation=None))
    assert only_queue_gate(pod(QUEUE_ALLOCATION_GATE))
    assert not only_queue_gate(pod(QUEUE_ALLOCATION_GATE, "example.com/x"))
    assert not only_queue_gate(pod())


def test_gate_patch() -> None:
    """Added as the first gate, appended after others, never twice, only when opted in."""
    assert gate_patch(pod()) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": QUEUE_ALLOCATION_GATE}]}
    ]
    assert gate_patch(pod("example.com/x")) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": QUEUE_ALLOCATION_GATE}}
    ]
    assert gate_patch(pod(QUEUE_ALLOCATION_GATE)) == []
    assert gate_patch(pod(annotation=None)) == []
