"""Tests for caldera.api.quantity: Kubernetes quantity parsing, rounding and rendering."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from caldera.api.quantity import (
    QuantityError,
    QuantityLike,
    format_milli,
    int_value,
    milli_value,
    parse_quantity,
)

# Expected values are the ones Kubernetes' own parser tests document.
VALID = [
    ("0", Fraction(0)),
    ("0Ki", Fraction(0)),
    ("-0", Fraction(0)),
    ("1", Fraction(1)),
    ("500m", Fraction(1, 2)),
    ("5n", Fraction(5, 10**9)),
    ("4u", Fraction(4, 10**6)),
    ("8k", Fraction(8000)),
    ("7M", Fraction(7 * 10**6)),
    ("6G", Fraction(6 * 10**9)),
    ("5T", Fraction(5 * 10**12)),
    ("2P", Fraction(2 * 10**15)),
    ("1E", Fraction(10**18)),
    ("12E", Fraction(12 * 10**18)),
    ("1Ki", Fraction(1024)),
    ("7Mi", Fraction(7 * 2**20)),
    ("6Gi", Fraction(6 * 2**30)),
    ("5Ti", Fraction(5 * 2**40)),
    ("4Pi", Fraction(4 * 2**50)),
    ("3Ei", Fraction(3 * 2**60)),
    ("1.5Gi", Fraction(1536 * 2**20)),
    ("0.5Mi", Fraction(2**19)),
    ("100.035Ki", Fraction(10243584, 100)),
    ("1e3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)),
    ("1.3E+6", Fraction(1_300_000)),
    ("0.5e-2", Fraction(5, 1000)),
    ("1e03", Fraction(1000)),
    ("100.035k", Fraction(100035)),
    ("0.0005k", Fraction(1, 2)),
    (".001", Fraction(1, 1000)),
    ("1.", Fraction(1)),
    ("1.G", Fraction(10**9)),
    ("+1.5", Fraction(3, 2)),
    ("-1.5", Fraction(-3, 2)),
    ("-500m", Fraction(-1, 2)),
    # Finer than nano rounds away from zero to a whole nano.
    ("3.001n", Fraction(4, 10**9)),
    ("0.9n", Fraction(1, 10**9)),
    ("0.5e-9", Fraction(1, 10**9)),
    ("0.00000012345", Fraction(124, 10**9)),
    ("0.000000000001Ki", Fraction(2, 10**9)),
    ("-0.9n", Fraction(-1, 10**9)),
    # Binary suffixes are capped at the largest int64; decimal ones are not.
    ("8Ei", Fraction(2**63 - 1)),
    ("9223372036854775807Ki", Fraction(2**63 - 1)),
    ("-9Ei", Fraction(-(2**63 - 1))),
    ("18446744073709551616", Fraction(2**64)),
]

INVALID = [
    "",
    " 1",
    "1 ",
    "1\n",
    "1.5.5",
    "1.1.M",
    "1Ki2",
    "Ki",
    "m",
    "e3",
    ".",
    "-",
    "+",
    "-.",
    "1KI",
    "1K",
    "1ki",
    "1kK",
    "+-1",
    "--1",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    "1e",
    "1e3.5",
    "1e+",
    "1E3Ki",
    "1,5",
    "1_000",
    "\u0661",  # an Arabic-Indic digit one: Kubernetes reads ASCII digits only
    "nan",
    "inf",
    "1e1001",
    "1" * 1001,
]


@pytest.mark.parametrize(("text", "expected"), VALID)
def test_parse_valid(text: str, expected: Fraction) -> None:
    """A well-formed quantity parses exactly, rounded to nano and capped as Kubernetes does."""
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", INVALID)
def test_parse_invalid(text: str) -> None:
    """A malformed quantity raises QuantityError naming the string and the expected format."""
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)
    assert "suffix" in str(info.value)


def test_quantity_error_is_value_error() -> None:
    """QuantityError is a ValueError, so generic validation code catches it."""
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2, Fraction(2)),
        (-3, Fraction(-3)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),
        (1e16, Fraction(10**16)),
        (1e-05, Fraction(1, 100_000)),
        (-0.0, Fraction(0)),
    ],
)
def test_parse_yaml_numbers(value: int | float, expected: Fraction) -> None:
    """An int or float from YAML is read as the decimal it was written as."""
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [True, False, None, float("nan"), float("inf"), b"1", [1]])
def test_parse_rejects_non_quantities(value: object) -> None:
    """Booleans, None, non-finite floats and other types are not quantities."""
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "milli", "whole"),
    [
        ("1", 1000, 1),
        ("500m", 500, 1),
        ("1.0001", 1001, 2),
        ("100m", 100, 1),
        ("1n", 1, 1),
        ("0", 0, 0),
        ("1Gi", 2**30 * 1000, 2**30),
        ("-1.0001", -1001, -2),
        ("-500m", -500, -1),
        (0.25, 250, 1),
        (3, 3000, 3),
        ("10E", 10**22, 10**19),
    ],
)
def test_milli_and_int_value(value: QuantityLike, milli: int, whole: int) -> None:
    """milli_value and int_value round away from zero like MilliValue and Value, never overflow."""
    assert milli_value(value) == milli
    assert int_value(value) == whole


@pytest.mark.parametrize(
    ("milli", "resource", "expected"),
    [
        (0, "cpu", "0"),
        (500, "cpu", "500m"),
        (2000, "cpu", "2"),
        (1500, "cpu", "1500m"),
        (-250, "cpu", "-250m"),
        (4000, "nvidia.com/gpu", "4"),
        (110_000, "pods", "110"),
        (2**30 * 1000, "memory", "1Gi"),
        (1536 * 2**20 * 1000, "memory", "1536Mi"),
        (1024 * 1000, "memory", "1Ki"),
        (2**60 * 1000, "memory", "1Ei"),
        (2**63 * 1000, "memory", str(2**63)),
        (10**9 * 1000, "memory", "1000000000"),
        (512 * 1000, "memory", "512"),
        (1500, "memory", "1500m"),
        (-(2**30) * 1000, "memory", "-1Gi"),
        (2**31 * 1000, "ephemeral-storage", "2Gi"),
        (2 * 2**20 * 1000, "hugepages-2Mi", "2Mi"),
        (2**30 * 1000, "example.com/foo", str(2**30)),
    ],
)
def test_format_milli(milli: int, resource: str, expected: str) -> None:
    """format_milli writes whole units or m, and bytes with the largest exact binary suffix."""
    assert format_milli(milli, resource) == expected


# --- property tests ---------------------------------------------------------------------

_DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=12)
_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


@st.composite
def quantity_strings(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """Draw (sign, number, suffix, exponent) whose concatenation is a valid quantity."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(_DIGITS)
    frac = draw(_DIGITS)
    number = draw(st.sampled_from([whole, f"{whole}.", f"{whole}.{frac}", f".{frac}"]))
    if draw(st.booleans()):
        return sign, number, draw(st.sampled_from(_SUFFIXES)), ""
    exp_sign = draw(st.sampled_from(["", "+", "-"]))
    exp = draw(st.integers(min_value=0, max_value=30))
    return sign, number, "", f"{draw(st.sampled_from('eE'))}{exp_sign}{exp}"


def _expected(sign: str, number: str, suffix: str, exponent: str) -> Fraction:
    """Compute a quantity's value with Python's own decimal reader, as an oracle."""
    value = Fraction(number) * Fraction(10) ** int(exponent[1:] or "0")
    if suffix.endswith("i"):
        value *= 1024 ** ("KMGTPE".index(suffix[0]) + 1)
    elif suffix in ("n", "u", "m"):
        value /= 1000 ** (3 - "num".index(suffix))
    elif suffix:
        value *= 1000 ** ("kMGTPE".index(suffix) + 1)
    value = Fraction(math.ceil(value * 10**9), 10**9)
    if suffix.endswith("i"):
        value = min(value, Fraction(2**63 - 1))
    return -value if sign == "-" else value


@given(quantity_strings())
@example(("", "1", "Ki", ""))
@example(("-", ".5", "", "E-3"))
def test_random_valid_strings_parse(parts: tuple[str, str, str, str]) -> None:
    """Any string built from the grammar parses to the value the grammar gives it."""
    assert parse_quantity("".join(parts)) == _expected(*parts)


@given(quantity_strings(), st.sampled_from([" ", "\t", "\n"]), st.booleans())
def test_whitespace_is_rejected(
    parts: tuple[str, str, str, str], space: str, leading: bool
) -> None:
    """A valid quantity with leading or trailing whitespace is rejected."""
    text = "".join(parts)
    with pytest.raises(QuantityError):
        parse_quantity(space + text if leading else text + space)


@given(quantity_strings(), st.sampled_from(["Ki", "k", "m", "e3", ".5", "K", ".", " 1", "0x"]))
def test_trailing_garbage_after_suffix_is_rejected(
    parts: tuple[str, str, str, str], extra: str
) -> None:
    """Anything appended after a suffix or exponent makes the quantity invalid."""
    sign, number, suffix, exponent = parts
    if not suffix and not exponent:
        suffix = "Ki"
    with pytest.raises(QuantityError):
        parse_quantity(sign + number + suffix + exponent + extra)


@given(quantity_strings(), st.sampled_from(["+", "-"]))
def test_double_sign_is_rejected(parts: tuple[str, str, str, str], extra: str) -> None:
    """A second sign before the number makes the quantity invalid."""
    sign, number, suffix, exponent = parts
    with pytest.raises(QuantityError):
        parse_quantity(extra + (sign or "+") + number + suffix + exponent)


@given(st.text(alphabet="0123456789.+-eEKMGTPinumk \t", max_size=12) | st.text(max_size=12))
def test_arbitrary_text_never_crashes(text: str) -> None:
    """Arbitrary text either parses to a Fraction or raises QuantityError, nothing else."""
    value: Fraction | None = None
    message = ""
    try:
        value = parse_quantity(text)
    except QuantityError as err:
        message = str(err)
    if value is None:
        assert repr(text) in message
    else:
        assert isinstance(value, Fraction)
        assert text.strip() == text


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_parses_or_raises_quantity_error(value: float) -> None:
    """A finite float parses to within rounding of itself; NaN and infinities are rejected."""
    if not math.isfinite(value):
        with pytest.raises(QuantityError):
            parse_quantity(value)
        return
    parsed = parse_quantity(value)
    assert abs(parsed - Fraction(value)) <= Fraction(1, 10**9) + abs(Fraction(value)) / 10**15


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_ints_are_exact(value: int) -> None:
    """An int is its own exact value, and milli_value is 1000 times it."""
    assert parse_quantity(value) == value
    assert milli_value(value) == value * 1000
    assert int_value(value) == value


@given(quantity_strings())
def test_rounding_bounds(parts: tuple[str, str, str, str]) -> None:
    """milli_value and int_value round away from zero by less than one unit."""
    text = "".join(parts)
    exact = parse_quantity(text)
    milli, whole = milli_value(text), int_value(text)
    assert abs(milli) >= abs(exact * 1000) > abs(milli) - 1
    assert abs(whole) >= abs(exact) > abs(whole) - 1
    assert (milli >= 0) == (exact >= 0) or milli == 0


@given(quantity_strings(), quantity_strings())
def test_rounding_is_monotone(a: tuple[str, str, str, str], b: tuple[str, str, str, str]) -> None:
    """A quantity no larger than another never gets a larger milli or integer value."""
    low, high = sorted(["".join(a), "".join(b)], key=parse_quantity)
    assert milli_value(low) <= milli_value(high)
    assert int_value(low) <= int_value(high)


@given(
    st.integers(min_value=-(10**24), max_value=10**24),
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "hugepages-1Gi"]),
)
@example(2**30 * 1000, "memory")
@example(1, "memory")
@example(2**63 * 1000, "memory")
def test_format_then_parse_round_trips(milli: int, resource: str) -> None:
    """milli_value of format_milli's output is the amount that was formatted."""
    text = format_milli(milli, resource)
    assert milli_value(text) == milli


@given(st.integers(min_value=1, max_value=2**62), st.integers(min_value=1, max_value=6))
def test_binary_multiples_use_binary_suffix(count: int, power: int) -> None:
    """A byte amount that is a multiple of 1024**k renders with a binary suffix up to 2**63 - 1."""
    amount = count * 1024**power
    text = format_milli(amount * 1000, "memory")
    assert text.endswith("i") is (amount <= 2**63 - 1)
