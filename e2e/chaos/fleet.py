"""Caldera's processes in the chaos run: replicas started, killed with SIGKILL and restarted, and
watched for exits nobody asked for. Each kind talks to the API server through its own proxy
(`e2e/chaos/proxy.py`) so its connections can be cut alone.

Times are measured from the restart (the new process spawned) or the kill (a failover) until the
process is ready (``/readyz`` 200) and acting: leading, and its own activity counter moved
(reconciles for the controllers, sessions for the scheduler; the webhook acts once ready).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from e2e.caldera_process import CalderaProcess

__all__ = ["ACTIVITY", "Fleet", "Replica", "metric_sum"]

LEADER = "caldera_leader_election_master_status"
ACTIVITY = {
    "controllers": "caldera_controller_reconcile_total",
    "scheduler": "caldera_session_latency_milliseconds_count",
}
# A replica that cannot renew its Lease in time (an API server restart longer than the renew
# deadline) exits so that its restart rejoins as a candidate, as kube-scheduler and Volcano do.
LEASE_LOST = "leadership lost; exiting"


def metric_sum(text: str, name: str) -> float:
    """The sum of every series of metric ``name`` in a /metrics page."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rpartition(" ")[2])
    return total


@dataclass
class Replica:
    kind: str
    index: int
    proc: CalderaProcess
    started: float
    killed: bool = False
    restartable: bool = True  # False once the run stops its processes

    def scrape(self) -> str | None:
        status, text = self.proc.get("/metrics")
        return text if status == 200 else None

    def leading(self) -> bool:
        text = self.scrape()
        return text is not None and metric_sum(text, LEADER) >= 1

    def acting(self) -> bool:
        """Ready, leading (when elected) and its activity counter above zero."""
        if self.proc.get("/readyz")[0] != 200:
            return False
        if self.kind == "webhook":
            return True
        text = self.scrape()
        return (
            text is not None
            and metric_sum(text, LEADER) >= 1
            and metric_sum(text, ACTIVITY[self.kind]) > 0
        )


@dataclass
class Fleet:
    """The replicas of the three processes, their proxies, and what happened to them."""

    kubeconfigs: dict[str, Path]  # per kind, pointing at that kind's proxy
    log_dir: Path
    lease_namespace: str
    webhook_args: list[str]
    replicas: dict[str, int]
    scheduler_args: list[str] = field(default_factory=list)
    members: dict[str, list[Replica]] = field(default_factory=dict)
    restarts: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds to ready
    acting: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds to acting
    failovers: dict[str, list[float]] = field(default_factory=dict)  # kind -> seconds
    crashes: list[str] = field(default_factory=list)
    lease_exits: list[str] = field(default_factory=list)  # exits by design, see watch_for_crashes
    kills: int = 0

    def _argv(self, kind: str) -> list[str]:
        if kind == "webhook":
            return list(self.webhook_args)
        # The chart's Lease timings (15 s / 10 s / 2 s, Volcano's): failover times are real.
        args = ["--leader-elect=true", f"--leader-election-namespace={self.lease_namespace}"]
        if kind == "scheduler":
            args += self.scheduler_args
        return args

    def current(self, kind: str, index: int) -> Replica | None:
        return next((r for r in self.members.get(kind, []) if r.index == index), None)

    def spawn(self, kind: str, index: int) -> Replica:
        """A new process in slot ``index``; the slot's previous process must have exited (one
        process per slot, so the kill path and the crash watch never both restart it)."""
        previous = self.current(kind, index)
        if previous is not None:
            assert previous.proc.proc.poll() is not None, f"{kind}[{index}] is still running"
            previous.proc.stop()  # closes its log
        proc = CalderaProcess(
            kind, self._argv(kind), kubeconfig=self.kubeconfigs[kind], log_dir=self.log_dir
        )
        replica = Replica(kind, index, proc, time.monotonic())
        group = self.members.setdefault(kind, [])
        group[:] = [r for r in group if r.index != index] + [replica]
        return replica

    def start_all(self) -> None:
        for kind, count in self.replicas.items():
            for i in range(count):
                self.spawn(kind, i)

    async def wait_acting(self, timeout: float = 90) -> None:  # noqa: ASYNC109
        """Until every kind has an acting replica (the leader, for the elected ones)."""
        deadline = time.monotonic() + timeout
        for kind in self.replicas:
            while not await asyncio.to_thread(self.any_acting, kind):
                if time.monotonic() > deadline:
                    tails = "\n".join(r.proc.log()[-2000:] for r in self.members[kind])
                    raise TimeoutError(f"no {kind} replica acting in {timeout:.0f}s:\n{tails}")
                await asyncio.sleep(0.3)

    def any_acting(self, kind: str) -> bool:
        return any(r.acting() for r in self.members[kind])

    def logs(self) -> list[Path]:
        return sorted(self.log_dir.glob("*.log"))

    async def _leader(self, kind: str) -> Replica:
        group = self.members[kind]
        if kind == "webhook" or len(group) == 1:
            return group[0]
        for replica in group:
            if await asyncio.to_thread(replica.leading):
                return replica
        return group[0]

    async def kill_and_restart(self, kind: str, pause: float) -> None:
        """SIGKILL the kind's leader, restart it after ``pause`` and time its return (and, with
        a standby, the standby's takeover)."""
        victim = await self._leader(kind)
        if victim.proc.proc.poll() is not None:
            return  # it exited on its own a moment ago (a lost Lease): the crash watch restarts it
        victim.killed = True
        killed_at = time.monotonic()
        await asyncio.to_thread(victim.proc.kill)
        self.kills += 1
        standbys = [r for r in self.members[kind] if r is not victim]
        takeover = (
            asyncio.create_task(self._time_takeover(kind, standbys, killed_at))
            if standbys and kind != "webhook"
            else None
        )
        await asyncio.sleep(pause)
        if self.current(kind, victim.index) is not victim:
            return  # restarted meanwhile by the crash watch
        replica = self.spawn(kind, victim.index)
        await self._time_return(replica, elected=not standbys)
        if takeover is not None:
            await takeover

    async def _time_takeover(self, kind: str, standbys: list[Replica], since: float) -> None:
        deadline = since + 120
        while time.monotonic() < deadline:
            for replica in standbys:
                if await asyncio.to_thread(replica.acting):
                    self.failovers.setdefault(kind, []).append(time.monotonic() - since)
                    return
            await asyncio.sleep(0.2)

    async def _time_return(self, replica: Replica, *, elected: bool) -> None:
        """Seconds until ready; and, when it is to lead again (no standby took over), until
        acting."""
        ready_at = acting_at = None
        deadline = replica.started + 120
        while time.monotonic() < deadline and (ready_at is None or acting_at is None):
            if (
                ready_at is None
                and await asyncio.to_thread(lambda: replica.proc.get("/readyz")[0]) == 200
            ):
                ready_at = time.monotonic()
                self.restarts.setdefault(replica.kind, []).append(ready_at - replica.started)
                if not elected:
                    return
            if acting_at is None and await asyncio.to_thread(replica.acting):
                acting_at = time.monotonic()
                self.acting.setdefault(replica.kind, []).append(acting_at - replica.started)
            await asyncio.sleep(0.2)

    async def watch_for_crashes(self, stop: asyncio.Event) -> None:
        """Record (and restart) any replica that exits without being killed: a crash, or an exit
        after a lost Lease (by design; counted apart)."""
        while not stop.is_set():
            for kind, group in self.members.items():
                for replica in list(group):
                    code = replica.proc.proc.poll()
                    if code is not None and not replica.killed and replica.restartable:
                        log = replica.proc.log()
                        exits = self.lease_exits if LEASE_LOST in log else self.crashes
                        exits.append(f"{kind}[{replica.index}] exited {code}: {log[-1500:]}")
                        replica.killed = True
                        self.spawn(kind, replica.index)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every live replica; each one's exit code (a clean stop is 0)."""
        codes = {}
        for group in self.members.values():
            for replica in group:
                replica.restartable = False
        for kind, group in self.members.items():
            for replica in group:
                if replica.proc.proc.poll() is None:
                    codes[f"{kind}[{replica.index}]"] = replica.proc.stop()
        return codes


@dataclass
class Proxies:
    """One `e2e/chaos/proxy.py` process per kind, in front of the API server."""

    upstream: str  # HOST:PORT
    directory: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)

    def start(self, kinds: tuple[str, ...], port: int = 0) -> dict[str, int]:
        """One proxy per kind (on ``port`` if given: then pass one kind), each one's port."""
        for kind in kinds:
            port_file = self.directory / f"proxy-{kind}.port"
            port_file.unlink(missing_ok=True)
            with (self.directory / f"proxy-{kind}.log").open("wb") as log:
                self.procs[kind] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "e2e.chaos.proxy",
                        f"--upstream={self.upstream}",
                        f"--port-file={port_file}",
                        f"--port={port}",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    cwd=Path(__file__).resolve().parents[2],
                )
            deadline = time.monotonic() + 20
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline or self.procs[kind].poll() is not None:
                    raise RuntimeError(f"the proxy for {kind} did not start")
                time.sleep(0.05)
            self.ports[kind] = int(port_file.read_text())
        return self.ports

    def drop(self, kind: str) -> None:
        os.kill(self.procs[kind].pid, signal.SIGUSR1)

    def drop_all(self) -> None:
        for kind in self.procs:
            self.drop(kind)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
            proc.wait(10)
