"""One chaos run on a local control plane: a burst of seeded jobs, faults injected while they run,
then the invariants checked (`e2e/chaos/checks.py`) and the figures returned as a `Report`.

Used by ``bench/chaos.py`` (the full run) and ``e2e/test_chaos.py`` (a short seeded round in CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.privilege import report_text, rights_report, scan_files
from caldera.api.core import Pod
from caldera.api.kinds import (
    COMMAND,
    CONFIGMAP,
    JOB,
    NAMESPACE,
    NETWORK_POLICY,
    POD,
    PODGROUP,
    PVC,
    QUEUE,
    SECRET,
    SERVICE,
    KindInfo,
)
from caldera.api.meta import OwnerReference
from caldera.api.resources import to_milli
from caldera.api.volcano import (
    JOB_NAME_KEY,
    KUBE_GROUP_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    Action,
    Job,
)
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import AlreadyExists, ApiConnectionError, ApiError, NotFound
from cli.cluster import command_body
from e2e.audit.secrets import Scanner, known_secret
from e2e.chaos.checks import (
    GANG_WINDOW,
    PodGroupCounts,
    PodLedger,
    duplicates,
    gang_violations,
    podgroup_mismatches,
    queue_mismatches,
    spread,
    wrong_jobs,
)
from e2e.chaos.faults import PROCESSES, Fault, FaultCounts, FaultKind, plan_faults
from e2e.chaos.fleet import ACTIVITY, Fleet, Proxies, metric_sum
from e2e.chaos.workload import GONE, JobPlan, Shape, make_workload
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import ControlPlane, free_port
from e2e.cluster.evidence import events, ssh_private_keys
from e2e.cluster.identities import (
    Identities,
    create_identities,
    delete_identities,
    write_token_kubeconfig,
)
from e2e.cluster.pki import write_serving_pair
from informers.reflector import Reflector
from informers.store import HandlerFuncs, Store

__all__ = ["ChaosConfig", "Report", "run_chaos"]

FINAL = ("Completed", "Failed", "Aborted", "Terminated")
ORPHAN_KINDS: tuple[KindInfo[Any], ...] = (
    POD,
    PODGROUP,
    PVC,
    SERVICE,
    CONFIGMAP,
    SECRET,
    NETWORK_POLICY,
)
# Lines of a process log that are an exception nobody handled (asyncio's last-resort handler, a
# traceback printed outside the logger, or a log record at critical level).
UNHANDLED = re.compile(
    r"Traceback \(most recent call last\)|never retrieved|Unhandled|\"level\": ?\"critical\""
)


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 1
    jobs: int = 500
    replicas: int = 1  # of the controllers and the scheduler (2: a standby takes over)
    window: float = 150.0  # seconds over which the faults are spread
    faults: FaultCounts = field(default_factory=FaultCounts)
    queues: tuple[str, ...] = ("chaos-a", "chaos-b")
    settle_timeout: float = 420.0
    # How long the orphan check waits for the garbage collector once the jobs are deleted.
    cleanup_timeout: float = 600.0
    create_concurrency: int = 16
    # Run the processes as the chart's ServiceAccounts and audit what they used (else as admin).
    service_accounts: bool = True


@dataclass
class Report:
    config: ChaosConfig
    namespace: str
    faults: list[Fault]
    jobs: int = 0
    shapes: dict[str, int] = field(default_factory=dict)
    wrong: list[tuple[str, str, str]] = field(default_factory=list)
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    podgroup_mismatches: list[Any] = field(default_factory=list)
    queue_mismatches: list[Any] = field(default_factory=list)
    gang_violations: list[tuple[str, float, int]] = field(default_factory=list)
    # (from, to) on the run's clock: no scheduler acting, or the API server restarting
    outages: list[tuple[float, float]] = field(default_factory=list)
    # gangs short for the window of wall time, outages included: told, not judged
    gangs_late_by_wall: list[tuple[str, float, int]] = field(default_factory=list)
    restarts: dict[str, list[float]] = field(default_factory=dict)
    acting: dict[str, list[float]] = field(default_factory=dict)
    failovers: dict[str, list[float]] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    unhandled: list[str] = field(default_factory=list)
    stop_codes: dict[str, int] = field(default_factory=dict)
    kills: int = 0
    refused_creates: int = 0
    relists: float = 0
    watch_restarts: float = 0
    pods_seen: int = 0
    burst_seconds: float = 0.0
    settle_seconds: float = 0.0
    logs: list[Path] = field(default_factory=list)
    lease_exits: list[str] = field(default_factory=list)
    wrong_detail: list[str] = field(default_factory=list)  # what each wrong job looked like
    cleanup_seconds: float = 0.0  # from deleting the jobs until nothing of them is left
    rights: str = ""  # the rights table, when run as ServiceAccounts
    privilege_failures: list[str] = field(default_factory=list)
    unused_rights: int = 0
    refused_granted: int = 0
    secrets_found: list[str] = field(default_factory=list)
    secrets_known: int = 0
    unfinished_rounds: int = 0  # suspend/resume rounds still waiting after settling

    @property
    def ok(self) -> bool:
        return not (
            self.wrong
            or self.duplicates
            or self.orphans
            or self.podgroup_mismatches
            or self.queue_mismatches
            or self.gang_violations
            or self.crashes
            or self.unhandled
            or self.privilege_failures
            or self.secrets_found
            or any(code != 0 for code in self.stop_codes.values())
        )

    def table(self) -> str:
        """The invariants and figures as a markdown table."""
        pm = len(self.podgroup_mismatches) + len(self.queue_mismatches)
        rows = [
            (
                "jobs that did not reach the phase their policies and pods dictate",
                f"{len(self.wrong)} / {self.jobs}",
            ),
            (
                "duplicate pods (two live pods for one `<job>-<task>-<index>`)",
                f"{len(self.duplicates)} (of {self.pods_seen} pods seen)",
            ),
            (
                "orphans after the jobs were deleted (pods, PodGroups, PVCs, Services, ConfigMaps, "
                "Secrets, NetworkPolicies)",
                str(len(self.orphans)),
            ),
            (
                "PodGroup counts and Queue allocations that differ from the pods",
                f"{pm} ({len(self.podgroup_mismatches)} PodGroups, "
                f"{len(self.queue_mismatches)} queues)",
            ),
            (
                f"gangs partly bound (binds short of minAvailable for {GANG_WINDOW:.0f} s "
                "of scheduling time)",
                str(len(self.gang_violations)),
            ),
        ]
        for kind in PROCESSES:
            times = self.restarts.get(kind, [])
            rows.append(
                (
                    f"`caldera {kind}` restart to ready, s (p50 / max)",
                    f"{spread(times)} ({len(times)} restarts)",
                )
            )
            if kind in ACTIVITY and self.acting.get(kind):
                rows.append(
                    (
                        f"`caldera {kind}` restart to leading and acting, s (p50 / max)",
                        spread(self.acting[kind]),
                    )
                )
            if self.failovers.get(kind):
                rows.append(
                    (
                        f"`caldera {kind}` leader failover (kill to standby acting), s (p50 / max)",
                        spread(self.failovers[kind]),
                    )
                )
        rows.append(
            (
                "exits other than our kills; unhandled exceptions in logs",
                f"{len(self.crashes)}; {len(self.unhandled)}",
            )
        )
        rows.append(
            (
                "exits after losing the Lease during an API server outage (by design: the "
                "replica restarts as a candidate)",
                str(len(self.lease_exits)),
            )
        )
        if self.rights:
            rows.append(
                (
                    "rights used but not granted; requests refused (403) for a granted right "
                    "(the authorizer warming up after an API server restart); granted, never used",
                    f"{len(self.privilege_failures)}; {self.refused_granted}; {self.unused_rights}",
                )
            )
        rows.append(
            (
                "private keys, tokens or certificates in a log line or an Event",
                f"{len(self.secrets_found)} (of {self.secrets_known} known secrets, and any "
                "PEM block or JWT)",
            )
        )
        lines = ["| invariant | figure |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in rows]
        return "\n".join(lines)

    def details(self) -> str:
        shapes = ", ".join(f"{k} {v}" for k, v in sorted(self.shapes.items()))
        kinds = Counter(str(f.kind) for f in self.faults)
        faults = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        out = [
            f"seed {self.config.seed}, {self.jobs} jobs ({shapes}), "
            f"{self.config.replicas} replica(s) of controllers and scheduler",
            f"faults: {len(self.faults)} ({faults}); {self.kills} kills; "
            f"job creates refused while the webhook was down: {self.refused_creates}",
            f"watch restarts {self.watch_restarts:.0f}, relists after 410 Gone "
            f"{self.relists:.0f} (all processes)",
            f"burst created in {self.burst_seconds:.1f} s; "
            f"settled {self.settle_seconds:.1f} s after the burst began; "
            f"deleted jobs cleaned up in {self.cleanup_seconds:.0f} s; "
            f"suspend/resume rounds cancelled unfinished: {self.unfinished_rounds}",
            f"scheduling paused {sum(b - a for a, b in self.outages):.1f} s in "
            f"{len(self.outages)} outage(s), the longest "
            f"{max((b - a for a, b in self.outages), default=0.0):.1f} s "
            "(the gang window does not count them; gangs short for as long in wall time: "
            f"{self.gangs_late_by_wall[:5]})",
        ]
        out += [f"  {line}" for line in self.wrong_detail[:40]]
        for title, items in (
            ("wrong", self.wrong),
            ("duplicates", self.duplicates),
            ("orphans", self.orphans),
            ("podgroups", self.podgroup_mismatches),
            ("queues", self.queue_mismatches),
            ("gangs", self.gang_violations),
            ("crashes", self.crashes),
            ("unhandled", self.unhandled),
            ("privilege", self.privilege_failures),
            ("secrets", self.secrets_found),
        ):
            if items:
                out.append(f"{title}: {items[:20]}")
        if any(code != 0 for code in self.stop_codes.values()):
            out.append(f"exit codes at the end: {self.stop_codes}")
        return "\n".join(out)


def _kubeconfig_via(source: Path, server: str, dest: Path) -> Path:
    """``source`` with its cluster's server replaced (the proxy in front of the API server)."""
    config = json.loads(source.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    dest.write_text(json.dumps(config))
    return dest


def _requests(pod: Pod) -> tuple[int, int]:
    cpu = mem = 0
    for container in pod.spec.containers:
        requests = container.resources.requests
        cpu += to_milli("cpu", requests.get("cpu", 0))
        mem += to_milli("memory", requests.get("memory", 0))
    return cpu, mem


class ChaosRun:
    def __init__(
        self,
        plane: ControlPlane,
        config: ChaosConfig,
        workdir: Path,
        kube: KubeClient,
    ) -> None:
        self.plane, self.config, self.dir, self.kube = plane, config, workdir, kube
        self.namespace = f"chaos-{config.seed}-{secrets.token_hex(3)}"
        self.plans = make_workload(config.seed, config.jobs, config.queues)
        self.faults = plan_faults(config.seed, config.window, config.faults)
        self.rng = random.Random(config.seed * 7919)  # noqa: S311 - seeded victims
        self.ledger = PodLedger()
        self.jobs: Store[Job] = Store()
        self.pods: Store[Pod] = Store()
        self.t0 = time.monotonic()
        self.report = Report(config, self.namespace, self.faults)
        self.proxies = Proxies(f"127.0.0.1:{plane.ports['apiserver']}", workdir)
        self.identities: Identities | None = None
        self.lease_namespace = self.namespace
        self.known_secrets: dict[str, str] = {}  # label -> value, collected during the run
        self.webhook_name = f"caldera-{self.namespace}"
        self.tasks: list[asyncio.Task[None]] = []
        self.final: dict[str, str] = {}
        self.apiserver_restarting = False

    # ---- set-up ------------------------------------------------------------------------------

    def _fleet(self) -> Fleet:
        ports = self.proxies.start(PROCESSES)
        servers = {kind: f"https://127.0.0.1:{port}" for kind, port in ports.items()}
        admin = self.plane.kubeconfig
        if self.config.service_accounts:
            ids = create_identities(
                admin,
                self.dir / "identities",
                release=self.namespace,
                namespace=f"{self.namespace}-system",
            )
            self.identities, self.lease_namespace = ids, ids.namespace
            kubeconfigs = {
                kind: write_token_kubeconfig(
                    admin,
                    self.dir / f"{kind}.kubeconfig",
                    user=ids.usernames[kind],
                    token=ids.tokens[kind],
                    server=servers[kind],
                )
                for kind in PROCESSES
            }
            self.known_secrets |= {f"{kind} token": t for kind, t in ids.tokens.items()}
        else:
            kubeconfigs = {
                kind: _kubeconfig_via(admin, servers[kind], self.dir / f"{kind}.kubeconfig")
                for kind in PROCESSES
            }
        crt, key = write_serving_pair(
            self.plane.pki, self.dir / "webhook-certs", ["127.0.0.1", "localhost"]
        )
        self.known_secrets["webhook serving key"] = key.read_text()
        self.webhook_port = free_port()
        replicas = {
            "webhook": 1,
            "controllers": self.config.replicas,
            "scheduler": self.config.replicas,
        }
        logs = self.dir / "logs"
        logs.mkdir(exist_ok=True)
        return Fleet(
            kubeconfigs=kubeconfigs,
            log_dir=logs,
            lease_namespace=self.lease_namespace,
            webhook_args=[
                f"--port={self.webhook_port}",
                f"--tls-cert-file={crt}",
                f"--tls-key-file={key}",
            ],
            replicas=replicas,
        )

    async def _namespace_and_queues(self) -> None:
        labels = {"caldera.io/chaos": self.namespace}
        await self.kube.create(NAMESPACE, {"metadata": {"name": self.namespace, "labels": labels}})
        for i, queue in enumerate(self.config.queues):
            body = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": queue, "labels": labels},
                "spec": {"weight": i + 1, "reclaimable": True},
            }
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(QUEUE, body)

    def _register_webhook(self) -> None:
        url = f"https://127.0.0.1:{self.webhook_port}"
        selector = {"matchLabels": {"caldera.io/chaos": self.namespace}}
        for doc in webhook_configurations(
            url,
            self.plane.pki.ca_crt.read_bytes(),
            name=self.webhook_name,
            namespace_selector=selector,
            queue_selector=selector,
            hook_domain=self.namespace + ".caldera.io",
        ):
            self.plane.kubectl("apply", "-f", "-", input=json.dumps(doc))

    def _unregister_webhook(self) -> None:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            self.plane.kubectl("delete", kind, self.webhook_name, "--ignore-not-found")

    # ---- observation -------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _seen_pod(self, pod: Pod) -> None:
        meta = pod.metadata
        self.ledger.seen(
            self.now(),
            uid=meta.uid,
            name=meta.name,
            job=meta.labels.get(JOB_NAME_KEY, "") or meta.annotations.get(JOB_NAME_KEY, ""),
            task=meta.annotations.get(TASK_SPEC_KEY, ""),
            index=meta.annotations.get(TASK_INDEX_KEY, "") or meta.labels.get(TASK_INDEX_KEY, ""),
            group=meta.annotations.get(KUBE_GROUP_NAME_KEY, ""),
            requests=_requests(pod),
            node=pod.spec.node_name,
            phase=pod.status.phase,
            deleting=meta.deletion_timestamp is not None,
        )

    def _observers(self) -> list[Reflector[Any]]:
        pods = HandlerFuncs[Pod](
            add=self._seen_pod,
            update=lambda _old, new: self._seen_pod(new),
            delete=lambda pod: self.ledger.gone(self.now(), pod.metadata.uid),
        )
        return [
            Reflector(
                client=self.kube,
                kind=POD,
                store=self.pods,
                handlers=[pods],
                namespace=self.namespace,
            ),
            Reflector(
                client=self.kube, kind=JOB, store=self.jobs, handlers=[], namespace=self.namespace
            ),
        ]

    def phase(self, name: str) -> str | None:
        job = self.jobs.get(f"{self.namespace}/{name}")
        return None if job is None else job.status.state.phase

    # ---- the workload ------------------------------------------------------------------------

    async def _with_retries(
        self, what: Callable[[], Awaitable[object]], refusals: bool = False
    ) -> None:
        """Call until it succeeds; the API server or the webhook may be down for a while."""
        while True:
            try:
                await what()
                return
            except AlreadyExists:
                return  # an earlier attempt went through before its answer was lost
            except (ApiConnectionError, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status not in (500, 503, 504, 429):
                    raise
                if refusals:
                    self.report.refused_creates += 1
                await asyncio.sleep(1)

    async def _create_jobs(self) -> None:
        sem = asyncio.Semaphore(self.config.create_concurrency)

        async def one(plan: JobPlan) -> None:
            async with sem:
                await self._with_retries(
                    lambda: self.kube.create(JOB, plan.manifest, namespace=self.namespace),
                    refusals=True,
                )
            if plan.shape is Shape.SUSPEND:
                self.tasks.append(asyncio.create_task(self._suspend_and_resume(plan)))

        await asyncio.gather(*(one(p) for p in self.plans))

    async def _command(self, plan: JobPlan, action: Action) -> None:
        job = self.jobs.get(f"{self.namespace}/{plan.name}")
        if job is None:
            return
        target = OwnerReference(
            api_version=JOB.api_version,
            kind=JOB.kind,
            name=plan.name,
            uid=job.metadata.uid,
            controller=True,
        )
        body = command_body(self.namespace, action, target)
        await self._with_retries(lambda: self.kube.create(COMMAND, body, namespace=self.namespace))

    async def _until_phase(self, name: str, phases: tuple[str, ...], timeout: float) -> bool:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.phase(name) in phases:
                return True
            await asyncio.sleep(0.5)
        return False

    async def _suspend_and_resume(self, plan: JobPlan) -> None:
        """``caldera job suspend`` once the job runs, ``resume`` after a pause (as a user would:
        retried until the API server takes the Command)."""
        if not await self._until_phase(plan.name, ("Running",), 600):
            return
        await asyncio.sleep(plan.suspend_after)
        await self._command(plan, Action.ABORT_JOB)
        await self._until_phase(plan.name, ("Aborted",), 300)
        await asyncio.sleep(plan.suspended_for)
        await self._command(plan, Action.RESUME_JOB)

    # ---- faults ------------------------------------------------------------------------------

    async def _inject(self, fleet: Fleet) -> None:
        pending: list[asyncio.Task[None]] = []
        for fault in self.faults:
            delay = fault.at - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
            if fault.kind is FaultKind.KILL:
                pending.append(
                    asyncio.create_task(fleet.kill_and_restart(fault.target, fault.pause))
                )
            elif fault.kind is FaultKind.APISERVER_RESTART:
                self.apiserver_restarting = True
                try:
                    await asyncio.to_thread(self.plane.restart, "kube-apiserver")
                finally:
                    self.apiserver_restarting = False
            elif fault.kind is FaultKind.COMPACTION:
                await asyncio.to_thread(self.plane.compact_etcd)
                self.proxies.drop_all()
            elif fault.kind is FaultKind.DROP_CONNECTIONS:
                self.proxies.drop(fault.target)
            elif fault.kind is FaultKind.EVICTIONS:
                await self._evict(fault.count)
        await asyncio.gather(*pending)

    async def _watch_scheduling(self, fleet: Fleet, stop: asyncio.Event) -> None:
        """Record the outages of scheduling (no scheduler acting, or the API server restarting)
        until ``stop``: the gang check's clock does not run in them."""
        down_since: float | None = None
        while not stop.is_set():
            acting = await asyncio.to_thread(fleet.any_acting, "scheduler")
            up = acting and not self.apiserver_restarting  # read after: it may have begun
            if not up and down_since is None:
                down_since = self.now()
            elif up and down_since is not None:
                self.report.outages.append((down_since, self.now()))
                down_since = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
        if down_since is not None:
            self.report.outages.append((down_since, self.now()))

    async def _evict(self, count: int) -> None:
        running = sorted(
            p.metadata.name
            for p in self.pods.list()
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
        )
        for name in self.rng.sample(running, min(count, len(running))):
            # Gone already, or the API server is restarting: a missed eviction.
            with contextlib.suppress(NotFound, ApiConnectionError, ApiError):
                await self.kube.delete(POD, name, namespace=self.namespace)

    # ---- settling and checks -----------------------------------------------------------------

    def _settled(self) -> bool:
        for plan in self.plans:
            phase = self.phase(plan.name)
            if plan.expected == GONE:
                if phase is not None:
                    return False
            elif phase != plan.expected:
                return False
        return True

    async def _settle(self) -> None:
        deadline = time.monotonic() + self.config.settle_timeout
        while time.monotonic() < deadline and not self._settled():  # noqa: ASYNC110 - polls a store
            await asyncio.sleep(1)
        self.report.settle_seconds = self.now()

    async def _finish_tasks(self, grace: float) -> None:
        """The suspend/resume rounds, given ``grace`` seconds after settling; any still waiting
        then (its job never ran, so the settle check has already failed it) is cancelled."""
        if not self.tasks:
            return
        _, waiting = await asyncio.wait(self.tasks, timeout=grace)
        for task in waiting:
            task.cancel()
        self.report.unfinished_rounds = len(waiting)

    def _progress(self, what: str) -> None:
        """One line per stage on stdout, so that a run stopped from outside shows how far it
        went."""
        print(f"chaos +{self.now():.0f}s: {what}", flush=True)

    async def _check_counts(self) -> None:
        """PodGroup counts and Queue allocations against the pods, given 30 s to converge (the
        scheduler writes them each session)."""
        deadline = time.monotonic() + 30
        while True:
            groups = (await self.kube.list(PODGROUP, namespace=self.namespace)).items
            pods = (await self.kube.list(POD, namespace=self.namespace)).items
            queues = (await self.kube.list(QUEUE)).items
            live = [p for p in pods if p.metadata.deletion_timestamp is None]
            queue_of = {g.metadata.name: g.spec.queue for g in groups}
            pg = podgroup_mismatches(
                [
                    PodGroupCounts(
                        g.metadata.name,
                        g.spec.queue,
                        g.status.running,
                        g.status.succeeded,
                        g.status.failed,
                    )
                    for g in groups
                ],
                [
                    (p.metadata.annotations.get(KUBE_GROUP_NAME_KEY, ""), p.status.phase)
                    for p in live
                ],
            )
            allocated = {
                q.metadata.name: (
                    to_milli("cpu", q.status.allocated.get("cpu", 0)),
                    to_milli("memory", q.status.allocated.get("memory", 0)),
                )
                for q in queues
                if q.metadata.name in self.config.queues
            }
            bound = [
                (
                    queue_of.get(p.metadata.annotations.get(KUBE_GROUP_NAME_KEY, ""), ""),
                    _requests(p),
                )
                for p in live
                if p.spec.node_name and p.status.phase not in ("Succeeded", "Failed")
            ]
            qm = queue_mismatches(allocated, bound)
            if (not pg and not qm) or time.monotonic() > deadline:
                self.report.podgroup_mismatches, self.report.queue_mismatches = pg, qm
                return
            await asyncio.sleep(2)

    async def _describe_wrong(self) -> None:
        """For each job not in its expected phase: its state, its PodGroup and its pods."""
        expected = {p.name: p.expected for p in self.plans}
        wrong = [n for n, want in expected.items() if self.final.get(n, GONE) != want]
        if not wrong:
            return
        groups = (await self.kube.list(PODGROUP, namespace=self.namespace)).items
        group_of = {g.metadata.annotations.get(JOB_NAME_KEY, ""): g for g in groups}
        for g in groups:
            for owner in g.metadata.owner_references:
                group_of.setdefault(owner.name, g)
        for name in wrong:
            job = self.jobs.get(f"{self.namespace}/{name}")
            state = (
                "gone"
                if job is None
                else (
                    f"{job.status.state.phase} ({job.status.state.reason}: "
                    f"{job.status.state.message[:120]}) retries {job.status.retry_count}"
                )
            )
            group = group_of.get(name)
            pg = (
                "none"
                if group is None
                else (f"{group.status.phase} {[c.reason for c in group.status.conditions]}")
            )
            pods = Counter(
                life.phase or "?"
                for life in self.ledger.lives.values()
                if life.job == name and life.deleted is None
            )
            self.report.wrong_detail.append(
                f"{name}: want {expected[name]}, job {state}; podgroup {pg}; pods {dict(pods)}"
            )

    async def _orphans(self) -> None:
        """Delete every job as a user would, then list what is left of them once the garbage
        collector (kube-controller-manager's, at its default 20 requests/s) is done: until
        nothing is left, or nothing went for 60 s, at most ``cleanup_timeout``."""
        names = [
            j.metadata.name for j in (await self.kube.list(JOB, namespace=self.namespace)).items
        ]
        for name in names:
            with contextlib.suppress(NotFound):
                await self.kube.delete(JOB, name, namespace=self.namespace)
        started = time.monotonic()
        last_change, last_count = started, -1
        while True:
            left = []
            for kind in (JOB, *ORPHAN_KINDS):
                for obj in (await self.kube.list(kind, namespace=self.namespace)).items:
                    meta = obj.metadata
                    if kind is CONFIGMAP and meta.name == "kube-root-ca.crt":
                        continue
                    left.append(f"{kind.kind}/{meta.name}")
            now = time.monotonic()
            if len(left) != last_count:
                last_change, last_count = now, len(left)
            if not left or now - last_change > 60 or now - started > self.config.cleanup_timeout:
                self.report.orphans = left
                self.report.cleanup_seconds = now - started
                return
            await asyncio.sleep(2)

    def _collect_ssh_keys(self) -> None:
        """The ssh plugin's private keys as they exist now (a TTL deletes them with the Job)."""
        self.known_secrets |= ssh_private_keys(self.plane.kubeconfig, self.namespace)

    async def _collect_ssh_keys_while(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # the API server may be restarting
                await asyncio.to_thread(self._collect_ssh_keys)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 10)

    def _privilege(self, fleet: Fleet) -> None:
        """What each process did as its ServiceAccount against its roles (the API server's
        audit log), and no known secret, PEM block or token in any log line or Event."""
        known = [known_secret(label, value) for label, value in self.known_secrets.items()]
        found = scan_files(fleet.logs(), known)
        found += Scanner(known).events(events(self.plane.kubeconfig, self.namespace))
        self.report.secrets_found = [str(f) for f in found]
        self.report.secrets_known = len(known)
        if self.identities is None:
            return
        audit = sorted(self.plane.audit_log.parent.glob(self.plane.audit_log.stem + "*"))
        comparisons = rights_report(audit, self.identities.rbac)
        self.report.rights = report_text(comparisons)
        # A 403 for a right the roles grant is the API server's authorizer warming up after its
        # restart, not a missing right: counted apart.
        self.report.privilege_failures = [
            f"{c.process}: {row.right.verb} {row.right.group}/{row.right.resource} not granted"
            for c in comparisons.values()
            for row in c.ungranted
        ] + [
            f"{c.process}: no request in the audit log" for c in comparisons.values() if not c.rows
        ]
        self.report.refused_granted = sum(
            row.refused for c in comparisons.values() for row in c.rows if row.granted
        )
        self.report.unused_rights = sum(len(c.unused) for c in comparisons.values())

    def _scan_logs(self, fleet: Fleet) -> None:
        found = []
        for path in fleet.logs():
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if UNHANDLED.search(line):
                    found.append(f"{path.name}:{n}: {line[:300]}")
        self.report.unhandled = found
        self.report.logs = fleet.logs()

    def _scrape_totals(self, fleet: Fleet) -> None:
        for group in fleet.members.values():
            for replica in group:
                text = replica.scrape()
                if text:
                    self.report.relists += metric_sum(text, "caldera_informer_relists_total")
                    self.report.watch_restarts += metric_sum(
                        text, "caldera_informer_watch_restarts_total"
                    )

    # ---- the run -----------------------------------------------------------------------------

    async def run(self) -> Report:
        await self._namespace_and_queues()
        fleet = self._fleet()
        stop = asyncio.Event()
        observers = [asyncio.create_task(r.run()) for r in self._observers()]
        fleet.start_all()
        try:
            await fleet.wait_acting()
            self._register_webhook()
            crash_watch = asyncio.create_task(fleet.watch_for_crashes(stop))
            key_watch = asyncio.create_task(self._collect_ssh_keys_while(stop))
            self.t0 = time.monotonic()
            outage_watch = asyncio.create_task(self._watch_scheduling(fleet, stop))
            injector = asyncio.create_task(self._inject(fleet))
            started = time.monotonic()
            await self._create_jobs()
            self.report.burst_seconds = time.monotonic() - started
            self._progress(f"{len(self.plans)} jobs created")
            await injector
            self._progress("faults done")
            await fleet.wait_acting(120)
            await self._settle()
            self._progress("settled" if self._settled() else "settle timed out")
            await self._finish_tasks(60)
            await self._check_counts()
            # Judged by the phases at the end of the run: the orphan check deletes the jobs next.
            self.final = {j.metadata.name: j.status.state.phase for j in self.jobs.list()}
            await self._describe_wrong()
            self._progress("counts checked")
            self._scrape_totals(fleet)
            stop.set()
            await asyncio.gather(crash_watch, key_watch, outage_watch)
            await asyncio.to_thread(self._collect_ssh_keys)
            await self._orphans()
            self._progress("orphans checked")
        finally:
            stop.set()
            for task in self.tasks:
                task.cancel()
            self.report.stop_codes = await asyncio.to_thread(fleet.stop_all)
            self.proxies.stop()
            self._unregister_webhook()
            if self.identities is not None:
                delete_identities(self.plane.kubeconfig, self.identities)
            for task in observers:
                task.cancel()
            await asyncio.gather(*observers, return_exceptions=True)
        self.report.jobs = len(self.plans)
        self.report.shapes = dict(Counter(p.shape.value for p in self.plans))
        self.report.wrong = wrong_jobs(self.plans, self.final)
        self.report.duplicates = duplicates(self.ledger.lives.values())
        self.report.pods_seen = len(self.ledger.lives)
        by_job, need = self.ledger.of_job(), {p.name: p.min_available for p in self.plans}
        self.report.gang_violations = gang_violations(by_job, need, outages=self.report.outages)
        self.report.gangs_late_by_wall = gang_violations(by_job, need)
        self.report.restarts, self.report.acting = fleet.restarts, fleet.acting
        self.report.failovers, self.report.crashes, self.report.kills = (
            fleet.failovers,
            fleet.crashes,
            fleet.kills,
        )
        self.report.lease_exits = fleet.lease_exits
        self._scan_logs(fleet)
        await asyncio.to_thread(self._privilege, fleet)
        return self.report


async def run_chaos(
    plane: ControlPlane,
    config: ChaosConfig,
    workdir: Path,
) -> Report:
    """Run the chaos round on ``plane`` (its processes' logs, kubeconfigs and the rendered RBAC
    under ``workdir``)."""
    options = ClientOptions(qps=500, burst=500)
    async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
        return await ChaosRun(plane, config, workdir, kube).run()
