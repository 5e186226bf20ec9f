"""Exact Kubernetes resource quantities ("500m", "1.5Gi", "2", "1e3").

The grammar is the one Kubernetes documents for ``resource.Quantity``::

    quantity   ::= sign? number suffix?
    sign       ::= "+" | "-"
    number     ::= digits | digits "." | digits "." digits | "." digits
    suffix     ::= binary | decimal | exponent
    binary     ::= Ki | Mi | Gi | Ti | Pi | Ei                  (powers of 1024)
    decimal    ::= n | u | m | k | M | G | T | P | E            (powers of 1000)
    exponent   ::= ("e" | "E") sign? digits                     ("1e3", "1E-3")

A string is accepted only if both Kubernetes gates accept it: ``ParseQuantity``
and the OpenAPI pattern that CRD schemas put on quantity fields. The parser alone
would also take a bare sign, "." or "Ki" as zero; the schema rejects those, and a
user who writes them has made a mistake, so Caldera rejects them too. No
whitespace is allowed (the API server trims it only when decoding JSON).

The value is kept exact (``Fraction``) and then treated as Kubernetes treats it:
a non-zero value finer than 1n is rounded away from zero to a whole number of
nano units ("0.9n" is 1n), and a binary-suffixed value is capped in magnitude at
2**63 - 1 ("8Ei" is 2**63 - 1). Integer accessors round away from zero like
``Quantity.Value`` and ``Quantity.MilliValue``, but never overflow.

Numbers that YAML decoded as ``int`` or ``float`` are accepted: an ``int`` is
exact; a ``float`` is read through its shortest decimal form, so ``0.1`` is
exactly 1/10, which is what the API server sees when it receives ``0.1`` in JSON.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final, TypeAlias

__all__ = [
    "QuantityError",
    "QuantityLike",
    "format_milli",
    "int_value",
    "milli_value",
    "parse_quantity",
]

QuantityLike: TypeAlias = str | int | float
"""What a resource list may hold: a quantity string, or a YAML/JSON number."""


class QuantityError(ValueError):
    """A value that is not a valid Kubernetes quantity; the message names it."""


_FORMAT_HELP: Final = (
    "expected an optional sign, a number such as 2, 1.5 or .5, then an optional suffix: "
    "Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or an exponent such as e3 or E-3, "
    "with no spaces (for example 500m, 1.5Gi, 1e3)"
)

_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)"
    r"(?:(?P<whole>[0-9]+)(?:\.(?P<frac>[0-9]*))?|\.(?P<onlyfrac>[0-9]+))"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?"
)

_BINARY_SHIFT: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENT: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}

# Kubernetes caps binary-suffixed quantities at the largest int64.
_BINARY_CAP: Final = (1 << 63) - 1

# Bounds that keep a hostile string from costing seconds of big-integer work.
# Kubernetes has no real use above 1e18 or below 1e-9, so these reject nothing
# anyone writes; int() also refuses strings longer than 4300 digits.
_MAX_DIGITS: Final = 1000
_MAX_EXPONENT: Final = 1000

_NANO: Final = 10**9

# Resources whose amounts are bytes, rendered with binary suffixes.
_BYTE_RESOURCES: Final = frozenset({"memory", "ephemeral-storage", "storage"})
_BINARY_SUFFIXES_DESC: Final = (
    ("Ei", 60),
    ("Pi", 50),
    ("Ti", 40),
    ("Gi", 30),
    ("Mi", 20),
    ("Ki", 10),
)


def _invalid(value: object, why: str = "") -> QuantityError:
    detail = f" ({why})" if why else ""
    return QuantityError(f"invalid quantity {value!r}{detail}: {_FORMAT_HELP}")


def _parse_str(text: str, original: object) -> Fraction:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise _invalid(original)
    whole = match["whole"] or ""
    frac = match["frac"] or match["onlyfrac"] or ""
    if len(whole) + len(frac) > _MAX_DIGITS:
        raise _invalid(original, f"more than {_MAX_DIGITS} digits")

    exponent = -len(frac)
    shift = 0
    binary = match["binary"]
    if binary is not None:
        shift = _BINARY_SHIFT[binary]
    elif match["decimal"] is not None:
        exponent += _DECIMAL_EXPONENT[match["decimal"]]
    elif match["exponent"] is not None:
        written = match["exponent"]
        digits = written.lstrip("+-").lstrip("0")
        if len(digits) > len(str(_MAX_EXPONENT)) or int(digits or "0") > _MAX_EXPONENT:
            raise _invalid(original, f"exponent beyond +-{_MAX_EXPONENT}")
        exponent += int(written)

    magnitude = int(whole + frac or "0") << shift
    value = (
        Fraction(magnitude * 10**exponent) if exponent >= 0 else Fraction(magnitude, 10**-exponent)
    )

    # Kubernetes keeps nano precision and rounds anything finer away from zero:
    # asking for a sliver of a resource must not turn into asking for none.
    if value.denominator != 1 and _NANO % value.denominator != 0:
        value = Fraction(math.ceil(value * _NANO), _NANO)
    if binary is not None and value > _BINARY_CAP:
        value = Fraction(_BINARY_CAP)
    return -value if match["sign"] == "-" else value


def parse_quantity(value: QuantityLike) -> Fraction:
    """Return the exact value of a Kubernetes quantity.

    Raises ``QuantityError`` (a ``ValueError``) naming the value and the format
    when it is not a quantity Kubernetes would accept.
    """
    # bool is an int subclass, but `cpu: true` is a mistake, as the API server says.
    if isinstance(value, bool):
        raise _invalid(value, "a boolean is not a number")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _invalid(value, "not a finite number")
        # repr is the shortest string that reads back as this float: the
        # decimal the user wrote in YAML, not its binary approximation.
        return _parse_str(repr(value), value)
    if isinstance(value, str):
        return _parse_str(value, value)
    raise _invalid(value, f"a {type(value).__name__} is neither a string nor a number")


def _round_away_from_zero(value: Fraction) -> int:
    return math.ceil(value) if value >= 0 else -math.ceil(-value)


def milli_value(value: QuantityLike) -> int:
    """Return the quantity in thousandths, rounded away from zero ("1.0001" -> 1001).

    This is Kubernetes' ``MilliValue``, without its int64 overflow; the scheduler
    keeps cpu and extended resources in this unit.
    """
    return _round_away_from_zero(parse_quantity(value) * 1000)


def int_value(value: QuantityLike) -> int:
    """Return the quantity rounded away from zero to an integer ("1.5" -> 2, "100m" -> 1).

    This is Kubernetes' ``Value``, without its int64 overflow; memory is counted
    in whole bytes this way.
    """
    return _round_away_from_zero(parse_quantity(value))


def _is_byte_resource(resource: str) -> bool:
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def format_milli(milli: int, resource: str) -> str:
    """Render an amount in thousandths as a canonical quantity string for `resource`.

    Byte resources (memory, ephemeral-storage, storage, hugepages-*) in whole
    bytes use the largest exact binary suffix ("1Gi", "1536Mi") or plain bytes
    ("1000000000"). Other amounts are whole numbers ("2") or thousandths
    ("500m"), as are byte amounts with a fraction of a byte ("1500m").
    ``milli_value`` of the result is ``milli`` again, also past 2**63 - 1 bytes,
    where a binary suffix would be capped and plain bytes are used instead.
    """
    if milli == 0:
        return "0"
    whole, thousandths = divmod(abs(milli), 1000)
    if thousandths != 0:
        return f"{milli}m"
    sign = "-" if milli < 0 else ""
    # Past 2**63 - 1 a binary suffix would be capped on parsing; plain bytes are not.
    if _is_byte_resource(resource) and whole <= _BINARY_CAP:
        for suffix, shift in _BINARY_SUFFIXES_DESC:
            if whole & ((1 << shift) - 1) == 0:
                return f"{sign}{whole >> shift}{suffix}"
    return f"{sign}{whole}"
