"""proportion: water-filling deserved shares by weight under capability, request and guarantee;
queue order, overused, allocatable, enqueueable and reclaimable as Volcano defines them."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.api.types import QueueInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.plugins.proportion import (
    QUOTA_EVENT,
    Claim,
    ProportionPlugin,
    queue_share,
    water_fill,
)
from unit.sched_fixtures import add_job, cpu, cpu_cluster, open_session


def proportion() -> ProportionPlugin:
    return ProportionPlugin(Arguments("proportion", {}))


@pytest.mark.parametrize(
    ("total", "claims", "expected"),
    [
        pytest.param(10_000, [Claim(3, 10**9), Claim(1, 10**9)], [7_500, 2_500], id="3:1"),
        pytest.param(7, [Claim(3, 10**9), Claim(1, 10**9)], [5, 1], id="3:1-rounded-down"),
        pytest.param(10_000, [Claim(3, 2_000), Claim(1, 10**9)], [2_000, 8_000], id="cap"),
        pytest.param(10_000, [Claim(1, 1_000), Claim(1, 2_000)], [1_000, 2_000], id="requests"),
        pytest.param(
            9_000,
            [Claim(1, 1_000), Claim(1, 10**9), Claim(2, 10**9)],
            [1_000, 2_666, 5_333],
            id="capped-share-flows-by-weight",
        ),
        pytest.param(
            10_000, [Claim(3, 10**9), Claim(1, 10**9, 4_000)], [6_000, 4_000], id="guarantee"
        ),
        pytest.param(
            10_000,
            [Claim(1, 10**9, 1_000), Claim(1, 10**9)],
            [5_000, 5_000],
            id="guarantee-below-share",
        ),
        pytest.param(
            10_000, [Claim(1, 0, 3_000), Claim(1, 10**9)], [3_000, 7_000], id="idle-guarantee"
        ),
        pytest.param(
            10_000,
            [Claim(1, 5_000, 6_000), Claim(1, 5_000, 6_000)],
            [6_000, 6_000],
            id="guarantees-exceed-total",
        ),
        pytest.param(0, [Claim(1, 1_000)], [0], id="no-such-resource"),
    ],
)
def test_water_fill(total: int, claims: list[Claim], expected: list[int]) -> None:
    """Weighted max-min fair split of one resource under ceilings and guarantee floors."""
    assert water_fill(total, claims) == expected


_claims = st.lists(
    st.builds(
        Claim,
        weight=st.integers(1, 10),
        ceiling=st.integers(0, 50_000),
        guarantee=st.integers(0, 5_000),
    ),
    min_size=1,
    max_size=8,
)


@given(total=st.integers(0, 100_000), claims=_claims)
def test_water_fill_invariants(total: int, claims: list[Claim]) -> None:
    """Guarantees are floors, ceilings are caps, nothing is handed out twice or wasted beyond
    rounding, and queues that are neither capped nor at their floor share by weight."""
    deserved = water_fill(total, claims)
    floors = sum(c.guarantee for c in claims)
    for claim, amount in zip(claims, deserved, strict=True):
        assert claim.guarantee <= amount <= max(claim.ceiling, claim.guarantee)
    if floors <= total:
        assert sum(deserved) <= total
        wanted = sum(max(c.ceiling, c.guarantee) for c in claims)
        assert sum(deserved) >= min(wanted, total) - len(claims)
    levels = [
        amount / claim.weight
        for claim, amount in zip(claims, deserved, strict=True)
        if claim.guarantee < amount < claim.ceiling
    ]
    if levels:
        assert max(levels) - min(levels) <= 1


def _plain_water_fill(total: int, claims: list[Claim]) -> list[int]:
    """The deserved split by its definition, in Fractions: the level at which the claims'
    amounts (weight x level between guarantee and ceiling) add up to the total, found by
    bisecting exactly between the amounts' breakpoints."""

    def amount(claim: Claim, level: Fraction) -> Fraction:
        return max(min(claim.weight * level, Fraction(claim.ceiling)), Fraction(claim.guarantee))

    if sum(max(c.ceiling, c.guarantee) for c in claims) <= total:
        return [max(c.ceiling, c.guarantee) for c in claims]
    if sum(c.guarantee for c in claims) >= total:
        return [c.guarantee for c in claims]
    points = sorted(
        {Fraction(c.guarantee, c.weight) for c in claims}
        | {Fraction(c.ceiling, c.weight) for c in claims}
    )
    high = next(p for p in points if sum(amount(c, p) for c in claims) >= total)
    lower = [p for p in points if p < high]
    low = lower[-1] if lower else Fraction(0)
    low_sum = sum(amount(c, low) for c in claims)
    high_sum = sum(amount(c, high) for c in claims)
    level = (
        high
        if high_sum == low_sum
        else low + (total - low_sum) * (high - low) / (high_sum - low_sum)
    )
    return [math.floor(amount(c, level)) for c in claims]


@given(total=st.integers(0, 100_000), claims=_claims)
def test_water_fill_is_the_plain_split(total: int, claims: list[Claim]) -> None:
    """The integer-scaled water-fill hands out exactly what the definition in Fractions does."""
    assert water_fill(total, claims) == _plain_water_fill(total, claims)


def test_saturated_queues_split_three_to_one() -> None:
    """Two queues of weights 3 and 1 that both ask for more than the cluster get 3:1."""
    cluster = cpu_cluster({"n0": "8"}, [QueueInfo("a", weight=3), QueueInfo("b", weight=1)])
    add_job(cluster, "ja", queue="a", pending=20)
    add_job(cluster, "jb", queue="b", pending=20)
    plugin = proportion()
    open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu("6")
    assert plugin.queue_attrs["b"].deserved == cpu("2")


@pytest.mark.parametrize(
    ("a", "b", "want_a", "want_b"),
    [
        pytest.param(
            QueueInfo("a", weight=3, capability=cpu("2")),
            QueueInfo("b"),
            "2",
            "8",
            id="capability-caps-and-the-rest-flows",
        ),
        pytest.param(
            QueueInfo("a", weight=3, capability=cpu("0")),
            QueueInfo("b"),
            "7500m",
            "2500m",
            id="cpu-capability-0-is-unlimited",
        ),
        pytest.param(
            QueueInfo("a", weight=3),
            QueueInfo("b", guarantee=cpu("4")),
            "6",
            "4",
            id="guarantee-respected",
        ),
        pytest.param(
            QueueInfo("a", weight=3, capability=cpu("9")),
            QueueInfo("b", guarantee=cpu("4")),
            "6",
            "4",
            id="guarantee-reserved-out-of-capability",
        ),
    ],
)
def test_deserved_from_queue_specs(a: QueueInfo, b: QueueInfo, want_a: str, want_b: str) -> None:
    """Capability, Volcano's cpu 0 = unlimited, and guarantees shape the deserved share."""
    cluster = cpu_cluster({"n0": "10"}, [a, b])
    add_job(cluster, "ja", queue="a", pending=50)
    add_job(cluster, "jb", queue="b", pending=50)
    plugin = proportion()
    open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu(want_a)
    assert plugin.queue_attrs["b"].deserved == cpu(want_b)


def test_request_caps_deserved_and_leftover_goes_to_the_hungry_queue() -> None:
    """A queue asking for 1 cpu deserves 1; the other gets the rest; an empty queue gets 0."""
    cluster = cpu_cluster({"n0": "10"}, [QueueInfo(n) for n in ("a", "b", "idle")])
    add_job(cluster, "ja", queue="a", running=1)
    add_job(cluster, "jb", queue="b", pending=30)
    plugin = proportion()
    open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu("1")
    assert plugin.queue_attrs["b"].deserved == cpu("9")
    assert plugin.queue_attrs["idle"].deserved == Resources()


def test_queue_order_priority_then_share() -> None:
    """Higher spec.priority first; among equals the queue with the lower share first."""
    cluster = cpu_cluster(
        {"n0": "10"},
        [
            QueueInfo("busy"),
            QueueInfo("calm"),
            QueueInfo("vip", priority=5),
        ],
    )
    add_job(cluster, "jbusy", queue="busy", running=5, pending=5)
    add_job(cluster, "jcalm", queue="calm", running=1, pending=5)
    add_job(cluster, "jvip", queue="vip", running=4, pending=5)
    ssn = open_session(cluster, [proportion()])
    ordered = sorted(ssn.queues.values(), key=ssn.queue_order_key())
    assert [q.name for q in ordered] == ["vip", "calm", "busy"]


def test_overused_when_deserved_is_reached_in_every_resource() -> None:
    """Overused means deserved <= allocated (Volcano's LessEqual)."""
    cluster = cpu_cluster({"n0": "4"}, [QueueInfo("a"), QueueInfo("b")])
    add_job(cluster, "ja", queue="a", running=2, pending=2)
    add_job(cluster, "jb", queue="b", running=1, pending=3)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu("2")
    assert ssn.overused(ssn.queues["a"]) is True
    assert ssn.overused(ssn.queues["b"]) is False


def test_allocatable_and_preemptive_stop_at_the_deserved_share() -> None:
    """Competing queues take tasks only while they stay within their deserved share
    (Volcano's queueAllocatable), for allocate and for reclaim alike."""
    cluster = cpu_cluster({"n0": "4"}, [QueueInfo("a"), QueueInfo("b")])
    ja = add_job(cluster, "ja", queue="a", running=2, pending=2)
    jb = add_job(cluster, "jb", queue="b", running=1, pending=3)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu("2")
    task_a = next(iter(ja.tasks_in(TaskStatus.PENDING)))
    task_b = next(iter(jb.tasks_in(TaskStatus.PENDING)))
    assert ssn.allocatable(ssn.queues["a"], task_a) is False
    assert ssn.preemptive(ssn.queues["a"], [task_a]) is False
    assert ssn.allocatable(ssn.queues["b"], task_b) is True
    assert ssn.preemptive(ssn.queues["b"], [task_b]) is True
    assert ssn.preemptive(ssn.queues["b"], list(jb.tasks_in(TaskStatus.PENDING))[:2]) is False


def test_reclaimable_counts_only_what_the_victim_requests() -> None:
    """A queue at its deserved memory but below its deserved cpu keeps its cpu pods: losing
    one would put it below its share of what it lost, and it would reclaim it back."""
    cluster = cpu_cluster({"n0": "4"}, [QueueInfo("a"), QueueInfo("b")])
    victim = add_job(cluster, "v", queue="a", running=1, pending=2)
    add_job(cluster, "other", queue="b", running=3)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    attr = plugin.queue_attrs["a"]
    attr.deserved = Resources.from_list({"cpu": "2", "memory": "0"})  # held memory 0 >= 0
    reclaimer = next(iter(ssn.jobs["ns/other"].tasks.values()))
    assert ssn.reclaimable(reclaimer, list(victim.tasks_in(TaskStatus.RUNNING))) == []


def test_allocatable_checks_real_capability() -> None:
    """A task is allocatable while allocated + request stays within the real capability
    (deserved never exceeds it)."""
    cluster = cpu_cluster(
        {"n0": "10"},
        [
            QueueInfo("capped", capability=cpu("3")),
            QueueInfo("other", guarantee=cpu("8")),
        ],
    )
    add_job(cluster, "jc", queue="capped", running=2, pending=3)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    pending = next(iter(ssn.jobs["ns/jc"].tasks_in(TaskStatus.PENDING)))
    # real capability: min(3, 10 - 8 guaranteed elsewhere) = 2, already used.
    assert plugin.queue_attrs["capped"].real_capability.get("cpu") == 2000
    assert ssn.allocatable(ssn.queues["capped"], pending) is False
    ssn.queues["other"].guarantee = Resources()
    ssn = open_session(cluster, [proportion()])
    assert ssn.allocatable(ssn.queues["capped"], pending) is True


def test_enqueueable_closed_queue_and_quota() -> None:
    """Closed queues reject; minResources beyond the quota reject with Volcano's event; an
    enqueued job's minResources count against the next one."""
    cluster = cpu_cluster({"n0": "10"}, [QueueInfo("q", capability=cpu("4")), QueueInfo("shut")])
    cluster.queues["shut"].state = "Closed"
    add_job(cluster, "run", queue="q", running=1, min_resources={"cpu": "1"})  # not elastic
    first = add_job(
        cluster, "first", queue="q", pending=2, phase="Pending", min_resources={"cpu": "2"}
    )
    second = add_job(
        cluster, "second", queue="q", pending=2, phase="Pending", min_resources={"cpu": "2"}
    )
    shut = add_job(cluster, "shutjob", queue="shut", pending=1, phase="Pending")
    ssn = open_session(cluster, [proportion()])
    assert ssn.job_enqueueable(shut) is False
    assert ssn.result.events == []
    assert ssn.job_enqueueable(first) is True
    ssn.job_enqueued(first)
    assert ssn.job_enqueueable(second) is False  # 1 running + 2 inqueue + 2 > 4
    [event] = ssn.result.events
    assert (event.kind, event.name, event.type, event.reason, event.message) == (
        "PodGroup",
        "second",
        "Normal",
        "Unschedulable",
        QUOTA_EVENT,
    )


def test_job_without_min_resources_is_enqueueable() -> None:
    """A job with no minResources is always permitted by an open queue."""
    cluster = cpu_cluster({"n0": "1"}, [QueueInfo("q", capability=cpu("1"))])
    add_job(cluster, "full", queue="q", running=1)
    job = add_job(cluster, "j", queue="q", pending=5, phase="Pending")
    ssn = open_session(cluster, [proportion()])
    assert ssn.job_enqueueable(job) is True


def test_reclaimable_keeps_victim_queue_at_deserved() -> None:
    """Victims are allowed only while their queue stays at or above its deserved share."""
    cluster = cpu_cluster({"n0": "4"}, [QueueInfo("a"), QueueInfo("b")])
    rich = add_job(cluster, "rich", queue="a", running=4)
    poor = add_job(cluster, "poor", queue="b", pending=4)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    assert plugin.queue_attrs["a"].deserved == cpu("2")
    reclaimer = next(iter(poor.tasks.values()))
    victims = ssn.reclaimable(reclaimer, list(rich.tasks.values()))
    assert len(victims) == 2


def test_allocate_handler_keeps_allocated_current() -> None:
    """Allocations and their undoing move the queue's allocated amount and share."""
    cluster = cpu_cluster({"n0": "4"}, [QueueInfo("a")])
    job = add_job(cluster, "j", queue="a", pending=4)
    plugin = proportion()
    ssn = open_session(cluster, [plugin])
    attr = plugin.queue_attrs["a"]
    stmt = ssn.statement()
    for task in list(job.tasks.values())[:3]:
        stmt.allocate(task, "n0")
    assert attr.allocated == cpu("3")
    assert attr.share == pytest.approx(0.75)
    stmt.discard()
    assert attr.allocated == Resources()
    assert attr.share == 0.0


def test_kept_shares_follow_the_queues_and_their_requests() -> None:
    """The queues' limits and deserved shares kept with the snapshot between sessions
    (``Incremental.memo_for_cluster``) are derived again whenever a queue or a request
    changes, a queue changed in place included, and reused while nothing did."""
    cluster = cpu_cluster({"n0": "8"}, [QueueInfo("a", weight=3), QueueInfo("b", weight=1)])
    add_job(cluster, "ja", queue="a", pending=20)

    def deserved() -> tuple[Resources, Resources]:
        plugin = proportion()
        open_session(cluster, [plugin])
        return plugin.queue_attrs["a"].deserved, plugin.queue_attrs["b"].deserved

    assert deserved() == (cpu("8"), Resources())
    kept = cluster.derived["proportion.deserved"][1]
    assert deserved() == (cpu("8"), Resources())
    assert cluster.derived["proportion.deserved"][1] is kept  # reused: nothing changed
    add_job(cluster, "jb", queue="b", pending=20)
    assert deserved() == (cpu("6"), cpu("2"))
    cluster.queues["b"] = QueueInfo("b", weight=3)
    assert deserved() == (cpu("4"), cpu("4"))
    cluster.queues["b"].capability = cpu("1")  # in place
    assert deserved() == (cpu("7"), cpu("1"))


@given(
    allocated=st.dictionaries(
        st.sampled_from(("cpu", "memory", "pods", "gpu")), st.integers(-5, 20)
    ),
    deserved=st.dictionaries(
        st.sampled_from(("cpu", "memory", "gpu", "disk")), st.integers(-5, 20)
    ),
)
def test_queue_share_reads_only_what_is_allocated(
    allocated: dict[str, int], deserved: dict[str, int]
) -> None:
    """A resource only the deserved share lists adds a share of 0: the share over the
    allocated resources equals the share over both sides' resources."""
    both = 0.0
    for name in set(allocated) | set(deserved):
        used, limit = allocated.get(name, 0), deserved.get(name, 0)
        both = max(both, (0.0 if used <= 0 else 1.0) if limit <= 0 else used / limit)
    assert queue_share(Resources(allocated), Resources(deserved)) == both
