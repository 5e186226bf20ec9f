"""gangpreempt on the real API server with kwok nodes: a high-priority gang that cannot fit
evicts nothing; one that fits once a low-priority gang at its minAvailable is gone evicts that
gang whole (preempt would take none of its pods) and runs."""

from __future__ import annotations

import asyncio

import pytest

from e2e.test_scheduler_experiments import (
    Experiment,
    _by_group,
    _counts,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

# No enqueue action: allocate admits PodGroups itself, so a gang arriving to a full cluster is
# a preemptor (with enqueue and overcommit it would stay Pending).
GANG_CONF = """\
actions: "allocate, gangpreempt, backfill"
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
    await eventually(lambda: _ready(scheduler), timeout=30, what="scheduler readiness")

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
