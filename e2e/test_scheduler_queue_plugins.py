"""The capacity and sla plugins on the real API server with kwok nodes (issue 21).

Both divide what the *whole cluster* has (capacity's real capability, overcommit's promise), so
they run on the dedicated control plane of ``test_scheduler_experiments``, whose only nodes are
the experiment's own.

- capacity, hierarchical: a three-level tree (org -> two teams -> two projects each) where one
  project's guarantee is reserved, an idle cluster is lent to the first project that asks, the
  owners take their deserved shares back by reclaim within a few sessions (the time and the
  sessions are measured and printed), and under full contention every project holds its
  deserved share, reclaim never taking one below it (the guarantee lies below the deserved
  share, so it is never reclaimed); Queue ``status.allocated`` adds up the tree and the
  scheduler exports the limits as metrics;
- sla: a job held at the enqueue gate with an older job is admitted once its waiting time has
  passed, on time although the cluster is quiet, and then runs before the older job.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from caldera.api.kinds import POD, PODGROUP, QUEUE
from caldera.api.resources import Resources
from e2e.caldera_process import CalderaProcess
from e2e.test_scheduler_experiments import (  # noqa: F401  (fixtures)
    EXIT_CODE,
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

CAPACITY_CONF = """\
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
  - name: nodeorder
"""
PROJECTS = ("pa1", "pa2", "pb1", "pb2")
DESERVED = 4  # cpu, each project
SESSIONS = "caldera_e2e_scheduling_latency_milliseconds_count"


def cpu(amount: int) -> dict[str, str]:
    return {"cpu": str(amount)}


async def _tree(exp: Experiment) -> dict[str, str]:
    """org (16 cpu, guarantee 2) -> team-a (8, guarantee 2), team-b (8) -> two projects of 4
    each; pa1 is guaranteed 2 cpu. Returns short name -> queue name."""
    names: dict[str, str] = {}

    async def make(short: str, parent: str, deserved: int, guarantee: int = 0) -> None:
        spec: dict[str, Any] = {"parent": parent, "deserved": cpu(deserved)}
        if guarantee:
            spec["guarantee"] = {"resource": cpu(guarantee)}
        names[short] = await exp.make_queue(short, **spec)

    await make("org", "root", 16, 2)
    await make("team-a", names["org"], 8, 2)
    await make("team-b", names["org"], 8)
    await make("pa1", names["team-a"], DESERVED, 2)
    await make("pa2", names["team-a"], DESERVED)
    await make("pb1", names["team-b"], DESERVED)
    await make("pb2", names["team-b"], DESERVED)
    return names


async def _held(exp: Experiment) -> dict[str, int]:
    return _by_group(await exp.placed(), list(PROJECTS))


async def _greedy(exp: Experiment, project: str, queue: str, pods: int) -> None:
    """A PodGroup of minMember 1 with ``pods`` one-cpu pods that run until evicted."""
    await exp.podgroup(project, 1, queue=queue)
    await exp.pods([f"{project}-{i}" for i in range(pods)], project)


async def _reach(
    exp: Experiment,
    scheduler: CalderaProcess,
    want: dict[str, int],
    what: str,
    lowest: dict[str, int] | None = None,
) -> tuple[float, int]:
    """Wait until the projects hold ``want``; (seconds it took, sessions the scheduler ran).
    ``lowest``, when given, keeps the fewest pods each project held at any poll."""
    started, sessions = time.monotonic(), scheduler.metric(SESSIONS) or 0.0

    async def reached() -> bool:
        held = await _held(exp)
        if lowest is not None:
            for project, count in held.items():
                lowest[project] = min(lowest.get(project, count), count)
        return all(held[p] == n for p, n in want.items())

    await eventually(reached, timeout=90, interval=0.25, what=what)
    return time.monotonic() - started, int((scheduler.metric(SESSIONS) or 0.0) - sessions)


async def test_capacity_tree_lends_and_reclaims_deserved_shares(dexp: Experiment) -> None:  # noqa: F811
    """16 cpu under a three-level tree: pb1 alone borrows all but pa1's guaranteed 2; pa1 then
    takes its deserved 4 back within a few sessions; with all four projects greedy each holds
    its deserved 4 (within 5%) and nothing moves any more. Reclaim never takes a project
    below what it deserves: pa1 (guaranteed 2) and pb1 never hold fewer than 4 pods once there,
    whatever is borrowed and given back around them."""
    dexp.make_nodes(4, 4)
    names = await _tree(dexp)
    scheduler = dexp.scheduler(CAPACITY_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    # Lending: pb1 deserves 4 but may hold 14 (16 less pa1's reserved guarantee).
    await _greedy(dexp, "pb1", names["pb1"], 16)
    seconds, _ = await _reach(dexp, scheduler, {"pb1": 14}, "pb1 borrowing 14 cpu")
    await asyncio.sleep(2)
    assert (await _held(dexp))["pb1"] == 14, "pb1 took pa1's guarantee"

    # Reclaim: pa1 gets the 2 reserved cpu at once and 2 more from pb1.
    await _greedy(dexp, "pa1", names["pa1"], 8)
    seconds, sessions = await _reach(dexp, scheduler, {"pa1": 4, "pb1": 12}, "pa1's deserved 4")
    print(
        f"\npa1 reached its deserved 4 cpu {seconds:.1f} s after its demand ({sessions} sessions)"
    )
    assert sessions <= 15, f"reclaim took {sessions} sessions"

    # Contention: the last two projects arrive; every project ends at its deserved share.
    await _greedy(dexp, "pa2", names["pa2"], 8)
    await _greedy(dexp, "pb2", names["pb2"], 8)
    lowest: dict[str, int] = {}
    seconds, sessions = await _reach(
        dexp, scheduler, dict.fromkeys(PROJECTS, DESERVED), "the deserved split", lowest
    )
    print(f"the deserved split reached {seconds:.1f} s after pa2 and pb2 ({sessions} sessions)")
    settled = await dexp.settle(lambda: _held(dexp), 5)
    for held in settled.values():
        assert abs(held - DESERVED) <= 0.05 * DESERVED, settled
    assert lowest["pa1"] >= DESERVED, f"pa1 went below its deserved share: {lowest}"
    assert lowest["pb1"] >= DESERVED, f"pb1 went below its deserved share: {lowest}"

    # Queue status adds up the tree; the limits are exported.
    async def allocated(short: str) -> Resources:
        queue = await dexp.kube.get(QUEUE, names[short])
        return Resources.from_list(queue.status.allocated)

    async def statuses() -> bool:
        return (await allocated("team-a")).get("cpu") == 8000 and (await allocated("org")).get(
            "cpu"
        ) == 16000

    await eventually(statuses, timeout=30, what="queue status.allocated up the tree")
    assert (await allocated("pb2")).get("cpu") == 4000
    labels = {"queue_name": names["pa2"]}
    assert scheduler.metric("caldera_queue_deserved_milli_cpu", labels) == 4000
    assert scheduler.metric("caldera_queue_real_capacity_milli_cpu", labels) == 14000
    assert scheduler.metric(
        "caldera_queue_real_capacity_milli_cpu", {"queue_name": names["pa1"]}
    ) == (16000)


# Volcano's default configuration with sla in the first tier.
SLA_CONF = DEFAULT_CONF.replace("  - name: conformance\n", "  - name: conformance\n  - name: sla\n")
WAIT = 15  # seconds: the sla job's waiting time


async def _gang(exp: Experiment, name: str, *, run_for: str = "", sla: str = "") -> None:
    """A PodGroup of 4 one-cpu pods with minResources (so the enqueue gate weighs it)."""
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "annotations": {"volcano.sh/sla-waiting-time": sla} if sla else {},
        },
        "spec": {"minMember": 4, "queue": "default", "minResources": cpu(4)},
    }
    await exp.kube.create(PODGROUP, body, namespace=exp.namespace)
    pods = [exp.pod_body(f"{name}-{i}", name) for i in range(4)]
    for pod in pods:
        if run_for:
            pod["metadata"]["annotations"].update({RUN_FOR: run_for, EXIT_CODE: "0"})
        await exp.kube.create(POD, pod, namespace=exp.namespace)


async def _phase(exp: Experiment, name: str) -> str:
    pg = await exp.kube.get(PODGROUP, name, namespace=exp.namespace)
    return pg.status.phase


async def test_sla_job_overtakes_an_older_job(dexp: Experiment) -> None:  # noqa: F811
    """4 cpu, all held by a running gang: an older gang and a younger one with a 15 s sla
    waiting time are both refused by overcommit. The sla gang is admitted once its waiting time
    has passed (not before, and within a few seconds after, though no event wakes the
    scheduler), the older one is not; when the running gang finishes, the sla gang runs first."""
    dexp.make_nodes(1, 4)
    scheduler = dexp.scheduler(SLA_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")
    await _gang(dexp, "first", run_for=f"{WAIT + 12}s")

    async def first_runs() -> bool:
        return _by_group(await dexp.placed(), ["first"]) == {"first": 4}

    await eventually(first_runs, timeout=30, what="the first gang running")
    await _gang(dexp, "older")
    await asyncio.sleep(1)
    await _gang(dexp, "urgent", sla=f"{WAIT}s")
    created = time.monotonic()
    await asyncio.sleep(WAIT - 3)
    assert await _phase(dexp, "urgent") == "Pending", "admitted before its waiting time"
    assert await _phase(dexp, "older") == "Pending"

    async def admitted() -> bool:
        return await _phase(dexp, "urgent") == "Inqueue"

    await eventually(admitted, timeout=15, interval=0.25, what="the sla gang admitted")
    late = time.monotonic() - created - WAIT
    print(f"\nthe sla gang was admitted {late:+.1f} s after its waiting time ran out")
    assert late <= 4, "admitted late: the quiet scheduler did not come back at the deadline"
    assert await _phase(dexp, "older") == "Pending"

    async def urgent_runs() -> bool:
        return _by_group(await dexp.placed(), ["urgent"]) == {"urgent": 4}

    await eventually(urgent_runs, timeout=60, what="the sla gang running after the first")
    assert _by_group(await dexp.placed(), ["older"]) == {"older": 0}
    assert await _phase(dexp, "older") == "Pending"
