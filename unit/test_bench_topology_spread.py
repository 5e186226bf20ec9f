"""bench/scheduler_perf.py's spread case (scheduler_perf's TopologySpreading): its sizes, its
pods, the zones round-robin and the skew check."""

from __future__ import annotations

from bench.scheduler_perf import MOON_KEY, cases, moons, pod_body, spread_violations
from caldera.api.core import Container, Pod, PodSpec
from caldera.api.meta import ObjectMeta


def test_the_case_scales_from_scheduler_perfs_5000_nodes() -> None:
    assert (cases(5000)["spread"].init, cases(5000)["spread"].measure) == (5000, 5000)
    assert (cases(500)["spread"].init, cases(500)["spread"].measure) == (500, 500)
    assert cases(500, cap=100)["spread"].measure == 100


def test_measured_pods_spread_and_the_first_ones_are_plain() -> None:
    measured = pod_body("p", "caldera", "spread", ("s-1", "s-0"))
    (constraint,) = measured["spec"]["topologySpreadConstraints"]
    assert constraint == {
        "maxSkew": 5,
        "topologyKey": MOON_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}},
    }
    assert measured["metadata"]["labels"] == {"color": "blue"}
    first = pod_body("i", "kube", "spread", ("s-1", "s-0"), init=True)
    assert "topologySpreadConstraints" not in first["spec"]
    assert first["metadata"]["labels"] == {}


def _pod(node: str, color: str = "blue") -> Pod:
    meta = ObjectMeta(name=f"{node}-{color}", namespace="n", labels={"color": color})
    return Pod(metadata=meta, spec=PodSpec(containers=(Container(name="c"),), node_name=node))


def test_violations_are_the_skew_beyond_five() -> None:
    """Zones round-robin over the nodes; 7/1/0 blue pods skew by 7: 2 beyond maxSkew 5;
    other colours and unbound pods do not count."""
    zone_of = moons(["n0", "n1", "n2", "n3"])
    assert zone_of == {"n0": "moon-1", "n1": "moon-2", "n2": "moon-3", "n3": "moon-1"}
    pods = [_pod("n0")] * 4 + [_pod("n3")] * 3 + [_pod("n1"), _pod("n2", "green"), _pod("")]
    assert spread_violations(pods, zone_of) == 2
    assert spread_violations(pods[:5], zone_of) == 0
