"""Queue priority in reclaim on the real API server with kwok nodes: when two queues have
borrowed and either could give a pod back, reclaim takes it from the lower-priority queue
(Volcano's BuildVictimsPriorityQueue: victims across queues in the reverse of queue order),
although the pod order alone would have picked the other queue's pod.

It runs on the dedicated control plane of ``test_scheduler_experiments``, whose only nodes are
the experiment's own.
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
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

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
  - name: nodeorder
"""
GROUPS = ["a-high", "b-low", "c-poor"]


async def test_reclaim_takes_from_the_lower_priority_queue(dexp: Experiment) -> None:  # noqa: F811
    """12 cpu; queues high (priority 5), low (priority 0) and poor, each deserving 4 cpu. high
    and low borrow 6 cpu each; then poor asks for one pod: reclaim evicts one of low's pods, not
    high's (whose pods, "a-high-*", come first in pod order), and poor's pod runs."""
    dexp.make_nodes(1, 12)
    deserved = {"deserved": {"cpu": "4"}}
    high = await dexp.make_queue("high", priority=5, **deserved)
    low = await dexp.make_queue("low", **deserved)
    poor = await dexp.make_queue("poor", **deserved)
    for group, queue in (("a-high", high), ("b-low", low)):
        await dexp.podgroup(group, 1, queue=queue)
        await dexp.pods([f"{group}-{i}" for i in range(6)], group)
    scheduler = dexp.scheduler(CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def borrowed() -> bool:
        return _by_group(await dexp.placed(), GROUPS) == {"a-high": 6, "b-low": 6, "c-poor": 0}

    await eventually(borrowed, timeout=60, what="high and low holding 6 cpu each")
    await dexp.podgroup("c-poor", 1, queue=poor)
    await dexp.pods(["c-poor-0"], "c-poor")

    async def reclaimed() -> dict[str, int] | None:
        counts = _by_group(await dexp.placed(), GROUPS)
        return counts if counts["c-poor"] == 1 else None

    await eventually(reclaimed, timeout=90, what="poor's pod running")
    settled = await dexp.settle(lambda: dexp.placed(), 3)
    assert _by_group(settled, GROUPS) == {"a-high": 6, "b-low": 5, "c-poor": 1}
