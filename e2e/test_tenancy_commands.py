"""Tenancy of queue Commands on the real API server: a namespace editor cannot open or close a
Queue through a Command, an administrator can, and tenants keep everything else they should do.

Set-up, once for the module: the chart's RBAC for a fresh release (its processes' roles, and the
user roles aggregated into the built-in ``edit`` and ``view``), ``caldera webhook`` and
``caldera controllers`` running as the release's ServiceAccounts (so their SubjectAccessReviews
go through their own rights), the webhook registered for this module's labelled namespaces and
queue only, and two ServiceAccounts in the tenant's namespace: one bound to ``edit``, one to
``view`` (RoleBindings), each with its own token. The controllers trust the release namespace
with queue Commands, as the chart sets them up.

Namespaces: ``team`` (the tenant's, webhook on), ``ops`` (an administrator's, webhook on),
``rogue`` (webhook off: what an object stored while the webhook is not registered looks like)
and the release namespace (trusted, webhook off).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caldera.api.authz import REQUESTED_BY_KEY
from caldera.api.kinds import COMMAND, EVENT, QUEUE
from caldera.api.volcano import Queue
from caldera.kube.client import KubeClient
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import ClusterError, free_port, kubectl, run_kubectl
from e2e.cluster.identities import (
    Identities,
    bound_account_kubeconfig,
    create_identities,
    delete_identities,
)
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.job_fixtures import in_phase, job, task
from e2e.waiting import eventually, gone, until

pytestmark = pytest.mark.e2e

LABEL = "caldera.io/e2e-tenancy"
CALDERA = str(Path(sys.prefix) / "bin" / "caldera")


@dataclass(frozen=True)
class Tenancy:
    """What the module set up."""

    identities: Identities
    webhook: CalderaProcess
    controllers: CalderaProcess
    team: str
    ops: str
    rogue: str
    queue: str
    kubeconfigs: dict[str, Path]
    """"editor" and "viewer" (ServiceAccounts in ``team``) to their kubeconfigs."""

    def user(self, account: str) -> str:
        return f"system:serviceaccount:{self.team}:{account}"


def _ready(proc: CalderaProcess) -> bool:
    assert proc.proc.poll() is None, proc.log()[-3000:]
    return proc.get("/readyz")[0] == 200


@pytest.fixture(scope="module")
def tenancy(
    cluster: Cluster, crds: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenancy]:
    """See the module docstring; everything is removed afterwards and both processes must exit
    cleanly."""
    if cluster.plane is None:
        pytest.skip("registers a webhook at a local URL: needs the local control plane")
    plane = cluster.plane
    tmp = tmp_path_factory.mktemp("tenancy")
    token = secrets.token_hex(3)
    release = f"ten{token}"
    team, ops, rogue = f"team-{token}", f"ops-{token}", f"rogue-{token}"
    queue = f"tenancy-{token}"
    for name, labelled in ((team, True), (ops, True), (rogue, False)):
        labels = {LABEL: token} if labelled else {}
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }
        plane.kubectl("apply", "-f", "-", input=json.dumps(body))
    identities = create_identities(
        cluster.kubeconfig, tmp / "identities", release=release, namespace=f"{release}-system"
    )
    crt, key = write_serving_pair(plane.pki, tmp / "cert", ["127.0.0.1", "localhost"])
    port = free_port()
    webhook = CalderaProcess(
        "webhook",
        [f"--port={port}", f"--tls-cert-file={crt}", f"--tls-key-file={key}"],
        kubeconfig=identities.kubeconfigs["webhook"],
        log_dir=tmp,
    )
    controllers = CalderaProcess(
        "controllers",
        [
            "--controllers=job,queue,command",
            "--leader-elect=false",
            f"--queue-command-namespaces={identities.namespace}",
        ],
        kubeconfig=identities.kubeconfigs["controllers"],
        log_dir=tmp,
    )
    selector = {"matchLabels": {LABEL: token}}
    configurations = webhook_configurations(
        f"https://127.0.0.1:{port}",
        plane.pki.ca_crt.read_bytes(),
        name=release,
        namespace_selector=selector,
        queue_selector=selector,
        hook_domain=f"{release}.caldera.io",
    )
    try:
        until(lambda: _ready(webhook) and _ready(controllers), what="webhook and controllers")
        # The queue controller makes "default" (the Jobs' queue), which the webhook must have seen.
        plane.kubectl(
            "wait", "--for=create", "--timeout=30s", "queues.scheduling.volcano.sh/default"
        )
        for doc in configurations:
            plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
        kubeconfigs: dict[str, Path] = {}
        for account, role in (("editor", "edit"), ("viewer", "view")):
            kubeconfigs[account] = bound_account_kubeconfig(
                cluster.kubeconfig, team, account, role, tmp / f"{account}.kubeconfig"
            )

        def aggregated() -> bool:
            can = _as(
                kubeconfigs["editor"], team, "auth", "can-i", "create", "commands.bus.volcano.sh"
            )
            return can.stdout.strip() == "yes"

        # The aggregation controller adds the chart's user roles to edit and view.
        until(aggregated, what="the chart's user roles aggregated into edit")
        body = {
            "apiVersion": QUEUE.api_version,
            "kind": "Queue",
            "metadata": {"name": queue, "labels": {LABEL: token}},
            "spec": {"weight": 1},
        }
        plane.kubectl("apply", "-f", "-", input=json.dumps(body))
        until(lambda: _state(cluster, queue) == "Open", what=f"queue {queue} Open")
        yield Tenancy(identities, webhook, controllers, team, ops, rogue, queue, kubeconfigs)
    finally:
        for doc in configurations:
            plane.kubectl("delete", doc["kind"].lower(), release, "--ignore-not-found")
        codes = (webhook.stop(), controllers.stop())
        with contextlib.suppress(ClusterError):
            plane.kubectl("delete", "queues.scheduling.volcano.sh", queue, "--ignore-not-found")
        plane.kubectl("delete", "namespace", team, ops, rogue, "--ignore-not-found", "--wait=false")
        delete_identities(cluster.kubeconfig, identities)
    assert codes == (0, 0), webhook.log()[-2000:] + controllers.log()[-2000:]


def _as(
    kubeconfig: Path, namespace: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubectl(), f"--kubeconfig={kubeconfig}", "-n", namespace, *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )


def _state(cluster: Cluster, queue: str) -> str:
    got = json.loads(
        run_kubectl(cluster.kubeconfig, "get", "queues.scheduling.volcano.sh", queue, "-o", "json")
    )
    state: str = got.get("status", {}).get("state", "")
    return state


def _queue_command(name: str, action: str, queue: Queue, **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": COMMAND.api_version,
        "kind": "Command",
        "metadata": {"name": name, **meta},
        "action": action,
        "target": {
            "apiVersion": QUEUE.api_version,
            "kind": "Queue",
            "name": queue.metadata.name,
            "uid": queue.metadata.uid,
        },
    }


async def _state_is(kube: KubeClient, name: str, state: str) -> bool:
    return (await kube.get(QUEUE, name)).status.state == state


async def _warning(kube: KubeClient, namespace: str, name: str, reason: str) -> str | None:
    events = await kube.list(
        EVENT, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    for event in events.items:
        if event.type == "Warning" and event.reason == reason:
            return event.message
    return None


async def test_an_editor_cannot_close_or_open_a_queue(tenancy: Tenancy, kube: KubeClient) -> None:
    """CloseQueue and OpenQueue Commands from a ServiceAccount bound to edit are refused at
    admission with a message naming the field, the user and the queue; the queue stays Open."""
    t = tenancy
    queue = await kube.get(QUEUE, t.queue)
    for action in ("CloseQueue", "OpenQueue"):
        body = _queue_command(f"by-editor-{action.lower()}", action, queue)
        created = _as(t.kubeconfigs["editor"], t.team, "create", "-f", "-", input=json.dumps(body))
        assert created.returncode != 0, created.stdout
        assert (
            f'target.name: Forbidden: user "{t.user("editor")}" may not update queue "{t.queue}"'
            in created.stderr
        ), created.stderr
        assert "only those who may update a Queue may open or close it" in created.stderr
    assert (await kube.get(QUEUE, t.queue)).status.state == "Open"
    refused = t.webhook.metric(
        "caldera_webhook_admission_requests_total",
        {"path": "/commands/validate", "operation": "CREATE", "result": "denied"},
    )
    assert refused is not None
    assert refused >= 2


async def test_the_controller_refuses_what_the_webhook_did_not_stamp(
    tenancy: Tenancy, kube: KubeClient
) -> None:
    """With the webhook out of the way (a namespace it does not cover), an administrator stores
    queue Commands directly: one with a forged stamp naming the editor, one with no stamp, one
    with a malformed stamp. The controller asks the API server about the stamped user, refuses
    each with a Warning Event naming why, deletes it, and the queue stays Open."""
    t = tenancy
    queue = await kube.get(QUEUE, t.queue)
    forged = json.dumps({"user": t.user("editor"), "groups": ["system:serviceaccounts"]})
    cases = {
        "forged": ({REQUESTED_BY_KEY: forged}, f'user "{t.user("editor")}" may not update queue'),
        "unstamped": ({}, f"carries no {REQUESTED_BY_KEY} stamp"),
        "malformed": ({REQUESTED_BY_KEY: "{not json"}, f"metadata.annotations[{REQUESTED_BY_KEY}]"),
    }
    for name, (stamped, _why) in cases.items():
        body = _queue_command(name, "CloseQueue", queue, annotations=stamped)
        await kube.create(COMMAND, body, namespace=t.rogue)
    for name, (_stamped, why) in cases.items():
        message = await eventually(
            lambda n=name: _warning(kube, t.rogue, n, "CommandForbidden"),  # type: ignore[misc]
            timeout=30,
            what=f"the CommandForbidden event of {name}",
        )
        assert f"Command {name} was removed: " in message
        assert why in message, message
        await eventually(lambda n=name: gone(kube, COMMAND, n, t.rogue), what=f"{name} deleted")  # type: ignore[misc]
    # Each was refused before its delete: the queue was never touched.
    assert (await kube.get(QUEUE, t.queue)).status.state == "Open"


async def test_an_administrator_can_close_and_open_a_queue(
    tenancy: Tenancy, kube: KubeClient, cluster: Cluster
) -> None:
    """``caldera queue operate`` as an administrator: in a namespace the webhook covers (stamped
    and checked), and in the trusted release namespace (``--namespace``); a plain Command too."""
    t = tenancy

    def operate(action: str, namespace: str) -> None:
        argv = [
            CALDERA,
            "queue",
            "operate",
            "-n",
            t.queue,
            "-a",
            action,
            f"--namespace={namespace}",
        ]
        done = subprocess.run(
            [*argv, f"--kubeconfig={cluster.kubeconfig}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    operate("close", t.ops)
    await eventually(lambda: _state_is(kube, t.queue, "Closed"), what="closed through ops")
    operate("open", t.identities.namespace)
    await eventually(
        lambda: _state_is(kube, t.queue, "Open"), what="opened through the trusted namespace"
    )
    queue = await kube.get(QUEUE, t.queue)
    created = await kube.create(
        COMMAND, _queue_command("plain-close", "CloseQueue", queue), namespace=t.ops
    )
    stamp = json.loads(created.metadata.annotations[REQUESTED_BY_KEY])
    assert "system:masters" in stamp["groups"], stamp
    await eventually(lambda: _state_is(kube, t.queue, "Closed"), what="closed by a plain Command")
    await kube.create(COMMAND, _queue_command("plain-open", "OpenQueue", queue), namespace=t.ops)
    await eventually(lambda: _state_is(kube, t.queue, "Open"), what="opened by a plain Command")


async def test_an_editor_still_runs_jobs_and_job_commands(
    tenancy: Tenancy, kube: KubeClient
) -> None:
    """The editor creates a Job and aborts it with a Command of its own; the Command carries the
    editor as its requester."""
    t = tenancy
    body = job("mine", [task("w", 1)])
    created = _as(t.kubeconfigs["editor"], t.team, "create", "-f", "-", input=json.dumps(body))
    assert created.returncode == 0, created.stderr
    uid = json.loads(
        _as(
            t.kubeconfigs["editor"], t.team, "get", "jobs.batch.volcano.sh", "mine", "-o", "json"
        ).stdout
    )["metadata"]["uid"]
    command = {
        "apiVersion": COMMAND.api_version,
        "kind": "Command",
        "metadata": {"name": "abort-mine"},
        "action": "AbortJob",
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "mine",
            "uid": uid,
        },
    }
    issued = _as(
        t.kubeconfigs["editor"],
        t.team,
        "create",
        "-o",
        "json",
        "-f",
        "-",
        input=json.dumps(command),
    )
    assert issued.returncode == 0, issued.stderr
    stamp = json.loads(json.loads(issued.stdout)["metadata"]["annotations"][REQUESTED_BY_KEY])
    assert stamp["user"] == t.user("editor")
    await eventually(
        lambda: in_phase(kube, t.team, "mine", "Aborted"), timeout=40, what="mine Aborted"
    )


async def test_a_viewer_creates_nothing(tenancy: Tenancy) -> None:
    """The viewer reads Jobs and Commands and is refused every create, queue Commands included
    (by RBAC, before any webhook)."""
    t = tenancy
    viewer = t.kubeconfigs["viewer"]
    listed = _as(viewer, t.team, "get", "jobs.batch.volcano.sh,commands.bus.volcano.sh")
    assert listed.returncode == 0, listed.stderr
    queue_command = {
        "apiVersion": COMMAND.api_version,
        "kind": "Command",
        "metadata": {"name": "by-viewer"},
        "action": "CloseQueue",
        "target": {"apiVersion": QUEUE.api_version, "kind": "Queue", "name": t.queue, "uid": "x"},
    }
    for body in (job("by-viewer", [task("w", 1)]), queue_command):
        refused = _as(viewer, t.team, "create", "-f", "-", input=json.dumps(body))
        assert refused.returncode != 0
        assert "forbidden" in refused.stderr.lower(), refused.stderr
        assert "cannot create resource" in refused.stderr, refused.stderr
