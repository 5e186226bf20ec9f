"""Least privilege, proven on a small run: Caldera's three processes, each with only its chart
ServiceAccount's token, carry a workload through the real API server, and its audit log shows
that every right they used is granted by their roles, none was refused, and no private key,
token or certificate reached their logs or the Events.

The workload touches every controller and the scheduler's writes: a Job with the svc, ssh and
env plugins that completes and is collected by its TTL; the same Job as the one step of a JobFlow
(from a JobTemplate) deleted once the flow succeeded; a running Job aborted and resumed by
Commands; a Queue closed and opened by Commands (the webhook and the queue controller each ask a
SubjectAccessReview whether the requester may update it); a standalone PodGroup. Everything is
created by the admin through the API server, so the webhook admits it as in production (its
configurations match only this test's namespace and queue).

``pytest -s`` prints the rights table and the grants the run did not use; the chaos run makes
the same comparison with a long workload (docs/reliability.md, "Least privilege").
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import COMMAND, JOB, JOBFLOW, JOBTEMPLATE, PODGROUP, QUEUE
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.audit.rbac import Comparison, compare_processes
from e2e.audit.report import findings_table, rights_table, unused_table
from e2e.audit.secrets import Scanner, known_secret
from e2e.audit.usage import Right, parse_audit
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import ControlPlane, free_port
from e2e.cluster.evidence import events, ssh_private_keys
from e2e.cluster.identities import Identities, create_identities, delete_identities
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.job_fixtures import in_phase, job, task
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e

# A write each process must have made in the workload (the webhook only reads).
WRITES = {
    "controllers": Right("", "secrets", "create"),
    "scheduler": Right("", "pods/binding", "create"),
    "webhook": Right("scheduling.volcano.sh", "queues", "watch"),
}


@dataclass
class Run:
    """The release's identities, its three processes, and what the test will look for."""

    identities: Identities
    procs: dict[str, CalderaProcess]
    known: dict[str, str]
    """Label to secret value: tokens, the webhook's key, the ssh keys seen during the run."""


@pytest.fixture
def identities(cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[Identities]:
    """The chart's RBAC for a fresh release, and a kubeconfig per process; removed after."""
    release = f"priv{secrets.token_hex(3)}"
    made = create_identities(
        cluster.kubeconfig, tmp_path / "identities", release=release, namespace=f"{release}-system"
    )
    yield made
    delete_identities(cluster.kubeconfig, made)


@pytest.fixture
async def run(
    identities: Identities, plane: ControlPlane, namespace: str, tmp_path: Path
) -> AsyncIterator[Run]:
    """The three processes as their ServiceAccounts (controllers and scheduler leading through
    their Leases), the webhook registered for this test's namespace and queues; stopped and
    unregistered afterwards, and each must exit cleanly."""
    crt, key = write_serving_pair(plane.pki, tmp_path / "cert", ["127.0.0.1", "localhost"])
    port = free_port()
    lease_ns = f"--leader-election-namespace={identities.namespace}"
    args = {
        # Default Lease timings: nothing here waits for a takeover, and under a loaded CI a
        # 4 s renew deadline can be missed, which makes the leader exit (fencing) mid-test.
        "controllers": ["--leader-elect=true", lease_ns],
        "scheduler": ["--leader-elect=true", lease_ns, "--schedule-period=0.5"],
        "webhook": [f"--port={port}", f"--tls-cert-file={crt}", f"--tls-key-file={key}"],
    }
    procs = {
        process: CalderaProcess(
            process, argv, kubeconfig=identities.kubeconfigs[process], log_dir=tmp_path
        )
        for process, argv in args.items()
    }
    selector = {"matchLabels": {"caldera.io/e2e": namespace}}
    configurations = webhook_configurations(
        f"https://127.0.0.1:{port}",
        plane.pki.ca_crt.read_bytes(),
        name=identities.release,
        namespace_selector=selector,
        queue_selector=selector,
        hook_domain=f"{identities.release}.caldera.io",
    )
    known = {f"token of {p}": token for p, token in identities.tokens.items()}
    known["webhook serving key"] = key.read_text()
    try:
        for process, proc in procs.items():
            await eventually(_ready(proc), timeout=60, what=f"{process} ready")
        for process in ("controllers", "scheduler"):
            await eventually(
                _leading(procs[process], f"caldera-{process}"),
                timeout=30,
                what=f"{process} leading",
            )
        # The webhook refuses a Job whose queue it has not seen; the scheduler makes "default".
        plane.kubectl(
            "wait", "--for=create", "--timeout=30s", "queues.scheduling.volcano.sh/default"
        )
        for doc in configurations:
            plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
        yield Run(identities, procs, known)
    finally:
        for doc in configurations:
            plane.kubectl("delete", doc["kind"].lower(), identities.release, "--ignore-not-found")
        codes = {process: proc.stop() for process, proc in procs.items()}
    logs = "\n".join(f"--- {p}\n{proc.log()[-2000:]}" for p, proc in procs.items())
    assert codes == {"controllers": 0, "scheduler": 0, "webhook": 0}, logs


def _ready(proc: CalderaProcess) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        assert proc.proc.poll() is None, proc.log()[-3000:]
        return proc.get("/readyz")[0] == 200

    return probe


def _leading(proc: CalderaProcess, lease: str) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return proc.metric("caldera_leader_election_master_status", {"name": lease}) == 1.0

    return probe


def _command(name: str, action: str, target: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name},
        "action": action,
        "target": target,
    }


async def _gone(get: Callable[[], Awaitable[object]]) -> bool:
    try:
        await get()
    except NotFound:
        return True
    return False


async def _workload(kube: KubeClient, namespace: str, cluster: Cluster, run: Run) -> None:
    """Drive every controller and the scheduler through the webhook; see the module docstring."""
    plugins: dict[str, list[str]] = {"svc": [], "ssh": [], "env": []}
    done = job(
        "done",
        [task("worker", 2, run_for="3s", exit_code=0)],
        plugins=plugins,
        ttlSecondsAfterFinished=1,
    )
    held = job("held", [task("worker", 1)])
    await kube.create(JOB, done, namespace=namespace)
    await kube.create(JOB, held, namespace=namespace)
    # A one-step JobFlow of the same Job: its Job is created by the jobflow controller, admitted
    # by the webhook, deleted once the flow succeeded; the templates' status is written.
    template = {**done, "apiVersion": JOBTEMPLATE.api_version, "kind": "JobTemplate"}
    await kube.create(JOBTEMPLATE, template, namespace=namespace)
    flow = {
        "apiVersion": JOBFLOW.api_version,
        "kind": "JobFlow",
        "metadata": {"name": "flow"},
        "spec": {"jobRetainPolicy": "delete", "flows": [{"name": "done"}]},
    }
    await kube.create(JOBFLOW, flow, namespace=namespace)

    queue_name = f"q-{namespace}"
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": queue_name, "labels": {"caldera.io/e2e": namespace}},
        "spec": {"weight": 1},
    }
    await kube.create(QUEUE, queue)
    podgroup = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "standalone"},
        "spec": {"minMember": 1, "queue": "default"},
    }
    await kube.create(PODGROUP, podgroup, namespace=namespace)
    try:
        # The ssh key is read while the Job lives: the TTL removes its Secret with it.
        async def ssh_key() -> dict[str, str] | None:
            return ssh_private_keys(cluster.kubeconfig, namespace) or None

        run.known.update(await eventually(ssh_key, timeout=30, what="the ssh Secret"))

        try:
            # Up to 90 s: the worker's earlier tests may leave jobs in namespaces still being
            # deleted, whose PodGroups hold room in the shared cluster for a while.
            running = await eventually(
                lambda: in_phase(kube, namespace, "held", "Running"),
                timeout=90,
                what="held Running",
            )
        except AssertionError as exc:  # say why: the processes' last lines
            logs = "\n".join(f"--- {p}\n{proc.log()[-3000:]}" for p, proc in run.procs.items())
            raise AssertionError(f"{exc}\n{logs}") from None
        target = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "held",
            "uid": running.metadata.uid,
            "controller": True,
        }
        await kube.create(COMMAND, _command("abort", "AbortJob", target), namespace=namespace)
        await eventually(
            lambda: in_phase(kube, namespace, "held", "Aborted"), timeout=30, what="held Aborted"
        )
        await kube.create(COMMAND, _command("resume", "ResumeJob", target), namespace=namespace)
        await eventually(
            lambda: in_phase(kube, namespace, "held", "Running"), timeout=40, what="held resumed"
        )

        ref = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "name": queue_name,
            "uid": (await kube.get(QUEUE, queue_name)).metadata.uid,
        }

        async def queue_state(state: str) -> bool:
            return (await kube.get(QUEUE, queue_name)).status.state == state

        await eventually(lambda: queue_state("Open"), timeout=20, what="the queue Open")
        await kube.create(COMMAND, _command("close", "CloseQueue", ref), namespace=namespace)
        await eventually(lambda: queue_state("Closed"), timeout=20, what="the queue Closed")
        await kube.create(COMMAND, _command("open", "OpenQueue", ref), namespace=namespace)
        await eventually(lambda: queue_state("Open"), timeout=20, what="the queue Open again")

        async def podgroup_seen() -> bool:
            status = (await kube.get(PODGROUP, "standalone", namespace=namespace)).status
            return status.phase != ""

        await eventually(podgroup_seen, timeout=20, what="the standalone PodGroup's phase")
        await eventually(
            lambda: _gone(lambda: kube.get(JOB, "done", namespace=namespace)),
            timeout=40,
            what="the completed Job collected by its TTL",
        )

        async def flow_succeeded() -> bool:
            got = await kube.get(JOBFLOW, "flow", namespace=namespace)
            return got.status.state.phase == "Succeed"

        await eventually(flow_succeeded, timeout=60, what="the JobFlow Succeed")
        await eventually(
            lambda: _gone(lambda: kube.get(JOB, "flow-done", namespace=namespace)),
            timeout=30,
            what="the JobFlow's Job deleted",
        )
    finally:
        await kube.delete(JOB, "held", namespace=namespace)
        await kube.delete(QUEUE, queue_name)


async def test_each_process_uses_only_what_its_role_grants(
    run: Run, kube: KubeClient, namespace: str, cluster: Cluster, plane: ControlPlane
) -> None:
    """Every process made requests as its ServiceAccount; every right used is granted; no
    request was refused; no secret in the processes' logs or the namespace's Events."""
    await _workload(kube, namespace, cluster, run)
    validated = run.procs["webhook"].metric(
        "caldera_webhook_admission_requests_total",
        {"path": "/jobs/validate", "operation": "CREATE", "result": "allowed"},
    )
    assert validated == 3, "the webhook did not admit the three Jobs (two, and the flow's)"
    flows = run.procs["webhook"].metric(
        "caldera_webhook_admission_requests_total",
        {"path": "/jobflows/validate", "operation": "CREATE", "result": "allowed"},
    )
    assert flows == 1, "the webhook did not admit the JobFlow"
    # Stopped first, so that their watches end and are logged complete.
    for proc in run.procs.values():
        proc.stop()

    users = set(run.identities.usernames.values())
    with plane.audit_log.open() as f:
        requests = [r for r in parse_audit(f) if r.user in users]
    comparisons: dict[str, Comparison] = compare_processes(requests, run.identities.rbac)
    print("\n" + rights_table(comparisons) + "\nGranted, never used:\n" + unused_table(comparisons))

    scanner = Scanner([known_secret(label, value) for label, value in run.known.items()])
    findings = scanner.events(events(cluster.kubeconfig, namespace))
    findings += scanner.events(events(cluster.kubeconfig, run.identities.namespace))
    for process, proc in run.procs.items():
        findings += scanner.lines(proc.log().splitlines(), f"{process}.log")

    assert set(comparisons) == {"controllers", "scheduler", "webhook"}
    assert all(c.rows for c in comparisons.values()), "a process made no request"
    # The audit saw the writes, not only the informers' lists and watches.
    for process, right in WRITES.items():
        assert right in {row.right for row in comparisons[process].rows}, (process, right)
    access = Right("authorization.k8s.io", "subjectaccessreviews", "create")
    for process in ("controllers", "webhook"):  # the queue Commands' checks
        assert access in {row.right for row in comparisons[process].rows}, (process, access)
    ungranted = [row for c in comparisons.values() for row in c.ungranted]
    assert not ungranted, ungranted
    # The processes watch every namespace of this worker's control plane, where other tests'
    # namespaces may be terminating: a create there is refused (403) by the API server's
    # namespace lifecycle, not by RBAC, whose roles here are cluster-wide. Only refusals in
    # this test's namespaces, or of cluster-scoped requests, count.
    own = {namespace, run.identities.namespace, ""}
    refused_here = [
        (r.user, r.verb, r.resource, r.subresource, r.namespace)
        for r in requests
        if r.code == 403 and r.namespace in own
    ]
    elsewhere = Counter(r.namespace for r in requests if r.code == 403 and r.namespace not in own)
    print(f"refused in other tests' namespaces (namespace lifecycle): {dict(elsewhere)}")
    assert not refused_here, refused_here
    assert not findings, findings_table(findings)
    assert any(label.startswith("secret ") for label in run.known), "no ssh key was looked for"
