"""Fair sharing settles on the real system: with reclaim and preempt on (Volcano's Helm default
configuration plus both actions), two queues reach their split and keep it; no pod is evicted
"because of reclaim" once it is reached.

Volcano Jobs go through Caldera's job controller, so an evicted pod comes back Pending under the
same name, as in a user's cluster: exactly the loop in which queues used to evict each other's
pods forever. Pods ask for memory as well as cpu, which is what made a queue at its cpu share
look below its share.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from caldera.api.kinds import EVENT, JOB
from e2e.test_scheduler_experiments import (  # noqa: F401  (fixtures)
    EXIT_CODE,
    NODE_LABEL,
    RUN_FOR,
    Experiment,
    _by_group,
    _ready,
    dedicated_plane,
    dexp,
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

# Volcano's default configuration with reclaim, preempt and binpack.
FULL_CONF = (
    DEFAULT_CONF.replace(
        '"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, reclaim, preempt"'
    )
    + "  - name: binpack\n"
)
HOLD_SECONDS = 30


def _job(exp: Experiment, name: str, queue: str, replicas: int) -> dict[str, Any]:
    """A Volcano Job of ``replicas`` pods of 1 cpu and 1Gi that run for long, minAvailable 1."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": 1,
            "schedulerName": "volcano",
            "queue": queue,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {RUN_FOR: "1h", EXIT_CODE: "0"}},
                        "spec": {
                            "nodeSelector": {NODE_LABEL: exp.namespace},
                            "tolerations": [{"operator": "Exists"}],
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


async def _evictions(exp: Experiment) -> int:
    """Pod evictions recorded in the namespace (aggregated Events counted by their count)."""
    events = (await exp.kube.list(EVENT, namespace=exp.namespace)).items
    return sum(
        max(e.count, 1) for e in events if e.reason == "Evict" and e.involved_object.kind == "Pod"
    )


async def _start(exp: Experiment) -> None:
    exp.make_nodes(2, 4)
    scheduler = exp.scheduler(FULL_CONF)
    exp.controllers()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")


async def _reach_and_hold(exp: Experiment, want: dict[str, int]) -> None:
    """Wait for the split ``want`` (pods placed per job), then require it, and no new eviction
    Event, at every poll for HOLD_SECONDS."""
    groups = list(want)

    async def reached() -> bool:
        return _by_group(await exp.placed(), groups) == want

    await eventually(reached, timeout=90, what=f"the split {want}")
    evicted = await _evictions(exp)
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(1)
        counts = _by_group(await exp.placed(), groups)
        assert counts == want, f"the split moved: {counts}"
    assert await _evictions(exp) == evicted, "pods were evicted after the split was reached"


async def test_reclaimed_split_holds(dexp: Experiment) -> None:  # noqa: F811
    """Two queues of weight 1 on 8 cpu: hog runs 8 pods; claim arrives in the other queue;
    reclaim gives claim its 4 and the 4:4 split holds for 30 s with no eviction."""
    await _start(dexp)
    a = await dexp.make_queue("a")
    b = await dexp.make_queue("b")
    await dexp.kube.create(JOB, _job(dexp, "hog", a, 8), namespace=dexp.namespace)

    async def hog_runs() -> bool:
        return _by_group(await dexp.placed(), ["hog"]) == {"hog": 8}

    await eventually(hog_runs, timeout=60, what="hog's 8 pods")
    await dexp.kube.create(JOB, _job(dexp, "claim", b, 4), namespace=dexp.namespace)
    await _reach_and_hold(dexp, {"hog": 4, "claim": 4})
    assert await _evictions(dexp) == 4  # hog's four, once


async def test_weighted_split_holds(dexp: Experiment) -> None:  # noqa: F811
    """Queues of weight 3 and 1 on 8 cpu, a 12-pod job in each: 6:2, held for 30 s with no
    eviction."""
    await _start(dexp)
    heavy = await dexp.make_queue("heavy", weight=3)
    light = await dexp.make_queue("light", weight=1)
    await dexp.kube.create(JOB, _job(dexp, "heavy", heavy, 12), namespace=dexp.namespace)
    await dexp.kube.create(JOB, _job(dexp, "light", light, 12), namespace=dexp.namespace)
    await _reach_and_hold(dexp, {"heavy": 6, "light": 2})
