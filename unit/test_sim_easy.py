"""EASY backfilling's pure plan (simulator/easy.py): placement, the head's shadow time, what
may backfill, and over random clusters and queues the promise that a head job never starts
later than the reservation it was first given."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.easy import Release, Reservation, Waiting, place, plan, shadow

GPU = "gpu"


def gpus(n: int) -> dict[str, int]:
    return {GPU: n}


def test_place_puts_each_pod_where_it_fits_best() -> None:
    free = {"a": gpus(8), "b": gpus(3), "c": gpus(2)}
    assert place([gpus(2), gpus(3), gpus(2)], free) == ["c", "b", "a"]
    assert place([gpus(8), gpus(8)], free) is None
    assert free == {"a": gpus(8), "b": gpus(3), "c": gpus(2)}, "the caller's amounts are kept"


def test_the_shadow_time_is_when_enough_has_ended() -> None:
    free = {"a": gpus(2), "b": gpus(0)}
    releases = [
        Release("a", 10.0, gpus(6)),
        Release("b", 30.0, gpus(4)),
        Release("b", 20.0, gpus(4)),
    ]
    head = Waiting("head", (gpus(8), gpus(8)), 100.0)
    assert shadow(head, free, releases, now=5.0) == Reservation("head", 30.0, frozenset({"a", "b"}))
    assert shadow(Waiting("big", (gpus(9),), 1.0), free, releases, now=5.0) is None


def test_backfill_only_what_does_not_delay_the_head() -> None:
    """Two nodes of 8 GPUs, both busy until 100 (b has 6 free). A head of two whole-node
    pods is reserved both nodes at 100: a 4-GPU job of 50 s ends by then and backfills; a
    2-GPU job of 500 s would leave b short at 100 and waits. A head of one whole node is
    reserved node a: the 500 s job then fits beside it on b."""
    free = {"a": gpus(0), "b": gpus(6)}
    releases = [Release("a", 100.0, gpus(8)), Release("b", 100.0, gpus(2))]
    queue = [
        Waiting("head", (gpus(8), gpus(8)), 10.0),
        Waiting("short", (gpus(4),), 50.0),
        Waiting("long", (gpus(2),), 500.0),
        Waiting("wide", (gpus(6),), 500.0),
    ]
    found = plan(0.0, free, releases, queue)
    assert found.reservation == Reservation("head", 100.0, frozenset({"a", "b"}))
    assert found.starts == {"short": ["b"]}

    queue[0] = Waiting("head", (gpus(8),), 10.0)
    found = plan(0.0, free, releases, queue)
    assert found.reservation == Reservation("head", 100.0, frozenset({"a"}))
    assert found.starts == {"short": ["b"], "long": ["b"]}


def test_a_head_that_never_fits_holds_nothing_back() -> None:
    free = {"a": gpus(8)}
    queue = [Waiting("huge", (gpus(8), gpus(8)), 10.0), Waiting("small", (gpus(1),), 1e6)]
    found = plan(0.0, free, [], queue)
    assert found.reservation is None
    assert found.starts == {"small": ["a"]}


def test_jobs_start_in_order_while_they_fit() -> None:
    free = {"a": gpus(4)}
    queue = [Waiting("one", (gpus(2),), 5.0), Waiting("two", (gpus(2),), 5.0)]
    found = plan(0.0, free, [], queue)
    assert found.starts == {"one": ["a"], "two": ["a"]}
    assert found.reservation is None


# ---- the promise, over random clusters and queues ---------------------------------------------


@dataclass
class Loop:
    """A first-come-first-served cluster run pass by pass with exact run times."""

    capacity: dict[str, int]
    jobs: list[tuple[float, tuple[int, ...], float]]  # arrival, GPUs per pod, run time
    first_reservation: dict[str, float] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)

    def run(self) -> None:
        free = {node: gpus(c) for node, c in self.capacity.items()}
        running: list[tuple[float, str, int]] = []  # end, node, GPUs
        pending = sorted(enumerate(self.jobs), key=lambda item: (item[1][0], item[0]))
        queue: list[Waiting] = []
        now = 0.0
        while pending or running:
            times = [end for end, _, _ in running] + [job[0] for _, job in pending[:1]]
            now = max(now, min(times))
            for _end, node, n in [r for r in running if r[0] <= now]:
                free[node][GPU] += n
            running = [r for r in running if r[0] > now]
            while pending and pending[0][1][0] <= now:
                index, (_, pods, run_time) = pending.pop(0)
                queue.append(Waiting(f"j{index}", tuple(gpus(n) for n in pods), run_time))
            releases = [Release(node, end, gpus(n)) for end, node, n in running]
            found = plan(now, free, releases, queue)
            for job in queue:
                nodes = found.starts.get(job.key)
                if nodes is None:
                    continue
                self.started[job.key] = now
                for request, node in zip(job.pods, nodes, strict=True):
                    free[node][GPU] -= request[GPU]
                    assert free[node][GPU] >= 0, "a pass started more than fits"
                    running.append((now + job.run_time, node, request[GPU]))
            queue = [job for job in queue if job.key not in found.starts]
            if found.reservation is not None:
                self.first_reservation.setdefault(found.reservation.job, found.reservation.start)


clusters = st.dictionaries(
    st.sampled_from(["n0", "n1", "n2", "n3"]), st.integers(1, 8), min_size=1, max_size=4
)
jobs = st.lists(
    st.tuples(
        st.integers(0, 50).map(float),
        st.lists(st.integers(1, 8), min_size=1, max_size=4).map(tuple),
        st.integers(1, 60).map(float),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(clusters, jobs)
def test_a_head_never_starts_later_than_its_first_reservation(
    capacity: dict[str, int], trace: list[tuple[float, tuple[int, ...], float]]
) -> None:
    loop = Loop(capacity, trace)
    loop.run()
    for job, reserved in loop.first_reservation.items():
        assert job in loop.started, f"{job} was reserved {reserved} and never started"
        assert loop.started[job] <= reserved, (job, loop.started[job], reserved)
