"""Memory and start-up of ``caldera scheduler`` and ``caldera controllers`` on a large idle
cluster: 15,000 kwok nodes and 150,000 running pods (issue 47).

    .venv/bin/python bench/startup_memory.py                             # 15,000 / 150,000
    .venv/bin/python bench/startup_memory.py --nodes 1500 --pods 15000   # a tenth
    .venv/bin/python bench/startup_memory.py --smoke                     # CI: 100 / 1,000

A local control plane of its own, N kwok nodes of 32 cpu, and M pods created already bound
(``spec.nodeName``, round-robin, so nothing needs scheduling), ``schedulerName: volcano``, 10 to
a PodGroup of minMember 10 whose status is set to Running (a cluster that has been running, as
a restarted scheduler finds it). kwok marks the pods Running; the bench waits for that (up to a
limit, and says how many were Running) before it starts the processes. Then, one at a time:

- ``caldera scheduler``: the time from the process's start to the end of its first session
  (``caldera_e2e_scheduling_latency_milliseconds_count`` turning 1, polled every 0.1 s); then,
  after 20 s to settle, an idle window of 30 s (2 and 5 s in smoke mode): the mean cycle of
  the sessions that ran (the histogram's sum over its count; cycles the quiet rule skipped are
  counted apart) and the process's CPU share; its peak resident set (``VmHWM``) at the end;
- ``caldera controllers``: the time to ``/readyz`` 200 (informers synced) and its peak resident
  set after 20 s more.

The goals: scheduler peak RSS < 2 GiB, first session < 30 s after start, idle cycle < 0.3 s.
Beside them the bench prints what the informer bench's per-object figure (1,828 bytes per
cached pod, ``bench/informer.py``) predicts for the pods alone, the API server's and etcd's
resident sets, and the load average. Exits 0 when a goal is missed (it says MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/*.py are no package)
    sys.path.insert(0, str(REPO))

from bench._procfs import available_gib, cpu_seconds, load_average, memory_kib  # noqa: E402
from bench.scheduler import (  # noqa: E402
    QPS,
    create_all,
    create_ready_nodes,
    machine,
    make_namespace,
    sample,
    start_with_crds,
)
from caldera.api.kinds import POD, PODGROUP  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402

if TYPE_CHECKING:
    from e2e.caldera_process import CalderaProcess

NAMESPACE: Final = "idle"
GANG: Final = 10
BYTES_PER_POD: Final = 1828  # bench/informer.py, 50,000 pods (docs/benchmarks.md)
RSS_GOAL_GIB: Final = 2.0
FIRST_SESSION_GOAL: Final = 30.0
IDLE_GOAL: Final = 0.3
MIN_AVAILABLE_GIB: Final = 4.0  # stop creating before the shared machine runs short
CYCLES: Final = "caldera_e2e_scheduling_latency_milliseconds"


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


async def all_running(kube: KubeClient) -> bool:
    """No pod of the namespace is in another phase than Running (one item asked for)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    query = {"fieldSelector": "status.phase!=Running", "limit": "1"}
    return not json.loads(await kube.request("GET", path, params=query)).get("items")


async def not_running(kube: KubeClient) -> int:
    listed = await kube.list(POD, namespace=NAMESPACE, field_selector="status.phase!=Running")
    return len(listed.items)


async def fill(kube: KubeClient, nodes: list[str], pods: int) -> None:
    """The PodGroups (status Running) and the pods, bound, in chunks while memory lasts."""
    await make_namespace(kube, NAMESPACE)
    groups = [f"g-{g}" for g in range((pods + GANG - 1) // GANG)]
    bodies = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": g},
            "spec": {"minMember": GANG, "queue": "default"},
            # No status subresource (as Volcano's CRD): the status is written with the object.
            "status": {"phase": "Running", "running": GANG},
        }
        for g in groups
    ]
    await create_all(kube, PODGROUP, bodies, NAMESPACE)
    started = time.monotonic()
    chunk = 10_000
    for first in range(0, pods, chunk):
        if available_gib() < MIN_AVAILABLE_GIB:
            raise RuntimeError(f"only {available_gib():.1f} GiB available: stopped at {first:,}")
        batch = [
            running_pod(i, nodes[i % len(nodes)]) for i in range(first, min(pods, first + chunk))
        ]
        await create_all(kube, POD, batch, NAMESPACE)
        done = first + len(batch)
        print(
            f"  {done:,} pods created in {time.monotonic() - started:.0f}s "
            f"(available {available_gib():.1f} GiB, load {load_average()})",
            flush=True,
        )


async def wait_running(kube: KubeClient, pods: int, limit: float) -> int:
    """Wait up to ``limit`` seconds for kwok to mark every pod Running; how many are."""
    deadline = time.monotonic() + limit
    while not await all_running(kube):
        if time.monotonic() > deadline:
            return pods - await not_running(kube)
        await asyncio.sleep(10)
    return pods


def gib(kib: int) -> str:
    return f"{kib / 2**20:.2f} GiB"


def start(command: str, kubeconfig: Path, tmp: Path) -> CalderaProcess:
    """``caldera <command>`` as the chart runs it (one replica), logging warnings only."""
    from e2e.caldera_process import CalderaProcess

    args = ["--leader-elect=false", f"--kube-qps={QPS}", f"--kube-burst={QPS}"]
    return CalderaProcess(
        command, [*args, "--log-level=warning"], kubeconfig=kubeconfig, log_dir=tmp
    )


async def seconds_until(
    proc: CalderaProcess, reached: Callable[[CalderaProcess], bool]
) -> float | None:
    """Seconds from now until ``reached(proc)``, polled every 0.1 s; None when the process
    exits first or 10 minutes pass."""
    started = time.monotonic()
    while time.monotonic() - started < 600 and proc.proc.poll() is None:
        if reached(proc):
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    return None


def sessions_ran(proc: CalderaProcess) -> bool:
    status, text = proc.get("/metrics")
    return status == 200 and sample(text, f"{CYCLES}_count") >= 1


async def measure_scheduler(kubeconfig: Path, tmp: Path, settle: float, window: float) -> bool:
    proc = start("scheduler", kubeconfig, tmp)
    try:
        first = await seconds_until(proc, sessions_ran)
        await asyncio.sleep(settle)
        before = proc.get("/metrics")[1]
        cpu_before = cpu_seconds(proc.proc.pid)
        await asyncio.sleep(window)
        after = proc.get("/metrics")[1]
        cpu = cpu_seconds(proc.proc.pid) - cpu_before
        peak = memory_kib(proc.proc.pid)
    finally:
        code = proc.stop()
    if first is None:
        print(proc.log()[-3000:])
        return False
    cycles = sample(after, f"{CYCLES}_count") - sample(before, f"{CYCLES}_count")
    spent = sample(after, f"{CYCLES}_sum") - sample(before, f"{CYCLES}_sum")
    skipped = sample(after, "caldera_sessions_skipped_total") - sample(
        before, "caldera_sessions_skipped_total"
    )
    mean = spent / cycles / 1000 if cycles else 0.0
    verdict = {
        "peak": "met" if peak / 2**20 < RSS_GOAL_GIB else "MISS",
        "first": "met" if first < FIRST_SESSION_GOAL else "MISS",
        "idle": "met" if mean < IDLE_GOAL else "MISS",
    }
    print(
        f"  scheduler: first session ended {first:.1f}s after start "
        f"(goal < 30 s: {verdict['first']})"
    )
    print(
        f"  scheduler: idle window {window:.0f}s: {cycles:.0f} cycles ran, mean "
        f"{mean:.3f}s (goal < 0.3 s: {verdict['idle']}), {skipped:.0f} skipped as quiet; "
        f"CPU {cpu:.1f}s ({cpu / window:.0%} of a core)"
    )
    print(f"  scheduler: peak RSS {gib(peak)} (goal < 2 GiB: {verdict['peak']}); exit {code}")
    return code == 0


async def measure_controllers(kubeconfig: Path, tmp: Path, settle: float) -> bool:
    proc = start("controllers", kubeconfig, tmp)
    try:
        ready = await seconds_until(proc, lambda p: p.get("/readyz")[0] == 200)
        await asyncio.sleep(settle)
        peak = memory_kib(proc.proc.pid)
    finally:
        code = proc.stop()
    if ready is None:
        print(proc.log()[-3000:])
        return False
    print(f"  controllers: ready {ready:.1f}s after start; peak RSS {gib(peak)}; exit {code}")
    return code == 0


async def bench(node_count: int, pods: int, running_limit: float, smoke: bool) -> bool:
    from e2e.cluster.control_plane import ControlPlane, NodeSpec

    print(f"available memory {available_gib():.1f} GiB, load {load_average()}")
    with tempfile.TemporaryDirectory(prefix="caldera-memory-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        try:
            started = time.monotonic()
            start_with_crds(plane)
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                spec = NodeSpec(cpu="32", memory="256Gi", pods="110")
                nodes = await create_ready_nodes(kube, [f"n-{i}" for i in range(node_count)], spec)
                print(f"{node_count:,} kwok nodes in {time.monotonic() - started:.0f}s", flush=True)
                await fill(kube, nodes, pods)
                running = await wait_running(kube, pods, running_limit)
            server = memory_kib(plane.procs.pid("kube-apiserver"), "VmRSS")
            etcd = memory_kib(plane.procs.pid("etcd"), "VmRSS")
            print(
                f"{pods:,} pods bound, {running:,} marked Running by kwok, set-up "
                f"{time.monotonic() - started:.0f}s; API server {gib(server)}, "
                f"etcd {gib(etcd)} resident; "
                f"available {available_gib():.1f} GiB; load {load_average()}",
                flush=True,
            )
            print(
                f"  the informer bench's {BYTES_PER_POD:,} bytes per cached pod predict "
                f"{pods * BYTES_PER_POD / 2**20:,.0f} MiB for the pods alone"
            )
            settle, window = (2.0, 5.0) if smoke else (20.0, 30.0)
            ok = await measure_scheduler(plane.kubeconfig, Path(tmp), settle, window)
            ok = await measure_controllers(plane.kubeconfig, Path(tmp), settle) and ok
            print(f"load {load_average()}")
        finally:
            plane.down(purge=True)
    return ok


def main() -> int:
    configure_logging(component="bench", level="warning", fmt="console")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="100 nodes, 1,000 pods (CI)")
    parser.add_argument("--nodes", type=int, default=15_000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--running-limit", type=float, default=300, help="seconds to wait for kwok")
    args = parser.parse_args()
    nodes, pods = (100, 1000) if args.smoke else (args.nodes, args.pods)
    print(machine())
    ok = asyncio.run(bench(nodes, pods, 60 if args.smoke else args.running_limit, args.smoke))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
