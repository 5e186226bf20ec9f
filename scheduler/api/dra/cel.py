"""Device selectors in CEL, evaluated with Kubernetes' device semantics.

A selector sees one variable, ``device``: ``device.driver`` (the slice's driver),
``device.attributes["<domain>"].<name>`` and ``device.capacity["<domain>"].<name>``, an
attribute or capacity named without a domain in the slice belonging to the driver's domain
(``model`` of driver ``gpu.example.com`` is ``device.attributes["gpu.example.com"].model``).
Attributes are ints, bools, strings and versions (semantic versions, as strings here);
capacities are quantities. Looking up what the device lacks is an error, and an expression that
errs or answers anything but true does not select the device, as in Kubernetes.

Kubernetes' CEL library is there for what selectors use: ``quantity("40Gi")`` and a
quantity's ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``,
``asApproximateFloat``, ``sign``, ``isInteger``, ``add`` and ``sub``; ``semver("1.2.3")`` and a
version's ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor`` and ``patch``;
``isQuantity`` and ``isSemver``. A quantity is a number here (an int when whole), so two
quantities also compare with ``==``, ``<`` and the other operators, which Kubernetes refuses.

Bounds (an expression comes from a tenant): at most ``MAX_EXPRESSION_LENGTH`` characters, as
Kubernetes allows, and at most one comprehension macro (``all``, ``exists``, ``exists_one``,
``map``, ``filter``): without nesting, evaluation is linear in the expression and the device,
which is bounded by the API server's own limits on slices. Kubernetes instead estimates a cost
and refuses expressions over its budget; the rule here is simpler and stricter. An expression
that breaks a bound or does not compile is refused with a message that says why
(``SelectorError``), which the scheduler puts on the pod.

An import-linter contract keeps this module free of I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import cel

from caldera.api.dra import Device
from caldera.api.quantity import QuantityError, parse_quantity

MAX_EXPRESSION_LENGTH: Final = 10 * 1024  # Kubernetes' CELSelectorExpressionMaxLength
MAX_COMPREHENSIONS: Final = 1
_COMPREHENSION = re.compile(r"\.\s*(all|exists_one|exists|map|filter)\s*\(")
_LITERAL_QUANTITY = re.compile(r"""quantity\(\s*(?:"([^"]*)"|'([^']*)')\s*\)""")
_LITERAL_SEMVER = re.compile(r"""semver\(\s*(?:"([^"]*)"|'([^']*)')\s*\)""")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)

Number = int | float


class SelectorError(ValueError):
    """A selector Caldera will not evaluate: the message says why."""


def quantity_number(text: str) -> Number:
    """A quantity as a number: an int when whole, else a float."""
    value = parse_quantity(text)
    return int(value) if value.denominator == 1 else float(value)


def _quantity(text: object) -> Number:
    if not isinstance(text, str):
        raise TypeError("quantity() takes a string")
    return quantity_number(text)


def _is_quantity(text: object) -> bool:
    try:
        _quantity(text)
    except (QuantityError, TypeError, ValueError):
        return False
    return True


def _semver_key(text: str) -> tuple[int, int, int, tuple[tuple[int, int | str], ...]]:
    """The precedence of a semantic version (semver.org section 11): a version without
    pre-release parts comes after one with them."""
    match = _SEMVER.match(text)
    if match is None:
        raise ValueError(f"invalid semantic version {text!r}")
    major, minor, patch, pre = match.groups()
    parts: tuple[tuple[int, int | str], ...] = (
        tuple((0, int(p)) if p.isdigit() else (1, p) for p in pre.split(".")) if pre else ((2, 0),)
    )
    return int(major), int(minor), int(patch), parts


def _semver(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError("semver() takes a string")
    _semver_key(text)
    return text


def _is_semver(text: object) -> bool:
    return isinstance(text, str) and _SEMVER.match(text) is not None


def _compare(left: object, right: object) -> int:
    """compareTo over two quantities (numbers) or two versions (strings)."""
    if isinstance(left, str) and isinstance(right, str):
        a, b = _semver_key(left), _semver_key(right)
        return (a > b) - (a < b)
    if isinstance(left, int | float) and isinstance(right, int | float):
        x, y = Fraction(left), Fraction(right)
        return (x > y) - (x < y)
    raise TypeError("compareTo compares two quantities or two versions")


def _number(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("a quantity was expected")
    return value


def _exact(value: Fraction) -> Number:
    return int(value) if value.denominator == 1 else float(value)


class _Error:
    """What a library function answers instead of raising: the bindings print the exception
    of a Python function that raises to stderr (a tenant's expression could flood the log),
    while a value they cannot convert fails the expression silently, as an error should."""

    __slots__ = ()


_ERROR: Final = _Error()


def _quiet(function: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except (ArithmeticError, TypeError, ValueError):
            return _ERROR

    return call


_FUNCTIONS: Final[dict[str, Callable[..., Any]]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": lambda q: int(_number(q)),
    "asApproximateFloat": lambda q: float(_number(q)),
    "sign": lambda q: (_number(q) > 0) - (_number(q) < 0),
    "isInteger": lambda q: float(_number(q)).is_integer(),
    "add": lambda a, b: _exact(Fraction(_number(a)) + Fraction(_number(b))),
    "sub": lambda a, b: _exact(Fraction(_number(a)) - Fraction(_number(b))),
    "major": lambda v: _semver_key(v)[0],
    "minor": lambda v: _semver_key(v)[1],
    "patch": lambda v: _semver_key(v)[2],
}
FUNCTIONS: Final = {name: _quiet(function) for name, function in _FUNCTIONS.items()}


@dataclass(frozen=True, slots=True)
class Selector:
    """A compiled selector expression."""

    source: str
    program: Any  # cel.Program; the library's type is not importable for annotations


def compile_selector(expression: str) -> Selector:
    """The expression compiled, or ``SelectorError`` saying why not (too long, too many
    comprehensions, a literal quantity or version that does not parse, a syntax error)."""
    if not expression.strip():
        raise SelectorError("the CEL expression is empty")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(
            f"the CEL expression is {len(expression)} characters long; "
            f"at most {MAX_EXPRESSION_LENGTH} are allowed"
        )
    loops = len(_COMPREHENSION.findall(expression))
    if loops > MAX_COMPREHENSIONS:
        raise SelectorError(
            f"the CEL expression has {loops} comprehensions (all, exists, exists_one, map, "
            f"filter); Caldera evaluates at most {MAX_COMPREHENSIONS}, to bound its cost"
        )
    for match in _LITERAL_QUANTITY.finditer(expression):
        text = match.group(1) if match.group(1) is not None else match.group(2)
        if not _is_quantity(text):
            raise SelectorError(f"the CEL expression has an invalid quantity {text!r}")
    for match in _LITERAL_SEMVER.finditer(expression):
        text = match.group(1) if match.group(1) is not None else match.group(2)
        if not _is_semver(text):
            raise SelectorError(f"the CEL expression has an invalid semantic version {text!r}")
    try:
        program = cel.compile(expression)
    except Exception as exc:  # the library raises ValueError, but promises no type
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SelectorError(f"the CEL expression does not compile: {first[:300]}") from None
    return Selector(expression, program)


def _attribute_value(attribute: Any) -> object:
    if attribute.int_value is not None:
        return attribute.int_value
    if attribute.bool_value is not None:
        return attribute.bool_value
    if attribute.string is not None:
        return attribute.string
    if attribute.version is not None:
        return attribute.version
    return None


def _qualified(driver: str, name: str) -> tuple[str, str]:
    domain, slash, short = name.rpartition("/")
    return (domain, short) if slash else (driver, name)


def device_variables(driver: str, device: Device) -> dict[str, Any]:
    """The ``device`` variable of a selector for ``device`` of ``driver``'s slice."""
    attributes: dict[str, dict[str, object]] = {}
    for name, attribute in device.attributes.items():
        domain, short = _qualified(driver, name)
        value = _attribute_value(attribute)
        if value is not None:
            attributes.setdefault(domain, {})[short] = value
    capacity: dict[str, dict[str, Number]] = {}
    for name, cap in device.capacity.items():
        domain, short = _qualified(driver, name)
        try:
            capacity.setdefault(domain, {})[short] = quantity_number(cap.value)
        except QuantityError:
            continue  # the API server validates quantities; a bad one is left out
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
    }


def attribute_of(driver: str, device: Device, name: str) -> object:
    """The value of the fully qualified attribute ``name`` (``<domain>/<name>``) of the
    device; None when it has none. A constraint's ``matchAttribute`` is always qualified."""
    domain, short = _qualified(driver, name)
    for key, attribute in device.attributes.items():
        if _qualified(driver, key) == (domain, short):
            return _attribute_value(attribute)
    return None


def matches(selector: Selector, variables: Mapping[str, Any]) -> bool:
    """Whether the selector answers true for the device; an error answers no."""
    try:
        context = cel.Context(variables={"device": variables}, functions=FUNCTIONS)
        return selector.program.execute(context) is True
    except Exception:
        return False
