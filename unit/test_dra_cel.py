"""CEL device selectors (scheduler.api.dra.cel): Kubernetes' device variable, quantities and
versions, errors that select nothing, and the bounds a tenant's expression is held to."""

from __future__ import annotations

import pytest

from caldera.api.dra import Device, DeviceAttribute, DeviceCapacity
from scheduler.api.dra.cel import (
    MAX_EXPRESSION_LENGTH,
    SelectorError,
    attribute_of,
    compile_selector,
    device_variables,
    matches,
)

DRIVER = "gpu.example.com"
GPU = Device(
    name="gpu-3",
    attributes={
        "model": DeviceAttribute(string="A100"),
        "index": DeviceAttribute(int_value=3),
        "driverVersion": DeviceAttribute(version="1.4.0"),
        "example.com/nvlink": DeviceAttribute(bool_value=True),
    },
    capacity={"memory": DeviceCapacity(value="40Gi")},
)


def selects(expression: str, device: Device = GPU) -> bool:
    return matches(compile_selector(expression), device_variables(DRIVER, device))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "A100"', True),
        ('device.attributes["gpu.example.com"].index >= 4', False),
        ('device.attributes["example.com"].nvlink', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("32Gi"))', False),
        (
            'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.10.0"))',
            False,
        ),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.3.9"))', True),
        ('device.attributes["gpu.example.com"].model.matches("^A")', True),
        # a missing attribute, domain or a non-bool answer selects nothing
        ('device.attributes["gpu.example.com"].missing == "x"', False),
        ('device.attributes["other.com"].model == "A100"', False),
        ('"yes"', False),
    ],
)
def test_kubernetes_device_semantics(expression: str, expected: bool) -> None:
    """Attributes without a domain belong to the driver's; quantities and versions compare."""
    assert selects(expression) is expected


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("", "empty"),
        ("device.driver == ", "does not compile"),
        ("[1,2].all(x, [3].exists(y, y > x))", "comprehensions"),
        ('device.capacity["d"].memory.compareTo(quantity("lots")) > 0', "invalid quantity"),
        ('device.attributes["d"].v.isGreaterThan(semver("1.x"))', "invalid semantic version"),
        ("true || " * (MAX_EXPRESSION_LENGTH // 8) + "true", "characters long"),
    ],
)
def test_bad_expressions_are_refused_saying_why(expression: str, says: str) -> None:
    """Refused at compile time with a message for the pod, never evaluated."""
    with pytest.raises(SelectorError, match=says):
        compile_selector(expression)


def test_constraints_read_fully_qualified_attributes() -> None:
    """matchAttribute names <domain>/<name>; an unqualified slice attribute is the driver's."""
    assert attribute_of(DRIVER, GPU, "gpu.example.com/index") == 3
    assert attribute_of(DRIVER, GPU, "example.com/nvlink") is True
    assert attribute_of(DRIVER, GPU, "other.com/index") is None


def test_a_failing_library_call_selects_nothing_and_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """compareTo between a quantity and a string is an error: no match, and nothing on
    stderr (the bindings print the exceptions of Python functions that raise)."""
    assert not selects('device.capacity["gpu.example.com"].memory.compareTo("x") == 0')
    assert not selects('!(device.capacity["gpu.example.com"].memory.compareTo("x") == 0)')
    assert capfd.readouterr().err == ""
