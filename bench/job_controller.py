"""Job controller throughput: Volcano Jobs to pods, beside a bare client creating the same pods.

    .venv/bin/python bench/job_controller.py            # 200 jobs of 10 pods
    .venv/bin/python bench/job_controller.py --smoke    # CI: 10 jobs of 10 pods
    .venv/bin/python bench/job_controller.py --write-costs 400   # API server CPU per write first

On a local control plane of its own (temporary directory; no nodes: the pods only need to
exist), with ``caldera controllers --controllers=job`` and ``caldera scheduler`` running an
enqueue-only configuration (the job controller creates a job's pods once the scheduler has
moved its PodGroup to Inqueue, as in Volcano):

1. bare: this process creates J x 10 pods (the pods the jobs' template gives) with 100 requests
   in flight, the most the controller has in flight (5 workers x 20 creations per reconcile),
   and the same client rate limit as the controller (``--kube-qps/--kube-burst`` 1000);
2. jobs: this process creates J Volcano Jobs of one task of 10 replicas (100 in flight), and the
   time runs until every pod exists: job -> PodGroup -> Inqueue -> pods.

In both runs the time ends when the bench's watch has seen the last pod, so both pay for the
same watch.

The figure is pods per second of each; the goal is jobs >= 0.8 x bare. For the jobs the bench
also prints when every PodGroup existed and was Inqueue, each job's time per stage (median and
slowest: created -> PodGroup -> Inqueue -> pods), watched rather than polled so the bench adds
no LISTs. For both runs it prints the requests the API server counted (``apiserver_request_total``)
and the CPU seconds of every process (``/proc/<pid>/stat``), then the API server's CPU per pod in
each run: on two shared cores the API server is the bottleneck, and that ratio bounds the goal.
With ``--write-costs N`` it first measures the API server's CPU per write of each kind the jobs
path makes (N of each, before any Caldera process runs). It exits 0 when a goal is missed (and
says MISS).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import msgspec

REPO: Final = Path(__file__).resolve().parent.parent
CRD_DIR: Final = REPO / "charts" / "caldera" / "crds"
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/scheduler.py is no package)
    sys.path.insert(0, str(REPO))

from bench.scheduler import PodWatch, create_all, machine, make_namespace, wait_done  # noqa: E402
from caldera.api.core import Pod  # noqa: E402
from caldera.api.kinds import JOB, NAMESPACE, POD, PODGROUP, KindInfo  # noqa: E402
from caldera.api.volcano import (  # noqa: E402
    JOB_NAME_KEY,
    JobState,
    JobStatus,
    PodGroup,
    PodGroupStatus,
)
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.kube.errors import NotFound  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from controllers.job.pods import build_pod  # noqa: E402
from e2e.apiserver_metrics import request_counts  # noqa: E402
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


def cpu_seconds(pids: dict[str, int | None]) -> dict[str, float]:
    """User plus system CPU seconds each process has used so far (from ``/proc/<pid>/stat``)."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    for name, pid in pids.items():
        if pid is None:
            continue
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[name] = (int(fields[11]) + int(fields[12])) / tick
    return used


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds each process used between two ``cpu_seconds``."""
    return {n: after[n] - before.get(n, 0.0) for n in after}


def cpu_summary(used: dict[str, float], wall: float) -> str:
    """``cpu_used`` in seconds and as a share of one core over ``wall`` seconds."""
    ordered = sorted(used.items(), key=lambda kv: -kv[1])
    total = sum(used.values())
    parts = ", ".join(f"{n} {v:.2f}s ({v / wall:.0%})" for n, v in ordered if v >= 0.01)
    return f"{parts}; total {total:.2f}s ({total / wall:.0%} of one core)"


def request_summary(before: Counter[str], after: Counter[str]) -> str:
    """The requests made between two ``request_counts`` (reads too), most first."""
    made = {
        key: after[key] - before.get(key, 0) for key in after if after[key] > before.get(key, 0)
    }
    ordered = sorted(made.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{key} {n}" for key, n in ordered) or "none"


class Timeline:
    """When each job passed each stage (monotonic seconds): created (its POST answered), PodGroup
    seen, PodGroup seen Inqueue, and each of its pods seen."""

    def __init__(self) -> None:
        self.created: dict[str, float] = {}
        self.podgroup: dict[str, float] = {}
        self.inqueue: dict[str, float] = {}
        self.pods: dict[str, list[float]] = {}

    def pod_seen(self, pod: Pod) -> bool:
        job = pod.metadata.annotations.get(JOB_NAME_KEY, "")
        self.pods.setdefault(job, []).append(time.monotonic())
        return True

    async def watch_podgroups(self, kube: KubeClient, namespace: str) -> None:
        async with kube.watch(PODGROUP, namespace=namespace) as events:
            async for event in events:
                group = event.object
                if not isinstance(group, PodGroup):
                    return
                job = next((r.name for r in group.metadata.owner_references), "")
                now = time.monotonic()
                self.podgroup.setdefault(job, now)
                if group.status.phase not in ("", "Pending"):
                    self.inqueue.setdefault(job, now)

    def stages(self) -> str:
        """Median and slowest job, per stage."""

        def spread(pairs: list[float]) -> str:
            if not pairs:
                return "n/a"
            ordered = sorted(pairs)
            return f"{ordered[len(ordered) // 2]:.2f}/{ordered[-1]:.2f}s"

        jobs = list(self.created)
        to_pg = [self.podgroup[j] - self.created[j] for j in jobs if j in self.podgroup]
        to_inq = [self.inqueue[j] - self.podgroup[j] for j in jobs if j in self.inqueue]
        to_first = [
            min(self.pods[j]) - self.inqueue[j]
            for j in jobs
            if j in self.pods and j in self.inqueue
        ]
        spans = [max(self.pods[j]) - min(self.pods[j]) for j in jobs if j in self.pods]
        return (
            f"per job, median/slowest: created -> PodGroup {spread(to_pg)}, "
            f"PodGroup -> Inqueue {spread(to_inq)}, Inqueue -> first pod {spread(to_first)}, "
            f"first -> last pod {spread(spans)}"
        )


async def create_jobs(kube: KubeClient, names: list[str], timeline: Timeline) -> None:
    gate = asyncio.Semaphore(INFLIGHT)

    async def one(name: str) -> None:
        async with gate:
            await kube.create(JOB, _job(name), namespace="jobs")
            timeline.created[name] = time.monotonic()

    await asyncio.gather(*(one(n) for n in names))


async def write_costs(kube: KubeClient, server_pid: int | None, count: int) -> str:
    """The API server's CPU per write, by kind of write, with no Caldera process running (so
    only kube-controller-manager watches): ``count`` of each, 100 in flight, in a namespace of
    their own. The writes of the jobs path besides the pods are custom resources."""
    await make_namespace(kube, "costs")
    gate = asyncio.Semaphore(INFLIGHT)
    server = {"kube-apiserver": server_pid}

    async def measured(
        what: str, calls: list[Callable[[], Awaitable[Any]]]
    ) -> tuple[str, list[Any]]:
        async def one(call: Callable[[], Awaitable[Any]]) -> Any:
            async with gate:
                return await call()

        before = cpu_seconds(server)
        results = await asyncio.gather(*(one(c) for c in calls))
        used = cpu_used(before, cpu_seconds(server)).get("kube-apiserver", 0.0)
        return f"{what} {used / count * 1000:.2f} ms", results

    def creates(
        kind: KindInfo[Any], bodies: list[dict[str, Any]]
    ) -> list[Callable[[], Awaitable[Any]]]:
        return [functools.partial(kube.create, kind, b, namespace="costs") for b in bodies]

    # A fresh API server is slower on its first writes: warm it up with writes not counted.
    await measured("warm-up", creates(POD, [_pod(f"w-{i}") for i in range(count)]))
    pods, _ = await measured("POST pod", creates(POD, [_pod(f"c-{i}") for i in range(count)]))
    jobs, made = await measured("POST Job", creates(JOB, [_job(f"c-{i}") for i in range(count)]))
    # The same pods as the job controller builds them: Volcano's labels, annotations and the
    # owner reference to the Job.
    built = [build_pod(j, j.spec.tasks[0], 0).pod for j in made]
    job_pods, _ = await measured("POST pod of a Job", creates(POD, built))
    pending = JobStatus(state=JobState(phase="Pending"), min_available=REPLICAS)
    status, _ = await measured(
        "PUT Job status",
        [
            functools.partial(kube.update_status, JOB, msgspec.structs.replace(j, status=pending))
            for j in made
        ],
    )
    groups = [
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"c-{i}"},
            "spec": {"minMember": REPLICAS, "queue": "default"},
        }
        for i in range(count)
    ]
    pg_posts, made_groups = await measured("POST PodGroup", creates(PODGROUP, groups))
    inqueue = PodGroupStatus(phase="Inqueue")
    pg_puts, _ = await measured(
        "PUT PodGroup",
        [
            functools.partial(kube.replace, PODGROUP, msgspec.structs.replace(g, status=inqueue))
            for g in made_groups
        ],
    )
    await kube.delete(NAMESPACE, "costs")
    for _ in range(600):  # gone before the Caldera processes start, or they act on its Jobs
        try:
            await kube.get(NAMESPACE, "costs")
        except NotFound:
            break
        await asyncio.sleep(0.2)
    return ", ".join((pods, job_pods, jobs, status, pg_posts, pg_puts))


async def _ready(proc: CalderaProcess, what: str) -> None:
    for _ in range(300):
        if proc.get("/readyz")[0] == 200:
            return
        if proc.proc.poll() is not None:
            break
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{what} not ready:\n{proc.log()[-3000:]}")


async def run(smoke: bool, workers: int | None, write_cost_count: int) -> bool:
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
            if write_cost_count:
                options = ClientOptions(qps=QPS, burst=QPS)
                async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                    costs = await write_costs(
                        kube, plane.running().get("kube-apiserver"), write_cost_count
                    )
                print(f"  API server CPU per write, no Caldera process running: {costs}")
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
                    [
                        *common,
                        *qps,
                        "--controllers=job",
                        *([f"--workers={workers}"] if workers else []),
                    ],
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
                pids: dict[str, int | None] = {
                    **plane.running(),
                    "scheduler": procs[0].proc.pid,
                    "controllers": procs[1].proc.pid,
                    "bench": os.getpid(),
                }
                counted = await request_counts(kube)
                cpu = cpu_seconds(pids)
                async with PodWatch(kube, "bare", pods, wanted=_exists) as watch:
                    began = time.monotonic()
                    await create_all(kube, POD, bodies, "bare", inflight=INFLIGHT)
                    await wait_done(watch, 120 if smoke else 600, "bare loop")
                wall = watch.last - began
                bare = pods / wall
                bare_used = cpu_used(cpu, cpu_seconds(pids))
                print(f"  bare client create loop ({INFLIGHT} in flight): {bare:,.0f} pods/s")
                print(f"    requests: {request_summary(counted, await request_counts(kube))}")
                print(f"    CPU seconds: {cpu_summary(bare_used, wall)}")

                await make_namespace(kube, "jobs")
                counted = await request_counts(kube)
                cpu = cpu_seconds(pids)
                timeline = Timeline()
                groups = asyncio.create_task(timeline.watch_podgroups(kube, "jobs"))
                async with PodWatch(kube, "jobs", pods, wanted=timeline.pod_seen) as watch:
                    began = time.monotonic()
                    await create_jobs(kube, [f"job-{j}" for j in range(jobs)], timeline)
                    created = time.monotonic() - began
                    await wait_done(watch, 120 if smoke else 600, "job controller")
                    elapsed = watch.last - began
                rate = pods / elapsed
                groups.cancel()
                exist = max(timeline.podgroup.values(), default=began) - began
                inqueue = max(timeline.inqueue.values(), default=began) - began
                jobs_wall = time.monotonic() - began
                jobs_used = cpu_used(cpu, cpu_seconds(pids))
                await asyncio.sleep(2)  # the controller's last status writes
                requests = request_summary(counted, await request_counts(kube))
                print(
                    f"  job controller: all {pods} pods exist {elapsed:.1f}s after the first "
                    f"job create: {rate:,.0f} pods/s (jobs created by {created:.1f}s, "
                    f"every PodGroup created by {exist:.1f}s and Inqueue by {inqueue:.1f}s)"
                )
                print(f"    {timeline.stages()}")
                print(f"    requests: {requests}")
                print(f"    CPU seconds: {cpu_summary(jobs_used, jobs_wall)}")
                server = "kube-apiserver"
                bare_ms = bare_used.get(server, 0.0) / pods * 1000
                jobs_ms = jobs_used.get(server, 0.0) / pods * 1000
                if bare_ms and jobs_ms:
                    print(
                        f"  API server CPU per pod: bare {bare_ms:.2f} ms, jobs {jobs_ms:.2f} ms; "
                        f"with the API server the bottleneck, jobs can reach at most "
                        f"{bare_ms / jobs_ms:.2f} of the bare rate"
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
    parser.add_argument("--workers", type=int, help="the job controller's --workers")
    parser.add_argument(
        "--write-costs",
        type=int,
        default=0,
        metavar="N",
        help="first measure the API server's CPU per write of each kind (N of each)",
    )
    args = parser.parse_args()
    configure_logging(component="bench", level="warning", fmt="console")
    print(machine())
    return 0 if asyncio.run(run(args.smoke, args.workers, args.write_costs)) else 1


if __name__ == "__main__":
    sys.exit(main())
