"""capacity's ancestorReclaimLevel on the real API server with kwok nodes (issue 46).

On the dedicated control plane (capacity divides the whole cluster), one 2-cpu node and two
branches under root: parent-a (deserved 2 cpu) -> queue-a (deserved 2) and parent-b (deserved
2) -> queue-b (deserved 1). queue-b holds the node with two 1-cpu pods: one more than it
deserves, but no more than parent-b does. A pod of queue-a waits. At level 1 parent-b's
deserved share counts and no pod is reclaimed; at level 0 (the default) only the leaves count
and queue-b loses its extra pod to queue-a.
"""

from __future__ import annotations

import pytest

from e2e.test_scheduler_experiments import (  # noqa: F401  (fixtures)
    Experiment,
    _by_group,
    _ready,
    dedicated_plane,
    dexp,
)
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

SESSIONS = "caldera_e2e_scheduling_latency_milliseconds_count"

CONF = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
    enableHierarchy: true
    arguments:
      ancestorReclaimLevel: {level}
  - name: nodeorder
"""


async def _held(exp: Experiment) -> dict[str, int]:
    return _by_group(await exp.placed(), ["a", "b"])


async def test_level_one_keeps_the_parents_share_level_zero_reclaims(
    dexp: Experiment,  # noqa: F811
) -> None:
    dexp.make_nodes(1, 2)
    names = {
        short: await dexp.make_queue(short, parent="root", deserved={"cpu": 2})
        for short in ("parent-a", "parent-b")
    }
    names["queue-a"] = await dexp.make_queue(
        "queue-a", parent=names["parent-a"], deserved={"cpu": 2}
    )
    names["queue-b"] = await dexp.make_queue(
        "queue-b", parent=names["parent-b"], deserved={"cpu": 1}
    )
    await dexp.podgroup("b", 1, queue=names["queue-b"])
    await dexp.pods(["b-0", "b-1"], "b")

    strict = dexp.scheduler(CONF.format(level=1))
    await eventually(lambda: _ready(strict), timeout=30, what="scheduler readiness")

    async def b_holds_the_node() -> bool:
        return (await _held(dexp)) == {"a": 0, "b": 2}

    await eventually(b_holds_the_node, timeout=60, what="queue-b's two pods placed")

    await dexp.podgroup("a", 1, queue=names["queue-a"])
    sessions = strict.metric(SESSIONS) or 0.0
    await dexp.pods(["a-0"], "a")
    # Level 1: parent-b holds exactly its deserved 2 cpu, so queue-b's extra pod stays.
    kept = await dexp.settle(lambda: _held(dexp), 5)
    assert kept == {"a": 0, "b": 2}
    ran = (strict.metric(SESSIONS) or 0.0) - sessions
    # The scheduler skips sessions that could decide nothing new: one after the pod is enough.
    assert ran >= 1, "no session ran while queue-a's pod waited"
    assert strict.stop() == 0

    # Level 0: queue-b holds 2 of its deserved 1, and gives one up to queue-a.
    lenient = dexp.scheduler(CONF.format(level=0))
    await eventually(lambda: _ready(lenient), timeout=30, what="scheduler readiness")

    async def reclaimed() -> dict[str, int] | None:
        held = await _held(dexp)
        return held if held["a"] == 1 else None

    await eventually(reclaimed, timeout=60, what="queue-a's pod placed by reclaim")
    assert await dexp.settle(lambda: _held(dexp), 4) == {"a": 1, "b": 1}
