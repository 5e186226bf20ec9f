"""Memory and start-up of ``caldera scheduler`` and ``caldera controllers`` on a large idle
cluster: 15,000 kwok nodes and 150,000 running pods (issue 47).

    .venv/bin/python bench/startup_memory.py                             # 15,000 / 150,000
    .venv/bin/python bench/startup_memory.py --nodes 1500 --pods 15000   # a tenth
    .venv/bin/python bench/startup_memory.py --smoke                     # CI: 100 / 1,000
    .venv/bin/python bench/startup_memory.py --cluster DIR --keep --runs 2

A local control plane of its own, N kwok nodes of 32 cpu, and M pods created already bound
(``spec.nodeName``, round-robin, so nothing needs scheduling), ``schedulerName: volcano``, 10 to
a PodGroup of minMember 10 whose status is Running with gang's Scheduled condition (a cluster
that has been running, as a restarted scheduler finds it). The bench gives each pod its Running
status itself (the status subresource, right after the create, a bounded number of pods in
flight): kwok runs with its node stages only, so it never touches a pod. kwok's node Lease is
long enough for its renewals to stay near 50 writes a second (40 s up to 2,000 nodes, 1,200 s
at 15,000; the node lifecycle controller's grace matches), so heartbeats stay current on a
2-core machine; the bench counts the Ready nodes before and after each process it measures.

``--cluster DIR`` keeps the cluster in DIR; a populated one found there (its control plane is
started again if it stopped) is used as it is, and ``--keep`` leaves it running at the end, so
one set-up serves many runs (``--runs`` starts each process that many times). A kwok started
again has a new identity and takes a node over only when the Lease the old one held expires
(20 minutes at 15,000 nodes): the nodes of a stopped cluster stay NotReady that long. Then, one at a
time:

- ``caldera scheduler``: from the process's start (wall clock, and the process's own CPU
  seconds from /proc, which tell its work from the wait for a shared machine) to its caches
  synced (``/readyz`` 200) and to the end of its first session
  (``caldera_e2e_scheduling_latency_milliseconds_count`` turning 1), polled every 0.1 s; then,
  after 20 s to settle, an idle window of 30 s (2 and 5 s in smoke mode): the node, pod and
  PodGroup changes the API server made in it (a watch of each), the mean cycle of the sessions
  that ran (the histogram's sum over its count; cycles the quiet rule skipped are counted
  apart) and the process's CPU; its peak (``VmHWM``) and settled (``VmRSS``) resident set;
- ``caldera controllers``: the same to ``/readyz`` 200 (informers synced), and its peak and
  settled resident set after 20 s more.

The goals: scheduler peak RSS < 2 GiB, first session < 30 s after start, idle cycle < 0.3 s.
Beside them the bench prints what the informer bench's per-object figure (1,828 bytes per
cached pod, ``bench/informer.py``) predicts for the pods alone, the API server's, etcd's and
kwok's resident sets, and the load average. Exits 0 when a goal is missed (it says MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/*.py are no package)
    sys.path.insert(0, str(REPO))

from bench._procfs import available_gib, cpu_seconds, load_average, memory_kib  # noqa: E402
from bench.scheduler import (  # noqa: E402
    QPS,
    create_ready_nodes,
    machine,
    make_namespace,
    sample,
    start_with_crds,
)
from caldera.api.kinds import NODE, POD, PODGROUP, KindInfo  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.kube.errors import AlreadyExists, ApiConnectionError, ApiError, NotFound  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from scheduler.plugins.gang import SCHEDULED_REASON  # noqa: E402

if TYPE_CHECKING:
    from e2e.caldera_process import CalderaProcess
    from e2e.cluster.control_plane import ControlPlane

NAMESPACE: Final = "idle"
GANG: Final = 10
BYTES_PER_POD: Final = 1828  # bench/informer.py, 50,000 pods (docs/benchmarks.md)
RSS_GOAL_GIB: Final = 2.0
FIRST_SESSION_GOAL: Final = 30.0
IDLE_GOAL: Final = 0.3
MIN_AVAILABLE_GIB: Final = 4.0  # stop creating before the shared machine runs short
CYCLES: Final = "caldera_e2e_scheduling_latency_milliseconds"
IN_FLIGHT: Final = 64  # PodGroup creates at once
ETCD_BATCH: Final = 100  # pods to an etcd transaction (etcd allows 128 operations)
CHUNK: Final = 10_000  # pods between progress lines and memory checks
LEASE_WRITES_PER_SECOND: Final = 50  # what kwok's node Lease renewals may cost the API server
POLL: Final = 0.1
HEARTBEATS_PER_SECOND: Final = 10  # kwok's node status refreshes, all nodes together
KWOK_PARALLELISM: Final = 32  # nodes kwok initialises, and Leases it renews, at once
LIMIT: Final = 900.0  # seconds a process may take to its first session or readiness


def node_lease_seconds(nodes: int) -> int:
    """A node Lease long enough that kwok's renewals (four a Lease) stay near
    ``LEASE_WRITES_PER_SECOND``; never shorter than the default 40 s."""
    return max(40, math.ceil(4 * nodes / LEASE_WRITES_PER_SECOND))


def node_stages(stages: str, nodes_count: int) -> str:
    """kwok's configuration: the stages for Nodes only (initialise, heartbeat) from a stages
    file, with no pod stage (kwok leaves the pods alone); the status heartbeat spaced so that
    all nodes' come to about ``HEARTBEATS_PER_SECOND`` (the Lease tells liveness; at 15,000
    nodes the stages file's 5 minutes were 33 writes a second, and they held back the
    initialisation of the last 4,000 nodes); and more nodes handled at once than kwok's
    default 4 (15,000 nodes came up at 5 a second with it, at load 23)."""
    docs = [d for d in yaml.safe_load_all(stages) if d]
    nodes = [d for d in docs if d["spec"]["resourceRef"]["kind"] == "Node"]
    if not nodes:
        raise ValueError("the stages file has no Node stage")
    spacing = 1000 * nodes_count // HEARTBEATS_PER_SECOND  # milliseconds
    for stage in nodes:
        delay = stage["spec"].get("delay")
        if delay is not None and delay["durationMilliseconds"] < spacing // 2:
            # from half the spacing to one and a half: the mean is the spacing
            delay["durationMilliseconds"] = spacing // 2
            delay["jitterDurationMilliseconds"] = spacing * 3 // 2
    options = {
        "nodePlayStageParallelism": KWOK_PARALLELISM,
        "nodeLeaseParallelism": KWOK_PARALLELISM,
    }
    config = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": options,
    }
    return yaml.safe_dump_all([*nodes, config], sort_keys=False)


def running_pod(i: int, node: str) -> dict[str, Any]:
    group = f"g-{i // GANG}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{i % GANG}",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


def running_status(i: int, now: str) -> dict[str, Any]:
    """What a kubelet reports for the pod's running container (as kwok's pod-ready stage
    writes it): the phase, conditions, the container's status, the host's and a pod IP."""
    ready = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "status": {
            "phase": "Running",
            "conditions": ready,
            "containerStatuses": [
                {
                    "name": "c",
                    "image": "busybox",
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
            "hostIP": "10.240.0.1",
            "podIP": f"10.{128 + i // 65536}.{i // 256 % 256}.{i % 256}",
            "startTime": now,
        }
    }


async def count(kube: KubeClient, path: str, params: dict[str, str] | None = None) -> int:
    """How many objects a LIST of ``path`` would return, asking for one."""
    query = {"limit": "1", **(params or {})}
    listed = json.loads(await kube.request("GET", path, params=query))
    return len(listed.get("items") or ()) + int(listed["metadata"].get("remainingItemCount", 0))


async def ready_nodes(kube: KubeClient) -> tuple[int, int]:
    """(Ready nodes, all nodes)."""
    nodes = (await kube.list(NODE)).items
    ready = sum(
        any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes
    )
    return ready, len(nodes)


async def make_nodes(kube: KubeClient, count_: int) -> list[str]:
    """``n-0`` .. ``n-<count-1>``: those missing created and waited for."""
    from e2e.cluster.control_plane import NodeSpec

    names = [f"n-{i}" for i in range(count_)]
    existing = {n.metadata.name for n in (await kube.list(NODE)).items}
    missing = [n for n in names if n not in existing]
    if missing:
        spec = NodeSpec(cpu="32", memory="256Gi", pods="110")
        await create_ready_nodes(kube, missing, spec)
    return names


def stored_pod(i: int, node: str, now: str) -> dict[str, Any]:
    """Pod ``i`` as the API server would store it once created, defaulted and Running: what
    the bench writes to etcd (the fields a create adds: uid, creation time, a field manager's
    entry, the defaults and the service account's token volume)."""
    pod = running_pod(i, node)
    meta, spec = pod["metadata"], pod["spec"]
    meta.update(
        namespace=NAMESPACE,
        uid=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{NAMESPACE}/{meta['name']}")),
        creationTimestamp=now,
        managedFields=[
            {
                "manager": "bench",
                "operation": "Update",
                "apiVersion": "v1",
                "time": now,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {}}, "f:spec": {"f:containers": {}}},
            }
        ],
    )
    volume = "kube-api-access-bench"
    spec["containers"][0].update(
        volumeMounts=[
            {
                "name": volume,
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        terminationMessagePath="/dev/termination-log",
        terminationMessagePolicy="File",
        imagePullPolicy="Always",
    )
    spec.update(
        volumes=[
            {
                "name": volume,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
                    ],
                    "defaultMode": 420,
                },
            }
        ],
        restartPolicy="Always",
        dnsPolicy="ClusterFirst",
        serviceAccountName="default",
        serviceAccount="default",
        securityContext={},
        tolerations=[
            {
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
        priority=0,
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
    )
    pod["status"] = {**running_status(i, now)["status"], "qosClass": "Burstable"}
    return pod


def put_in_etcd(plane: ControlPlane, pods: list[dict[str, Any]]) -> None:
    """Store ``pods`` in etcd directly (JSON, which the API server reads as it reads its own
    protobuf), ``ETCD_BATCH`` to a transaction: the API server's watch sees each created."""
    url = f"http://127.0.0.1:{plane.ports['etcd']}/v3/kv/txn"
    for first in range(0, len(pods), ETCD_BATCH):
        puts = [
            {
                "requestPut": {
                    "key": _b64(f"/registry/pods/{NAMESPACE}/{pod['metadata']['name']}"),
                    "value": _b64(json.dumps(pod, separators=(",", ":"))),
                }
            }
            for pod in pods[first : first + ETCD_BATCH]
        ]
        request = urllib.request.Request(  # etcd's gateway on loopback
            url, data=json.dumps({"success": puts}).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            if not json.loads(response.read()).get("succeeded"):
                raise RuntimeError("etcd refused a transaction of pods")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def fill(plane: ControlPlane, kube: KubeClient, nodes: list[str], pods: int) -> None:
    """The PodGroups (status Running, through the API) and the pods, bound and Running,
    written to etcd in chunks while memory lasts; what a stopped fill left is kept.

    Through the API a pod is a create and a status write: at 150,000 pods on this loaded
    2-core machine that was over an hour (42 pods a second at load 14); etcd takes them in
    seconds, and what the processes measured read goes through the API server all the same."""
    with contextlib.suppress(AlreadyExists):
        await make_namespace(kube, NAMESPACE)
    made = {p.metadata.name for p in (await kube.list(POD, namespace=NAMESPACE)).items}
    groups = {g.metadata.name for g in (await kube.list(PODGROUP, namespace=NAMESPACE)).items}
    gate = asyncio.Semaphore(IN_FLIGHT)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    async def group(name: str) -> None:
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": GANG, "queue": "default"},
            # No status subresource (as Volcano's CRD): the status is written with the object,
            # as a scheduler that has been running leaves it (gang's Scheduled condition: else
            # a restarted scheduler's first session writes every PodGroup).
            "status": {
                "phase": "Running",
                "running": GANG,
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "reason": SCHEDULED_REASON,
                        "lastTransitionTime": now,
                    }
                ],
            },
        }
        async with gate:
            with contextlib.suppress(AlreadyExists):
                await kube.create(PODGROUP, body, namespace=NAMESPACE)

    started = time.monotonic()
    wanted = [f"g-{g}" for g in range((pods + GANG - 1) // GANG)]
    await asyncio.gather(*(group(g) for g in wanted if g not in groups))
    print(f"  {len(wanted):,} PodGroups in {time.monotonic() - started:.0f}s", flush=True)
    for first in range(0, pods, CHUNK):
        if available_gib() < MIN_AVAILABLE_GIB:
            raise RuntimeError(f"only {available_gib():.1f} GiB available: stopped at {first:,}")
        batch = [
            stored_pod(i, nodes[i % len(nodes)], now)
            for i in range(first, min(pods, first + CHUNK))
            if f"g-{i // GANG}-{i % GANG}" not in made
        ]
        await asyncio.to_thread(put_in_etcd, plane, batch)
        print(
            f"  {min(pods, first + CHUNK):,} pods bound and Running after "
            f"{time.monotonic() - started:.0f}s (available {available_gib():.1f} GiB, "
            f"load {load_average()})",
            flush=True,
        )
    for _ in range(600):  # the API server's watch cache catching up with etcd
        if await count(kube, f"/api/v1/namespaces/{NAMESPACE}/pods") >= pods and (
            await cache_caught_up(kube)
        ):
            return
        await asyncio.sleep(1)
    raise RuntimeError("the API server did not list every pod written to etcd in 600 s")


async def cache_caught_up(kube: KubeClient) -> bool:
    """Whether the API server's watch cache has reached etcd: a list's second page is served
    from the cache at the first page's revision (while the cache lags, as after 150,000 pods
    written to etcd at once, it answers 504 "Too large resource version", and an informer's
    list waits with it)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    first = json.loads(await kube.request("GET", path, params={"limit": "1"}))
    token = first["metadata"].get("continue")
    if not token:
        return True
    try:
        await kube.request("GET", path, params={"limit": "1", "continue": token}, timeout=10)
    except (ApiError, ApiConnectionError, TimeoutError):
        return False
    return True


async def populated(kube: KubeClient, nodes: int, pods: int) -> bool:
    """Whether the cluster has the nodes, and the pods all Running."""
    try:
        have_pods = await count(kube, f"/api/v1/namespaces/{NAMESPACE}/pods")
        running = await count(
            kube,
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {"fieldSelector": "status.phase=Running"},
        )
    except NotFound:
        return False
    have_nodes = await count(kube, "/api/v1/nodes")
    return have_nodes == nodes and have_pods == pods == running


def gib(kib: int) -> str:
    return f"{kib / 2**20:.2f} GiB"


def start(command: str, kubeconfig: Path, tmp: Path) -> CalderaProcess:
    """``caldera <command>`` as the chart runs it (one replica), logging warnings only."""
    from e2e.caldera_process import CalderaProcess

    args = ["--leader-elect=false", f"--kube-qps={QPS}", f"--kube-burst={QPS}"]
    return CalderaProcess(
        command, [*args, "--log-level=warning"], kubeconfig=kubeconfig, log_dir=tmp
    )


@dataclass(frozen=True)
class Mark:
    """A moment of a process's start: wall seconds since it started, its CPU seconds then,
    and its resident set then (KiB)."""

    wall: float
    cpu: float
    rss: int

    def __str__(self) -> str:
        share = self.cpu / self.wall if self.wall else 0.0
        return (
            f"{self.wall:.1f}s after start, {self.cpu:.1f} CPU s ({share:.0%} of a core), "
            f"RSS {gib(self.rss)}"
        )


def ready(proc: CalderaProcess) -> bool:
    return proc.get("/readyz")[0] == 200


def sessions_ran(proc: CalderaProcess) -> bool:
    status, text = proc.get("/metrics")
    return status == 200 and sample(text, f"{CYCLES}_count") >= 1


async def until(proc: CalderaProcess, started: float, reached: Any) -> Mark | None:
    """The moment ``reached(proc)`` first holds, polled every 0.1 s; None when the process
    exits first or ``LIMIT`` passes."""
    while time.monotonic() - started < LIMIT and proc.proc.poll() is None:
        if reached(proc):
            pid = proc.proc.pid
            return Mark(time.monotonic() - started, cpu_seconds(pid), memory_kib(pid, "VmRSS"))
        await asyncio.sleep(POLL)
    return None


async def changes(kube: KubeClient, kinds: list[KindInfo[Any]], seconds: float) -> Counter[str]:
    """The changes the API server made to ``kinds`` in the next ``seconds`` (watches from
    now), by kind."""
    seen: Counter[str] = Counter()

    async def one(kind: KindInfo[Any]) -> None:
        path = f"/apis/{kind.group}/{kind.version}" if kind.group else "/api/v1"
        listed = json.loads(
            await kube.request("GET", f"{path}/{kind.plural}", params={"limit": "1"})
        )
        version = listed["metadata"]["resourceVersion"]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                watch = kube.watch(
                    kind,
                    resource_version=version,
                    allow_watch_bookmarks=False,
                    timeout_seconds=int(seconds) + 30,
                )
                async with watch as events:
                    async for _event in events:
                        seen[kind.kind] += 1

    await asyncio.gather(*(one(kind) for kind in kinds))
    return seen


def verdict(met: bool) -> str:
    return "met" if met else "MISS"


async def measure_scheduler(
    kube: KubeClient, kubeconfig: Path, tmp: Path, settle: float, window: float
) -> bool:
    proc = start("scheduler", kubeconfig, tmp)
    started = time.monotonic()
    try:
        synced = await until(proc, started, ready)
        first = await until(proc, started, sessions_ran) if synced else None
        await asyncio.sleep(settle)
        before = proc.get("/metrics")[1]
        cpu_before = cpu_seconds(proc.proc.pid)
        seen = await changes(kube, [NODE, POD, PODGROUP], window)
        after = proc.get("/metrics")[1]
        cpu = cpu_seconds(proc.proc.pid) - cpu_before
        peak, settled = memory_kib(proc.proc.pid), memory_kib(proc.proc.pid, "VmRSS")
    finally:
        code = proc.stop()
    if synced is None or first is None:
        print(proc.log()[-3000:])
        return False
    cycles = sample(after, f"{CYCLES}_count") - sample(before, f"{CYCLES}_count")
    spent = sample(after, f"{CYCLES}_sum") - sample(before, f"{CYCLES}_sum")
    skipped = sample(after, "caldera_sessions_skipped_total") - sample(
        before, "caldera_sessions_skipped_total"
    )
    mean = spent / cycles / 1000 if cycles else 0.0
    print(f"  scheduler: caches synced {synced}")
    print(
        f"  scheduler: first session ended {first} "
        f"(goal < 30 s: {verdict(first.wall < FIRST_SESSION_GOAL)}; "
        f"its CPU alone {verdict(first.cpu < FIRST_SESSION_GOAL)})"
    )
    print(
        f"  scheduler: idle window {window:.0f}s with {seen['Node']} node, {seen['Pod']} pod "
        f"and {seen['PodGroup']} PodGroup changes: {cycles:.0f} cycles ran, mean {mean:.3f}s "
        f"(goal < 0.3 s: {verdict(mean < IDLE_GOAL)}), {skipped:.0f} skipped as quiet; "
        f"CPU {cpu:.1f}s ({cpu / window:.0%} of a core"
        + (f", {cpu / cycles:.3f} s a cycle ran)" if cycles else ")")
    )
    print(
        f"  scheduler: peak RSS {gib(peak)} (goal < 2 GiB: {verdict(peak / 2**20 < RSS_GOAL_GIB)})"
        f", settled {gib(settled)}; exit {code}"
    )
    return code == 0


async def measure_controllers(kubeconfig: Path, tmp: Path, settle: float) -> bool:
    proc = start("controllers", kubeconfig, tmp)
    started = time.monotonic()
    try:
        synced = await until(proc, started, ready)
        await asyncio.sleep(settle)
        peak, settled = memory_kib(proc.proc.pid), memory_kib(proc.proc.pid, "VmRSS")
    finally:
        code = proc.stop()
    if synced is None:
        print(proc.log()[-3000:])
        return False
    print(f"  controllers: ready {synced}")
    print(f"  controllers: peak RSS {gib(peak)}, settled {gib(settled)}; exit {code}")
    return code == 0


def resident(plane: ControlPlane) -> str:
    parts = [
        f"{name} {gib(memory_kib(plane.procs.pid(name), 'VmRSS'))}"
        for name in ("kube-apiserver", "etcd", "kwok", "kube-controller-manager")
    ]
    return ", ".join(parts)


async def set_up(plane: ControlPlane, node_count: int, pods: int) -> None:
    """Start ``plane`` (what of it is not running) and populate it, unless it is."""
    started = time.monotonic()
    start_with_crds(plane)
    options = ClientOptions(qps=QPS, burst=QPS)
    async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
        if await populated(kube, node_count, pods):
            print(f"a populated cluster found in {plane.dir}: set-up skipped", flush=True)
            return
        nodes = await make_nodes(kube, node_count)
        print(
            f"{node_count:,} kwok nodes (Lease {plane.node_lease_seconds}s) in "
            f"{time.monotonic() - started:.0f}s, load {load_average()}",
            flush=True,
        )
        await fill(plane, kube, nodes, pods)
    print(f"set-up {time.monotonic() - started:.0f}s", flush=True)


async def bench(
    plane: ControlPlane, node_count: int, pods: int, runs: int, smoke: bool, tmp: Path
) -> bool:
    await set_up(plane, node_count, pods)
    options = ClientOptions(qps=QPS, burst=QPS)
    ok = True
    settle, window = (2.0, 5.0) if smoke else (20.0, 30.0)
    async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
        print(
            f"{node_count:,} nodes, {pods:,} pods bound and Running; resident: "
            f"{resident(plane)}; available {available_gib():.1f} GiB; load {load_average()}"
        )
        print(
            f"  the informer bench's {BYTES_PER_POD:,} bytes per cached pod predict "
            f"{pods * BYTES_PER_POD / 2**20:,.0f} MiB for the pods alone"
        )
        for run in range(1, runs + 1):
            up, total = await ready_nodes(kube)
            print(f"run {run}: {up:,} of {total:,} nodes Ready; load {load_average()}", flush=True)
            ok = await measure_scheduler(kube, plane.kubeconfig, tmp, settle, window) and ok
            print(f"  load {load_average()}", flush=True)
            ok = await measure_controllers(plane.kubeconfig, tmp, settle) and ok
            up, total = await ready_nodes(kube)
            print(f"  {up:,} of {total:,} nodes Ready; load {load_average()}", flush=True)
    return ok


def main() -> int:
    from e2e.cluster.control_plane import STAGES, ControlPlane

    configure_logging(component="bench", level="warning", fmt="console")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="100 nodes, 1,000 pods (CI)")
    parser.add_argument("--nodes", type=int, default=15_000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--runs", type=int, default=1, help="times each process is started")
    parser.add_argument("--cluster", type=Path, help="the cluster's directory, kept between runs")
    parser.add_argument("--keep", action="store_true", help="leave --cluster's cluster running")
    args = parser.parse_args()
    if args.keep and args.cluster is None:
        parser.error("--keep needs --cluster")
    nodes, pods = (100, 1000) if args.smoke else (args.nodes, args.pods)
    print(machine())
    print(f"available memory {available_gib():.1f} GiB, load {load_average()}")
    with tempfile.TemporaryDirectory(prefix="caldera-memory-") as tmp:
        directory = args.cluster or Path(tmp) / "cluster"
        directory.mkdir(parents=True, exist_ok=True)
        stages = directory / "kwok-node-stages.yaml"
        stages.write_text(node_stages(STAGES.read_text(), nodes))
        plane = ControlPlane(directory, stages=stages, node_lease_seconds=node_lease_seconds(nodes))
        try:
            ok = asyncio.run(bench(plane, nodes, pods, args.runs, args.smoke, Path(tmp)))
            print(f"load {load_average()}")
        finally:
            if not args.keep:
                plane.down(purge=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
