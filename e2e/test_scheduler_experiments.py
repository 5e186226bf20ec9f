"""Issue #7's scheduling experiments on the real API server with kwok nodes.

Each experiment gets its own fake nodes (a label only its pods select through a nodeSelector),
its own queues and PriorityClasses (named after the test's namespace), and its own
``caldera scheduler`` process with the configuration the experiment needs, started once the
experiment's objects exist, so that the first session sees the whole contest.

Proportion divides the *whole cluster's* resources, not a node group's, exactly as Volcano
does: on the shared test cluster a queue's deserved share of cpu would be computed against every
node's cpu, and a queue would never look overused. The queue experiments therefore run on a
dedicated local control plane whose only nodes are the experiment's own (started once for the
module), so that the node group is the whole cluster, as on a real dedicated cluster.

Experiments (issue #7, "Done means"):

1. the deadlock: kube-scheduler (a second local control plane) strands five 6-pod jobs half
   placed on room for two; Caldera runs them to completion two at a time;
2. queues of weight 3:1 share a saturated node group 6:2;
3. a queue's capability caps it;
4. reclaim takes a new queue's deserved share from an overused reclaimable queue, never from
   a non-reclaimable one;
5. drf gives two competing jobs of different sizes equal numbers of pods;
6. binpack fills one node before using the next;
7. preemption evicts low-priority pods only when that makes a high-priority gang whole, and
   never breaks a victim gang below its minAvailable;
8. preemption toleration holds a preemptor below the minimum priority back until the victims'
   toleration-seconds have passed;
9. task-topology affinity puts a job's ps and workers on one node.

None is skipped on the local control plane: the current actions and plugins do all nine. On an
external cluster (``CALDERA_E2E_KUBECONFIG``) the experiments that start control planes of their
own or create fake nodes skip, as the other e2e tests that need the local plane do.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import JOB, NAMESPACE, NODE, POD, PODGROUP, PRIORITY_CLASS, QUEUE
from caldera.api.meta import find_condition, parse_time
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import ControlPlane, NodeSpec
from e2e.conftest import Cluster, own_plane
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

NODE_LABEL = "caldera.io/experiment"
GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"
RUN_FOR = "kwok.caldera.io/run-for"
EXIT_CODE = "kwok.caldera.io/exit-code"

# Volcano's default tiers, with the switches Volcano's Helm chart uses for preemption (drf's
# share rule would otherwise refuse the third victim of equal-sized jobs).
PREEMPT_CONF = """\
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
{extra}
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
# Volcano's default configuration with one more action or one more last-tier plugin.
RECLAIM_CONF = DEFAULT_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, reclaim"'
)
BINPACK_CONF = DEFAULT_CONF + "  - name: binpack\n    arguments: {binpack.weight: 10}\n"
TOPOLOGY_CONF = (
    DEFAULT_CONF + "  - name: task-topology\n    arguments: {task-topology.weight: 10}\n"
)


# ---- fixtures and helpers -------------------------------------------------------------------


class Experiment:
    """One experiment's nodes, queues, PriorityClasses and scheduler processes, all removed (or
    stopped) at the end of the test."""

    def __init__(self, plane: ControlPlane, kube: KubeClient, namespace: str, tmp: Path) -> None:
        self.plane, self.kube, self.namespace, self.tmp = plane, kube, namespace, tmp
        self.nodes: list[str] = []
        self.queues: list[str] = []
        self.classes: list[str] = []
        self.processes: list[CalderaProcess] = []

    # -- cluster objects --

    def make_nodes(self, count: int, cpu: int) -> list[str]:
        """``count`` nodes of ``cpu`` cpu that only this experiment's pods select."""
        spec = NodeSpec(cpu=str(cpu), memory="64Gi", labels={NODE_LABEL: self.namespace})
        names = self.plane.create_nodes(count, spec, prefix=f"{self.namespace}-")
        self.nodes += names
        return names

    async def make_queue(self, suffix: str, **spec: Any) -> str:
        name = f"{self.namespace}-{suffix}"
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": {"weight": 1, **spec},
        }
        await self.kube.create(QUEUE, body)
        self.queues.append(name)
        return name

    async def make_priority_class(
        self, suffix: str, value: int, annotations: dict[str, str] | None = None
    ) -> str:
        name = f"{self.namespace}-{suffix}"
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "annotations": annotations or {}},
            "value": value,
        }
        await self.kube.create(PRIORITY_CLASS, body)
        self.classes.append(name)
        return name

    async def podgroup(
        self,
        name: str,
        min_member: int,
        *,
        queue: str = "default",
        priority_class: str = "",
        annotations: dict[str, str] | None = None,
    ) -> None:
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"minMember": min_member, "queue": queue},
        }
        if priority_class:
            body["spec"]["priorityClassName"] = priority_class  # type: ignore[index]
        await self.kube.create(PODGROUP, body, namespace=self.namespace)

    def pod_body(
        self,
        name: str,
        group: str | None,
        *,
        cpu: str = "1",
        priority_class: str = "",
        role: str = "",
        scheduler: str = "volcano",
    ) -> dict[str, Any]:
        requests = {"cpu": cpu}
        annotations = {GROUP_NAME: group} if group else {}
        if role:
            annotations[TASK_SPEC] = role
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "nodeSelector": {NODE_LABEL: self.namespace},
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": requests},
                }
            ],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": spec,
        }

    async def pods(self, names: list[str], group: str, **kwargs: Any) -> None:
        """Create pods of one PodGroup, a few at a time."""
        bodies = [self.pod_body(n, group, **kwargs) for n in names]
        for start in range(0, len(bodies), 10):
            await asyncio.gather(
                *(
                    self.kube.create(POD, b, namespace=self.namespace)
                    for b in bodies[start : start + 10]
                )
            )

    # -- processes --

    def scheduler(self, conf: str | None = None, *extra: str) -> CalderaProcess:
        """Start ``caldera scheduler`` (with ``conf`` as its configuration file)."""
        args = ["--leader-elect=false", "--schedule-period=0.5", *extra]
        if conf is not None:
            path = self.tmp / f"scheduler-{len(self.processes)}.conf"
            path.write_text(conf)
            args.append(f"--scheduler-conf={path}")
        proc = CalderaProcess("scheduler", args, kubeconfig=self.plane.kubeconfig, log_dir=self.tmp)
        self.processes.append(proc)
        return proc

    def controllers(self) -> CalderaProcess:
        proc = CalderaProcess(
            "controllers",
            ["--controllers=job", "--leader-elect=false"],
            kubeconfig=self.plane.kubeconfig,
            log_dir=self.tmp,
        )
        self.processes.append(proc)
        return proc

    # -- reading --

    async def placed(self, group_prefix: str = "") -> dict[str, str]:
        """Live pods with a node (not finished, not being deleted), name -> node."""
        pods = (await self.kube.list(POD, namespace=self.namespace)).items
        return {
            p.metadata.name: p.spec.node_name
            for p in pods
            if p.spec.node_name
            and p.metadata.deletion_timestamp is None
            and p.status.phase not in ("Succeeded", "Failed")
            and p.metadata.name.startswith(group_prefix)
        }

    async def settle(self, probe: Callable[[], Awaitable[Any]], seconds: float) -> Any:
        """Wait until ``probe``'s answer has not changed for ``seconds``; return it."""
        last, since = await probe(), time.monotonic()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            now = await probe()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= seconds:
                return now
        raise AssertionError(f"never settled; last: {last!r}")

    async def close(self) -> None:
        logs = []
        for proc in self.processes:
            code = proc.stop()
            if code != 0:
                logs.append(f"{proc.log_path} exited {code}:\n{proc.log()[-3000:]}")
        for name in self.queues:
            with contextlib.suppress(NotFound):
                await self.kube.delete(QUEUE, name)
        for name in self.classes:
            with contextlib.suppress(NotFound):
                await self.kube.delete(PRIORITY_CLASS, name)
        for name in self.nodes:
            with contextlib.suppress(NotFound):
                await self.kube.delete(NODE, name)
        assert not logs, "\n".join(logs)


@pytest.fixture
async def exp(
    cluster: Cluster, crds: Path, kube: KubeClient, namespace: str, tmp_path: Path
) -> AsyncIterator[Experiment]:
    """An experiment on the session's shared cluster."""
    if cluster.plane is None:
        pytest.skip("creates fake nodes on the local control plane")
    experiment = Experiment(cluster.plane, kube, namespace, tmp_path)
    try:
        yield experiment
    finally:
        await experiment.close()


@pytest.fixture(scope="module")
def dedicated_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A local control plane without nodes of its own, with Caldera's CRDs."""
    with own_plane(
        tmp_path_factory.mktemp("dedicated"), "starts a dedicated local control plane"
    ) as plane:
        yield plane


@pytest.fixture
async def dexp(dedicated_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Experiment]:
    """An experiment on the dedicated control plane: its nodes are the whole cluster."""
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(dedicated_plane.kubeconfig, options=options) as kube:
        namespace = f"e2e-{secrets.token_hex(4)}"
        await kube.create(NAMESPACE, {"metadata": {"name": namespace}})

        async def has_account() -> bool:
            try:
                await kube.request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            except NotFound:
                return False
            return True

        await eventually(has_account, timeout=60, what="the default ServiceAccount")
        experiment = Experiment(dedicated_plane, kube, namespace, tmp_path)
        try:
            yield experiment
        finally:
            await experiment.close()
            with contextlib.suppress(NotFound):
                await kube.delete(NAMESPACE, namespace)


async def _ready(proc: CalderaProcess) -> bool:
    return proc.get("/readyz")[0] == 200


def _by_group(placed: dict[str, str], groups: list[str]) -> dict[str, int]:
    return {g: sum(1 for name in placed if name.startswith(f"{g}-")) for g in groups}


# ---- 1. the deadlock ------------------------------------------------------------------------

JOBS, PS, WORKERS = 5, 2, 4


def _job_pod_names() -> list[tuple[str, str]]:
    """(job, pod) for 5 jobs of 2 ps + 4 workers, round-robin across the jobs: the first pod
    of every job, then the second of every job, and so on."""
    per_job = [f"ps-{i}" for i in range(PS)] + [f"worker-{i}" for i in range(WORKERS)]
    return [(f"job{j}", f"job{j}-{p}") for p in per_job for j in range(JOBS)]


@pytest.fixture
def second_plane(tmp_path: Path) -> Iterator[ControlPlane]:
    """A second local control plane that runs kube-scheduler."""
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip("starts a second local control plane")
    plane = ControlPlane(tmp_path / "kube-scheduler-plane")
    try:
        plane.up(scheduler=True)
        yield plane
    finally:
        plane.down(purge=True)


async def test_deadlock_with_kube_scheduler(second_plane: ControlPlane) -> None:
    """The baseline: kube-scheduler places pods one at a time, so five jobs of 2 ps + 4 workers
    (each needing all 6 pods to make progress) created round-robin on room for two jobs all
    end up partly placed: 12 pods bound across the jobs, no job whole, 18 pods pending."""
    second_plane.create_nodes(
        2, NodeSpec(cpu="6", memory="64Gi", labels={NODE_LABEL: "deadlock"}), prefix="deadlock-"
    )
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(second_plane.kubeconfig, options=options) as kube:
        for _, name in _job_pod_names():  # one by one: kube-scheduler's queue is FIFO
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name},
                "spec": {
                    "nodeSelector": {NODE_LABEL: "deadlock"},
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            }
            await kube.create(POD, body, namespace="default")

        async def bound() -> dict[str, int]:
            counts = {f"job{j}": 0 for j in range(JOBS)}
            for p in (await kube.list(POD, namespace="default")).items:
                if p.spec.node_name:
                    counts[p.metadata.name.split("-")[0]] += 1
            return counts

        async def full() -> dict[str, int] | None:
            counts = await bound()
            return counts if sum(counts.values()) == 12 else None

        await eventually(full, timeout=60, what="the two nodes full")
        await asyncio.sleep(5)  # kube-scheduler keeps trying; nothing changes
        counts = await bound()
        pending = sum(
            1 for p in (await kube.list(POD, namespace="default")).items if not p.spec.node_name
        )
    assert sum(counts.values()) == 12, counts
    assert pending == 18, counts
    partial = [job for job, n in counts.items() if 0 < n < PS + WORKERS]
    assert len(partial) == JOBS, f"every job holds part of the cluster and none can run: {counts}"


def _volcano_job(name: str, label: str, run_for: str) -> dict[str, Any]:
    def task(task_name: str, replicas: int) -> dict[str, Any]:
        return {
            "name": task_name,
            "replicas": replicas,
            "template": {
                "metadata": {"annotations": {RUN_FOR: run_for, EXIT_CODE: "0"}},
                "spec": {
                    "nodeSelector": {NODE_LABEL: label},
                    "tolerations": [{"operator": "Exists"}],
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": task_name,
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                },
            },
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": PS + WORKERS,
            "schedulerName": "volcano",
            "queue": "default",
            "maxRetry": 3,
            "tasks": [task("ps", PS), task("worker", WORKERS)],
        },
    }


async def test_deadlock_gone_with_caldera(exp: Experiment) -> None:
    """The same five jobs as Volcano Jobs with Caldera's scheduler and job controller: gangs
    are placed whole, so jobs run two at a time and all five complete; at no moment do more
    than two jobs run or hold any node."""
    exp.make_nodes(2, 6)
    scheduler = exp.scheduler()
    exp.controllers()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")
    names = [f"job{j}" for j in range(JOBS)]
    for name in names:
        await exp.kube.create(JOB, _volcano_job(name, exp.namespace, "4s"), namespace=exp.namespace)

    most_running, most_holding = 0, 0
    phases: dict[str, str] = {}
    order: list[str] = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        jobs = (await exp.kube.list(JOB, namespace=exp.namespace)).items
        phases = {j.metadata.name: j.status.state.phase for j in jobs}
        placed = await exp.placed()
        holding = {name.rsplit("-", 2)[0] for name in placed}
        most_running = max(most_running, sum(1 for p in phases.values() if p == "Running"))
        most_holding = max(most_holding, len(holding))
        order += [n for n, p in sorted(phases.items()) if p == "Completed" and n not in order]
        if len(order) == JOBS:
            break
        await asyncio.sleep(0.3)
    assert sorted(order) == names, f"all five complete; phases: {phases}"
    assert most_running <= 2, f"{most_running} jobs ran at once on room for two"
    assert most_holding <= 2, f"{most_holding} jobs held nodes at once: a gang was split"


# ---- 2-4. queues ----------------------------------------------------------------------------


async def test_queue_weights_share_three_to_one(dexp: Experiment) -> None:
    """Two queues of weight 3 and 1, each with 16 one-cpu pods (a PodGroup of minMember 1) on a
    node group of 8 cpu: the heavy queue gets 6 and the light one 2 (within 10% of 3:1)."""
    dexp.make_nodes(2, 4)
    heavy = await dexp.make_queue("heavy", weight=3)
    light = await dexp.make_queue("light", weight=1)
    for group, queue in (("heavy", heavy), ("light", light)):
        await dexp.podgroup(group, 1, queue=queue)
        await dexp.pods([f"{group}-{i}" for i in range(16)], group)
    dexp.scheduler()
    counts = await _filled(dexp, ["heavy", "light"], 8)
    share = counts["heavy"] / 8
    assert abs(share - 0.75) <= 0.075, f"3:1 is 6:2, got {counts}"


async def _filled(exp: Experiment, groups: list[str], total: int) -> dict[str, int]:
    """Counts of placed pods per group once ``total`` are placed and nothing moves for 3 s."""

    async def counts() -> dict[str, int] | None:
        placed = _by_group(await exp.placed(), groups)
        return placed if sum(placed.values()) >= total else None

    await eventually(counts, timeout=60, what=f"{total} pods placed")
    settled: dict[str, int] = await exp.settle(counts, 3)
    return settled


async def test_capability_caps_a_queue(dexp: Experiment) -> None:
    """A queue with capability cpu 3 never holds more than 3 cpu, even with 16 pods waiting and
    room free; the other queue gets the rest of the 8-cpu node group."""
    dexp.make_nodes(2, 4)
    capped = await dexp.make_queue("capped", capability={"cpu": "3"})
    free = await dexp.make_queue("free")
    for group, queue in (("capped", capped), ("free", free)):
        await dexp.podgroup(group, 1, queue=queue)
        await dexp.pods([f"{group}-{i}" for i in range(16)], group)
    dexp.scheduler()
    counts = await _filled(dexp, ["capped", "free"], 8)
    assert counts == {"capped": 3, "free": 5}


async def test_reclaim_from_reclaimable_queue_only(dexp: Experiment) -> None:
    """On 8 cpu, queue 'over' (reclaimable) holds 6 and queue 'keep' (reclaimable: false) 2.
    A new queue of weight 2 with 8 pods deserves 4 (weights 1:1:2 of 8, capped by what each
    asks): reclaim evicts 4 pods of 'over' (down to its own deserved 2) and none of 'keep'."""
    dexp.make_nodes(2, 4)
    over = await dexp.make_queue("over", reclaimable=True)
    keep = await dexp.make_queue("keep", reclaimable=False)
    await dexp.podgroup("over", 1, queue=over)
    await dexp.pods([f"over-{i}" for i in range(6)], "over")
    await dexp.podgroup("keep", 1, queue=keep)
    await dexp.pods([f"keep-{i}" for i in range(2)], "keep")
    dexp.scheduler(RECLAIM_CONF)
    before = await _filled(dexp, ["over", "keep"], 8)
    assert before == {"over": 6, "keep": 2}
    kept = {n for n in await dexp.placed() if n.startswith("keep-")}

    new = await dexp.make_queue("new", weight=2)
    await dexp.podgroup("new", 1, queue=new)
    await dexp.pods([f"new-{i}" for i in range(8)], "new")

    async def reclaimed() -> dict[str, int] | None:
        counts = _by_group(await dexp.placed(), ["over", "keep", "new"])
        return counts if counts["new"] >= 4 else None

    await eventually(reclaimed, timeout=60, what="the new queue's deserved 4 pods")
    after = await dexp.settle(lambda: _counts(dexp, ["over", "keep", "new"]), 4)
    assert after == {"over": 2, "keep": 2, "new": 4}
    assert {n for n in await dexp.placed() if n.startswith("keep-")} == kept


async def _counts(exp: Experiment, groups: list[str]) -> dict[str, int]:
    return _by_group(await exp.placed(), groups)


# ---- 5. drf ---------------------------------------------------------------------------------


async def test_drf_gives_competing_jobs_equal_pods(exp: Experiment) -> None:
    """The DRF experiment: two jobs (PodGroups of minMember 1) of 300 and 60 one-cpu pods on
    room for 120 get 60 pods each, although the big one is older (first come, first served
    would give it all 120)."""
    exp.make_nodes(15, 8)
    await exp.podgroup("big", 1)
    await exp.pods([f"big-{i}" for i in range(300)], "big")
    await exp.podgroup("small", 1)
    await exp.pods([f"small-{i}" for i in range(60)], "small")
    exp.scheduler()
    counts = await _filled(exp, ["big", "small"], 120)
    assert counts == {"big": 60, "small": 60}


# ---- 6. binpack -----------------------------------------------------------------------------


async def test_binpack_fills_one_node_first(exp: Experiment) -> None:
    """16 pods of half a cpu on two 8-cpu nodes all land on one node; the 17th uses the other."""
    nodes = exp.make_nodes(2, 8)
    await exp.podgroup("small", 1)
    await exp.pods([f"small-{i}" for i in range(16)], "small", cpu="500m")
    exp.scheduler(BINPACK_CONF)

    async def placed16() -> dict[str, str] | None:
        placed = await exp.placed()
        return placed if len(placed) == 16 else None

    placed = await eventually(placed16, timeout=60, what="16 pods placed")
    assert len(set(placed.values())) == 1, f"one node only: {placed}"
    await exp.pods(["small-16"], "small", cpu="500m")

    async def seventeenth() -> str | None:
        return (await exp.placed()).get("small-16")

    other = await eventually(seventeenth, timeout=30, what="the 17th pod placed")
    assert {other, *placed.values()} == set(nodes)


# ---- 7-8. preemption ------------------------------------------------------------------------


async def test_preemption_only_makes_gangs_whole(exp: Experiment) -> None:
    """On 8 cpu full of low-priority pods (a gang of 4 with minAvailable 4, and an elastic job of
    4 pods with minAvailable 1): a high-priority gang of 4 would need a pod of the gang, so it
    evicts nobody; a high-priority gang of 3 evicts 3 elastic pods and runs; the victim gang
    keeps all 4 pods throughout."""
    exp.make_nodes(2, 4)
    low = await exp.make_priority_class("low", 100)
    high = await exp.make_priority_class("high", 1000)
    await exp.podgroup("gang", 4, priority_class=low)
    await exp.pods([f"gang-{i}" for i in range(4)], "gang", priority_class=low)
    await exp.podgroup("elastic", 1, priority_class=low)
    await exp.pods([f"elastic-{i}" for i in range(4)], "elastic", priority_class=low)
    exp.scheduler(PREEMPT_CONF.format(extra=""))
    await _filled(exp, ["gang", "elastic"], 8)
    gang = {n for n in await exp.placed() if n.startswith("gang-")}
    assert len(gang) == 4

    await exp.podgroup("four", 4, priority_class=high)
    await exp.pods([f"four-{i}" for i in range(4)], "four", priority_class=high)
    await asyncio.sleep(6)  # a dozen sessions
    assert _by_group(await exp.placed(), ["gang", "elastic", "four"]) == {
        "gang": 4,
        "elastic": 4,
        "four": 0,
    }, "no eviction that would not make the gang of 4 whole"

    await exp.podgroup("three", 3, priority_class=high)
    await exp.pods([f"three-{i}" for i in range(3)], "three", priority_class=high)

    async def whole() -> bool:
        return _by_group(await exp.placed(), ["three"])["three"] == 3

    await eventually(whole, timeout=60, what="the gang of 3 running")
    after = await exp.settle(lambda: _counts(exp, ["gang", "elastic", "four", "three"]), 3)
    assert after == {"gang": 4, "elastic": 1, "four": 0, "three": 3}
    assert {n for n in await exp.placed() if n.startswith("gang-")} == gang


async def test_preemption_toleration_delays_a_low_preemptor(exp: Experiment) -> None:
    """Victims whose PriorityClass tolerates preemptors below priority 100000 for 15 s: a
    priority-1000 gang waits (nothing evicted) until the victims have run for 15 s, then
    preempts and runs."""
    exp.make_nodes(1, 4)
    tolerant = await exp.make_priority_class(
        "tolerant",
        100,
        {
            "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "100000",
            "preemption-toleration.scheduling.x-k8s.io/toleration-seconds": "15",
        },
    )
    urgent = await exp.make_priority_class("urgent", 1000)
    await exp.podgroup("victim", 1, priority_class=tolerant)
    await exp.pods([f"victim-{i}" for i in range(4)], "victim", priority_class=tolerant)
    exp.scheduler(PREEMPT_CONF.format(extra="  - name: preemption-toleration"))
    await _filled(exp, ["victim"], 4)
    pods = (await exp.kube.list(POD, namespace=exp.namespace)).items
    scheduled = max(_scheduled_at(p) for p in pods)

    await exp.podgroup("urgent", 2, priority_class=urgent)
    await exp.pods([f"urgent-{i}" for i in range(2)], "urgent", priority_class=urgent)
    first_eviction: dt.datetime | None = None
    counts: dict[str, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        counts = _by_group(await exp.placed(), ["victim", "urgent"])
        now = dt.datetime.now(dt.UTC)
        if counts["victim"] < 4 and first_eviction is None:
            first_eviction = now
        if counts["urgent"] == 2:
            break
        await asyncio.sleep(0.3)
    assert counts == {"victim": 2, "urgent": 2}, counts
    assert first_eviction is not None
    waited = (first_eviction - scheduled).total_seconds()
    # PodScheduled times have whole seconds: the victims were scheduled up to 1 s after it.
    assert waited >= 14, f"evicted {waited:.1f}s after scheduling, before the toleration ran out"


def _scheduled_at(pod: Pod) -> dt.datetime:
    cond = find_condition(pod.status.conditions, "PodScheduled")
    assert cond is not None, pod
    assert cond.status == "True", pod
    assert cond.last_transition_time, pod
    return parse_time(cond.last_transition_time)


# ---- 9. task-topology -----------------------------------------------------------------------


async def test_task_topology_keeps_ps_and_workers_together(exp: Experiment) -> None:
    """Two jobs of 1 ps + 3 workers with task-topology affinity "ps,worker" on two 8-cpu nodes:
    each job's four pods share one node (the resource scores alone would spread them)."""
    exp.make_nodes(2, 8)
    annotations = {
        "volcano.sh/task-topology-affinity": "ps,worker",
        "volcano.sh/task-topology-task-order": "ps,worker",
    }
    for job in ("tfa", "tfb"):
        await exp.podgroup(job, 4, annotations=annotations)
        await exp.pods([f"{job}-ps-0"], job, role="ps")
        await exp.pods([f"{job}-worker-{i}" for i in range(3)], job, role="worker")
    exp.scheduler(TOPOLOGY_CONF)
    await _filled(exp, ["tfa", "tfb"], 8)
    placed = await exp.placed()
    for job in ("tfa", "tfb"):
        nodes = {node for name, node in placed.items() if name.startswith(f"{job}-")}
        assert len(nodes) == 1, f"{job} spread over {nodes}: {placed}"
