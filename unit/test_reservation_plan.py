"""Tests of scheduler.plugins.reservation_plan: where and when a gang would start, and the
backfill rule, with hypothesis properties over random clusters, runtimes and arrivals."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.plugins.reservation_plan import (
    NodeRoom,
    Release,
    Runtimes,
    admits,
    backfills,
    earliest_plan,
    estimated_end,
    expected_end,
    fits,
    pack,
    pack_at,
)

GPU = "nvidia.com/gpu"


def gpus(n: int, cpu: int = 0) -> Resources:
    return Resources({GPU: n * 1000, "cpu": cpu * 1000})


def test_pack_fills_first_room_first() -> None:
    """First fit decreasing puts the largest pods first, each on the first room it fits."""
    held = pack([gpus(1), gpus(4), gpus(2)], [("a", gpus(4)), ("b", gpus(4))])
    assert held == {"a": gpus(4), "b": gpus(3)}


def test_pack_refuses_what_does_not_fit() -> None:
    """A pod that fits in no room makes the whole pack fail."""
    assert pack([gpus(3), gpus(3)], [("a", gpus(4)), ("b", gpus(2))]) is None


def test_earliest_plan_waits_for_the_first_end_that_makes_room() -> None:
    """The gang starts when enough pods have ended, on the nodes freed soonest; the plan is
    known when every pod waited for has a known end."""
    rooms = [
        NodeRoom.of("n1", gpus(4), [Release(gpus(4), 600.0, True)]),
        NodeRoom.of("n2", gpus(0), [Release(gpus(8), 300.0, True)]),
        NodeRoom.of("n3", gpus(0), [Release(gpus(8), 900.0, False)]),
    ]
    plan = earliest_plan([gpus(8), gpus(8)], rooms)
    assert plan is not None
    assert plan.start == 600.0
    assert plan.nodes == ("n1", "n2")
    assert plan.known
    assert plan.waits_for == 2
    assert plan.total() == gpus(16)


def test_earliest_plan_now_when_idle_suffices() -> None:
    """A gang that fits in what is idle starts now, waiting for no pod."""
    rooms = [NodeRoom.of("n1", gpus(8), [Release(gpus(0, 1), 100.0, False)])]
    plan = earliest_plan([gpus(4), gpus(4)], rooms)
    assert plan is not None
    assert plan.start == 0.0
    assert plan.waits_for == 0


def test_earliest_plan_prefers_nodes_with_fewer_pods_to_wait_for() -> None:
    """Of two nodes free by the same time, the one with fewer pods to wait for is taken."""
    rooms = [
        NodeRoom.of("busy", gpus(0), [Release(gpus(1), 60.0, True) for _ in range(8)]),
        NodeRoom.of("calm", gpus(0), [Release(gpus(8), 60.0, True)]),
    ]
    plan = earliest_plan([gpus(8)], rooms)
    assert plan is not None
    assert plan.nodes == ("calm",)
    assert plan.waits_for == 1


def test_earliest_plan_none_when_the_gang_never_fits() -> None:
    """A gang larger than the nodes together gets no plan."""
    rooms = [NodeRoom.of("n1", gpus(2), [Release(gpus(6), 10.0, True)])]
    assert earliest_plan([gpus(8), gpus(1)], rooms) is None


def test_expected_end() -> None:
    """A limit gives a known end until overrun; without one a pod runs as long again as it
    has; never sooner than the floor."""
    assert expected_end(age=100.0, limit=400.0, floor=10.0) == (300.0, True)
    assert expected_end(age=500.0, limit=400.0, floor=10.0) == (10.0, False)
    assert expected_end(age=120.0, limit=None, floor=10.0) == (120.0, False)
    assert expected_end(age=1.0, limit=None, floor=10.0) == (10.0, False)


def test_admits_room_beyond_the_hold_or_a_pod_gone_before_start() -> None:
    """On a held node a pod takes only what is idle beyond the hold, unless its known end
    (plus the margin) comes before the reservation's start."""
    idle, held = gpus(6), gpus(4)
    assert admits(gpus(2), idle, held, end=None, start=600.0, margin=30.0)
    assert not admits(gpus(3), idle, held, end=None, start=600.0, margin=30.0)
    assert admits(gpus(6), idle, held, end=500.0, start=600.0, margin=30.0)
    assert not admits(gpus(6), idle, held, end=590.0, start=600.0, margin=30.0)
    assert not admits(gpus(7), idle, held, end=10.0, start=600.0, margin=30.0)
    assert not backfills(None, 600.0, 0.0)
    assert fits(Resources({"cpu": 0}), Resources())


# ---- properties --------------------------------------------------------------------------


@dataclass
class Pod:
    node: str
    resources: Resources
    end: float  # absolute seconds


@st.composite
def clusters(draw: st.DrawFn) -> tuple[dict[str, Resources], list[Pod]]:
    """Nodes of 4 or 8 GPUs and 32 cpu, running pods of random sizes and ends."""
    sizes = draw(st.lists(st.sampled_from([4, 8]), min_size=1, max_size=6))
    allocatable = {f"n{i}": gpus(size, 32) for i, size in enumerate(sizes)}
    pods: list[Pod] = []
    for name, total in allocatable.items():
        left = total.get(GPU) // 1000
        for _ in range(draw(st.integers(0, 4))):
            g = draw(st.integers(0, left))
            left -= g
            end = float(draw(st.integers(1, 3600)))
            pods.append(Pod(name, gpus(g, draw(st.integers(0, 4))), end))
    return allocatable, pods


def idle_of(allocatable: dict[str, Resources], pods: list[Pod]) -> dict[str, Resources]:
    used: dict[str, Resources] = {n: Resources() for n in allocatable}
    for pod in pods:
        used[pod.node] = used[pod.node] + pod.resources
    return {n: allocatable[n] - used[n] for n in allocatable}


def rooms_of(
    allocatable: dict[str, Resources], pods: list[Pod], known: list[bool], now: float = 0.0
) -> list[NodeRoom]:
    idle = idle_of(allocatable, pods)
    return [
        NodeRoom.of(
            name,
            idle[name],
            [
                Release(p.resources, p.end - now, k)
                for p, k in zip(pods, known, strict=False)
                if p.node == name
            ],
        )
        for name in allocatable
    ]


gangs = st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=6).map(
    lambda sizes: [gpus(s, 1) for s in sizes]
)


@settings(max_examples=150, deadline=None)
@given(clusters(), gangs)
def test_plan_holds_the_gang(
    cluster: tuple[dict[str, Resources], list[Pod]], gang: list[Resources]
) -> None:
    """Property: a plan's nodes can hold the gang at its start: every pod is held somewhere,
    and each node's hold fits what it offers then; no earlier end leaves room on the nodes
    of a gang that packs now."""
    allocatable, pods = cluster
    rooms = rooms_of(allocatable, pods, [True] * len(pods))
    plan = earliest_plan(gang, rooms)
    everything = pack_at(gang, rooms, max([0.0, *(p.end for p in pods)]))
    assert (plan is None) == (everything is None)
    if plan is None:
        return
    assert plan.total() == Resources.sum(gang)
    by_name = {room.name: room for room in rooms}
    for name, held in plan.held.items():
        assert fits(held, by_name[name].offers_at(plan.start))
        assert held.get(GPU) <= allocatable[name].get(GPU)


arrivals = st.lists(
    st.tuples(
        st.integers(0, 3600),  # arrival time
        st.sampled_from([1, 2, 4]),  # GPUs
        st.one_of(st.none(), st.integers(1, 3600)),  # known runtime, or unknown
        st.integers(1, 3600),  # how long it really runs when unknown
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(clusters(), gangs, arrivals, st.integers(0, 120))
def test_backfill_never_delays_the_reservation(
    cluster: tuple[dict[str, Resources], list[Pod]],
    gang: list[Resources],
    stream: list[tuple[int, int, int | None, int]],
    margin: int,
) -> None:
    """Property: small jobs arriving while a reservation waits, each placed on any node where
    the backfill rule admits it (held nodes) or where it fits (other nodes), never keep the
    gang from its held room at the planned start, when every pod ends by its expected end."""
    allocatable, pods = cluster
    plan = earliest_plan(gang, rooms_of(allocatable, pods, [True] * len(pods)))
    if plan is None:
        return
    running = list(pods)
    for arrival, g, runtime, real in sorted(stream, key=lambda a: a[0]):
        now = float(arrival)
        if now >= plan.start:
            break
        running = [p for p in running if p.end > now]
        idle = idle_of(allocatable, running)
        request = gpus(g, 1)
        end = None if runtime is None else float(runtime)
        for name in sorted(allocatable):
            held = plan.held.get(name)
            if held is None:
                ok = fits(request, idle[name])
            else:
                ok = admits(
                    request, idle[name], held, end=end, start=plan.start - now, margin=margin
                )
            if ok:
                # A pod with a known runtime ends by it; an unknown one runs as it will.
                runs = end if end is not None else float(real)
                running.append(Pod(name, request, now + runs))
                break
    still = [p for p in running if p.end > plan.start]
    offered = idle_of(allocatable, still)
    for name, held in plan.held.items():
        assert fits(held, offered[name]), (name, held, offered[name])


def test_runtimes_learnt_per_queue_and_shape() -> None:
    """Finished pods' runtimes make an exponentially weighted mean per queue and request,
    each pod counted once; a pod past its estimate is expected to run as long again."""
    runtimes = Runtimes(weight=0.5)
    runtimes.learn("a", "q", gpus(1), 100.0)
    runtimes.learn("a", "q", gpus(1), 900.0)  # the same pod again: not counted
    runtimes.learn("b", "q", gpus(1), 300.0)
    assert runtimes.estimate("q", gpus(1)) == 200.0
    assert runtimes.estimate("q", gpus(2)) is None
    assert runtimes.estimate("other", gpus(1)) is None
    assert estimated_end(age=50.0, estimate=200.0, floor=10.0) == 150.0
    assert estimated_end(age=500.0, estimate=200.0, floor=10.0) == 500.0
