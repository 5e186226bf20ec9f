"""The chaos run's pure parts (e2e/chaos): the seeded workload and fault plan, and the invariants
over observed pod lives. The run itself is e2e/test_chaos.py."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from caldera.api.names import pod_name
from e2e.chaos.checks import (
    PodGroupCounts,
    PodLedger,
    PodLife,
    duplicates,
    gang_violations,
    podgroup_mismatches,
    queue_mismatches,
    spread,
    window_end,
    wrong_jobs,
)
from e2e.chaos.faults import PROCESSES, FaultCounts, FaultKind, plan_faults
from e2e.chaos.workload import EXIT_CODE, GONE, Shape, make_workload


def life(uid: str, created: float, *, index: str = "0", **kw: object) -> PodLife:
    base = PodLife(uid, pod_name("j", "w", int(index)), "j", "w", index, "pg", (100, 0), created)
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def test_the_workload_is_a_function_of_its_seed() -> None:
    one, again, other = (make_workload(s, 60, ("a", "b")) for s in (3, 3, 4))
    assert [p.manifest for p in one] == [p.manifest for p in again]
    assert [p.manifest for p in one] != [p.manifest for p in other]
    assert len({p.name for p in one}) == 60
    assert {p.manifest["spec"]["queue"] for p in one} == {"a", "b"}


EXPECTED: dict[Shape, tuple[set[str | None], str]] = {
    Shape.TENSORFLOW: ({"0"}, "Completed"),
    Shape.MPI: ({"0", None}, "Completed"),
    Shape.PYTORCH: ({"0"}, "Completed"),
    Shape.VOLUMES: ({"0"}, "Completed"),
    Shape.RETRY_FAIL: ({"1"}, "Failed"),
    Shape.ABORT: ({"3"}, "Aborted"),
    Shape.SUSPEND: ({"0"}, "Completed"),
    Shape.TTL: ({"0"}, GONE),
    Shape.SERVICE: ({None}, "Running"),
}


def test_each_shape_expects_what_its_pods_and_policies_dictate() -> None:
    plans = make_workload(1, 300, ("q",))
    assert {p.shape for p in plans} == set(Shape)
    for plan in plans:
        spec = plan.manifest["spec"]
        codes = {t["template"]["metadata"]["annotations"].get(EXIT_CODE) for t in spec["tasks"]}
        assert plan.min_available == sum(t["replicas"] for t in spec["tasks"])
        want_codes, want_phase = EXPECTED[plan.shape]
        assert codes == want_codes, plan.name
        assert plan.expected == want_phase, plan.name
        if plan.shape is Shape.RETRY_FAIL:
            assert spec["maxRetry"] == 2
        if plan.shape is Shape.TTL:
            assert spec["ttlSecondsAfterFinished"] > 0
        assert (plan.suspend_after > 0) == (plan.shape is Shape.SUSPEND)


@given(st.integers(0, 10_000), st.floats(1, 500))
@example(6379, 1.609375)  # a moment drawn just below the window rounded past it
def test_the_fault_plan_is_sorted_within_its_window_and_complete(seed: int, window: float) -> None:
    counts = FaultCounts(kills_per_process=2, eviction_bursts=3)
    faults = plan_faults(seed, window, counts)
    assert [f.at for f in faults] == sorted(f.at for f in faults)
    assert all(0 <= f.at <= window for f in faults)
    kills = [f for f in faults if f.kind is FaultKind.KILL]
    assert sorted(f.target for f in kills) == sorted(PROCESSES * 2)
    assert sum(f.kind is FaultKind.EVICTIONS for f in faults) == 3
    assert plan_faults(seed, window, counts) == faults


def test_two_live_pods_for_one_slot_are_a_duplicate() -> None:
    first = life("a", 0, ended=10.0)
    overlapping = life("b", 5)
    assert duplicates([first, overlapping]) == [("j-w-0", "a", "b")]
    after = life("c", 11)
    assert duplicates([first, after]) == []
    other_slot = life("d", 5, index="1")
    assert duplicates([first, other_slot]) == []


@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=8))
def test_lives_one_after_another_are_never_duplicates(durations: list[float]) -> None:
    lives, t = [], 0.0
    for i, d in enumerate(durations):
        lives.append(life(f"u{i}", t, deleted=t + d))
        t += d
    assert duplicates(lives) == []


def test_a_gang_bound_short_of_min_available_is_a_violation() -> None:
    whole = [life("a", 0, bound=1.0), life("b", 0, bound=1.5, index="1")]
    assert gang_violations({"j": whole}, {"j": 2}) == []
    part = [life("a", 0, bound=1.0), life("b", 0, index="1")]
    assert gang_violations({"j": part}, {"j": 2}) == [("j", 1.0, 1)]
    late = [life("a", 0, bound=1.0), life("b", 0, bound=100.0, index="1")]
    assert gang_violations({"j": late}, {"j": 2}, window=45) == [("j", 1.0, 1)]


def test_outages_pause_the_gang_window() -> None:
    """No scheduler acting, or the API server restarting: those seconds do not count."""
    late = [life("a", 0, bound=1.0), life("b", 0, bound=60.0, index="1")]
    assert gang_violations({"j": late}, {"j": 2}, window=45) == [("j", 1.0, 1)]
    assert gang_violations({"j": late}, {"j": 2}, window=45, outages=[(10.0, 30.0)]) == []
    before = [(0.0, 0.5), (50.0, 70.0)]  # one ended before the bind, one began after the end
    assert gang_violations({"j": late}, {"j": 2}, window=45, outages=before) == [("j", 1.0, 1)]


def test_window_end_adds_the_outages_inside_it() -> None:
    assert window_end(0.0, 10.0, []) == 10.0
    assert window_end(5.0, 10.0, [(0.0, 7.0)]) == 17.0  # began before the start: counts from it
    assert window_end(0.0, 10.0, [(2.0, 4.0), (11.0, 13.0)]) == 14.0  # the first moved the end
    assert window_end(0.0, 10.0, [(2.0, 4.0), (12.0, 13.0)]) == 12.0


@given(
    st.floats(0, 100),
    st.floats(0.1, 60),
    st.lists(st.tuples(st.floats(0.1, 20), st.floats(0.1, 20)), max_size=6),
)
def test_window_end_leaves_exactly_the_window_outside_outages(
    start: float, window: float, gaps: list[tuple[float, float]]
) -> None:
    outages, t = [], 0.0
    for gap, length in gaps:
        outages.append((t + gap, t + gap + length))
        t += gap + length
    end = window_end(start, window, outages)
    paused = sum(max(0.0, min(b, end) - max(a, start)) for a, b in outages)
    assert end - start - paused == pytest.approx(window)
    assert not any(a < end < b for a, b in outages)  # it ends in scheduling time


def test_a_gang_torn_down_while_its_binds_are_in_flight_is_whole() -> None:
    """A restart policy deleting the job's pods right after the first bind: the sibling whose
    bind then failed counts; a sibling created later, or deleted after the window, does not."""
    torn = [life("a", 0, bound=1.0), life("b", 0, index="1", deleting=1.5)]
    assert gang_violations({"j": torn}, {"j": 2}) == []
    newer = [life("a", 0, bound=1.0), life("b", 2.0, index="1", deleting=3.0)]
    assert gang_violations({"j": newer}, {"j": 2}) == [("j", 1.0, 1)]
    later = [life("a", 0, bound=1.0), life("b", 0, index="1", deleting=100.0)]
    assert gang_violations({"j": later}, {"j": 2}, window=45) == [("j", 1.0, 1)]


def test_a_pod_rebound_beside_running_siblings_completes_the_gang() -> None:
    evicted = life("a", 0, bound=1.0, deleted=20.0)
    sibling = life("b", 0, bound=1.0, index="1")
    replacement = life("c", 21, bound=22.0)
    assert gang_violations({"j": [evicted, sibling, replacement]}, {"j": 2}) == []
    failed_sibling = life("b", 0, bound=1.0, index="1", phase="Failed", ended=15.0)
    found = gang_violations({"j": [evicted, failed_sibling, replacement]}, {"j": 2})
    assert found == [("j", 22.0, 1)]


def test_the_ledger_follows_a_pod_through_its_life() -> None:
    ledger = PodLedger()
    for t, node, phase, deleting in (
        (1, "", "Pending", False),
        (2, "n1", "Pending", False),
        (3, "n1", "Succeeded", False),
        (4, "n1", "Succeeded", True),
    ):
        ledger.seen(
            t,
            uid="u",
            name="j-w-0",
            job="j",
            task="w",
            index="0",
            group="pg",
            requests=(1, 2),
            node=node,
            phase=phase,
            deleting=deleting,
        )
    ledger.gone(5, "u")
    got = ledger.lives["u"]
    assert (got.created, got.bound, got.ended, got.deleting, got.deleted) == (1, 2, 3, 4, 5)
    assert got.end_of_life == 3
    assert ledger.of_job() == {"j": [got]}


def test_counts_and_allocations_are_compared_with_the_pods() -> None:
    groups = [PodGroupCounts("pg", "q", running=1, succeeded=1, failed=0)]
    assert podgroup_mismatches(groups, [("pg", "Running"), ("pg", "Succeeded")]) == []
    assert podgroup_mismatches(groups, [("pg", "Running")]) == [
        (
            "pg",
            {"running": 1, "succeeded": 1, "failed": 0},
            {"running": 1, "succeeded": 0, "failed": 0},
        )
    ]
    assert queue_mismatches({"q": (300, 10)}, [("q", (100, 5)), ("q", (200, 5))]) == []
    assert queue_mismatches({"q": (0, 0)}, [("q", (100, 5))]) == [("q", (0, 0), (100, 5))]


def test_a_job_is_wrong_when_its_phase_is_not_the_expected_one() -> None:
    plans = make_workload(2, 20, ("q",))
    final = {p.name: p.expected for p in plans if p.expected != GONE}
    assert wrong_jobs(plans, final) == []
    victim = next(p for p in plans if p.expected == "Completed")
    assert wrong_jobs(plans, final | {victim.name: "Running"}) == [
        (victim.name, "Completed", "Running")
    ]
    ttl = next((p for p in plans if p.expected == GONE), None)
    if ttl is not None:
        assert wrong_jobs(plans, final | {ttl.name: "Completed"}) == [(ttl.name, GONE, "Completed")]


def test_spread_is_median_and_max() -> None:
    assert spread([]) == "-"
    assert spread([1.0, 3.0, 10.0]) == "3.0 / 10.0"
