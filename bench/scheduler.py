"""Scheduler throughput: the pure core, and the whole process on a real API server.

    .venv/bin/python bench/scheduler.py                 # core: 10,000 pods, 500 gangs, 1,000 nodes
    .venv/bin/python bench/scheduler.py --smoke         # CI: the core, small
    .venv/bin/python bench/scheduler.py --e2e           # API server: 5,000 pods on 50 kwok nodes
    .venv/bin/python bench/scheduler.py --e2e --smoke   # API server: 200 pods on 10 nodes
    .venv/bin/python bench/scheduler.py --burst         # API server: gangs + backlog, 1,000 nodes
    .venv/bin/python bench/scheduler.py --burst --smoke # the same on 20 nodes

Core (goal >= 3,000 placements/s): one session (``run_session``) over a ClusterInfo built
directly: 10,000 pending 1-cpu/2Gi pods in 500 gang jobs of 20 (minAvailable 20) on 1,000
nodes of 16 cpu / 64Gi, with Volcano's default configuration plus binpack. Every pod fits, so
the figure is placements (binds decided) per second of session time, snapshot building
excluded. Both modes exit 0 when a goal is missed (they say MISS), 1 when something broke.

End to end (``--e2e``): a local control plane of its own (temporary directory) with kwok nodes,
and N plain pods (100m cpu each) scheduled three ways, in this order, each in its own namespace:

1. ceiling: a bare client loop in a process of its own binds the pods to precomputed nodes
   (round-robin), 32 binds in flight (the scheduler's ``--bind-workers``), with the same client
   rate limit: the most binds per second this API server takes from one such client;
2. kube-scheduler (started for this round only) with ``--kube-api-qps/--kube-api-burst`` equal
   to Caldera's (2000/2000);
3. ``caldera scheduler`` (default configuration, 2000/2000); each pod has its own PodGroup of
   minMember 1, which is what Volcano's PodGroup controller makes for a plain pod (the
   PodGroups are created beforehand and are not timed).

Burst (``--burst``, issue 14): 1,000 kwok nodes of 20 cpu, 1,500 PodGroups of 20 (minMember 20,
queue default) created first, then 30,000 pods of 1 cpu created in a burst while ``caldera
scheduler`` runs with preempt and reclaim on (actions ``enqueue, allocate, backfill, reclaim,
preempt``; Volcano's default plugins plus binpack): 20,000 of them fit, 10,000 stay a backlog.
Reported: binds per second from the first to the 20,000th bind, beside the ceiling measured in
the same run (the bare bind loop binding 20,000 pods that request nothing, in a namespace of
their own, before the burst), and the p50/p99 of ``caldera_e2e_scheduling_latency`` and of the
session latency over the sessions of the burst (read from the process's /metrics before and
after; a percentile is the upper bound of its histogram bucket).

The pods of each round are created while no scheduler serves them; the rate is measured from
the first bind this process sees on its watch to the N-th: (N - 1) / (last - first). Later
rounds run with the earlier rounds' pods bound in the cluster (they are in every cache).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
CRD_DIR: Final = REPO / "charts" / "caldera" / "crds"
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from bench._clusters import NODE_ALLOCATABLE, POD_REQUESTS, T0, empty_cluster, gang_job  # noqa: E402
from caldera.api.core import Container, Pod, PodSpec, ResourceRequirements  # noqa: E402
from caldera.api.kinds import NAMESPACE, NODE, POD, PODGROUP, KindInfo  # noqa: E402
from caldera.api.meta import ObjectMeta  # noqa: E402
from caldera.api.resources import Resources  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.kube.errors import ApiConnectionError, ApiError, NotFound  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from scheduler.api.types import ClusterInfo  # noqa: E402
from scheduler.conf import DEFAULT_CONF, parse_conf  # noqa: E402
from scheduler.framework.runner import run_session  # noqa: E402
from scheduler.framework.session import Session  # noqa: E402
from scheduler.registry import REGISTRY  # noqa: E402

if TYPE_CHECKING:
    from e2e.cluster.control_plane import ControlPlane, NodeSpec

CORE_GOAL = 3000.0
BINPACK = "  - name: binpack\n"
QPS = 2000
GANG = 20  # pods per gang in --burst, and cpu per node


def machine() -> str:
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}"
    )


# ---- the pure core ------------------------------------------------------------------------------


def build_cluster(pods: int, jobs: int, nodes: int) -> ClusterInfo:
    """``pods`` pending pods in ``jobs`` gangs (each whole: minAvailable = its size) on
    ``nodes`` empty nodes."""
    cluster = empty_cluster(
        (f"node-{i}" for i in range(nodes)), Resources.from_list(dict(NODE_ALLOCATABLE))
    )
    resreq = Resources.from_list(POD_REQUESTS)

    def pod(name: str, uid: str) -> Pod:
        container = Container(name="main", resources=ResourceRequirements(requests=POD_REQUESTS))
        meta = ObjectMeta(name=name, namespace="bench", uid=uid)
        return Pod(metadata=meta, spec=PodSpec(containers=(container,)))

    per_job = pods // jobs
    for j in range(jobs):
        created = T0 + dt.timedelta(seconds=j)
        job = gang_job(f"job-{j}", per_job, resreq, created=created, uid_prefix="uid-", pod=pod)
        cluster.jobs[job.key] = job
    return cluster


def bench_core(smoke: bool) -> bool:
    pods, jobs, nodes = (1000, 50, 100) if smoke else (10_000, 500, 1000)
    conf = parse_conf(DEFAULT_CONF + BINPACK, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    rounds = 1 if smoke else 3
    best = float("inf")
    binds = 0
    for _ in range(rounds):
        cluster = build_cluster(pods, jobs, nodes)
        started = time.perf_counter()
        result = run_session(Session(cluster, conf.tiers), conf, REGISTRY)
        best = min(best, time.perf_counter() - started)
        binds = len(result.binds)
    rate = binds / best
    print(f"core: {pods} pending pods in {jobs} gangs on {nodes} nodes, default conf + binpack")
    print(f"  session {best:.2f}s (best of {rounds}), {binds} placements")
    ok = binds == pods
    print(
        f"  {rate:,.0f} placements/s; goal >= {CORE_GOAL:,.0f}/s: "
        f"{'met' if rate >= CORE_GOAL else 'MISS'}"
    )
    return ok


# ---- end to end ---------------------------------------------------------------------------------


def _pod(name: str, scheduler: str, group: str | None = None) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


async def create_all(
    kube: KubeClient,
    kind: KindInfo[Any],
    bodies: list[dict[str, Any]],
    namespace: str,
    inflight: int = 64,
) -> None:
    """Create ``bodies`` with ``inflight`` requests at a time."""
    gate = asyncio.Semaphore(inflight)

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            await kube.create(kind, body, namespace=namespace)

    await asyncio.gather(*(one(b) for b in bodies))


def is_bound(pod: Pod) -> bool:
    return bool(pod.spec.node_name)


class PodWatch:
    """Watches a namespace's pods and records when pods become ``wanted`` (bound, by default):
    the first and the last time, until ``count`` of them are; and per pod the time the watch
    first saw it (``added``, pods listed at the start excepted) and saw it wanted
    (``wanted_at``), for latencies on one clock."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        count: int,
        wanted: Callable[[Pod], bool] = is_bound,
    ) -> None:
        self.kube, self.namespace, self.count, self.wanted = kube, namespace, count, wanted
        self.bound: set[str] = set()
        self.added: dict[str, float] = {}
        self.wanted_at: dict[str, float] = {}
        self.first = 0.0
        self.last = 0.0
        self.done = asyncio.Event()
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodWatch:
        listed = await self.kube.list(POD, namespace=self.namespace)
        for pod in listed.items:
            if self.wanted(pod):
                self.bound.add(pod.metadata.name)

        async def run() -> None:
            version = listed.resource_version
            while True:
                try:
                    async with self.kube.watch(
                        POD, namespace=self.namespace, resource_version=version
                    ) as events:
                        self.ready.set()
                        async for event in events:
                            pod = event.object
                            if not isinstance(pod, Pod):
                                break  # an ERROR event: list again
                            version = pod.metadata.resource_version
                            self.added.setdefault(pod.metadata.name, time.monotonic())
                            if self.wanted(pod) and self._seen(pod.metadata.name):
                                return
                except (ApiError, ApiConnectionError, TimeoutError):
                    pass
                # The stream ended: catch up with a list, then watch from there.
                again = await self.kube.list(POD, namespace=self.namespace)
                version = again.resource_version
                for pod in again.items:
                    if self.wanted(pod) and self._seen(pod.metadata.name):
                        return

        self._task = asyncio.create_task(run())
        await self.ready.wait()
        return self

    def _seen(self, name: str) -> bool:
        """Record a bound pod; True once all are bound."""
        if name not in self.bound:
            now = time.monotonic()
            if not self.bound:
                self.first = now
            self.bound.add(name)
            self.wanted_at[name] = now
            self.last = now
        if len(self.bound) >= self.count:
            self.done.set()
            return True
        return False

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with_suppress = asyncio.gather(self._task, return_exceptions=True)
            await with_suppress

    def rate(self) -> float:
        span = self.last - self.first
        return (len(self.bound) - 1) / span if span > 0 else float("nan")


async def make_namespace(kube: KubeClient, name: str) -> None:
    await kube.create(NAMESPACE, {"metadata": {"name": name}})
    path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
    for _ in range(300):
        try:
            await kube.request("GET", path)
            return
        except NotFound:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"no default ServiceAccount in {name}")


async def wait_done(watch: PodWatch, limit: float, what: str) -> None:
    try:
        await asyncio.wait_for(watch.done.wait(), limit)
    except TimeoutError:
        raise RuntimeError(
            f"{what}: only {len(watch.bound)}/{watch.count} pods bound after {limit:.0f}s"
        ) from None


async def measure_ceiling(
    kube: KubeClient, kubeconfig: Path, bodies: list[dict[str, Any]], nodes: list[str], limit: float
) -> float:
    """Binds per second of a bare bind loop (``--bind-loop``, in a process of its own, as the
    schedulers are) binding ``bodies``, created first in namespace ``bare``, round-robin."""
    await make_namespace(kube, "bare")
    await create_all(kube, POD, bodies, "bare")
    names = [body["metadata"]["name"] for body in bodies]
    plan = [(n, nodes[i % len(nodes)]) for i, n in enumerate(names)]
    async with PodWatch(kube, "bare", len(names)) as watch:
        binder = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--bind-loop", str(kubeconfig), stdin=asyncio.subprocess.PIPE
        )
        await binder.communicate(json.dumps(plan).encode())
        await wait_done(watch, limit, "ceiling")
    ceiling = watch.rate()
    print(f"  ceiling (bare bind loop, 32 in flight): {ceiling:,.0f} binds/s")
    return ceiling


async def bench_e2e(smoke: bool, count: int | None) -> bool:
    from e2e.caldera_process import CalderaProcess
    from e2e.cluster.control_plane import ControlPlane, NodeSpec, binaries

    pods = count or (200 if smoke else 5000)
    node_count = 10 if smoke else 50
    timeout = 120 if smoke else 600
    with tempfile.TemporaryDirectory(prefix="caldera-bench-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        try:
            started = time.monotonic()
            plane.up()
            plane.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
            plane.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR)
            )
            nodes = plane.create_nodes(
                node_count, NodeSpec(cpu="64", memory="256Gi", pods="1000"), prefix="bench-"
            )
            print(
                f"e2e: {pods} plain pods on {node_count} kwok nodes "
                f"(control plane up in {time.monotonic() - started:.0f}s)"
            )
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                names = [f"p-{i}" for i in range(pods)]

                # 1. the ceiling: binds from this process to precomputed nodes
                bare = [_pod(n, "nobody") for n in names]
                ceiling = await measure_ceiling(kube, plane.kubeconfig, bare, nodes, timeout)

                # 2. kube-scheduler with the same client rate limit
                await make_namespace(kube, "kube")
                await create_all(kube, POD, [_pod(n, "default-scheduler") for n in names], "kube")
                argv = plane._argv("kube-scheduler", binaries())
                argv += [f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}"]
                async with PodWatch(kube, "kube", pods) as watch:
                    plane.procs.start("kube-scheduler", argv)
                    try:
                        await wait_done(watch, timeout, "kube-scheduler")
                    except RuntimeError:
                        print(plane.procs.tail("kube-scheduler"))
                        raise
                    finally:
                        plane.procs.stop("kube-scheduler")
                kube_rate = watch.rate()
                print(f"  kube-scheduler (qps/burst {QPS}): {kube_rate:,.0f} binds/s")

                # 3. caldera scheduler
                await make_namespace(kube, "caldera")
                groups = [
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": n},
                        "spec": {"minMember": 1, "queue": "default"},
                    }
                    for n in names
                ]
                await create_all(kube, PODGROUP, groups, "caldera")
                await create_all(kube, POD, [_pod(n, "volcano", group=n) for n in names], "caldera")
                async with PodWatch(kube, "caldera", pods) as watch:
                    proc = CalderaProcess(
                        "scheduler",
                        [
                            "--leader-elect=false",
                            f"--kube-qps={QPS}",
                            f"--kube-burst={QPS}",
                            "--log-level=warning",
                        ],
                        kubeconfig=plane.kubeconfig,
                        log_dir=Path(tmp),
                    )
                    try:
                        await wait_done(watch, timeout, "caldera scheduler")
                    finally:
                        code = proc.stop()
                    if code != 0:
                        print(proc.log()[-3000:])
                caldera = watch.rate()
                print(f"  caldera scheduler (qps/burst {QPS}): {caldera:,.0f} binds/s")
        finally:
            plane.down(purge=True)
    vs_kube, vs_ceiling = caldera / kube_rate, caldera / ceiling
    print(
        f"  caldera / kube-scheduler = {vs_kube:.2f} (goal >= 1: "
        f"{'met' if vs_kube >= 1 else 'MISS'}); caldera / ceiling = {vs_ceiling:.2f} "
        f"(goal >= 0.80: {'met' if vs_ceiling >= 0.8 else 'MISS'})"
    )
    return code == 0


FULL_CONF = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
"""


def _gang_pod(name: str, group: str, cpu: str | None) -> dict[str, Any]:
    requests = {"requests": {"cpu": cpu}} if cpu else {}
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "schedulerName": "volcano" if group else "nobody",
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "busybox", "resources": requests}],
        },
    }


def histogram(text: str, name: str) -> dict[float, float]:
    """Cumulative bucket counts of one Prometheus histogram, by upper bound."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            buckets[float("inf") if bound == "+Inf" else float(bound)] = float(line.split()[-1])
    return buckets


def requests_by_verb(text: str) -> dict[str, float]:
    """``caldera_rest_client_requests_total`` summed by verb (every code)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("caldera_rest_client_requests_total{"):
            verb = line.split('verb="', 1)[1].split('"', 1)[0]
            totals[verb] = totals.get(verb, 0.0) + float(line.split()[-1])
    return totals


def sample(text: str, name: str) -> float:
    """The value of an unlabelled sample in a /metrics text (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    return 0.0


def percentile(before: dict[float, float], after: dict[float, float], q: float) -> str:
    """The upper bound of the bucket holding quantile ``q`` of the observations in between."""
    total = after.get(float("inf"), 0.0) - before.get(float("inf"), 0.0)
    if total <= 0:
        return "n/a"
    for bound in sorted(after):
        if after[bound] - before.get(bound, 0.0) >= q * total:
            return "> 10,000 ms" if bound == float("inf") else f"<= {bound:,.0f} ms"
    return "n/a"


async def create_nodes(kube: KubeClient, count: int, cpu: str) -> list[str]:
    """``count`` kwok nodes ``burst-<i>`` (``create_ready_nodes``)."""
    from e2e.cluster.control_plane import NodeSpec

    spec = NodeSpec(cpu=cpu, memory="256Gi", pods="1000")
    return await create_ready_nodes(kube, [f"burst-{i}" for i in range(count)], spec)


async def create_ready_nodes(kube: KubeClient, names: list[str], spec: NodeSpec) -> list[str]:
    """kwok nodes ``names``, created and given their capacity through the API (kubectl per node
    is too slow at 1,000), once kwok has made them all Ready."""
    gate = asyncio.Semaphore(32)

    async def one(name: str) -> None:
        manifest = spec.manifest(name)
        async with gate:
            await kube.create(NODE, manifest)
            await kube.patch_status(NODE, name, {"status": manifest["status"]})

    await asyncio.gather(*(one(n) for n in names))
    wanted = set(names)
    ready: set[str] = set()
    for _ in range(600):
        listed = await kube.list(NODE)
        ready = {
            node.metadata.name
            for node in listed.items
            if node.metadata.name in wanted
            and any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
        }
        if ready == wanted:
            return names
        await asyncio.sleep(0.5)
    raise RuntimeError(f"only {len(ready)}/{len(wanted)} nodes Ready")


def start_with_crds(plane: ControlPlane) -> None:
    """Start ``plane`` and wait until Caldera's CRDs are established on it."""
    plane.up()
    plane.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR))


async def bench_burst(smoke: bool) -> bool:
    from e2e.caldera_process import CalderaProcess
    from e2e.cluster.control_plane import ControlPlane

    node_count, gangs, backlog_gangs = (20, 20, 10) if smoke else (1000, 1000, 500)
    fit = gangs * GANG
    timeout = 180 if smoke else 900
    with tempfile.TemporaryDirectory(prefix="caldera-burst-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        conf = Path(tmp) / "scheduler.yaml"
        conf.write_text(FULL_CONF)
        code = 0
        try:
            started = time.monotonic()
            start_with_crds(plane)
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                nodes = await create_nodes(kube, node_count, str(GANG))
                print(
                    f"burst: {fit:,} pods in {gangs:,} gangs that fit and "
                    f"{backlog_gangs * GANG:,} that do not, on {node_count:,} kwok nodes of "
                    f"{GANG} cpu (set-up {time.monotonic() - started:.0f}s)"
                )
                # 1. the ceiling, as in --e2e, with pods requesting nothing
                bare = [_gang_pod(f"b-{i}", "", None) for i in range(fit)]
                ceiling = await measure_ceiling(kube, plane.kubeconfig, bare, nodes, timeout)

                # 2. caldera, with the PodGroups in place and the pods arriving in a burst
                await make_namespace(kube, "burst")
                groups = [f"g-{g}" for g in range(gangs + backlog_gangs)]
                await create_all(
                    kube,
                    PODGROUP,
                    [
                        {
                            "apiVersion": "scheduling.volcano.sh/v1beta1",
                            "kind": "PodGroup",
                            "metadata": {"name": g},
                            "spec": {"minMember": GANG, "queue": "default"},
                        }
                        for g in groups
                    ],
                    "burst",
                )
                proc = CalderaProcess(
                    "scheduler",
                    [
                        "--leader-elect=false",
                        f"--kube-qps={QPS}",
                        f"--kube-burst={QPS}",
                        f"--scheduler-conf={conf}",
                        "--log-level=warning",
                    ],
                    kubeconfig=plane.kubeconfig,
                    log_dir=Path(tmp),
                )
                try:
                    for _ in range(300):
                        if proc.get("/readyz")[0] == 200:
                            break
                        await asyncio.sleep(0.2)
                    await asyncio.sleep(2)  # a few idle sessions
                    text_before = proc.get("/metrics")[1]
                    pods = [_gang_pod(f"{g}-{i}", g, "1") for g in groups for i in range(GANG)]
                    async with PodWatch(kube, "burst", fit) as watch:
                        burst_started = time.monotonic()
                        await create_all(kube, POD, pods, "burst")
                        created = time.monotonic() - burst_started
                        await wait_done(watch, timeout, "caldera scheduler")
                    await asyncio.sleep(3)  # sessions over the backlog once everything runs
                    text_after = proc.get("/metrics")[1]
                finally:
                    code = proc.stop()
                if code != 0:
                    print(proc.log()[-3000:])
                rate = watch.rate()
                print(
                    f"  created {len(pods):,} pods in {created:.1f}s "
                    f"({len(pods) / created:,.0f}/s; the {fit:,} that fit come first); caldera "
                    f"bound {fit:,} at {rate:,.0f} binds/s = {rate / ceiling:.2f} of the ceiling "
                    f"(goal >= 0.80: {'met' if rate / ceiling >= 0.8 else 'MISS'})"
                )
                print(
                    f"  first bind {watch.first - burst_started:.1f}s after the burst began, "
                    f"last bind {watch.last - burst_started:.1f}s, i.e. "
                    f"{watch.last - burst_started - created:+.1f}s after the last pod was created"
                )
                cpu = sample(text_after, "process_cpu_seconds_total") - sample(
                    text_before, "process_cpu_seconds_total"
                )
                span = watch.last - burst_started + 3
                print(
                    f"  caldera scheduler used {cpu:.1f} s of CPU in those {span:.0f} s "
                    f"({cpu / span:.0%} of one core; the machine has 2 for everything)"
                )
                calls = requests_by_verb(text_after)
                for verb, count in requests_by_verb(text_before).items():
                    calls[verb] -= count
                print(
                    "  caldera scheduler's API requests in that time: "
                    + ", ".join(f"{verb} {n:,.0f}" for verb, n in sorted(calls.items()) if n)
                )
                for metric in (
                    "caldera_e2e_scheduling_latency_milliseconds",
                    "caldera_session_latency_milliseconds",
                ):
                    before, after = histogram(text_before, metric), histogram(text_after, metric)
                    sessions = after.get(float("inf"), 0) - before.get(float("inf"), 0)
                    print(
                        f"  {metric}: {sessions:.0f} sessions, p50 "
                        f"{percentile(before, after, 0.5)}, p99 {percentile(before, after, 0.99)}"
                    )
        finally:
            plane.down(purge=True)
    return code == 0


async def bind_loop(kubeconfig: str, plan: list[tuple[str, str]]) -> None:
    """Bind the ``bare`` namespace's pods as planned, 32 in flight (``--bind-loop``)."""
    gate = asyncio.Semaphore(32)
    options = ClientOptions(qps=QPS, burst=QPS)
    async with KubeClient.from_kubeconfig(kubeconfig, options=options) as kube:

        async def bind(name: str, node: str) -> None:
            async with gate:
                await kube.bind("bare", name, node)

        await asyncio.gather(*(bind(name, node) for name, node in plan))


def main() -> int:
    configure_logging(component="bench", level="warning", fmt="console")
    if len(sys.argv) == 3 and sys.argv[1] == "--bind-loop":
        asyncio.run(bind_loop(sys.argv[2], [tuple(p) for p in json.load(sys.stdin)]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small and quick (CI)")
    parser.add_argument("--e2e", action="store_true", help="on a local control plane")
    parser.add_argument("--pods", type=int, default=None, help="pods for --e2e")
    parser.add_argument("--burst", action="store_true", help="gangs and a backlog, in a burst")
    args = parser.parse_args()
    print(machine())
    if args.burst:
        ok = asyncio.run(bench_burst(args.smoke))
    elif args.e2e:
        ok = asyncio.run(bench_e2e(args.smoke, args.pods))
    else:
        ok = bench_core(args.smoke)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
