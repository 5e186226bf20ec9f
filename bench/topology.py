"""Network-topology-aware gang scheduling: what it buys, and what it costs (issue 22).

    .venv/bin/python bench/topology.py            # the stream and the 5,000-node cost (~minutes)
    .venv/bin/python bench/topology.py --smoke    # CI: a short stream, 500 nodes (seconds)

1. The stream. 4,096 GPUs in 512 nodes of 8 (64 racks of 8 nodes, 8 spines of 8 racks,
   HyperNodes of tier 1 and 2); a seeded Poisson stream of jobs of 8-256 GPUs (pods of 4 GPUs,
   gang = every pod), sizes 8/16/32/64/128/256 with weights 30/25/20/15/7/3, run times
   exponential with a mean of an hour, offered load 90%. The scheduler's pure core runs a
   session every 30 virtual seconds (when something arrived or finished) with ``allocate`` and
   priority, gang | predicates, binpack, in three modes over the same stream:
   - blind: topology-blind gang scheduling (no networkTopology, no plugin);
   - hard: network-topology-aware, every job hard mode, highestTierAllowed 1 (a rack) for jobs
     of 64 GPUs or fewer and 2 (a spine) above;
   - soft: the same tiers in soft mode.
   Figures: share of jobs placed in one rack (of those that fit a rack) and in one spine, mean
   tier span (1 rack, 2 spine, 3 more), mean and p95 wait, GPU utilisation (allocated GPU time
   over capacity, from the first to the last arrival), fragmentation (mean number of whole free
   racks, the islands a 64-GPU job can take). Goal: >= 95% of the jobs that fit a rack placed in
   one rack, utilisation within 5 points of blind.

2. The cost: one session placing a backlog of gangs on 5,000 nodes (625 racks, 79 spines), as
   blind (no HyperNodes, no plugin), with the feature on and unused (HyperNodes and the plugin,
   jobs without networkTopology), and with every job in hard mode; the modes in turn, seven
   times, the medians of wall and CPU time, and a digest of each mode's binds (pod and node:
   a speed-up must print the same digests). Goal: the hard-mode session under 20% more CPU
   time than blind (on a shared machine the wall time counts the other processes too).

3. The cost on the live snapshot: the same backlog's session, blind and hard in turn, but
   from the informer stores through the scheduler's live snapshot after a first session (one
   small gang placed and bound), as in the running process: what the snapshot keeps from
   session to session (the nodes' verdicts, in hard mode the HyperNode sums) is there. CPU
   time of the session alone, medians of three.

Nothing here is a test: a missed goal prints MISS and what was measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import hashlib
import heapq
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from bench._clusters import T0, conf_of, empty_cluster, gang_job, node_object  # noqa: E402
from caldera.api.core import (  # noqa: E402
    Container,
    Node,
    Pod,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)
from caldera.api.meta import ObjectMeta, format_time  # noqa: E402
from caldera.api.resources import Resources  # noqa: E402
from caldera.api.topology import (  # noqa: E402
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    MemberSelector,
    MemberSpec,
)
from caldera.api.topology_tree import HyperNodeTree, build_tree  # noqa: E402
from caldera.api.volcano import (  # noqa: E402
    KUBE_GROUP_NAME_KEY,
    NetworkTopologySpec,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    Queue,
    QueueSpec,
)
from scheduler.api.types import ClusterInfo, JobInfo, TaskStatus  # noqa: E402
from scheduler.framework.runner import run_session  # noqa: E402
from scheduler.framework.session import Bind, Session  # noqa: E402
from scheduler.live_snapshot import CachedObjects, KeyedObjects, LiveSnapshot  # noqa: E402
from scheduler.registry import REGISTRY  # noqa: E402

GPU: Final = "nvidia.com/gpu"
NODE_GPUS: Final = 8
POD_GPUS: Final = 4
NODES_PER_RACK: Final = 8
RACKS_PER_SPINE: Final = 8
SIZES: Final = (8, 16, 32, 64, 128, 256)
WEIGHTS: Final = (30, 25, 20, 15, 7, 3)
MEAN_RUN: Final = 3600.0
LOAD: Final = 0.9
PERIOD: Final = 30.0
RACK_GPUS: Final = NODE_GPUS * NODES_PER_RACK
NODE_ALLOCATABLE: Final = {"cpu": "128", "memory": "1Ti", GPU: str(NODE_GPUS), "pods": "110"}
# A pod's requests as the informer's pods carry them (``POD_REQUEST`` below).
POD_REQUEST_LIST: Final[dict[str, str | int | float]] = {
    "cpu": "16",
    "memory": "128Gi",
    GPU: str(POD_GPUS),
}

BLIND_CONF: Final = """\
actions: "allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: predicates}, {name: binpack}]
"""
TOPOLOGY_CONF: Final = """\
actions: "allocate"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins:
  - {name: predicates}
  - {name: binpack}
  - {name: network-topology-aware, arguments: {hypernode.binpack.resources: nvidia.com/gpu}}
"""


def machine() -> str:
    load = os.getloadavg()[0]
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {load:.2f} (shared), {dt.date.today()}"
    )


# ---- the cluster --------------------------------------------------------------------------------


def node_name(i: int) -> str:
    return f"n{i:04d}"


def topology(nodes: int) -> list[HyperNode]:
    """Racks of NODES_PER_RACK nodes (tier 1) under spines of RACKS_PER_SPINE racks (tier 2)."""
    hns: list[HyperNode] = []
    racks = (nodes + NODES_PER_RACK - 1) // NODES_PER_RACK
    for r in range(racks):
        members = [
            MemberSpec(type="Node", selector=MemberSelector(exact_match=ExactMatch(name=n)))
            for n in (node_name(i) for i in range(r * NODES_PER_RACK, (r + 1) * NODES_PER_RACK))
            if int(n[1:]) < nodes
        ]
        hns.append(
            HyperNode(
                metadata=ObjectMeta(name=f"rack-{r}"),
                spec=HyperNodeSpec(tier=1, tier_name="rack", members=tuple(members)),
            )
        )
    for s in range((racks + RACKS_PER_SPINE - 1) // RACKS_PER_SPINE):
        members = [
            MemberSpec(
                type="HyperNode", selector=MemberSelector(exact_match=ExactMatch(name=f"rack-{r}"))
            )
            for r in range(s * RACKS_PER_SPINE, min((s + 1) * RACKS_PER_SPINE, racks))
        ]
        hns.append(
            HyperNode(
                metadata=ObjectMeta(name=f"spine-{s}"),
                spec=HyperNodeSpec(tier=2, tier_name="spine", members=tuple(members)),
            )
        )
    return hns


def new_cluster(nodes: int, with_hypernodes: bool) -> ClusterInfo:
    alloc = Resources.from_list(NODE_ALLOCATABLE)
    cluster = empty_cluster((node_name(i) for i in range(nodes)), alloc)
    if with_hypernodes:
        cluster.hypernodes = build_tree(topology(nodes), {n: {} for n in cluster.nodes})
    return cluster


POD_REQUEST: Final = Resources.from_list(POD_REQUEST_LIST)


def new_job(name: str, gpus: int, created: float, spec: NetworkTopologySpec | None) -> JobInfo:
    pods = gpus // POD_GPUS
    podgroup = PodGroup(
        metadata=ObjectMeta(name=name, namespace="bench"),
        spec=PodGroupSpec(min_member=pods, network_topology=spec),
    )
    when = T0 + dt.timedelta(seconds=created)
    return gang_job(name, pods, POD_REQUEST, created=when, podgroup=podgroup)


def rule_for(mode: str, gpus: int) -> NetworkTopologySpec | None:
    if mode == "blind":
        return None
    tier = 1 if gpus <= RACK_GPUS else 2
    return NetworkTopologySpec(mode="hard" if mode == "hard" else "soft", highest_tier_allowed=tier)


# ---- the stream ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    at: float
    gpus: int
    run: float


def stream(jobs: int, capacity: int, seed: int = 22) -> list[Arrival]:
    rng = random.Random(seed)
    mean_gpus = sum(s * w for s, w in zip(SIZES, WEIGHTS, strict=True)) / sum(WEIGHTS)
    rate = LOAD * capacity / (mean_gpus * MEAN_RUN)
    out, now = [], 0.0
    for _ in range(jobs):
        now += rng.expovariate(rate)
        out.append(Arrival(now, rng.choices(SIZES, WEIGHTS)[0], rng.expovariate(1 / MEAN_RUN)))
    return out


@dataclass
class Outcome:
    mode: str
    placed: int = 0
    in_rack: int = 0
    rack_fit: int = 0
    rack_fit_in_rack: int = 0
    in_spine: int = 0
    spans: list[int] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    gpu_time: float = 0.0
    window: float = 0.0
    free_racks: list[int] = field(default_factory=list)
    sessions: int = 0
    session_seconds: float = 0.0  # CPU time

    def utilisation(self, capacity: int) -> float:
        return self.gpu_time / (capacity * self.window) if self.window else 0.0


def tier_span(tree: HyperNodeTree, nodes: Sequence[str]) -> int:
    common = tree.lowest_common(nodes)
    return tree.islands[common].tier if common is not None else 3


def simulate(mode: str, arrivals: Sequence[Arrival], nodes: int) -> Outcome:
    cluster = new_cluster(nodes, with_hypernodes=mode != "blind")
    # Measure placement with the same tree in every mode.
    tree = build_tree(topology(nodes), {n: {} for n in cluster.nodes})
    conf = conf_of(BLIND_CONF if mode == "blind" else TOPOLOGY_CONF)
    out = Outcome(mode)
    ends: list[tuple[float, str]] = []
    arrived: dict[str, Arrival] = {}
    pending: set[str] = set()
    horizon = arrivals[-1].at
    used_gpus, last = 0, 0.0
    i, now = 0, 0.0
    while i < len(arrivals) or pending or ends:
        now += PERIOD
        changed = False
        while ends and ends[0][0] <= now:
            _, key = heapq.heappop(ends)
            job = cluster.jobs.pop(key)
            for task in job.tasks.values():
                cluster.nodes[task.node_name].remove_task(task)
            used_gpus -= len(job.tasks) * POD_GPUS
            changed = True
        while i < len(arrivals) and arrivals[i].at <= now:
            a = arrivals[i]
            job = new_job(f"j{i}", a.gpus, a.at, rule_for(mode, a.gpus))
            cluster.jobs[job.key] = job
            arrived[job.key] = a
            pending.add(job.key)
            i += 1
            changed = True
        if now <= horizon:
            out.gpu_time += used_gpus * (min(now, horizon) - last)
            last = min(now, horizon)
            out.free_racks.append(
                sum(
                    1
                    for isl in tree.islands.values()
                    if isl.tier == 1
                    and sum(cluster.nodes[n].idle.get(GPU) for n in isl.nodes) >= RACK_GPUS * 1000
                )
            )
        if not changed or not pending:
            continue
        cluster.now = T0 + dt.timedelta(seconds=now)
        ssn = Session(cluster, conf.tiers)
        started = time.process_time()
        result = run_session(ssn, conf, REGISTRY)
        out.session_seconds += time.process_time() - started
        out.sessions += 1
        for node in cluster.nodes.values():
            node.changes = None
        for key in list(pending):
            job = cluster.jobs[key]
            job.changes = None
            job.fit_errors.clear()
            if job.count(TaskStatus.BINDING) < len(job.tasks):
                for task in job.tasks.values():
                    task.last_transaction = None
                continue
            for task in list(job.tasks.values()):
                job.set_status(task, TaskStatus.RUNNING)
            pending.discard(key)
            a = arrived[key]
            heapq.heappush(ends, (now + a.run, key))
            used_gpus += len(job.tasks) * POD_GPUS
            placed_on = [t.node_name for t in job.tasks.values()]
            span = tier_span(tree, placed_on)
            out.placed += 1
            out.spans.append(span)
            out.waits.append(now - a.at)
            out.in_rack += span == 1
            out.in_spine += span <= 2
            if a.gpus <= RACK_GPUS:
                out.rack_fit += 1
                out.rack_fit_in_rack += span == 1
        del result
    out.window = horizon
    return out


def report_stream(outcomes: list[Outcome], capacity: int) -> bool:
    print(
        f"{'mode':<7}{'placed':>7}{'1 rack (fit)':>14}{'1 rack':>8}{'1 spine':>9}{'span':>6}"
        f"{'wait s':>8}{'p95 s':>8}{'GPU util':>10}{'free racks':>12}{'sessions':>10}"
        f"{'cpu s/sess':>11}"
    )
    blind = next(o for o in outcomes if o.mode == "blind")
    ok = True
    for o in outcomes:
        p95 = statistics.quantiles(o.waits, n=20)[18] if len(o.waits) >= 20 else max(o.waits)
        print(
            f"{o.mode:<7}{o.placed:>7}"
            f"{o.rack_fit_in_rack / max(o.rack_fit, 1):>14.1%}"
            f"{o.in_rack / max(o.placed, 1):>8.1%}{o.in_spine / max(o.placed, 1):>9.1%}"
            f"{statistics.fmean(o.spans):>6.2f}{statistics.fmean(o.waits):>8.0f}{p95:>8.0f}"
            f"{o.utilisation(capacity):>10.1%}{statistics.fmean(o.free_racks):>12.1f}"
            f"{o.sessions:>10}{o.session_seconds / max(o.sessions, 1):>11.4f}"
        )
    for o in outcomes:
        if o.mode == "blind":
            continue
        share = o.rack_fit_in_rack / max(o.rack_fit, 1)
        gap = (blind.utilisation(capacity) - o.utilisation(capacity)) * 100
        verdict = "met" if share >= 0.95 and gap <= 5 else "MISS"
        ok = ok and verdict == "met"
        print(
            f"goal {o.mode}: {share:.1%} of rack-sized jobs in one rack (goal >= 95%), "
            f"utilisation {gap:+.1f} points below blind (goal <= 5): {verdict}"
        )
    return ok


# ---- the cost at 5,000 nodes --------------------------------------------------------------------


def backlog(mode: str, jobs: int, seed: int = 5) -> list[JobInfo]:
    rng = random.Random(seed)
    out = []
    for j in range(jobs):
        gpus = rng.choices(SIZES, WEIGHTS)[0]
        spec = rule_for("hard", gpus) if mode == "hard" else None
        out.append(new_job(f"b{j}", gpus, j, spec))
    return out


def one_session(nodes: int, jobs: int, mode: str) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds, binds, their digest) of one session over a fresh backlog."""
    cluster = new_cluster(nodes, with_hypernodes=mode != "blind")
    for job in backlog(mode, jobs):
        cluster.jobs[job.key] = job
    conf = conf_of(BLIND_CONF if mode == "blind" else TOPOLOGY_CONF)
    ssn = Session(cluster, conf.tiers)
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_session(ssn, conf, REGISTRY)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, len(result.binds), binds_digest(result.binds)


def binds_digest(binds: Sequence[Bind]) -> str:
    """The session's placements (pod and node, in bind order) as a short hash: a change that
    must not change decisions prints the same digest before and after."""
    digest = hashlib.sha256()
    for bind in binds:
        digest.update(f"{bind.task.namespace}/{bind.task.name}@{bind.node};".encode())
    return digest.hexdigest()[:16]


def report_cost(nodes: int, jobs: int, runs: int) -> bool:
    """The modes' sessions taken in turn ``runs`` times (a load that comes and goes falls on
    every mode alike); the medians. The goal is judged on CPU time, the session's own work:
    on a shared machine the wall time also counts the other processes' turns."""
    modes = ("blind", "on-unused", "hard")
    taken: dict[str, list[tuple[float, float, int, str]]] = {mode: [] for mode in modes}
    for _ in range(runs):
        for mode in modes:
            taken[mode].append(one_session(nodes, jobs, mode))
    wall = {mode: statistics.median(r[0] for r in taken[mode]) for mode in modes}
    cpu = {mode: statistics.median(r[1] for r in taken[mode]) for mode in modes}
    print(
        f"{'session at':<12}{'nodes':>7}{'gangs':>7}{'binds':>8}{'wall s':>9}{'vs blind':>10}"
        f"{'cpu s':>8}{'vs blind':>10}{'binds digest':>18}   (median of {runs})"
    )
    for mode in modes:
        digests = {r[3] for r in taken[mode]}
        print(
            f"{mode:<12}{nodes:>7,}{jobs:>7,}{taken[mode][0][2]:>8,}"
            f"{wall[mode]:>9.3f}{wall[mode] / wall['blind'] - 1:>+10.1%}"
            f"{cpu[mode]:>8.3f}{cpu[mode] / cpu['blind'] - 1:>+10.1%}"
            f"{' / '.join(sorted(digests)):>18}"
        )
    extra = cpu["hard"] / cpu["blind"] - 1
    verdict = "met" if extra < 0.20 else "MISS"
    print(f"goal: hard-mode session CPU {extra:+.1%} against blind (goal < +20%): {verdict}")
    return extra < 0.20


# ---- the cost on the live snapshot, session after session ---------------------------------------


def _pod_object(group: str, index: int, node: str = "") -> Pod:
    name = f"{group}-{index}"
    return Pod(
        metadata=ObjectMeta(
            name=name,
            namespace="bench",
            uid=f"uid-{name}",
            annotations={KUBE_GROUP_NAME_KEY: group},
        ),
        spec=PodSpec(
            node_name=node,
            scheduler_name="volcano",
            containers=(
                Container(name="main", resources=ResourceRequirements(requests=POD_REQUEST_LIST)),
            ),
        ),
        status=PodStatus(phase="Running" if node else "Pending"),
    )


class LiveCluster:
    """The informer stores and the scheduler's live snapshot over them, as in the process:
    a session's binds come back as running pods before the next update."""

    def __init__(self, nodes: int, mode: str) -> None:
        self.pods: KeyedObjects[Pod] = KeyedObjects()
        self.nodes: KeyedObjects[Node] = KeyedObjects()
        self.podgroups: KeyedObjects[PodGroup] = KeyedObjects()
        self.queues: KeyedObjects[Queue] = KeyedObjects()
        self.hypernodes: KeyedObjects[HyperNode] = KeyedObjects()
        self.live = LiveSnapshot()
        self.mode = mode
        self.conf = conf_of(BLIND_CONF if mode == "blind" else TOPOLOGY_CONF)
        queue = Queue(metadata=ObjectMeta(name="default"), spec=QueueSpec(weight=1))
        self.queues.items["default"] = queue
        self.live.queue_changed(queue)
        for i in range(nodes):
            node = node_object(node_name(i), NODE_ALLOCATABLE)
            self.nodes.items[node.metadata.name] = node
            self.live.node_changed(node)
        if mode != "blind":
            for hn in topology(nodes):
                self.hypernodes.items[hn.metadata.name] = hn
                self.live.hypernode_changed(hn)

    def add_jobs(self, prefix: str, jobs: int, seed: int) -> None:
        rng = random.Random(seed)
        for j in range(jobs):
            gpus = rng.choices(SIZES, WEIGHTS)[0]
            name, pods = f"{prefix}{j}", gpus // POD_GPUS
            spec = rule_for("hard", gpus) if self.mode == "hard" else None
            pg = PodGroup(
                metadata=ObjectMeta(
                    name=name,
                    namespace="bench",
                    creation_timestamp=format_time(T0 + dt.timedelta(seconds=j)),
                ),
                spec=PodGroupSpec(min_member=pods, network_topology=spec),
                status=PodGroupStatus(phase="Inqueue"),
            )
            self.podgroups.items[f"bench/{name}"] = pg
            self.live.podgroup_changed(pg)
            for i in range(pods):
                pod = _pod_object(name, i)
                self.pods.items[f"bench/{pod.metadata.name}"] = pod
                self.live.pod_changed(pod)

    def cycle(self) -> tuple[float, int, str]:
        """Update the snapshot, run one session (its CPU time taken), and write its binds
        back as running pods: (CPU seconds, binds, their digest)."""
        objects = CachedObjects(
            self.pods,
            self.nodes,
            self.podgroups,
            self.queues,
            KeyedObjects(),
            hypernodes=self.hypernodes,
        )
        cluster, _ = self.live.update(objects, assumed={}, now=T0 + dt.timedelta(hours=1))
        session = Session(cluster, self.conf.tiers)
        cpu = time.process_time()
        result = run_session(session, self.conf, REGISTRY)
        cpu = time.process_time() - cpu
        self.live.after_session(session)
        for bind in result.binds:
            key = bind.task.key
            pod = self.pods.items[key]
            spec = msgspec.structs.replace(pod.spec, node_name=bind.node)
            ran = msgspec.structs.replace(pod, spec=spec, status=PodStatus(phase="Running"))
            self.pods.items[key] = ran
            self.live.pod_changed(ran)
        return cpu, len(result.binds), binds_digest(result.binds)


def steady_session(nodes: int, jobs: int, mode: str) -> tuple[float, int, str]:
    """The backlog's session on a live snapshot that has run a session before (one small
    gang placed and bound): what the snapshot keeps from session to session (the nodes'
    verdicts; in hard mode the HyperNode sums) is there, as in the running process."""
    live = LiveCluster(nodes, mode)
    live.add_jobs("w", 1, seed=1)
    live.cycle()
    live.add_jobs("b", jobs, seed=5)
    return live.cycle()


def report_steady(nodes: int, jobs: int, runs: int) -> bool:
    """``report_cost`` on the live snapshot (``steady_session``), blind and hard in turn."""
    modes = ("blind", "hard")
    taken: dict[str, list[tuple[float, int, str]]] = {mode: [] for mode in modes}
    for _ in range(runs):
        for mode in modes:
            gc.collect()
            taken[mode].append(steady_session(nodes, jobs, mode))
    cpu = {mode: statistics.median(r[0] for r in taken[mode]) for mode in modes}
    print(
        f"{'live session':<14}{'nodes':>7}{'gangs':>7}{'binds':>8}{'cpu s':>8}{'vs blind':>10}"
        f"{'binds digest':>18}   (median of {runs}, after a first session)"
    )
    for mode in modes:
        digests = {r[2] for r in taken[mode]}
        print(
            f"{mode:<14}{nodes:>7,}{jobs:>7,}{taken[mode][0][1]:>8,}{cpu[mode]:>8.3f}"
            f"{cpu[mode] / cpu['blind'] - 1:>+10.1%}{' / '.join(sorted(digests)):>18}"
        )
    extra = cpu["hard"] / cpu["blind"] - 1
    verdict = "met" if extra < 0.20 else "MISS"
    print(f"goal, live snapshot: hard-mode session CPU {extra:+.1%} against blind: {verdict}")
    return extra < 0.20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a short stream, 500 nodes (CI)")
    args = parser.parse_args()
    print(machine())
    nodes = 512
    jobs = 120 if args.smoke else 3000
    arrivals = stream(jobs, nodes * NODE_GPUS)
    print(
        f"stream: {jobs} jobs over {arrivals[-1].at / 3600:.1f} h on {nodes} nodes "
        f"({nodes * NODE_GPUS} GPUs, {nodes // NODES_PER_RACK} racks)"
    )
    outcomes = [simulate(mode, arrivals, nodes) for mode in ("blind", "hard", "soft")]
    report_stream(outcomes, nodes * NODE_GPUS)
    if args.smoke:
        report_cost(504, 40, runs=1)
        report_steady(504, 40, runs=1)
    else:
        report_cost(5000, 800, runs=7)
        report_steady(5000, 800, runs=3)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
