"""The fencing run: a leader loses its Lease while it cannot act (``pause``: SIGSTOP; ``stall``:
its connection to the API server stops forwarding), the standby takes over and schedules, and
the old leader comes back while new work arrives. Counted from the API server's audit log: the
writes the old leader made after the standby took the Lease (goal 0), and the nodes whose pods
request more than they hold (goal 0). docs/reliability.md, "Fencing", has the figures.

One round per (fault, target): ``target`` ("scheduler" or "controllers") runs two replicas, each
as its own ServiceAccount (the chart's, and a copy bound to the same roles) so the audit log
tells them apart, each behind its own proxy (``e2e/chaos/proxy.py``); the other process runs one
replica. The jobs select the round's own nodes, sized so that the last job fits only on a
snapshot that misses the jobs the standby placed:

1. the first replica leads; the second starts as standby; a warm-up job runs;
2. the fault on the leader; the standby takes the Lease and a second job is bound;
3. the leader comes back (SIGCONT, or the stalled connections are reset) and a third job, which
   does not fit, arrives at once;
4. after ``watch`` seconds: the old leader's writes after the takeover, the over-committed nodes.

Used by ``bench/chaos.py --fencing`` (every fault and target) and ``e2e/test_fencing.py`` (a
short round in CI).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import secrets
import signal
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from caldera.api.core import Pod
from caldera.api.kinds import JOB, NAMESPACE, NODE, POD
from caldera.api.resources import to_milli
from caldera.api.volcano import JOB_NAME_KEY
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import ApiConnectionError, ApiError, NotFound
from e2e.caldera_process import CalderaProcess
from e2e.chaos.fleet import LEADER, Proxies, metric_sum
from e2e.cluster.control_plane import ControlPlane, NodeSpec, run_kubectl
from e2e.cluster.identities import (
    Identities,
    create_identities,
    delete_identities,
    write_token_kubeconfig,
)
from e2e.kwok_tasks import task

__all__ = [
    "FAULTS",
    "SHORT",
    "TARGETS",
    "AuditWrite",
    "FencingConfig",
    "Round",
    "overcommitted",
    "run_fencing",
    "writes_after",
]

FAULTS = ("pause", "stall")
TARGETS = ("scheduler", "controllers")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
LABEL = "caldera.io/fencing"


@dataclass(frozen=True)
class FencingConfig:
    faults: tuple[str, ...] = FAULTS
    targets: tuple[str, ...] = TARGETS
    # The Lease timings given to the processes (the chart's: 15 s, 10 s, 2 s).
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # Seconds the fault lasts at least; it lasts until the standby has taken over and placed
    # the second job, whichever is later.
    outage: float = 20.0
    # Seconds between the old leader's return and the third job's arrival (the issue's: 1 s).
    arrive_after: float = 1.0
    # Seconds the old leader is watched after it comes back.
    watch: float = 15.0
    nodes: int = 2
    node_cpu: int = 4  # the jobs: 2, then 4, then 4 pods of 1 cpu: the third fits only stale


# The CI round (e2e/test_fencing.py, bench/chaos.py --fencing --smoke): the pause fault on both
# elected processes, with short Lease timings so that it takes about a minute.
SHORT = FencingConfig(
    faults=("pause",),
    lease_duration=8.0,
    renew_deadline=5.0,
    retry_period=1.0,
    outage=10.0,
    watch=8.0,
)


@dataclass(frozen=True)
class AuditWrite:
    """A mutating request as the audit log tells it."""

    user: str
    verb: str
    resource: str
    namespace: str
    name: str
    code: int
    received: dt.datetime


@dataclass
class Round:
    fault: str
    target: str
    writes_after: list[AuditWrite] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)
    takeover: float | None = None  # seconds from the fault to the standby's Lease
    old_leader_exit: int | None = None
    old_leader_lost: bool = False  # it logged "leadership lost"
    dropped: int = 0  # writes the old leader's client dropped ("write dropped" lines)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.writes_after and not self.overcommitted and self.takeover is not None

    def row(self) -> str:
        kinds = Counter(f"{w.verb} {w.resource}" for w in self.writes_after)
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "-"
        takeover = f"{self.takeover:.1f}" if self.takeover is not None else "none"
        return (
            f"{self.fault:<6} {self.target:<12} {len(self.writes_after):>6} "
            f"{len(self.overcommitted):>6} {self.dropped:>8} {takeover:>9} "
            f"{self.old_leader_exit!s:>5}  {what}"
        )


HEADER = (
    "fault  target       writes  nodes  dropped  takeover  exit  writes after the takeover\n"
    "                    after   over   (fence)  (s)            (by verb and resource)"
)


def table(rounds: Iterable[Round]) -> str:
    return "\n".join([HEADER, *(r.row() for r in rounds)])


# --- pure: the audit log and the nodes -----------------------------------------------------------


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def audit_writes(lines: Iterable[str]) -> Iterator[AuditWrite]:
    """The mutating requests of audit log lines (one per request, at ResponseComplete)."""
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("stage") != "ResponseComplete":
            continue
        verb = str(event.get("verb", ""))
        if verb not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource", ""))
        if ref.get("subresource"):
            resource += "/" + str(ref["subresource"])
        yield AuditWrite(
            user=str((event.get("user") or {}).get("username", "")),
            verb=verb,
            resource=resource,
            namespace=str(ref.get("namespace", "")),
            name=str(ref.get("name", "")),
            code=int((event.get("responseStatus") or {}).get("code", 0)),
            received=_parse_time(str(event.get("requestReceivedTimestamp"))),
        )


def takeover_time(writes: Iterable[AuditWrite], standby: str) -> dt.datetime | None:
    """When ``standby`` first wrote the Lease successfully: the moment it took it."""
    times = [
        w.received
        for w in writes
        if w.user == standby and w.resource == "leases" and 200 <= w.code < 300
    ]
    return min(times, default=None)


def writes_after(writes: Iterable[AuditWrite], user: str, since: dt.datetime) -> list[AuditWrite]:
    """The writes ``user`` made (any answer) after ``since``, its Lease calls aside."""
    return [w for w in writes if w.user == user and w.received > since and w.resource != "leases"]


def overcommitted(pods: Iterable[Pod], allocatable_milli: dict[str, int]) -> list[str]:
    """The nodes (of ``allocatable_milli``, CPU in millicores) whose live pods request more."""
    used: Counter[str] = Counter()
    for pod in pods:
        node = pod.spec.node_name
        if node in allocatable_milli and pod.status.phase not in ("Succeeded", "Failed"):
            used[node] += sum(
                to_milli("cpu", c.resources.requests.get("cpu", 0)) for c in pod.spec.containers
            )
    return sorted(n for n, milli in used.items() if milli > allocatable_milli[n])


# --- one round on a control plane ----------------------------------------------------------------


def _job(name: str, pods: int, selector: dict[str, str]) -> dict[str, Any]:
    spec = task("work", pods, cpu="1", memory="64Mi")
    spec["template"]["spec"]["nodeSelector"] = selector
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": pods,
            "schedulerName": "volcano",
            "queue": "default",
            "maxRetry": 3,
            "tasks": [spec],
        },
    }


def _second_account(admin: Path, ids: Identities, process: str, directory: Path) -> str:
    """A copy of ``process``'s ServiceAccount, bound to the same roles; its kubeconfig is
    written next to the original's. Returns its username."""
    namespace, name = ids.usernames[process].split(":")[2:]
    copy = f"{name}-b"
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": copy, "namespace": namespace},
        }
    ]
    for obj in ids.rbac:
        if obj["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        subjects = obj.get("subjects") or []
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == name for s in subjects):
            objects.append(
                {
                    **obj,
                    "subjects": [
                        *subjects,
                        {"kind": "ServiceAccount", "name": copy, "namespace": namespace},
                    ],
                }
            )
    run_kubectl(
        admin,
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )
    token = run_kubectl(admin, "-n", namespace, "create", "token", copy, "--duration=3600s").strip()
    write_token_kubeconfig(admin, directory / f"{process}-b.kubeconfig", user=copy, token=token)
    return f"system:serviceaccount:{namespace}:{copy}"


class FencingRound:
    def __init__(
        self, plane: ControlPlane, config: FencingConfig, fault: str, target: str, workdir: Path
    ) -> None:
        self.plane, self.config, self.fault, self.target = plane, config, fault, target
        self.name = f"fence-{fault}-{target[:5]}-{secrets.token_hex(2)}"
        self.dir = workdir / self.name
        self.dir.mkdir(parents=True)
        self.other = next(t for t in TARGETS if t != target)
        self.selector = {LABEL: self.name}
        self.proxies = Proxies(f"127.0.0.1:{plane.ports['apiserver']}", self.dir)
        self.procs: dict[str, CalderaProcess] = {}
        self.result = Round(fault, target)

    def _spawn(self, slot: str, kind: str, kubeconfig: Path, lease_namespace: str) -> None:
        port = self.proxies.start((slot,))[slot]
        config = json.loads(kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
        via = self.dir / f"{slot}.kubeconfig"
        via.write_text(json.dumps(config))
        cfg = self.config
        args = [
            "--leader-elect=true",
            f"--leader-election-namespace={lease_namespace}",
            f"--lease-duration={cfg.lease_duration}",
            f"--renew-deadline={cfg.renew_deadline}",
            f"--retry-period={cfg.retry_period}",
        ]
        self.procs[slot] = CalderaProcess(kind, args, kubeconfig=via, log_dir=self.dir)

    async def _until(self, what: str, check: Any, timeout: float = 90.0) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(check):
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {s}\n{p.log()[-1500:]}" for s, p in self.procs.items())
                raise TimeoutError(f"{self.name}: {what} not within {timeout:.0f}s\n{logs}")
            await asyncio.sleep(0.2)

    def _leading(self, slot: str) -> bool:
        status, text = self.procs[slot].get("/metrics")
        return status == 200 and metric_sum(text, LEADER) >= 1

    async def _bound(self, kube: KubeClient, job: str, count: int) -> bool:
        pods = await kube.list(POD, namespace=self.name, label_selector=f"{JOB_NAME_KEY}={job}")
        return sum(1 for p in pods.items if p.spec.node_name) >= count

    async def _until_bound(self, kube: KubeClient, job: str, count: int) -> None:
        deadline = time.monotonic() + 90
        while not await self._bound(kube, job, count):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: job {job} not bound within 90s")
            await asyncio.sleep(0.2)

    async def run(self, kube: KubeClient) -> Round:
        started = time.monotonic()
        admin = self.plane.kubeconfig
        cfg = self.config
        ids = create_identities(
            admin, self.dir / "identities", release=self.name, namespace=f"{self.name}-system"
        )
        try:
            standby_user = _second_account(admin, ids, self.target, self.dir / "identities")
            leader_user = ids.usernames[self.target]
            await kube.create(NAMESPACE, {"metadata": {"name": self.name}})
            nodes = self.plane.create_nodes(
                cfg.nodes,
                NodeSpec(cpu=str(cfg.node_cpu), memory="32Gi", pods="110", labels=self.selector),
                prefix=f"{self.name}-",
            )
            lease_ns = ids.namespace
            self._spawn("leader", self.target, ids.kubeconfigs[self.target], lease_ns)
            self._spawn(self.other, self.other, ids.kubeconfigs[self.other], lease_ns)
            await self._until("the first replica leading", lambda: self._leading("leader"))
            standby_config = self.dir / "identities" / f"{self.target}-b.kubeconfig"
            self._spawn("standby", self.target, standby_config, lease_ns)
            await self._until(
                "the standby ready", lambda: self.procs["standby"].get("/readyz")[0] == 200
            )
            await kube.create(JOB, _job("warm", 2, self.selector), namespace=self.name)
            await self._until_bound(kube, "warm", 2)
            await self._outage(kube)
            await self._until_exit_or(cfg.watch)
            await self._measure(kube, nodes, leader_user, standby_user)
        finally:
            for proc in self.procs.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.proc.pid, signal.SIGCONT)
                proc.stop()
            self.proxies.stop()
            delete_identities(admin, ids)
            await self._clean_up(kube)
        self.result.seconds = time.monotonic() - started
        return self.result

    async def _clean_up(self, kube: KubeClient) -> None:
        """Delete the round's namespace (and wait, so the next round's processes do not act on
        its jobs), then its nodes."""
        with contextlib.suppress(ApiError, ApiConnectionError):
            await kube.delete(NAMESPACE, self.name)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    await kube.get(NAMESPACE, self.name)
                except NotFound:
                    break
                await asyncio.sleep(0.5)
        self.plane.kubectl("delete", "node", "-l", f"{LABEL}={self.name}", "--wait=false")

    async def _outage(self, kube: KubeClient) -> None:
        leader = self.procs["leader"]
        fault_at = time.monotonic()
        if self.fault == "pause":
            os.kill(leader.proc.pid, signal.SIGSTOP)
        else:
            os.kill(self.proxies.procs["leader"].pid, signal.SIGUSR2)
        await self._until("the standby leading", lambda: self._leading("standby"), timeout=120)
        self.result.takeover = time.monotonic() - fault_at
        await kube.create(JOB, _job("during", 4, self.selector), namespace=self.name)
        await self._until_bound(kube, "during", 4)
        await asyncio.sleep(max(0.0, fault_at + self.config.outage - time.monotonic()))
        if self.fault == "pause":
            os.kill(leader.proc.pid, signal.SIGCONT)
        else:
            os.kill(self.proxies.procs["leader"].pid, signal.SIGHUP)
        await asyncio.sleep(self.config.arrive_after)
        await kube.create(JOB, _job("late", 4, self.selector), namespace=self.name)

    async def _until_exit_or(self, seconds: float) -> None:
        """Watch the old leader ``seconds`` (and 3 s more after it exits, if sooner)."""
        proc = self.procs["leader"].proc
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and proc.poll() is None:  # noqa: ASYNC110 - a process
            await asyncio.sleep(0.2)
        await asyncio.sleep(3.0 if proc.poll() is not None else 0.0)

    async def _measure(
        self, kube: KubeClient, nodes: list[str], leader_user: str, standby_user: str
    ) -> None:
        leader = self.procs["leader"]
        self.result.old_leader_exit = leader.proc.poll()
        log = leader.log()
        self.result.old_leader_lost = "leadership lost" in log
        self.result.dropped = log.count("write dropped")
        audit = self.plane.audit_log
        lines = audit.read_text(errors="replace").splitlines() if audit.exists() else []
        writes = list(audit_writes(lines))
        since = takeover_time(writes, standby_user)
        if since is None:
            self.result.takeover = None
        else:
            self.result.writes_after = writes_after(writes, leader_user, since)
        listed = await kube.list(NODE, label_selector=f"{LABEL}={self.name}")
        allocatable = {
            n.metadata.name: to_milli("cpu", n.status.allocatable.get("cpu", 0))
            for n in listed.items
            if n.metadata.name in nodes
        }
        pods = await kube.list(POD, field_selector="status.phase!=Succeeded")
        self.result.overcommitted = overcommitted(pods.items, allocatable)


async def run_fencing(plane: ControlPlane, config: FencingConfig, workdir: Path) -> list[Round]:
    """Every (fault, target) round of ``config``, one after the other."""
    rounds = []
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(plane.kubeconfig, options=options) as kube:
        for fault in config.faults:
            for target in config.targets:
                rounds.append(await FencingRound(plane, config, fault, target, workdir).run(kube))
    return rounds
