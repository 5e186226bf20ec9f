"""bench/scheduler_perf.py's pure parts: the cases' sizes, the pods of scheduler_perf's shapes,
the latency quantile, the anti-affinity check and the on-paper bound; bench/_procfs.py's
readings of this very process."""

from __future__ import annotations

import math
import os

from hypothesis import given
from hypothesis import strategies as st

from bench._procfs import cpu_seconds, load_average, memory_fields_kib, memory_kib
from bench.scheduler_perf import (
    FILLED_KEY,
    SideResult,
    anti_affinity_violations,
    cases,
    on_paper,
    pod_body,
    quantile,
)
from caldera.api.core import Container, Pod, PodSpec
from caldera.api.meta import ObjectMeta


def test_cases_scale_from_5000_nodes_and_obey_the_cap() -> None:
    full = cases(5000)
    assert (full["basic-10k"].measure, full["basic-50k"].measure) == (10_000, 50_000)
    assert (full["anti-affinity"].init, full["anti-affinity"].measure) == (1000, 2000)
    assert (full["preemption"].init, full["preemption"].measure) == (4000, 1000)
    small = cases(500, cap=300)
    assert small["basic-10k"].measure == 300  # 1,000 scaled, capped
    assert small["anti-affinity"].init == 100  # under the cap
    assert small["preemption"].init == 4 * small["preemption"].measure


def test_pods_take_scheduler_perf_shapes() -> None:
    anti = pod_body("p", "kube", "anti-affinity", ("a-1", "a-0"))
    term = anti["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["namespaces"] == ["a-1", "a-0"]
    assert anti["spec"]["schedulerName"] == "default-scheduler"
    low = pod_body("l", "caldera", "preemption", ("c-1", "c-0"), init=True)
    high = pod_body("h", "caldera", "preemption", ("c-1", "c-0"))
    assert low["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "900m"
    assert high["spec"]["priorityClassName"] == "perf-high"
    assert high["spec"]["nodeSelector"] == {FILLED_KEY: "true"}
    assert high["spec"]["schedulerName"] == "volcano"


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=200))
def test_quantile_is_a_value_with_enough_below(values: list[float]) -> None:
    for q in (0.5, 0.99):
        got = quantile(values, q)
        assert got in values
        assert sum(v <= got for v in values) >= q * len(values)
        assert sum(v < got for v in values) < q * len(values)


def test_quantile_of_nothing_is_nan() -> None:
    assert math.isnan(quantile([], 0.5))


def _pod(name: str, node: str, color: str) -> Pod:
    meta = ObjectMeta(name=name, namespace="n", labels={"color": color})
    return Pod(metadata=meta, spec=PodSpec(containers=(Container(name="c"),), node_name=node))


def test_anti_affinity_violations_count_greens_beyond_the_first_per_node() -> None:
    pods = [
        _pod("a", "n1", "green"),
        _pod("b", "n1", "green"),
        _pod("c", "n1", "green"),
        _pod("d", "n2", "green"),
        _pod("e", "n2", "blue"),
    ]
    assert anti_affinity_violations(pods) == 2
    assert anti_affinity_violations(pods[3:]) == 0


def test_on_paper_names_the_tighter_machine() -> None:
    cpu = {"apiserver": 8.0, "etcd": 2.0, "kwok": 1.0, "kcm": 1.0, "scheduler": 1.0, "bench": 2.0}
    result = SideResult("caldera", 1000, 1000, 100.0, 0.1, 0.2, 10.0, cpu, 0, {})
    # 10 ms of API server and etcd per bind on 2 cores: 200/s; the rest 5 ms: 400/s.
    assert on_paper(result, threads=1) == "200 binds/s (bound by API server machine)"
    busy = SideResult(
        "caldera", 1000, 1000, 100.0, 0.1, 0.2, 10.0, {**cpu, "scheduler": 8.0}, 0, {}
    )
    assert on_paper(busy, threads=1) == "125 binds/s (bound by scheduler's cores)"


def test_procfs_reads_this_process() -> None:
    """The procfs readers see this process: CPU spent, a peak resident set at least the
    resident set of the same moment, 0 for a field or a process that is not there."""
    sum(i * i for i in range(200_000))  # some CPU to see
    assert cpu_seconds(os.getpid()) > 0
    # One read: two reads apart may see the resident set grow past the first read's peak.
    peak, resident = memory_fields_kib(os.getpid(), "VmHWM", "VmRSS")
    assert peak >= resident > 0
    assert memory_kib(os.getpid()) > 0
    assert memory_kib(os.getpid(), "VmRSS") > 0
    assert memory_fields_kib(os.getpid(), "VmNoSuchField") == (0,)
    assert cpu_seconds(None) == 0.0
    assert memory_kib(None) == 0
    assert len(load_average().split(", ")) == 3
