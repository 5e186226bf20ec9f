"""The rescheduling plugin and the shuffle action on the real API server with kwok nodes: pods
binpacked onto one of two nodes are evicted from it, once the interval is over, until it is
back at its target utilisation; the node stays as it is afterwards (no eviction loop). With a
metrics source configured, the measured load decides instead (a small Prometheus-compatible
endpoint the test serves)."""

from __future__ import annotations

import pytest

from e2e.test_scheduler_experiments import (
    BINPACK_CONF,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.test_scheduler_usage import (
    Prometheus,
    prometheus,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually

pytestmark = pytest.mark.e2e

SHUFFLE_CONF = BINPACK_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, shuffle"'
) + (
    "  - name: rescheduling\n"
    "    arguments:\n"
    "      interval: 2s\n"
    "      strategies:\n"
    "      - name: lowNodeUtilization\n"
    "        params:\n"
    "          thresholds: {cpu: 20, memory: 100}\n"
    "          targetThresholds: {cpu: 50, memory: 100}\n"
)


async def test_shuffle_evens_out_a_binpacked_node(exp: Experiment) -> None:  # noqa: F811
    """Six one-cpu pods binpacked on one 8-cpu node (75%) beside an empty one: shuffle evicts
    the pods above 50% and one more at it (Volcano's >=), three, and then nothing more."""
    nodes = exp.make_nodes(2, 8)
    assert "shuffle" in SHUFFLE_CONF
    await exp.podgroup("hot", 1)
    await exp.pods([f"hot-{i}" for i in range(6)], "hot", cpu="1")
    scheduler = exp.scheduler(SHUFFLE_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def spread() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed("hot-")).items()))

    # Placed on one node, then shuffled after 2 s; settled once nothing changed for 6 s.
    placed = dict(await exp.settle(spread, 6))
    assert len(placed) == 3, placed
    assert len(set(placed.values())) == 1
    assert set(placed.values()) <= set(nodes)


async def test_shuffle_weighs_the_measured_load_of_a_configured_source(
    exp: Experiment,  # noqa: F811
    prometheus: tuple[Prometheus, str],  # noqa: F811
) -> None:
    """With a metrics source, the node's measured load decides, not what its pods request: the
    binpacked node (75% requested) measured idle beside a busy empty node keeps its six pods
    over several intervals; once it is measured busy and the other idle, its pods are evicted."""
    prom, address = prometheus
    packed, empty = exp.make_nodes(2, 8)
    prom.cpu, prom.memory = {packed: 5.0, empty: 90.0}, {packed: 10.0, empty: 10.0}
    await exp.podgroup("hot", 1)
    await exp.pods([f"hot-{i}" for i in range(6)], "hot", cpu="1")
    conf = SHUFFLE_CONF + f"metrics:\n  type: prometheus\n  address: {address}\n  interval: 5s\n"
    scheduler = exp.scheduler(conf)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def spread() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed("hot-")).items()))

    # Binpacked, then left alone for 8 s (four intervals): no node is both loaded and with pods.
    placed = dict(await exp.settle(spread, 8))
    assert sorted(placed.values()) == [packed] * 6, scheduler.log()[-3000:]
    assert prom.asked >= 2

    prom.cpu = {packed: 90.0, empty: 5.0}

    async def shed() -> bool:
        return len(await exp.placed("hot-")) < 6

    await eventually(shed, timeout=40, what="pods evicted from the node measured busy")
