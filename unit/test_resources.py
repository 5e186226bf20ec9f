"""Tests for caldera.api.resources: resource vectors, Volcano comparisons and pod requests."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import PodSpec
from caldera.api.quantity import QuantityError, QuantityLike
from caldera.api.resources import Missing, Resources, pod_requests, pod_spec_requests, to_milli

GI = 2**30


def res(**milli: int) -> Resources:
    """Build a vector from keyword milli amounts; "gpu" stands for nvidia.com/gpu."""
    return Resources({("nvidia.com/gpu" if k == "gpu" else k): v for k, v in milli.items()})


# --- construction and rendering ---------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_list", "expected"),
    [
        ({"cpu": "500m", "memory": "1Gi"}, {"cpu": 500, "memory": GI * 1000}),
        ({"cpu": 2, "memory": 1024}, {"cpu": 2000, "memory": 1024 * 1000}),
        ({"cpu": 0.5}, {"cpu": 500}),
        ({"cpu": "1.0001"}, {"cpu": 1001}),
        ({"memory": "1.5"}, {"memory": 2000}),
        ({"memory": "100m"}, {"memory": 1000}),
        ({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": 1000}),
        ({"pods": "110"}, {"pods": 110_000}),
        ({"ephemeral-storage": "1.5"}, {"ephemeral-storage": 1500}),
        ({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": 4 * 2**20 * 1000}),
        ({"cpu": "0"}, {"cpu": 0}),
        ({}, {}),
    ],
)
def test_from_list(resource_list: Mapping[str, QuantityLike], expected: dict[str, int]) -> None:
    """from_list keeps cpu and scalars in rounded-up thousandths and memory in rounded-up bytes."""
    got = Resources.from_list(resource_list)
    assert dict(got.items()) == expected


def test_from_list_error_names_resource() -> None:
    """A bad quantity raises QuantityError naming the resource and the string."""
    with pytest.raises(QuantityError, match=r"resource 'memory': invalid quantity '1GB'"):
        Resources.from_list({"cpu": "1", "memory": "1GB"})


def test_to_milli_memory_is_whole_bytes() -> None:
    """to_milli rounds memory up to whole bytes but cpu only to thousandths."""
    assert to_milli("memory", "1500m") == 2000
    assert to_milli("cpu", "1500m") == 1500


def test_to_list_is_canonical_and_sorted() -> None:
    """to_list renders canonical strings sorted by resource name."""
    r = Resources.from_list({"memory": "1536Mi", "cpu": "1.5", "nvidia.com/gpu": 2, "pods": 0})
    assert list(r.to_list().items()) == [
        ("cpu", "1500m"),
        ("memory", "1536Mi"),
        ("nvidia.com/gpu", "2"),
        ("pods", "0"),
    ]


def test_repr_shows_quantities() -> None:
    """repr shows canonical quantities so logs and test failures read naturally."""
    assert repr(res(cpu=500, memory=GI * 1000)) == "Resources(cpu=500m, memory=1Gi)"


def test_constructor_rejects_non_int_amounts() -> None:
    """The milli constructor accepts only ints, so a stray float or string is caught early."""
    with pytest.raises(TypeError, match="cpu"):
        Resources({"cpu": 0.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="cpu"):
        Resources({"cpu": True})


def test_constructor_copies_its_input() -> None:
    """Mutating the dict a vector was built from does not change the vector."""
    source = {"cpu": 1000}
    r = Resources(source)
    source["cpu"] = 5
    assert r.get("cpu") == 1000


def test_immutable() -> None:
    """Attributes cannot be set or deleted."""
    r = res(cpu=1)
    with pytest.raises(AttributeError):
        r._amounts = {}
    with pytest.raises(AttributeError):
        del r._amounts


def test_get_names_contains() -> None:
    """get defaults to 0; names and `in` report listed names, zeros included."""
    r = res(cpu=1000, gpu=0)
    assert r.get("cpu") == 1000
    assert r.get("memory") == 0
    assert r.names() == ("cpu", "nvidia.com/gpu")
    assert "nvidia.com/gpu" in r
    assert "memory" not in r


def test_equality_treats_absent_as_zero() -> None:
    """A listed zero equals an absent resource, and their hashes agree."""
    assert res(cpu=1, gpu=0) == res(cpu=1)
    assert hash(res(cpu=1, gpu=0)) == hash(res(cpu=1))
    assert res(cpu=1) != res(cpu=2)
    assert len({res(cpu=1), res(cpu=1, memory=0)}) == 1
    assert res(cpu=1) != {"cpu": 1}


@pytest.mark.parametrize(
    ("r", "expected"),
    [
        (Resources(), True),
        (res(cpu=0, memory=0), True),
        (res(cpu=-5), True),
        (res(cpu=1), False),
        (res(cpu=0, gpu=1), False),
    ],
)
def test_is_empty(r: Resources, expected: bool) -> None:
    """is_empty holds when no amount is positive, as Volcano's IsEmpty."""
    assert r.is_empty() is expected


# --- arithmetic -------------------------------------------------------------------------


def test_add_sub() -> None:
    """+ and - work per resource over both sides' names; - may go negative."""
    a, b = res(cpu=1000, memory=5), res(cpu=300, gpu=1000)
    assert dict((a + b).items()) == {"cpu": 1300, "memory": 5, "nvidia.com/gpu": 1000}
    assert dict((a - b).items()) == {"cpu": 700, "memory": 5, "nvidia.com/gpu": -1000}


def test_sub_clamped() -> None:
    """sub_clamped floors every difference at zero."""
    assert dict(res(cpu=1000, memory=5).sub_clamped(res(cpu=3000, gpu=1)).items()) == {
        "cpu": 0,
        "memory": 5,
        "nvidia.com/gpu": 0,
    }


def test_multiply_and_scale() -> None:
    """multiply is exact; scale reads floats at their decimal value and rounds down."""
    r = res(cpu=1000, memory=7)
    assert r.multiply(3) == res(cpu=3000, memory=21)
    assert r.scale(1.2) == res(cpu=1200, memory=8)
    assert r.scale(Fraction(1, 3)) == res(cpu=333, memory=2)
    assert res(cpu=-1000).scale(Fraction(1, 3)) == res(cpu=-334)
    assert r.scale(0) == Resources()


@pytest.mark.parametrize("factor", [float("nan"), float("inf")])
def test_scale_rejects_non_finite(factor: float) -> None:
    """Scaling by NaN or infinity raises ValueError instead of producing garbage."""
    with pytest.raises(ValueError, match="finite"):
        res(cpu=1).scale(factor)


def test_max_min_treat_absent_as_zero() -> None:
    """max and min work per resource over both sides' names with absent as zero."""
    a, b = res(cpu=1000, memory=-5), res(cpu=300, gpu=2000)
    assert dict(a.max(b).items()) == {"cpu": 1000, "memory": 0, "nvidia.com/gpu": 2000}
    assert dict(a.min(b).items()) == {"cpu": 300, "memory": -5, "nvidia.com/gpu": 0}


def test_without_and_sum() -> None:
    """without drops names; Resources.sum adds any number of vectors."""
    r = res(cpu=1, pods=1000)
    assert r.without("pods").names() == ("cpu",)
    assert Resources.sum([r, r, res(gpu=1)]) == res(cpu=2, pods=2000, gpu=1)
    assert Resources.sum([]) == Resources()


# --- comparisons ------------------------------------------------------------------------

# (left, right, missing, less_equal, less_partly)
COMPARISONS: list[tuple[Resources, Resources, Missing, bool, bool]] = [
    (res(cpu=1000), res(cpu=1000), "zero", True, False),
    (res(cpu=1000), res(cpu=1001), "zero", True, True),
    (res(cpu=1001), res(cpu=1000), "zero", False, False),
    (res(cpu=1000, memory=5), res(cpu=2000, memory=4), "zero", False, True),
    # Absent on the left is zero.
    (res(cpu=1000), res(cpu=1000, gpu=1000), "zero", True, True),
    (Resources(), res(cpu=0), "zero", True, False),
    (res(gpu=1), Resources(), "zero", False, False),
    # Absent on the right is zero...
    (res(cpu=1000, gpu=1000), res(cpu=4000), "zero", False, True),
    (res(cpu=5000, gpu=1000), res(cpu=4000), "zero", False, False),
    (res(cpu=1000, gpu=0), res(cpu=4000), "zero", True, True),
    # ...or unbounded.
    (res(cpu=1000, gpu=1000), res(cpu=4000), "unbounded", True, True),
    (res(cpu=5000, gpu=1000), res(cpu=4000), "unbounded", False, True),
    (res(cpu=1000), res(cpu=4000, gpu=0), "unbounded", True, True),
    (res(gpu=1000), res(cpu=4000, gpu=0), "unbounded", False, True),
    (res(cpu=4000), res(cpu=4000), "unbounded", True, False),
    # A negative (overdrawn) amount on the right is below an absent zero.
    (res(cpu=1000), res(cpu=1000, memory=-1), "zero", False, False),
    (res(cpu=1000, memory=-1), res(cpu=1000), "zero", True, True),
]


@pytest.mark.parametrize(("left", "right", "missing", "le", "partly"), COMPARISONS)
def test_comparisons(
    left: Resources, right: Resources, missing: Missing, le: bool, partly: bool
) -> None:
    """less_equal (all dimensions <=) and less_partly (some dimension <) follow Volcano."""
    assert left.less_equal(right, missing=missing) is le
    assert left.fits_in(right, missing=missing) is le
    assert left.less_partly(right, missing=missing) is partly


# --- pod requests -----------------------------------------------------------------------


def container(
    name: str,
    requests: Mapping[str, QuantityLike] | None = None,
    limits: Mapping[str, QuantityLike] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Build a container dict as the API server returns it."""
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    return {"name": name, "image": "busybox", "resources": resources, **extra}


POD_CASES: list[tuple[str, dict[str, Any], dict[str, QuantityLike]]] = [
    ("no containers", {}, {}),
    ("no resources", {"containers": [{"name": "a"}]}, {}),
    (
        "sum of containers",
        {
            "containers": [
                container("a", {"cpu": "500m"}),
                container("b", {"cpu": 1, "memory": "1Gi"}),
            ]
        },
        {"cpu": "1500m", "memory": "1Gi"},
    ),
    (
        "limits default missing requests",
        {"containers": [container("a", {"cpu": "1"}, {"cpu": "2", "memory": "2Gi"})]},
        {"cpu": "1", "memory": "2Gi"},
    ),
    (
        "limits only",
        {"containers": [container("a", None, {"nvidia.com/gpu": 1})]},
        {"nvidia.com/gpu": 1},
    ),
    (
        "init container raises one resource",
        {
            "containers": [container("a", {"cpu": "1", "memory": "1Gi"})],
            "initContainers": [
                container("i1", {"cpu": "3"}),
                container("i2", {"memory": "512Mi"}),
            ],
        },
        {"cpu": "3", "memory": "1Gi"},
    ),
    (
        "init containers do not add up",
        {
            "containers": [container("a", {"cpu": "100m"})],
            "initContainers": [container("i1", {"cpu": "2"}), container("i2", {"cpu": "2"})],
        },
        {"cpu": "2"},
    ),
    (
        "sidecar adds to the sum and to later init containers",
        {
            "containers": [container("a", {"cpu": "1"})],
            "initContainers": [
                container("side", {"cpu": "500m"}, restartPolicy="Always"),
                container("i1", {"cpu": "2"}),
            ],
        },
        {"cpu": "2500m"},
    ),
    (
        "init container before a sidecar does not overlap it",
        {
            "containers": [container("a", {"cpu": "1"})],
            "initContainers": [
                container("i1", {"cpu": "2"}),
                container("side", {"cpu": "500m"}, restartPolicy="Always"),
            ],
        },
        {"cpu": "2"},
    ),
    (
        "overhead is added",
        {
            "containers": [container("a", {"cpu": "1"})],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        },
        {"cpu": "1250m", "memory": "120Mi"},
    ),
    (
        "pods count is not added",
        {"containers": [container("a", {"cpu": "1"})]},
        {"cpu": "1"},
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [(spec, exp) for _, spec, exp in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_requests(spec: dict[str, Any], expected: dict[str, QuantityLike]) -> None:
    """pod_requests follows Kubernetes: sum of containers, init peak, sidecars, overhead."""
    got = pod_requests(spec)
    assert got == Resources.from_list(expected)
    assert "pods" not in got


@pytest.mark.parametrize(
    ("spec", "expected"), [(spec, exp) for _, spec, exp in POD_CASES], ids=[c[0] for c in POD_CASES]
)
def test_pod_spec_requests_reads_a_decoded_spec_alike(
    spec: dict[str, Any], expected: dict[str, QuantityLike]
) -> None:
    """The typed form (a decoded PodSpec, as the dashboard holds it) gives the same figures."""
    decoded = msgspec.convert(spec, PodSpec)
    assert pod_spec_requests(decoded) == Resources.from_list(expected)


def test_pod_requests_error_names_container() -> None:
    """A bad quantity in a container names the container and the resource."""
    spec = {"containers": [container("trainer", {"cpu": "two"})]}
    with pytest.raises(QuantityError, match=r"container 'trainer': resource 'cpu'"):
        pod_requests(spec)


def test_pod_requests_error_names_overhead() -> None:
    """A bad quantity in the pod overhead says so."""
    with pytest.raises(QuantityError, match=r"pod overhead: resource 'cpu'"):
        pod_requests({"containers": [], "overhead": {"cpu": "1 "}})


# --- property tests ---------------------------------------------------------------------

_NAMES = st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu", "example.com/foo"])
_AMOUNTS = st.integers(min_value=-(10**15), max_value=10**15)
vectors = st.dictionaries(_NAMES, _AMOUNTS, max_size=5).map(Resources)
non_negative = st.dictionaries(_NAMES, st.integers(0, 10**15), max_size=5).map(Resources)
missing_modes = st.sampled_from(["zero", "unbounded"])


@given(vectors, vectors)
def test_add_commutative(a: Resources, b: Resources) -> None:
    """a + b == b + a."""
    assert a + b == b + a


@given(vectors, vectors, vectors)
def test_add_associative(a: Resources, b: Resources, c: Resources) -> None:
    """(a + b) + c == a + (b + c), exactly, since amounts are integers."""
    assert (a + b) + c == a + (b + c)


@given(vectors, vectors)
def test_sub_then_add_restores(a: Resources, b: Resources) -> None:
    """a - b + b == a."""
    assert a - b + b == a


@given(vectors)
def test_zero_is_identity(a: Resources) -> None:
    """Adding or subtracting the empty vector changes nothing; a - a is empty."""
    assert a + Resources() == a
    assert a - Resources() == a
    assert (a - a).is_empty()
    assert a - a == Resources()


@given(vectors, vectors)
def test_equal_vectors_hash_equal(a: Resources, b: Resources) -> None:
    """Equal vectors have equal hashes, whatever zeros each one lists."""
    if a == b:
        assert hash(a) == hash(b)
    padded = a + Resources(dict.fromkeys(b.names(), 0))
    assert padded == a
    assert hash(padded) == hash(a)


@given(vectors, vectors)
def test_less_equal_is_not_reverse_less_partly(a: Resources, b: Resources) -> None:
    """With absent as zero, a <= b in every dimension exactly when b is not partly below a."""
    assert a.less_equal(b) is not b.less_partly(a)


@given(vectors, non_negative, missing_modes)
def test_fits_after_adding(a: Resources, b: Resources, missing: Missing) -> None:
    """A vector fits in itself plus any non-negative vector."""
    assert a.fits_in(a + b, missing=missing)


@given(vectors, vectors)
def test_max_min_bounds(a: Resources, b: Resources) -> None:
    """min(a, b) <= a <= max(a, b) and max + min == a + b."""
    assert a.min(b).less_equal(a)
    assert a.less_equal(a.max(b))
    assert a.max(b) + a.min(b) == a + b


@given(vectors, vectors)
def test_sub_clamped_bounds(a: Resources, b: Resources) -> None:
    """sub_clamped is never negative and never below a - b."""
    clamped = a.sub_clamped(b)
    assert all(amount >= 0 for _, amount in clamped.items())
    assert (a - b).less_equal(clamped)


@given(vectors, st.integers(min_value=-5, max_value=5))
def test_multiply_is_repeated_addition(a: Resources, n: int) -> None:
    """multiply(n) equals adding the vector n times (or subtracting for negative n)."""
    expected = Resources.sum([a] * abs(n))
    assert a.multiply(n) == (expected if n >= 0 else Resources() - expected)


@given(vectors, st.fractions(min_value=0, max_value=10, max_denominator=1000))
def test_scale_rounds_down(a: Resources, factor: Fraction) -> None:
    """scale(f) is within one thousandth below the exact product, per resource."""
    scaled = a.scale(factor)
    for name, amount in a.items():
        exact = amount * factor
        assert exact - 1 < scaled.get(name) <= exact
    assert a.scale(1) == a


@given(non_negative.map(lambda r: r.without("memory")), st.integers(0, 10**12))
def test_to_list_round_trips(a: Resources, memory_bytes: int) -> None:
    """from_list(to_list(r)) == r for vectors built from resource lists."""
    r = a + Resources({"memory": memory_bytes * 1000})
    assert Resources.from_list(r.to_list()) == r
