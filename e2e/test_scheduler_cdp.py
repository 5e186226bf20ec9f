"""The cdp plugin (cooldown protection) on the real API server with kwok nodes: pods labelled
``volcano.sh/cooldown-time`` that started within it are not preempted; the others are taken
instead, though they come later in victim order."""

from __future__ import annotations

import pytest

from caldera.api.kinds import POD
from e2e.test_scheduler_experiments import (
    PREEMPT_CONF,
    Experiment,
    _by_group,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.plugins.cdp import COOLDOWN_TIME

pytestmark = pytest.mark.e2e

CDP_CONF = PREEMPT_CONF.format(extra="  - name: cdp")


async def test_preemption_skips_pods_in_their_cooldown(exp: Experiment) -> None:  # noqa: F811
    """A 6-cpu node full of low-priority pods: 'a-cooling' (3 pods, cooldown 1h) and 'z-warm'
    (3 pods, no cooldown), of one queue, equal in job order (priority, gang, drf's shares), so
    that a-cooling's pods come first in victim order (the pod key decides). A high-priority gang
    of 2 preempts: both victims come from z-warm, and the gang runs."""
    exp.make_nodes(1, 6)
    low = await exp.make_priority_class("low", 0)
    high = await exp.make_priority_class("high", 100)
    for group, pods, labels in (("a-cooling", 3, {COOLDOWN_TIME: "1h"}), ("z-warm", 3, {})):
        await exp.podgroup(group, 1, priority_class=low)
        for i in range(pods):
            body = exp.pod_body(f"{group}-{i}", group, priority_class=low)
            body["metadata"]["labels"] = labels
            await exp.kube.create(POD, body, namespace=exp.namespace)
    scheduler = exp.scheduler(CDP_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def full() -> bool:
        placed = _by_group(await exp.placed(), ["a-cooling", "z-warm"])
        return placed == {"a-cooling": 3, "z-warm": 3}

    await eventually(full, timeout=60, what="the node full of low-priority pods")
    cooling = {n for n in await exp.placed() if n.startswith("a-cooling-")}
    await exp.podgroup("urgent", 2, priority_class=high)
    await exp.pods([f"urgent-{i}" for i in range(2)], "urgent", priority_class=high)

    async def urgent_runs() -> bool:
        return _by_group(await exp.placed(), ["urgent"]) == {"urgent": 2}

    await eventually(urgent_runs, timeout=90, what="the high-priority gang running")
    placed = await exp.placed()
    assert {n for n in placed if n.startswith("a-cooling-")} == cooling
    assert _by_group(placed, ["z-warm"]) == {"z-warm": 1}
