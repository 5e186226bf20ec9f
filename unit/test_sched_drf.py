"""drf: dominant shares, fair job order that alternates hungry jobs, the preemption rule, and
namespace fairness with weights."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.api.types import TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.drf import (
    UNTRACKED,
    DrfPlugin,
    JobShares,
    dominant_share,
    resource_share,
)
from unit.sched_fixtures import add_job, cpu, cpu_cluster, open_session


def drf(**arguments: object) -> DrfPlugin:
    return DrfPlugin(Arguments("drf", arguments))


@pytest.mark.parametrize(
    ("allocated", "total", "share"),
    [
        pytest.param({"cpu": "2", "memory": "1Gi"}, {"cpu": "10", "memory": "4Gi"}, 0.25, id="mem"),
        pytest.param({"cpu": "5"}, {"cpu": "10", "memory": "4Gi"}, 0.5, id="cpu"),
        pytest.param({"nvidia.com/gpu": "1"}, {"cpu": "10"}, 1.0, id="resource-cluster-lacks"),
        pytest.param({"cpu": "1", "pods": "100"}, {"cpu": "10", "pods": "110"}, 0.1, id="no-pods"),
        pytest.param({}, {"cpu": "10"}, 0.0, id="nothing"),
    ],
)
def test_dominant_share(allocated: dict[str, str], total: dict[str, str], share: float) -> None:
    """The share is the largest allocated/total over tracked resources."""
    assert dominant_share(
        Resources.from_list(allocated), Resources.from_list(total)
    ) == pytest.approx(share)


def _place_in_job_order(ssn: Session) -> list[str]:
    """A minimal allocate loop: always the first job in the session's order, one task at a
    time, until nothing fits. Returns the job names in placement order."""
    placed: list[str] = []
    while True:
        hungry = [j for j in ssn.jobs.values() if j.count(TaskStatus.PENDING)]
        if not hungry:
            return placed
        job = ssn.sorted_jobs(hungry)[0]
        task = next(job.tasks_in(TaskStatus.PENDING))
        node = next(
            (n for n in ssn.nodes.values() if task.init_resreq.less_equal(n.future_idle())), None
        )
        if node is None:
            return placed
        stmt = ssn.statement()
        stmt.allocate(task, node.name)
        stmt.commit()
        placed.append(job.name)


@pytest.mark.parametrize(
    ("total", "big", "small"),
    [
        pytest.param(100, 50, 50, id="equal-split"),
        pytest.param(200, 140, 60, id="small-job-satisfied"),
    ],
)
def test_two_hungry_jobs_alternate_to_equal_shares(total: int, big: int, small: int) -> None:
    """Jobs of 300 and 60 pods take turns, so they end with equal numbers until the small one
    has all it asked for."""
    cluster = cpu_cluster({f"n{i}": str(total // 4) for i in range(4)})
    add_job(cluster, "big", pending=300)
    add_job(cluster, "small", pending=60)
    plugin = drf()
    ssn = open_session(cluster, [plugin])
    placed = _place_in_job_order(ssn)
    assert placed.count("big") == big
    assert placed.count("small") == small
    for i in range(1, 2 * min(big, small) + 1):
        prefix = placed[:i]
        assert abs(prefix.count("big") - prefix.count("small")) <= 1
    assert plugin.job_shares["ns/big"] == pytest.approx(big / total)


@pytest.mark.parametrize(
    ("preemptor_running", "victim_running", "candidates", "allowed"),
    [
        pytest.param(2, 6, 1, 1, id="victim-richer-after-loss"),
        pytest.param(2, 3, 1, 0, id="victim-would-fall-below"),
        pytest.param(2, 4, 1, 1, id="equal-after-exchange"),
        pytest.param(2, 6, 4, 3, id="cumulative-per-job"),
        pytest.param(0, 1, 1, 0, id="empty-preemptor-vs-last-task"),
    ],
)
def test_preemptable_compares_shares_after_exchange(
    preemptor_running: int, victim_running: int, candidates: int, allowed: int
) -> None:
    """A victim's job must keep a share at least the preemptor job's after the exchange."""
    cluster = cpu_cluster({"n0": "10"})
    hungry = add_job(cluster, "hungry", running=preemptor_running, pending=1)
    rich = add_job(cluster, "rich", running=victim_running)
    ssn = open_session(cluster, [drf()])
    preemptor = next(hungry.tasks_in(TaskStatus.PENDING))
    victims = ssn.preemptable(preemptor, list(rich.tasks.values())[:candidates])
    assert len(victims) == allowed


def test_tasks_of_the_preemptor_job_are_not_judged() -> None:
    """Moving resources inside one job does not change its share: drf lets it through."""
    cluster = cpu_cluster({"n0": "10"})
    job = add_job(cluster, "j", running=1, pending=1)
    ssn = open_session(cluster, [drf()])
    preemptor = next(job.tasks_in(TaskStatus.PENDING))
    running = list(job.tasks_in(TaskStatus.RUNNING))
    assert ssn.preemptable(preemptor, running) == running


def test_shares_follow_allocate_evict_and_discard() -> None:
    """The allocate handlers keep job and namespace shares current."""
    cluster = cpu_cluster({"n0": "10"})
    job = add_job(cluster, "j", running=2, pending=2)
    plugin = drf()
    ssn = open_session(cluster, [plugin])
    assert plugin.job_shares["ns/j"] == pytest.approx(0.2)
    stmt = ssn.statement()
    stmt.allocate(next(job.tasks_in(TaskStatus.PENDING)), "n0")
    assert plugin.job_shares["ns/j"] == pytest.approx(0.3)
    stmt.evict(next(job.tasks_in(TaskStatus.RUNNING)), "test")
    assert plugin.job_shares["ns/j"] == pytest.approx(0.2)
    assert plugin.namespace_shares["ns"] == pytest.approx(0.2)
    stmt.discard()
    assert plugin.job_shares["ns/j"] == pytest.approx(0.2)
    assert plugin.job_allocated["ns/j"] == cpu("2")


@pytest.mark.parametrize(
    ("fairness", "weights", "first"),
    [
        pytest.param(False, {}, "a/big-ns-small-job", id="off-job-share-decides"),
        pytest.param(True, {}, "b/small-ns-big-job", id="on-namespace-share-decides"),
        pytest.param(True, {"a": 4}, "a/big-ns-small-job", id="weights-divide-the-share"),
    ],
)
def test_namespace_fairness_orders_by_weighted_namespace_share(
    fairness: bool, weights: dict[str, int], first: str
) -> None:
    """With namespace fairness on, the less served namespace (share / weight) goes first."""
    cluster = cpu_cluster({"n0": "100"})
    cluster.namespace_weights = weights
    add_job(cluster, "big-ns-small-job", namespace="a", running=2, pending=1)
    add_job(cluster, "filler", namespace="a", running=40)
    add_job(cluster, "small-ns-big-job", namespace="b", running=20, pending=1)
    ssn = open_session(cluster, [drf(**{"drf.namespace-fairness": fairness})])
    contenders = [ssn.jobs["a/big-ns-small-job"], ssn.jobs["b/small-ns-big-job"]]
    assert ssn.sorted_jobs(contenders)[0].key == first


def test_namespace_fairness_in_preemption() -> None:
    """Across namespaces the weighted namespace shares decide before the job shares."""
    cluster = cpu_cluster({"n0": "100"})
    add_job(cluster, "poor", namespace="a", running=10, pending=1)
    add_job(cluster, "rich", namespace="b", running=5)
    add_job(cluster, "rich-filler", namespace="b", running=40)
    ssn = open_session(cluster, [drf(**{"drf.namespace-fairness": True})])
    preemptor = next(ssn.jobs["a/poor"].tasks_in(TaskStatus.PENDING))
    victims = list(ssn.jobs["b/rich"].tasks.values())
    # Job shares alone would refuse (poor 0.11 > rich 0.04); namespace b is far richer.
    assert ssn.preemptable(preemptor, victims[:1]) == victims[:1]
    ssn2 = open_session(cluster, [drf()])
    assert ssn2.preemptable(preemptor, victims[:1]) == []


def test_bad_argument_is_refused() -> None:
    """A non-boolean drf.namespace-fairness names the plugin and key."""
    with pytest.raises(ValueError, match=r"plugin drf: argument drf.namespace-fairness"):
        DrfPlugin(Arguments("drf", {"drf.namespace-fairness": "maybe"}))


@given(
    allocated=st.dictionaries(
        st.sampled_from(("cpu", "memory", "pods", "gpu")), st.integers(-5, 20)
    ),
    total=st.dictionaries(st.sampled_from(("cpu", "memory", "pods", "disk")), st.integers(-5, 20)),
)
def test_dominant_share_reads_only_what_is_held(
    allocated: dict[str, int], total: dict[str, int]
) -> None:
    """A resource only the total lists adds a share of 0: the dominant share over the held
    resources equals the one over both sides' resources (untracked names left out)."""
    both = 0.0
    for name in (set(allocated) | set(total)) - set(UNTRACKED):
        both = max(both, resource_share(allocated.get(name, 0), total.get(name, 0)))
    assert dominant_share(Resources(allocated), Resources(total)) == both


def test_a_session_changes_shares_over_the_snapshots_maps_not_in_them() -> None:
    """The per-job maps kept with the snapshot stay as they were: the session's changes are
    written over them (``Overlay``), so the next session starts from the snapshot again."""
    cluster = cpu_cluster({"n0": "10"})
    job = add_job(cluster, "j", running=2, pending=1)
    add_job(cluster, "k", running=1)
    plugin = drf()
    ssn = open_session(cluster, [plugin])
    kept_shares = dict(plugin.job_shares.base)
    kept_allocated = dict(plugin.job_allocated.base)
    ssn.statement().allocate(next(job.tasks_in(TaskStatus.PENDING)), "n0")
    assert plugin.job_shares["ns/j"] == pytest.approx(0.3)
    assert plugin.job_allocated["ns/j"] == cpu("3")
    assert plugin.job_shares.base == kept_shares
    assert plugin.job_allocated.base == kept_allocated
    assert dict(plugin.job_shares) == {"ns/j": pytest.approx(0.3), "ns/k": pytest.approx(0.1)}


@pytest.mark.parametrize("wanted", [True, False])
def test_per_job_shares_are_reported_only_when_the_session_wants_them(wanted: bool) -> None:
    cluster = cpu_cluster({"n0": "10"})
    add_job(cluster, "j", running=2)
    plugin = drf()
    ssn = open_session(cluster, [plugin])
    ssn.job_figures = wanted
    plugin.on_session_close(ssn)
    assert ssn.result.job_share == ({"ns/j": pytest.approx(0.2)} if wanted else {})
    assert ssn.result.namespace_share == {"ns": pytest.approx(0.2)}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["ns/a", "ns/b", "ns/c", "ns/d"]),
            st.dictionaries(
                st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"]),
                st.integers(min_value=0, max_value=10_000),
                max_size=3,
            ),
            max_size=4,
        ),
        min_size=1,
        max_size=6,
    ),
    st.dictionaries(
        st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
        st.integers(min_value=0, max_value=10_000),
        max_size=3,
    ),
)
def test_lazy_job_shares_equal_the_shares_worked_out_afresh(
    rounds: list[dict[str, dict[str, int]]], amounts: dict[str, int]
) -> None:
    """However the jobs' allocations come, change and go between sessions sharing one memo,
    every share read is the dominant share of the job's allocation now."""
    total = Resources(amounts)
    memo: dict[str, tuple[Resources, float]] = {}
    for allocations in rounds:
        allocated = {key: Resources(held) for key, held in allocations.items()}
        shares = JobShares(allocated, total, memo)
        assert dict(shares) == {key: dominant_share(held, total) for key, held in allocated.items()}
        assert shares.get("ns/none", 0.0) == 0.0


def test_the_share_memo_forgets_jobs_that_went() -> None:
    memo: dict[str, tuple[Resources, float]] = {f"ns/gone-{i}": (cpu("1"), 0.1) for i in range(100)}
    shares = JobShares({"ns/j": cpu("2")}, cpu("10"), memo)
    assert shares["ns/j"] == pytest.approx(0.2)
    assert set(memo) == {"ns/j"}


def test_a_job_share_is_worked_out_again_when_its_allocation_changes() -> None:
    total = cpu("10")
    memo: dict[str, tuple[Resources, float]] = {}
    assert JobShares({"ns/j": cpu("2")}, total, memo)["ns/j"] == pytest.approx(0.2)
    assert JobShares({"ns/j": cpu("5")}, total, memo)["ns/j"] == pytest.approx(0.5)
    assert memo["ns/j"][1] == pytest.approx(0.5)
