"""Job controller throughput: Volcano Jobs to pods, beside a bare client creating the same pods.

    .venv/bin/python bench/job_controller.py            # 200 jobs of 10 pods
    .venv/bin/python bench/job_controller.py --smoke    # CI: 10 jobs of 10 pods

On a local control plane of its own (temporary directory; no nodes: the pods only need to
exist), with ``caldera controllers --controllers=job`` and ``caldera scheduler`` running an
enqueue-only configuration (the job controller creates a job's pods once the scheduler has
moved its PodGroup to Inqueue, as in Volcano):

1. bare: this process creates J x 10 pods (the pods the jobs' template gives) with 100 requests
   in flight, the most the controller has in flight (5 workers x 20 creations per reconcile),
   and the same client rate limit as the controller (``--kube-qps/--kube-burst`` 1000);
2. jobs: this process creates J Volcano Jobs of one task of 10 replicas (100 in flight), and the
   time runs until every pod exists (seen on a watch): job -> PodGroup -> Inqueue -> pods.

The figure is pods per second of each; the goal is jobs >= 0.8 x bare. The bench also prints when
the last job was created and when every PodGroup was Inqueue (polled every 0.25 s), so the time
the scheduler's enqueue takes shows. It exits 0 when a goal is missed (and says MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
CRD_DIR: Final = REPO / "charts" / "caldera" / "crds"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.scheduler import PodWatch, create_all, machine, make_namespace, wait_done  # noqa: E402
from caldera.api.core import Pod  # noqa: E402
from caldera.api.kinds import JOB, POD, PODGROUP  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from e2e.caldera_process import CalderaProcess  # noqa: E402
from e2e.cluster.control_plane import ControlPlane  # noqa: E402

GOAL = 0.8
QPS = 1000
INFLIGHT = 100
REPLICAS = 10
ENQUEUE_ONLY = 'actions: "enqueue"\ntiers: []\n'


def _template() -> dict[str, Any]:
    return {
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
            ],
        }
    }


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": REPLICAS,
            "schedulerName": "volcano",
            "queue": "default",
            "maxRetry": 3,
            "tasks": [{"name": "worker", "replicas": REPLICAS, "template": _template()}],
        },
    }


def _pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, **_template()}


def _exists(pod: Pod) -> bool:
    return True


async def _all_inqueue(kube: KubeClient, jobs: int) -> tuple[float, float]:
    """When every job's PodGroup exists, and when every one is Inqueue (or further), polled
    every 0.25 s."""
    exist = 0.0
    while True:
        groups = (await kube.list(PODGROUP, namespace="jobs")).items
        if not exist and len(groups) >= jobs:
            exist = time.monotonic()
        if sum(1 for g in groups if g.status.phase not in ("", "Pending")) >= jobs:
            return exist, time.monotonic()
        await asyncio.sleep(0.25)


async def _ready(proc: CalderaProcess, what: str) -> None:
    for _ in range(300):
        if proc.get("/readyz")[0] == 200:
            return
        if proc.proc.poll() is not None:
            break
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{what} not ready:\n{proc.log()[-3000:]}")


async def run(smoke: bool) -> bool:
    jobs = 10 if smoke else 200
    pods = jobs * REPLICAS
    with tempfile.TemporaryDirectory(prefix="caldera-bench-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster")
        procs: list[CalderaProcess] = []
        try:
            started = time.monotonic()
            plane.up()
            plane.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
            plane.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR)
            )
            conf = Path(tmp) / "enqueue.conf"
            conf.write_text(ENQUEUE_ONLY)
            common = ["--leader-elect=false", "--log-level=warning"]
            qps = [f"--kube-qps={QPS}", f"--kube-burst={QPS}"]
            procs.append(
                CalderaProcess(
                    "scheduler",
                    [*common, f"--scheduler-conf={conf}"],
                    kubeconfig=plane.kubeconfig,
                    log_dir=Path(tmp),
                )
            )
            procs.append(
                CalderaProcess(
                    "controllers",
                    [*common, *qps, "--controllers=job"],
                    kubeconfig=plane.kubeconfig,
                    log_dir=Path(tmp),
                )
            )
            for proc, what in zip(procs, ("scheduler", "job controller"), strict=True):
                await _ready(proc, what)
            print(
                f"{jobs} Volcano jobs of {REPLICAS} pods ({pods} pods) "
                f"(control plane up in {time.monotonic() - started:.0f}s)"
            )
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                await make_namespace(kube, "bare")
                bodies = [_pod(f"p-{i}") for i in range(pods)]
                began = time.monotonic()
                await create_all(kube, POD, bodies, "bare", inflight=INFLIGHT)
                bare = pods / (time.monotonic() - began)
                print(f"  bare client create loop ({INFLIGHT} in flight): {bare:,.0f} pods/s")

                await make_namespace(kube, "jobs")
                async with PodWatch(kube, "jobs", pods, wanted=_exists) as watch:
                    began = time.monotonic()
                    enqueued = asyncio.create_task(_all_inqueue(kube, jobs))
                    await create_all(
                        kube, JOB, [_job(f"job-{j}") for j in range(jobs)], "jobs", INFLIGHT
                    )
                    created = time.monotonic() - began
                    await wait_done(watch, 120 if smoke else 600, "job controller")
                    elapsed = watch.last - began
                    exist, inqueue = ((t - began) for t in await enqueued)
                rate = pods / elapsed
                print(
                    f"  job controller: all {pods} pods exist {elapsed:.1f}s after the first "
                    f"job create: {rate:,.0f} pods/s (jobs created by {created:.1f}s, "
                    f"every PodGroup created by {exist:.1f}s and Inqueue by {inqueue:.1f}s)"
                )
        finally:
            codes = [proc.stop() for proc in procs]
            plane.down(purge=True)
    ratio = rate / bare
    verdict = "met" if ratio >= GOAL else "MISS"
    print(f"  job controller / bare = {ratio:.2f} (goal >= {GOAL}: {verdict})")
    return all(code == 0 for code in codes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small and quick (CI)")
    args = parser.parse_args()
    configure_logging(component="bench", level="warning", fmt="console")
    print(machine())
    return 0 if asyncio.run(run(args.smoke)) else 1


if __name__ == "__main__":
    sys.exit(main())
