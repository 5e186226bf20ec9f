"""kube-scheduler's scheduler_perf cases at 5,000 kwok nodes: kube-scheduler and Caldera side by
side on one API server (issue 47).

    .venv/bin/python bench/scheduler_perf.py                  # every case, 5,000 nodes
    .venv/bin/python bench/scheduler_perf.py --case basic-10k # one case (repeatable)
    .venv/bin/python bench/scheduler_perf.py --nodes 500      # the cases scaled to 500 nodes
    .venv/bin/python bench/scheduler_perf.py --smoke          # CI: 20 nodes, small cases

One local control plane (etcd, kube-apiserver, kube-controller-manager, kwok) and N kwok nodes
of 4 cpu / 32Gi / 110 pods labelled ``topology.kubernetes.io/zone: zone1``, scheduler_perf's
``node-default.yaml``. The cases, in the shape of scheduler_perf's (``performance-config.yaml``
of ``test/integration/scheduler_perf`` in kubernetes/kubernetes; sizes at 5,000 nodes):

- ``basic-10k``, ``basic-50k`` (SchedulingBasic): 10,000 or 50,000 plain pods of 100m / 500Mi;
- ``affinity`` (SchedulingPodAffinity 5000Nodes_5000Pods): 5,000 pods placed first, then 5,000
  measured, all with required pod affinity to ``color: blue`` over the zone key;
- ``anti-affinity`` (SchedulingPodAntiAffinity 5000Nodes_2000Pods): 1,000 placed first, then
  2,000 measured, all with required pod anti-affinity to ``color: green`` over the hostname;
- ``preemption`` (PreemptionBasic 1000Nodes): 1,000 of the nodes (labelled) filled with 4
  low-priority pods of 900m each (3.6 of their 4 cpu), then 1,000 high-priority pods of 3 cpu
  selecting those nodes, each of which must preempt 3 of them (scheduler_perf's 5,000-node
  workload, 20,000 and 5,000 pods, is commented out upstream as always failing);
- ``spread`` (TopologySpreading 5000Nodes_5000Pods): the nodes labelled round-robin with three
  zones (``moon-1`` to ``moon-3``, under ``perf.caldera.io/moon``: the zone label stays
  ``zone1`` for the affinity case), 5,000 plain pods placed first, then 5,000 measured, all
  ``color: blue`` with a DoNotSchedule spread over the zones (maxSkew 5); a side's skew
  beyond 5 at the end counts as invalid placements.

``--max-pods N`` caps every count (for a loaded machine: say so beside the figures);
``--fresh`` runs each side on a control plane and nodes of its own, so that no side starts on
the deleted pods, history and grown heap of the sides before it (the default runs them one after
the other on one cluster, Caldera last); ``--side NAME`` (repeatable) runs only those sides, e.g.
Caldera's alone under a profiler;
``--apiserver-profile SECONDS`` has the API server serve /debug/pprof and takes a CPU profile of
it over each side's first SECONDS of window, written beside the run (``go tool pprof -top``
reads it; the profiler's own cost is in that side's figures).

Each case runs its sides one after the other on the same nodes, each in namespaces of its own,
with the previous side's pods deleted first: the ceiling (plain pods only), kube-scheduler,
Caldera. A side starts its scheduler, waits for a probe pod to be bound (start-up and cache
sync are not timed), then a creator process of its own creates the measured pods as fast as it
can (64 in flight), as scheduler_perf creates them while its scheduler runs. The ceiling's
creator binds each pod itself right after creating it (to a precomputed node, round-robin): the
most binds per second this API server takes in this shape from a scheduler that costs nothing.

The pods scheduler_perf has the scheduler place before measuring (init pods) are created here
already bound (``spec.nodeName``), round-robin, since they are not measured. Caldera's measured
pods each have their PodGroup of minMember 1 (what Volcano's PodGroup controller makes for a
plain pod), created before the side and not timed; its low-priority pods one PodGroup per node.

Reported per side, from this process's watch of the measured namespace: pods bound per second
of the window (N / (last bind - creation start), the figure the verdicts compare, as
scheduler_perf averages its pods scheduled per second while it creates them), binds per second
from the first bind to the last ((N - 1) / (last - first)), the scheduling latency p50/p99
(pod first seen on the watch to seen bound: one clock, the watch's delay on both ends), and over
the window the CPU seconds of the API server, etcd, kwok with kube-controller-manager,
the scheduler, and the bench (creator and watch) from /proc, as shares of the machine's
2 x window core-seconds; the rest is idle or other work on the machine; and the API server's
writes per pod bound by verb and resource (``apiserver_request_total``, every client's: the
creator's ``POST pods`` and kwok's ``PATCH pods/status`` are on every side, so the difference
between two sides is their schedulers'). The load average is printed before and after. Exits 0
when a goal is missed (it says MISS), 1 when something broke.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(REPO)]:  # first, before bench/ itself (bench/*.py are no package)
    sys.path.insert(0, str(REPO))

from bench._procfs import cpu_seconds, load_average  # noqa: E402
from bench.scheduler import (  # noqa: E402
    FULL_CONF,
    QPS,
    PodWatch,
    create_all,
    create_ready_nodes,
    machine,
    make_namespace,
    requests_by_verb,
    start_with_crds,
)
from caldera.api.core import Pod  # noqa: E402
from caldera.api.kinds import NODE, POD, PODGROUP, PRIORITY_CLASS  # noqa: E402
from caldera.kube.client import ClientOptions, KubeClient  # noqa: E402
from caldera.kube.errors import ApiConnectionError, ServerError  # noqa: E402
from caldera.obs.logging import configure_logging  # noqa: E402
from e2e.apiserver_metrics import request_counts  # noqa: E402

if TYPE_CHECKING:
    from e2e.cluster.control_plane import ControlPlane

ZONE_KEY: Final = "topology.kubernetes.io/zone"
HOST_KEY: Final = "kubernetes.io/hostname"
GROUP_KEY: Final = "scheduling.k8s.io/group-name"
INFLIGHT: Final = 64
LOW_PER_NODE: Final = 4
FILLED_KEY: Final = "perf.caldera.io/filled"  # the nodes the preemption case fills
MOON_KEY: Final = "perf.caldera.io/moon"  # the spread case's zones
MOONS: Final = ("moon-1", "moon-2", "moon-3")
SPREAD_SKEW: Final = 5
SCHEDULER_OF: Final = {"ceiling": "nobody", "kube": "default-scheduler", "caldera": "volcano"}
WRITE_VERBS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})


@dataclass(frozen=True)
class Case:
    """One scheduler_perf workload: ``init`` pods placed beforehand, ``measure`` timed."""

    name: str
    kind: str  # the pods' shape: plain, affinity, anti-affinity, preemption, spread
    init: int
    measure: int
    ceiling: bool  # measured against the bare create-and-bind loop too


def cases(nodes: int, cap: int | None = None) -> dict[str, Case]:
    """The cases at ``nodes`` nodes, scheduler_perf's sizes scaled from 5,000, each count at
    most ``cap``."""

    def at(n: int) -> int:
        return min(max(1, n * nodes // 5000), cap or n)

    return {
        c.name: c
        for c in (
            Case("basic-10k", "plain", 0, at(10_000), True),
            Case("basic-50k", "plain", 0, at(50_000), True),
            Case("affinity", "affinity", at(5000), at(5000), False),
            Case("anti-affinity", "anti-affinity", at(1000), at(2000), False),
            Case("preemption", "preemption", at(1000) * LOW_PER_NODE, at(1000), False),
            Case("spread", "spread", at(5000), at(5000), False),
        )
    }


# ---- the pods -----------------------------------------------------------------------------------


def pod_body(
    name: str, side: str, kind: str, namespaces: tuple[str, str], *, init: bool = False
) -> dict[str, Any]:
    """A pod of scheduler_perf's templates for ``side``'s scheduler; ``init`` marks the pods
    placed beforehand (for preemption, the low-priority ones)."""
    cpu = "100m"
    spec: dict[str, Any] = {"schedulerName": SCHEDULER_OF[side], "terminationGracePeriodSeconds": 0}
    labels: dict[str, str] = {}
    if kind in ("affinity", "anti-affinity"):
        color, key = ("blue", ZONE_KEY) if kind == "affinity" else ("green", HOST_KEY)
        labels["color"] = color
        term = {
            "labelSelector": {"matchLabels": {"color": color}},
            "topologyKey": key,
            "namespaces": list(namespaces),
        }
        field = "podAffinity" if kind == "affinity" else "podAntiAffinity"
        spec["affinity"] = {field: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == "spread" and not init:  # the pods placed first are plain ones
        labels["color"] = "blue"
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": SPREAD_SKEW,
                "topologyKey": MOON_KEY,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"color": "blue"}},
            }
        ]
    elif kind == "preemption":
        cpu = "900m" if init else "3"
        spec["priorityClassName"] = "perf-low" if init else "perf-high"
        spec["nodeSelector"] = {FILLED_KEY: "true"}
    requests = {"cpu": cpu, "memory": "500Mi"}
    spec["containers"] = [
        {
            "name": "pause",
            "image": "registry.k8s.io/pause:3.10",
            "ports": [{"containerPort": 80}],
            "resources": {"requests": requests, "limits": requests},
        }
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def grouped(body: dict[str, Any], group: str) -> dict[str, Any]:
    """``body`` as a member of PodGroup ``group``."""
    body["metadata"]["annotations"] = {GROUP_KEY: group}
    return body


def podgroup(name: str, priority_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1, "queue": "default"}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


# ---- the creator process (``--create-loop``) ----------------------------------------------------


async def create_loop(kubeconfig: str, namespace: str) -> None:
    """Say ``ready`` once started, then create the bodies read from stdin in ``namespace``,
    INFLIGHT at a time; a body with ``bindTo`` is bound to that node as soon as it exists (the
    ceiling). Prints the CPU seconds this process spent after saying ready."""
    gate = asyncio.Semaphore(INFLIGHT)
    options = ClientOptions(qps=QPS, burst=QPS)
    async with KubeClient.from_kubeconfig(kubeconfig, options=options) as kube:
        print("ready", flush=True)
        bodies: list[dict[str, Any]] = json.loads(await asyncio.to_thread(sys.stdin.read))
        started = time.process_time()

        async def one(body: dict[str, Any]) -> None:
            node = body.pop("bindTo", None)
            async with gate:
                await kube.create(POD, body, namespace=namespace)
                if node:
                    await kube.bind(namespace, body["metadata"]["name"], node)

        await asyncio.gather(*(one(b) for b in bodies))
        print(json.dumps({"cpu": time.process_time() - started}))


# ---- one side -----------------------------------------------------------------------------------


@dataclass
class SideResult:
    side: str
    count: int
    bound: int
    rate: float
    p50: float
    p99: float
    window: float
    cpu: dict[str, float]
    invalid: int  # measured pods placed against their required (anti-)affinity
    requests: dict[str, float]  # the scheduler's API requests in the window, by verb (Caldera)
    # The API server's requests in the window by "VERB resource[/subresource]", every client's
    # (apiserver_request_total): the same for both schedulers' sides, so they compare.
    server: dict[str, float] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        """Pods bound per second of the window (creation start to last bind): the figure the
        verdicts use, as scheduler_perf averages pods scheduled per second while it creates."""
        return self.bound / self.window if self.window > 0 else math.nan

    def share(self, part: str) -> float:
        return self.cpu.get(part, 0.0) / (2 * self.window) if self.window > 0 else math.nan


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank), NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def writes_per_pod(server: dict[str, float], bound: int) -> dict[str, float]:
    """The API server's writes in a window, by "VERB resource", per pod bound, most first."""
    writes = {k: n / max(bound, 1) for k, n in server.items() if k.split()[0] in WRITE_VERBS}
    return dict(sorted(writes.items(), key=lambda kv: (-kv[1], kv[0])))


def counts_between(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """The counters' increase from ``before`` to ``after`` (those that moved)."""
    moved = {k: float(n - before.get(k, 0)) for k, n in after.items()}
    return {k: n for k, n in moved.items() if n > 0}


def anti_affinity_violations(pods: list[Pod]) -> int:
    """Pods labelled ``color: green`` beyond the first on each node (hostname anti-affinity)."""
    per_node: dict[str, int] = {}
    for pod in pods:
        if pod.spec.node_name and (pod.metadata.labels or {}).get("color") == "green":
            per_node[pod.spec.node_name] = per_node.get(pod.spec.node_name, 0) + 1
    return sum(n - 1 for n in per_node.values() if n > 1)


def spread_violations(pods: list[Pod], moon_of: dict[str, str]) -> int:
    """How far the ``color: blue`` pods' count per zone (``moon_of``: node -> zone) spreads
    beyond the spread case's maxSkew (max - min - 5, or 0): placed one by one within the
    skew, the zones never drift further apart."""
    per_zone = dict.fromkeys(moon_of.values(), 0)
    for pod in pods:
        node = pod.spec.node_name
        if node in moon_of and (pod.metadata.labels or {}).get("color") == "blue":
            per_zone[moon_of[node]] += 1
    if not per_zone:
        return 0
    return max(0, max(per_zone.values()) - min(per_zone.values()) - SPREAD_SKEW)


def moons(nodes: list[str]) -> dict[str, str]:
    """The spread case's zone of each node, round-robin."""
    return {node: MOONS[i % len(MOONS)] for i, node in enumerate(nodes)}


class Bench:
    """The control plane, its nodes and a client: what every side of every case shares."""

    def __init__(
        self,
        plane: ControlPlane,
        kube: KubeClient,
        nodes: list[str],
        tmp: Path,
        profile_seconds: int = 0,
    ):
        self.plane, self.kube, self.nodes, self.tmp = plane, kube, nodes, tmp
        self.profile_seconds = profile_seconds  # 0: no profile of the API server
        self.conf = tmp / "preempt.yaml"
        self.conf.write_text(FULL_CONF)

    def pids(self) -> dict[str, int | None]:
        procs = self.plane.procs
        return {
            "apiserver": procs.pid("kube-apiserver"),
            "etcd": procs.pid("etcd"),
            "kwok": procs.pid("kwok"),
            "kcm": procs.pid("kube-controller-manager"),
        }

    async def label_filled(self, count: int) -> None:
        """Label the first ``count`` nodes as the ones the preemption case fills."""
        patch = {"metadata": {"labels": {FILLED_KEY: "true"}}}
        await asyncio.gather(*(self.kube.patch(NODE, n, patch) for n in self.nodes[:count]))

    async def label_moons(self) -> None:
        """Label every node with its spread-case zone (``moons``)."""
        await asyncio.gather(
            *(
                self.kube.patch(NODE, n, {"metadata": {"labels": {MOON_KEY: zone}}})
                for n, zone in moons(self.nodes).items()
            )
        )

    async def delete_pods(self, namespace: str) -> None:
        """Delete every pod of ``namespace`` at once (grace 0) and wait until they are gone."""
        path = f"/api/v1/namespaces/{namespace}/pods"
        body = json.dumps({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            # A busy API server may answer 504 to a long collection delete, or drop the
            # connection at its request timeout: ask again.
            with contextlib.suppress(ServerError, ApiConnectionError):
                await self.kube.request("DELETE", path, body=body.encode(), timeout=300)
            for _ in range(20):
                left = json.loads(await self.kube.request("GET", path, params={"limit": "1"}))
                if not left.get("items"):
                    return
                await asyncio.sleep(0.5)
        raise RuntimeError(f"pods of {namespace} still there after 15 minutes")

    async def start_scheduler(self, side: str, case: Case) -> int | None:
        """Start ``side``'s scheduler (``stop`` stops it); return its pid once it has bound a
        probe pod."""
        from e2e.caldera_process import CalderaProcess
        from e2e.cluster.control_plane import binaries

        probe_ns = f"{case.name}-{side}-probe"
        await make_namespace(self.kube, probe_ns)
        probe = pod_body("probe", side, "plain", (probe_ns, probe_ns))
        if side == "kube":
            argv = self.plane._argv("kube-scheduler", binaries())
            argv += [f"--kube-api-qps={QPS}", f"--kube-api-burst={QPS}"]
            self.plane.procs.start("kube-scheduler", argv)
            self.stop: Callable[[], object] = lambda: self.plane.procs.stop("kube-scheduler")
            self.tail: Callable[[], str] = lambda: self.plane.procs.tail("kube-scheduler")
            self.metrics: Callable[[], str] = lambda: ""  # behind TLS and RBAC: not read
            pid = self.plane.procs.pid("kube-scheduler")
        else:
            await self.kube.create(PODGROUP, podgroup("probe", None), namespace=probe_ns)
            probe = grouped(probe, "probe")
            args = ["--leader-elect=false", f"--kube-qps={QPS}", f"--kube-burst={QPS}"]
            args.append("--log-level=warning")
            if case.kind == "preemption":
                args.append(f"--scheduler-conf={self.conf}")
            proc = CalderaProcess(
                "scheduler", args, kubeconfig=self.plane.kubeconfig, log_dir=self.tmp
            )
            self.stop = proc.stop
            self.tail = lambda: proc.log()[-3000:]
            self.metrics = lambda: proc.get("/metrics")[1]
            pid = proc.proc.pid
        await self.kube.create(POD, probe, namespace=probe_ns)
        for _ in range(600):
            pod = await self.kube.get(POD, "probe", namespace=probe_ns)
            if pod.spec.node_name:
                await self.settle()
                return pid
            await asyncio.sleep(0.2)
        print(self.tail())
        self.stop()
        raise RuntimeError(f"{side}: the probe pod was not bound in 120 s")

    def profile_apiserver(self, name: str) -> asyncio.Task[Path] | None:
        """A CPU profile of the API server over the next ``profile_seconds``, written to
        ``profiles/NAME.pb.gz`` beside the run (the cluster's temporary directory is gone after
        it); None when not asked for."""
        if not self.profile_seconds:
            return None
        path = REPO / "profiles" / f"{name}.pb.gz"

        async def take() -> Path:
            data = await self.kube.request(
                "GET",
                "/debug/pprof/profile",
                params={"seconds": str(self.profile_seconds)},
                timeout=self.profile_seconds + 60,
            )
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            return path

        return asyncio.create_task(take(), name=f"profile {name}")

    async def settle(self) -> None:
        """Wait until the scheduler has written what the pods placed beforehand made it write
        (Caldera: their PodGroups' statuses), i.e. its writes stayed the same for 2 s; at
        most 5 minutes. kube-scheduler writes nothing for them."""
        last: dict[str, float] = {}
        same = 0
        for _ in range(300):
            now = {
                verb: n
                for verb, n in requests_by_verb(self.metrics()).items()
                if verb in ("PUT", "PATCH", "POST")
            }
            same = same + 1 if now == last else 0
            if same >= 2:
                return
            last = now
            await asyncio.sleep(1)

    async def side(self, case: Case, side: str, limit: float, *, clean: bool = True) -> SideResult:
        """Run one side of ``case``; ``clean``: delete its pods after (not after a case's last
        side: the cluster goes down with them, and a 50,000-pod delete takes minutes)."""
        ns0, ns1 = f"{case.name}-{side}-0", f"{case.name}-{side}-1"
        namespaces = (ns1, ns0)
        await make_namespace(self.kube, ns0)
        await make_namespace(self.kube, ns1)
        caldera = side == "caldera"
        # The pods placed beforehand: already bound, round-robin (preemption: 4 on each of the
        # first ``measure`` nodes, labelled filled, one PodGroup per node for Caldera).
        spread = case.measure if case.kind == "preemption" else len(self.nodes)
        if case.init:
            init = []
            for i in range(case.init):
                body = pod_body(f"init-{i}", side, case.kind, namespaces, init=True)
                body["spec"]["nodeName"] = self.nodes[i % spread]
                if caldera and case.kind == "preemption":
                    body = grouped(body, f"low-{i % spread}")
                init.append(body)
            if caldera and case.kind == "preemption":
                low = [podgroup(f"low-{n}", "perf-low") for n in range(spread)]
                await create_all(self.kube, PODGROUP, low, ns0)
            await create_all(self.kube, POD, init, ns0)
        names = [f"p-{i}" for i in range(case.measure)]
        bodies = [pod_body(n, side, case.kind, namespaces) for n in names]
        if caldera:
            high = "perf-high" if case.kind == "preemption" else None
            await create_all(self.kube, PODGROUP, [podgroup(n, high) for n in names], ns1)
            bodies = [grouped(b, n) for b, n in zip(bodies, names, strict=True)]
        if side == "ceiling":
            for i, body in enumerate(bodies):
                body["bindTo"] = self.nodes[i % len(self.nodes)]
            scheduler_pid: int | None = None
        else:
            scheduler_pid = await self.start_scheduler(side, case)
        pids = {**self.pids(), "scheduler": scheduler_pid}
        profile: asyncio.Task[Path] | None = None
        try:
            async with PodWatch(self.kube, ns1, case.measure) as watch:
                creator = await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--create-loop",
                    str(self.plane.kubeconfig),
                    ns1,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                )
                assert creator.stdout is not None
                await creator.stdout.readline()  # ready: started and connected
                payload = json.dumps(bodies).encode()
                before = {part: cpu_seconds(pid) for part, pid in pids.items()}
                requests = requests_by_verb(self.metrics()) if side == "caldera" else {}
                server_before = dict(await request_counts(self.kube))
                own = time.process_time()
                started = time.monotonic()
                profile = self.profile_apiserver(f"{case.name}-{side}")
                out, _ = await creator.communicate(payload)
                created = time.monotonic() - started
                try:
                    await asyncio.wait_for(watch.done.wait(), max(1.0, limit - created))
                except TimeoutError:
                    print(
                        f"    {side}: {len(watch.bound):,}/{case.measure:,} bound in {limit:.0f}s"
                    )
                end = watch.last if watch.done.is_set() else time.monotonic()
                cpu = {part: cpu_seconds(pid) - before[part] for part, pid in pids.items()}
                creator_cpu = json.loads(out.decode().strip().splitlines()[-1])["cpu"]
                cpu["bench"] = creator_cpu + time.process_time() - own
                server = counts_between(server_before, dict(await request_counts(self.kube)))
                if side == "caldera":
                    for verb, n in requests_by_verb(self.metrics()).items():
                        requests[verb] = n - requests.get(verb, 0.0)
        finally:
            if side != "ceiling":
                self.stop()
        if profile is not None:
            print(f"    API server profile: {await profile}")
        latencies = [
            watch.wanted_at[n] - watch.added[n] for n in watch.wanted_at if n in watch.added
        ]
        invalid = 0
        if case.kind == "anti-affinity":
            listed = [*(await self.kube.list(POD, namespace=ns0)).items]
            listed += (await self.kube.list(POD, namespace=ns1)).items
            invalid = anti_affinity_violations(listed)
        elif case.kind == "spread":
            measured = list((await self.kube.list(POD, namespace=ns1)).items)
            invalid = spread_violations(measured, moons(self.nodes))
        result = SideResult(
            side=side,
            count=case.measure,
            bound=len(watch.bound),
            rate=watch.rate(),
            p50=quantile(latencies, 0.5),
            p99=quantile(latencies, 0.99),
            window=end - started,
            cpu=cpu,
            invalid=invalid,
            requests=requests,
            server=server,
        )
        print(f"    created {case.measure:,} in {created:.1f}s ({case.measure / created:,.0f}/s)")
        print(describe(result), flush=True)
        if clean:
            for namespace in (ns1, ns0):
                await self.delete_pods(namespace)
        return result


def describe(r: SideResult) -> str:
    """One side's figures and where its window's core-seconds went."""
    parts = ("apiserver", "etcd", "kwok", "kcm", "scheduler", "bench")
    used = sum(r.cpu.get(p, 0.0) for p in parts)
    shares = ", ".join(f"{p} {r.share(p):.0%}" for p in parts if p in r.cpu)
    rest = 1 - used / (2 * r.window) if r.window > 0 else math.nan
    line = (
        f"  {r.side}: {r.bound:,}/{r.count:,} bound, {r.throughput:,.0f} pods/s over the window "
        f"({r.rate:,.0f} binds/s first to last bind), latency p50 "
        f"{r.p50 * 1000:,.0f} ms p99 {r.p99 * 1000:,.0f} ms; API server {r.cpu['apiserver']:.1f} "
        f"CPU s ({r.cpu['apiserver'] / max(r.bound, 1) * 1000:.2f} ms a bind), scheduler "
        f"{r.cpu.get('scheduler', 0.0):.1f} CPU s, window {r.window:.1f} s\n"
        f"    share of 2 cores x window: {shares}, idle or other work {rest:.0%}"
    )
    if r.requests:
        line += "\n    its API requests in the window: " + ", ".join(
            f"{verb} {n:,.0f}" for verb, n in sorted(r.requests.items()) if n
        )
    if r.server:
        writes = writes_per_pod(r.server, r.bound)
        line += (
            f"\n    API server writes a pod bound, every client's ({sum(writes.values()):.2f}): "
            + ", ".join(f"{k} {n:.2f}" for k, n in writes.items() if n >= 0.005)
        )
    if r.invalid:
        line += f"\n    INVALID: {r.invalid:,} pods placed against their required constraints"
    return line


def on_paper(r: SideResult, threads: int) -> str:
    """Binds/s if the API server and etcd had a 2-core machine of their own: the least of what
    each machine's CPU allows at the measured CPU per bind (the scheduler on ``threads`` cores
    at most)."""
    binds = max(r.bound, 1)
    server = (r.cpu["apiserver"] + r.cpu["etcd"]) / binds
    sched = r.cpu.get("scheduler", 0.0) / binds
    rest = (r.cpu["kwok"] + r.cpu["kcm"] + r.cpu["bench"]) / binds
    bounds = {"API server machine": 2 / server if server else math.inf}
    if sched:
        bounds["scheduler's cores"] = threads / sched
    bounds["this machine"] = 2 / (sched + rest) if sched + rest else math.inf
    name, rate = min(bounds.items(), key=lambda kv: kv[1])
    return f"{rate:,.0f} binds/s (bound by {name})"


async def run_case(
    bench: Bench, case: Case, limit: float, only: list[str] | None = None, *, last: bool = False
) -> bool:
    print(
        f"case {case.name}: {case.init:,} pods placed first, {case.measure:,} measured "
        f"(load {load_average()})"
    )
    sides = sides_of(case, only)
    await prepare(bench, case)
    results = {
        side: await bench.side(case, side, limit, clean=not (last and side == sides[-1]))
        for side in sides
    }
    return compare(results)


def sides_of(case: Case, only: list[str] | None) -> list[str]:
    """The sides ``case`` runs, in order: the ceiling (plain pods only), kube, Caldera."""
    sides = (["ceiling"] if case.ceiling else []) + ["kube", "caldera"]
    return [side for side in sides if only is None or side in only]


async def prepare(bench: Bench, case: Case) -> None:
    """The node labels ``case`` reads."""
    if case.kind == "preemption":
        await bench.label_filled(case.measure)
    if case.kind == "spread":
        await bench.label_moons()


def compare(results: dict[str, SideResult]) -> bool:
    """The verdicts of a case's sides, side by side."""
    if "kube" not in results or "caldera" not in results:
        # A side alone (--side): its figures above, nothing to compare with.
        print(f"  (load {load_average()})")
        return True
    kube, caldera = results["kube"], results["caldera"]
    vs = caldera.throughput / kube.throughput if kube.throughput > 0 else math.nan
    valid = caldera.invalid == 0 and caldera.bound == caldera.count
    verdict = "met" if vs >= 1 and valid else "MISS"
    print(f"  caldera / kube-scheduler = {vs:.2f} (goal >= 1: {verdict})")
    if "ceiling" in results:  # not when --side left it out
        ceiling = results["ceiling"].throughput
        ratio = caldera.throughput / ceiling if ceiling > 0 else math.nan
        print(
            f"  caldera / ceiling = {ratio:.2f} (goal >= 0.80: "
            f"{'met' if ratio >= 0.8 else 'MISS'}); kube-scheduler / ceiling = "
            f"{kube.throughput / ceiling:.2f}"
        )
    writes = {s: sum(writes_per_pod(r.server, r.bound).values()) for s, r in results.items()}
    print(
        "  API server writes a pod bound: "
        + ", ".join(f"{s} {n:.2f}" for s, n in writes.items())
        + f"; caldera - kube-scheduler = {writes['caldera'] - writes['kube']:+.2f}"
    )
    print(
        f"  on paper, the API server and etcd on a second 2-core machine: kube-scheduler "
        f"{on_paper(kube, 2)}, caldera {on_paper(caldera, 1)}"
    )
    print(f"  (load {load_average()})")
    return True


async def bench_perf(
    node_count: int,
    chosen: list[Case],
    limit: float,
    only: list[str] | None = None,
    profile_seconds: int = 0,
    *,
    fresh: bool = False,
) -> bool:
    """Every case of ``chosen`` on one cluster, or with ``fresh`` each side of each on a
    cluster of its own."""
    if not fresh:
        async with cluster(node_count, profile_seconds) as bench:
            for case in chosen:
                await run_case(bench, case, limit, only, last=case is chosen[-1])
        return True
    for case in chosen:
        print(
            f"case {case.name}: {case.init:,} pods placed first, {case.measure:,} measured, "
            f"each side on a fresh cluster (load {load_average()})"
        )
        results = {}
        for side in sides_of(case, only):
            async with cluster(node_count, profile_seconds) as bench:
                await prepare(bench, case)
                results[side] = await bench.side(case, side, limit, clean=False)
        compare(results)
    return True


@contextlib.asynccontextmanager
async def cluster(node_count: int, profile_seconds: int) -> AsyncIterator[Bench]:
    """A local control plane with ``node_count`` ready kwok nodes and the cases' priority
    classes, removed after."""
    from e2e.cluster.control_plane import ControlPlane, NodeSpec

    with tempfile.TemporaryDirectory(prefix="caldera-perf-") as tmp:
        plane = ControlPlane(Path(tmp) / "cluster", apiserver_profiling=profile_seconds > 0)
        try:
            started = time.monotonic()
            start_with_crds(plane)
            options = ClientOptions(qps=QPS, burst=QPS)
            async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
                spec = NodeSpec(cpu="4", memory="32Gi", pods="110", labels={ZONE_KEY: "zone1"})
                names = [f"perf-{i}" for i in range(node_count)]
                nodes = await create_ready_nodes(kube, names, spec)
                for name, value in (("perf-low", 1), ("perf-high", 10)):
                    await kube.create(
                        PRIORITY_CLASS,
                        {
                            "apiVersion": "scheduling.k8s.io/v1",
                            "kind": "PriorityClass",
                            "metadata": {"name": name},
                            "value": value,
                        },
                    )
                print(
                    f"{node_count:,} kwok nodes of 4 cpu / 32Gi in "
                    f"{time.monotonic() - started:.0f}s (load {load_average()})"
                )
                yield Bench(plane, kube, nodes, Path(tmp), profile_seconds)
        finally:
            plane.down(purge=True)


def main() -> int:
    configure_logging(component="bench", level="warning", fmt="console")
    if len(sys.argv) == 4 and sys.argv[1] == "--create-loop":
        asyncio.run(create_loop(sys.argv[2], sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="20 nodes, small cases (CI)")
    parser.add_argument("--nodes", type=int, default=5000, help="kwok nodes (default 5,000)")
    parser.add_argument("--case", action="append", choices=sorted(cases(1)), help="repeatable")
    parser.add_argument("--timeout", type=float, default=900, help="per side, seconds")
    parser.add_argument("--max-pods", type=int, default=None, help="cap every case's counts")
    parser.add_argument(
        "--side",
        action="append",
        choices=["ceiling", "kube", "caldera"],
        help="run only these sides (repeatable; to look at one, e.g. under a profiler)",
    )
    parser.add_argument(
        "--apiserver-profile",
        type=int,
        default=0,
        metavar="SECONDS",
        help="profile the API server's CPU over each side's first SECONDS (profiles/*.pb.gz)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="each side on a control plane and nodes of its own (no side inherits another's "
        "deleted pods, compacted history or grown heap)",
    )
    args = parser.parse_args()
    nodes = 20 if args.smoke else args.nodes
    # CI's smoke run (under a minute) takes the first case alone unless told otherwise.
    wanted = args.case or list(cases(nodes))[: 1 if args.smoke else None]
    chosen = [cases(nodes, args.max_pods)[name] for name in wanted]
    print(machine())
    print(f"load average {load_average()}; pid {os.getpid()}")
    limit = 120 if args.smoke else args.timeout
    ok = asyncio.run(
        bench_perf(nodes, chosen, limit, args.side, args.apiserver_profile, fresh=args.fresh)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
