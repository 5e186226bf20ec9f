"""Inter-pod affinity's layered path (``interpod_affinity.claim_cross_node``) and Volcano's
feasible-node sampling, against the brute-force oracle of ``unit.test_plugin_pod_affinity``:
no placement breaks a required term, and the decisions are the same with the layered path off
and on and with the speed layer withheld, sampled or not."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.api.feasible_nodes import FeasibleNodes
from scheduler.api.pod_affinity import ANTI_AFFINITY_MISMATCH, EXISTING_ANTI_AFFINITY_MISMATCH
from scheduler.api.types import ClusterInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.plugin import PluginOption
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session
from scheduler.plugins import interpod_affinity
from unit.sched_fixtures import DEFAULT_PLUGINS, REGISTRY, binds, make_cluster, make_job, make_task
from unit.test_plugin_pod_affinity import (
    HOST,
    POD,
    build,
    node,
    one_per_host,
    plugins_session,
    shaped,
    term,
    violations,
)


@contextmanager
def layered(on: bool) -> Iterator[None]:
    kept = interpod_affinity.LAYERED
    interpod_affinity.LAYERED = on
    try:
        yield
    finally:
        interpod_affinity.LAYERED = kept


def run(cluster: ClusterInfo, *, speedups: bool, feasible: FeasibleNodes | None) -> Session:
    conf = SchedulerConf(
        actions=("enqueue", "allocate", "backfill"),
        tiers=tuple(tuple(PluginOption(p) for p in tier) for tier in DEFAULT_PLUGINS),
    )
    ssn = Session(cluster, conf.tiers, speedups=speedups)
    if feasible is not None:
        ssn.feasible_nodes = feasible
    run_session(ssn, conf, REGISTRY)
    return ssn


def test_a_claimed_pod_is_layered_and_passes_while_node_local() -> None:
    cluster = one_per_host(2, [node("n0", "a"), node("n1", "a")])
    ssn = plugins_session(cluster)
    first, second = sorted(ssn.jobs["ns/web"].tasks.values(), key=lambda t: t.name)
    stmt = ssn.statement()
    stmt.allocate(first, "n0")
    n0 = ssn.nodes["n0"]
    assert ssn.cross_node_layered(second)
    assert ssn.predicate(second, n0) == ANTI_AFFINITY_MISMATCH
    ssn.node_local = True
    assert ssn.predicate(second, n0) is None
    ssn.node_local = False
    with layered(False):
        fresh = plugins_session(one_per_host(1, [node("n0", "a")]))
        assert not fresh.cross_node_layered(next(iter(fresh.jobs["ns/web"].tasks.values())))


def test_a_pod_named_by_a_placed_pods_anti_affinity_is_kept_out_layered() -> None:
    """Symmetry: the pod has no terms; the placed pod's term names it."""

    def cluster() -> ClusterInfo:
        guard = shaped(
            make_task("guard", 0, status=TaskStatus.RUNNING, node="n0"),
            {"app": "guard"},
            anti=[term(HOST, app="web")],
        )
        web = shaped(make_task("web", 0, {"cpu": "1"}), {"app": "web"})
        # n0 is the emptier node by far: resources alone would choose it
        filler = make_task("filler", 0, {"cpu": "6"}, status=TaskStatus.RUNNING, node="n1")
        return make_cluster(
            [node("n0", "a"), node("n1", "a")],
            [make_job("guard", [guard]), make_job("web", [web]), make_job("filler", [filler])],
        )

    opened = plugins_session(cluster())
    web = next(iter(opened.jobs["ns/web"].tasks.values()))
    assert opened.cross_node_layered(web)
    assert opened.predicate(web, opened.nodes["n0"]) == EXISTING_ANTI_AFFINITY_MISMATCH
    for speedups in (True, False):
        assert binds(run(cluster(), speedups=speedups, feasible=None)) == {"web-0": "n1"}


SAMPLED = FeasibleNodes(minimum_feasible_nodes=1, percentage_nodes_to_find=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(POD, min_size=1, max_size=9),
    st.lists(st.sampled_from(("a", "b", "c")), min_size=1, max_size=8),
    st.booleans(),
)
def test_layered_and_sampled_sessions_break_no_required_term_and_decide_alike(
    spec: list[dict[str, object]], zones: list[str], sampled: bool
) -> None:
    feasible = SAMPLED if sampled else None
    outcomes = []
    for on, speedups in ((True, True), (False, True), (True, False), (False, False)):
        with layered(on):
            ssn = run(build(spec, zones), speedups=speedups, feasible=feasible)
        placed_now = {b.task.key for b in ssn.result.binds}
        assert violations(ssn, placed_now) == []
        outcomes.append(binds(ssn))
    assert outcomes[1:] == outcomes[:1] * 3
