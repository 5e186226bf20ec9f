"""Immutable resource vectors for scheduling: integer milli-units by resource name.

A ``Resources`` maps resource names ("cpu", "memory", "nvidia.com/gpu", ...) to
integer amounts in thousandths, the unit Volcano's scheduler uses for cpu and
scalar resources. Memory is the exception Volcano makes: it counts whole bytes
(``Quantity.Value``, rounded up), so "memory: 1.5" is 2 bytes, stored as 2000.
Integers make every comparison exact; Volcano compares floats with a tolerance
(``minResource`` = 0.1 milli-cpu, 0.1 byte), which on integer amounts decides
exactly as integer comparison does.

A resource absent from a vector counts as zero, except where a comparison is
told that the other side's absent resources are unbounded (a queue capability
that does not mention GPUs does not limit them). A listed zero is kept, because
it then differs from an absent resource: "nvidia.com/gpu: 0" in a capability
forbids GPUs. Equality and hashing treat absent and zero alike.

Departures from Volcano's ``Resource``, on purpose:
- every resource name is kept, where Volcano drops names that are not scalar
  resources (ephemeral-storage, storage) and moves "pods" to a task counter;
  callers that want Volcano's view use ``without("pods", ...)``;
- subtraction may go negative instead of asserting, and ``sub_clamped`` floors
  at zero;
- "unbounded" applies to the right-hand side only. Volcano's ``Infinity``
  treats an absent resource as infinite on both sides, so a request without
  GPUs never fits a capability that lists them; here the request's absent GPUs
  are zero.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, final

from caldera.api.quantity import QuantityError, QuantityLike, format_milli, int_value, milli_value

if TYPE_CHECKING:
    from caldera.api.core import PodSpec

__all__ = ["Missing", "Resources", "pod_requests", "pod_spec_requests", "to_milli"]

Missing: TypeAlias = Literal["zero", "unbounded"]
"""How a comparison reads a resource the right-hand side does not list."""

_MEMORY: Final = "memory"


# Quantities read before, by (resource, text): pods of a cluster repeat a handful of them, and
# parsing one exactly (with fractions) costs far more than a lookup. Bounded: emptied when full.
_READ: dict[tuple[str, str], int] = {}
_READ_MAX: Final = 4096


def to_milli(name: str, quantity: QuantityLike) -> int:
    """Return the amount Caldera keeps for `quantity` of resource `name`, in thousandths.

    Memory is rounded up to whole bytes first, as Volcano counts it; every other
    resource is rounded up to a whole thousandth. Raises ``QuantityError``.
    """
    if type(quantity) is str:
        key = (name, quantity)
        known = _READ.get(key)
        if known is None:
            known = _milli(name, quantity)
            if len(_READ) >= _READ_MAX:
                _READ.clear()
            _READ[key] = known
        return known
    return _milli(name, quantity)


def _milli(name: str, quantity: QuantityLike) -> int:
    if name == _MEMORY:
        return int_value(quantity) * 1000
    return milli_value(quantity)


@final
class Resources:
    """An immutable, hashable vector of resource amounts in thousandths.

    Build one with ``Resources.from_list`` from a Kubernetes resource list, or
    with ``Resources({"cpu": 500})`` from milli amounts.
    """

    __slots__ = ("_amounts", "_hash")
    _amounts: dict[str, int]
    _hash: int  # set on first use (schedulers hash the same vectors over and over)

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        copied = {} if amounts is None else dict(amounts)
        for name, amount in copied.items():
            if type(amount) is not int:
                raise TypeError(
                    f"resource {name!r}: amount must be an int of thousandths, got {amount!r}"
                )
        object.__setattr__(self, "_amounts", copied)

    @classmethod
    def _wrap(cls, amounts: dict[str, int]) -> Resources:
        # Skips the copy and checks: only for dicts built here and never shared.
        new = object.__new__(cls)
        object.__setattr__(new, "_amounts", amounts)
        return new

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Resources is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Resources is immutable")

    @classmethod
    def from_list(cls, resource_list: Mapping[str, QuantityLike]) -> Resources:
        """Read a Kubernetes resource list such as ``{"cpu": "500m", "memory": "1Gi"}``.

        Raises ``QuantityError`` naming the resource whose quantity is invalid.
        """
        amounts: dict[str, int] = {}
        for name, quantity in resource_list.items():
            try:
                amounts[name] = to_milli(name, quantity)
            except QuantityError as err:
                raise QuantityError(f"resource {name!r}: {err}") from err
        return cls._wrap(amounts)

    @classmethod
    def sum(cls, vectors: Iterable[Resources]) -> Resources:
        """Return the sum of `vectors` (empty for none)."""
        total: dict[str, int] = {}
        for vector in vectors:
            for name, amount in vector._amounts.items():
                total[name] = total.get(name, 0) + amount
        return cls._wrap(total)

    def to_list(self) -> dict[str, str]:
        """Return a Kubernetes resource list with canonical strings, sorted by name."""
        return {name: format_milli(self._amounts[name], name) for name in sorted(self._amounts)}

    def get(self, name: str) -> int:
        """Return the amount of `name` in thousandths; 0 when it is not listed."""
        return self._amounts.get(name, 0)

    def names(self) -> tuple[str, ...]:
        """Return the listed resource names, sorted, including those listed as zero."""
        return tuple(sorted(self._amounts))

    def items(self) -> ItemsView[str, int]:
        """Return a read-only view of the listed (name, thousandths) pairs."""
        return self._amounts.items()

    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def is_empty(self) -> bool:
        """Return True when no amount is positive (Volcano's ``IsEmpty``)."""
        # A loop, not all(): sessions ask millions of times, and a loop without a generator
        # takes a fifth of the time.
        for amount in self._amounts.values():  # noqa: SIM110
            if amount > 0:
                return False
        return True

    def __add__(self, other: Resources) -> Resources:
        total = dict(self._amounts)
        for name, amount in other._amounts.items():
            total[name] = total.get(name, 0) + amount
        return Resources._wrap(total)

    def __sub__(self, other: Resources) -> Resources:
        """Subtract per resource; amounts may go negative (see ``sub_clamped``)."""
        diff = dict(self._amounts)
        for name, amount in other._amounts.items():
            diff[name] = diff.get(name, 0) - amount
        return Resources._wrap(diff)

    def sub_clamped(self, other: Resources) -> Resources:
        """Subtract per resource, flooring each result at zero."""
        mine, theirs = self._amounts, other._amounts
        return Resources._wrap(
            {n: max(mine.get(n, 0) - theirs.get(n, 0), 0) for n in mine.keys() | theirs.keys()}
        )

    def multiply(self, count: int) -> Resources:
        """Return every amount times `count` (for example a pod request times replicas)."""
        return Resources._wrap({name: amount * count for name, amount in self._amounts.items()})

    def scale(self, factor: float | Fraction) -> Resources:
        """Return every amount times `factor`, rounded down to a whole thousandth.

        A float is taken at its shortest decimal form, so ``scale(1.2)`` of 1000
        is exactly 1200. Rounding down keeps scaled capacities and shares from
        granting more than the factor allows.
        """
        if isinstance(factor, float):
            if not math.isfinite(factor):
                raise ValueError(f"scale factor must be finite, got {factor!r}")
            exact = Fraction(repr(factor))
        else:
            exact = Fraction(factor)
        return Resources._wrap(
            {name: math.floor(amount * exact) for name, amount in self._amounts.items()}
        )

    def max(self, other: Resources) -> Resources:
        """Return the per-resource maximum over both sides' names (absent counts as 0)."""
        merged = dict(self._amounts)
        for name, amount in other._amounts.items():
            merged[name] = max(merged.get(name, 0), amount)
        for name in self._amounts.keys() - other._amounts.keys():
            merged[name] = max(merged[name], 0)
        return Resources._wrap(merged)

    def min(self, other: Resources) -> Resources:
        """Return the per-resource minimum over both sides' names (absent counts as 0)."""
        merged = dict(self._amounts)
        for name, amount in other._amounts.items():
            merged[name] = min(merged.get(name, 0), amount)
        for name in self._amounts.keys() - other._amounts.keys():
            merged[name] = min(merged[name], 0)
        return Resources._wrap(merged)

    def without(self, *names: str) -> Resources:
        """Return a copy without the given resource names."""
        return Resources._wrap({n: a for n, a in self._amounts.items() if n not in names})

    def less_equal(self, other: Resources, *, missing: Missing = "zero") -> bool:
        """Return True if every resource of self is <= that of `other` (Volcano's ``LessEqual``).

        Resources absent from self count as zero. With ``missing="unbounded"``,
        resources absent from `other` do not limit self.
        """
        theirs = other._amounts
        unbounded = missing == "unbounded"
        for name, amount in self._amounts.items():
            limit = theirs.get(name)
            if limit is None:
                if not unbounded and amount > 0:
                    return False
            elif amount > limit:
                return False
        mine = self._amounts
        # A negative amount on the right (an overdrawn capacity) is below self's zero.
        return all(limit >= 0 for name, limit in theirs.items() if name not in mine)

    def fits_in(self, capacity: Resources, *, missing: Missing = "zero") -> bool:
        """Return True if this request fits in `capacity`: ``self.less_equal(capacity)``."""
        return self.less_equal(capacity, missing=missing)

    def less_partly(self, other: Resources, *, missing: Missing = "zero") -> bool:
        """Return True if some resource of self is < that of `other` (Volcano's ``LessPartly``).

        Resources absent from self count as zero. With ``missing="unbounded"``,
        a resource absent from `other` is infinite there, so any amount self
        lists for it is less.
        """
        theirs = other._amounts
        unbounded = missing == "unbounded"
        for name, amount in self._amounts.items():
            limit = theirs.get(name)
            if limit is None:
                if unbounded or amount < 0:
                    return True
            elif amount < limit:
                return True
        mine = self._amounts
        return any(limit > 0 for name, limit in theirs.items() if name not in mine)

    def __eq__(self, other: object) -> bool:
        """Compare per resource, an absent resource being equal to a listed zero."""
        if not isinstance(other, Resources):
            return NotImplemented
        mine, theirs = self._amounts, other._amounts
        if mine == theirs:  # the usual case, compared in C
            return True
        return all(mine.get(n, 0) == theirs.get(n, 0) for n in mine.keys() | theirs.keys())

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            value = hash(frozenset((n, a) for n, a in self._amounts.items() if a != 0))
            object.__setattr__(self, "_hash", value)
            return value

    def __repr__(self) -> str:
        listed = ", ".join(f"{name}={text}" for name, text in self.to_list().items())
        return f"Resources({listed})"


def _requests(
    name: object, requests: Mapping[str, QuantityLike], limits: Mapping[str, QuantityLike]
) -> Resources:
    # Kubernetes defaults each request the container leaves out to its limit.
    merged = {**limits, **requests}
    try:
        return Resources.from_list(merged)
    except QuantityError as err:
        raise QuantityError(f"container {name!r}: {err}") from err


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources: Mapping[str, Any] = container.get("resources") or {}
    return _requests(
        container.get("name"), resources.get("requests") or {}, resources.get("limits") or {}
    )


def _total(
    containers: Iterable[Resources],
    init_containers: Iterable[tuple[Resources, bool]],
    overhead: Mapping[str, QuantityLike] | None,
) -> Resources:
    """`pod_requests`'s arithmetic over the containers' requests, the init containers'
    (with whether each is a sidecar) and the overhead."""
    total = Resources.sum(containers)
    sidecars = Resources()
    init_peak = Resources()
    for requests, sidecar in init_containers:
        if sidecar:
            sidecars = sidecars + requests
            total = total + requests
            running = sidecars
        else:
            running = sidecars + requests
        init_peak = init_peak.max(running)
    result = total.max(init_peak)
    if overhead:
        try:
            result = result + Resources.from_list(overhead)
        except QuantityError as err:
            raise QuantityError(f"pod overhead: {err}") from err
    return result


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """Return what a pod spec (a plain dict, camelCase keys) asks the scheduler for.

    Kubernetes semantics: the sum of the containers' requests, raised per
    resource to what any init container needs while it runs, plus
    ``spec.overhead``. A container's missing requests default to its limits.
    A sidecar (an init container with ``restartPolicy: Always``) keeps running,
    so it adds to the sum and to every init container started after it.
    Requests are rounded per container, as Volcano does. The "pods" count is
    not included: one pod is one pod, and callers account for it themselves.
    Pod-level ``spec.resources`` (a newer Kubernetes feature) is not read.
    Raises ``QuantityError`` naming the container and resource.
    """
    return _total(
        (_container_requests(c) for c in spec.get("containers") or ()),
        (
            (_container_requests(c), c.get("restartPolicy") == "Always")
            for c in spec.get("initContainers") or ()
        ),
        spec.get("overhead"),
    )


def pod_spec_requests(spec: PodSpec) -> Resources:
    """`pod_requests` of a decoded pod spec, without converting it to a dict first."""
    return _total(
        (_requests(c.name, c.resources.requests, c.resources.limits) for c in spec.containers),
        (
            (
                _requests(c.name, c.resources.requests, c.resources.limits),
                c.restart_policy == "Always",
            )
            for c in spec.init_containers
        ),
        spec.overhead,
    )
