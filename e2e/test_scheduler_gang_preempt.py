"""gangpreempt and gangreclaim on the real API server with kwok nodes: a high-priority gang
that cannot fit evicts nothing; one that fits once a low-priority gang at its minAvailable is
gone evicts that gang whole (preempt would take none of its pods) and runs; a queue below its
share takes a whole gang back from an overused queue."""

from __future__ import annotations

import asyncio

import pytest

from e2e.test_scheduler_experiments import (
    Experiment,
    _by_group,
    _counts,
    _ready,
    dedicated_plane,  # noqa: F401  (fixture)
    dexp,  # noqa: F401  (fixture)
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

# No enqueue action: allocate admits PodGroups itself, so a gang arriving to a full cluster is
# a preemptor (with enqueue and overcommit it would stay Pending).
GANG_CONF = """\
actions: "allocate, gangreclaim, gangpreempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def test_gang_preempts_a_gang_whole_or_not_at_all(exp: Experiment) -> None:  # noqa: F811
    """8 cpu full of a low-priority gang of 8 (minAvailable 8). A high-priority gang of three
    3-cpu pods can never fit: for a dozen sessions nothing is evicted. A high-priority gang of
    four 1-cpu pods evicts the low gang whole, and runs."""
    exp.make_nodes(2, 4)
    low = await exp.make_priority_class("low", 100)
    high = await exp.make_priority_class("high", 1000)
    await exp.podgroup("low", 8, priority_class=low)
    await exp.pods([f"low-{i}" for i in range(8)], "low", priority_class=low)
    scheduler = exp.scheduler(GANG_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def full() -> bool:
        return _by_group(await exp.placed(), ["low"]) == {"low": 8}

    await eventually(full, timeout=60, what="the low-priority gang running")
    low_pods = {n for n in await exp.placed() if n.startswith("low-")}

    await exp.podgroup("huge", 3, priority_class=high)
    await exp.pods([f"huge-{i}" for i in range(3)], "huge", priority_class=high, cpu="3")
    await asyncio.sleep(6)  # a dozen sessions
    placed = await exp.placed()
    assert {n for n in placed if n.startswith("low-")} == low_pods, "nothing evicted"
    assert _by_group(placed, ["huge"]) == {"huge": 0}

    await exp.podgroup("four", 4, priority_class=high)
    await exp.pods([f"four-{i}" for i in range(4)], "four", priority_class=high)

    async def four_runs() -> bool:
        return _by_group(await exp.placed(), ["four"]) == {"four": 4}

    await eventually(four_runs, timeout=90, what="the high-priority gang of 4 running")
    after = await exp.settle(lambda: _counts(exp, ["low", "four", "huge"]), 3)
    assert after == {"low": 0, "four": 4, "huge": 0}, "the low gang went whole"


async def test_gang_reclaims_a_whole_gang(dexp: Experiment) -> None:  # noqa: F811
    """On 8 cpu, queue 'a' runs two gangs of 4 (minAvailable 4). A gang of 4 arrives in queue
    'b' of the same weight: it deserves 4 cpu, so gangreclaim evicts one of a's gangs whole
    (reclaim could take no pod of a gang at its minAvailable), and a's other gang keeps all its
    pods."""
    dexp.make_nodes(2, 4)
    a = await dexp.make_queue("a")
    b = await dexp.make_queue("b")
    for group in ("a1", "a2"):
        await dexp.podgroup(group, 4, queue=a)
        await dexp.pods([f"{group}-{i}" for i in range(4)], group)
    scheduler = dexp.scheduler(GANG_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def full() -> bool:
        return _by_group(await dexp.placed(), ["a1", "a2"]) == {"a1": 4, "a2": 4}

    await eventually(full, timeout=60, what="queue a's gangs running")
    await dexp.podgroup("b1", 4, queue=b)
    await dexp.pods([f"b1-{i}" for i in range(4)], "b1")

    async def b_runs() -> bool:
        return _by_group(await dexp.placed(), ["b1"]) == {"b1": 4}

    await eventually(b_runs, timeout=90, what="queue b's gang running")
    after = await dexp.settle(lambda: _counts(dexp, ["a1", "a2", "b1"]), 3)
    assert after["b1"] == 4
    assert sorted((after["a1"], after["a2"])) == [0, 4], "one of a's gangs went whole"
