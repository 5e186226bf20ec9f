"""The tdm plugin on the real API server with kwok nodes labelled ``volcano.sh/revocable-zone``:
pods that may use revocable nodes go to the node whose zone's window is open now, other pods
never to a revocable node, no pod to a node whose window is closed; and with the shuffle action
a preemptable pod running on a closed zone's node is evicted."""

from __future__ import annotations

import datetime as dt

import pytest

from caldera.api.kinds import POD
from e2e.cluster.control_plane import NodeSpec
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    Experiment,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF
from scheduler.plugins.tdm import PREEMPTABLE, REVOCABLE_ZONE

pytestmark = pytest.mark.e2e


def _window(start: dt.timedelta, end: dt.timedelta) -> str:
    """A daily window from now + ``start`` to now + ``end``, UTC, as HH:MM-HH:MM."""
    now = dt.datetime.now(dt.UTC)
    return f"{(now + start):%H:%M}-{(now + end):%H:%M}"


def _conf() -> str:
    opened = _window(dt.timedelta(hours=-2), dt.timedelta(hours=2))
    closed = _window(dt.timedelta(hours=3), dt.timedelta(hours=4))
    return DEFAULT_CONF.replace(
        '"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, shuffle"'
    ) + (
        "  - name: tdm\n"
        "    arguments:\n"
        f'      tdm.revocable-zone.day: "{opened}"\n'
        f'      tdm.revocable-zone.night: "{closed}"\n'
        "      tdm.evict.period: 1s\n"
    )


def _zone_node(ex: Experiment, zone: str) -> str:
    spec = NodeSpec(cpu="4", memory="64Gi", labels={NODE_LABEL: ex.namespace, REVOCABLE_ZONE: zone})
    (name,) = ex.plane.create_nodes(1, spec, prefix=f"{ex.namespace}-{zone}-")
    ex.nodes.append(name)
    return name


async def _pod(ex: Experiment, name: str, group: str, node: str = "", **annotations: str) -> None:
    body = ex.pod_body(name, group)
    body["metadata"]["annotations"].update(annotations)
    if node:
        body["spec"]["nodeName"] = node
    await ex.kube.create(POD, body, namespace=ex.namespace)


async def _has(ex: Experiment, name: str) -> bool:
    return name in await ex.placed()


async def test_revocable_nodes_follow_their_windows(exp: Experiment) -> None:  # noqa: F811
    """Zone 'day' is open now, 'night' closed. Two pods annotated preemptable go to the day
    node; two plain pods to the ordinary node; the night node gets nothing, and the
    preemptable pod bound to it beforehand is evicted by shuffle."""
    (ordinary,) = exp.make_nodes(1, 4)
    day, night = _zone_node(exp, "day"), _zone_node(exp, "night")
    may_revoke = {PREEMPTABLE: "true"}
    await exp.podgroup("late", 1)
    await _pod(exp, "late-0", "late", node=night, **may_revoke)
    await eventually(
        lambda: _has(exp, "late-0"), timeout=30, what="the pod bound to the night node"
    )
    await exp.podgroup("rev", 1)
    for i in range(2):
        await _pod(exp, f"rev-{i}", "rev", **may_revoke)
    await exp.podgroup("plain", 1)
    await exp.pods([f"plain-{i}" for i in range(2)], "plain")
    scheduler = exp.scheduler(_conf())
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def spread() -> tuple[tuple[str, str], ...]:
        return tuple(sorted((await exp.placed()).items()))

    placed = dict(await exp.settle(spread, 4))
    # late-0 is gone: shuffle evicted it from the closed zone (nothing else deletes pods).
    assert placed == {"rev-0": day, "rev-1": day, "plain-0": ordinary, "plain-1": ordinary}
