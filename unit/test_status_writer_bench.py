"""bench/scheduler_perf.py's count of the API server's writes per pod bound, which shows the
status writer's effect beside kube-scheduler's (apiserver_request_total by verb and resource)."""

from __future__ import annotations

from bench.scheduler_perf import SideResult, counts_between, describe, writes_per_pod


def test_counts_between_keeps_what_moved() -> None:
    before = {"POST pods": 10, "GET pods": 5, "PUT podgroups": 3}
    after = {"POST pods": 110, "GET pods": 5, "PUT podgroups": 3, "PATCH podgroups": 100}
    assert counts_between(before, after) == {"POST pods": 100.0, "PATCH podgroups": 100.0}


def test_writes_per_pod_counts_writes_only_most_first() -> None:
    server = {
        "POST pods": 200.0,
        "POST pods/binding": 200.0,
        "PATCH podgroups": 100.0,
        "GET pods": 50.0,
        "WATCH pods": 3.0,
    }
    assert writes_per_pod(server, 200) == {
        "POST pods": 1.0,
        "POST pods/binding": 1.0,
        "PATCH podgroups": 0.5,
    }
    assert writes_per_pod({"POST pods": 3.0}, 0) == {"POST pods": 3.0}  # nothing bound


def test_a_side_says_its_writes_per_pod() -> None:
    cpu = {"apiserver": 10.0, "etcd": 1.0, "kwok": 1.0, "kcm": 1.0, "scheduler": 2.0}
    result = SideResult("kube", 100, 100, 10.0, 0.1, 0.2, 10.0, cpu, 0, {})
    result.server = {"POST pods": 100.0, "POST pods/binding": 100.0, "POST events": 100.0}
    assert "API server writes a pod bound, every client's (3.00): " in describe(result)
