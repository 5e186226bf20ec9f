"""The CLI commands issue 18 added, run as the user runs them against the real API server: the
namespace from the kubeconfig context and ``-A``, ``caldera version``, ``job restart``,
``job wait``, ``job view`` showing only the job's own events, and the names shell completion
asks for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.kinds import COMMAND, EVENT, JOB
from caldera.api.volcano import Command, Job
from caldera.kube.client import KubeClient
from e2e.conftest import Cluster
from e2e.test_cli import (  # noqa: F401 - controllers and scheduled are fixtures
    acaldera,
    caldera,
    controllers,
    ok,
    one_error,
    rows_by_name,
    scheduled,
    table,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]
SMALL = ["-R", "cpu=100m", "-L", "cpu=100m"]


def context_kubeconfig(cluster: Cluster, path: Path, namespace: str) -> Path:
    """The cluster's kubeconfig whose current context names `namespace`."""
    config: dict[str, Any] = yaml.safe_load(cluster.kubeconfig.read_text())
    for context in config["contexts"]:
        if context["name"] == config["current-context"]:
            context["context"]["namespace"] = namespace
    path.write_text(json.dumps(config))
    return path


async def test_namespace_comes_from_the_context_and_a_lists_every_namespace(
    cluster: Cluster, namespace: str, kube: KubeClient, tmp_path: Path
) -> None:
    config = context_kubeconfig(cluster, tmp_path / "kubeconfig", namespace)
    ok(caldera(None, "job", "run", "-N", "here", *SMALL, kubeconfig=config))
    assert (await kube.get(JOB, "here", namespace=namespace)).metadata.namespace == namespace
    assert "here" in rows_by_name(ok(caldera(None, "job", "list", kubeconfig=config)))
    # -n still wins over the context; the cluster's own kubeconfig has no namespace: default.
    assert "here" not in rows_by_name(ok(caldera(cluster, "job", "list", "-n", "default")))
    assert "here" not in rows_by_name(ok(caldera(cluster, "job", "list")))
    every = table(ok(caldera(cluster, "job", "list", "-A")))
    assert every[0][0] == "Namespace"
    assert [namespace, "here"] in [row[:2] for row in every[1:]]
    ok(caldera(cluster, "pod", "list", "-A"))
    ok(caldera(cluster, "cronjob", "list", "--all-namespaces"))
    # A namespace's objects: the names completion offers, and none (exit 1, quiet) unreachable.
    names = ok(caldera(None, "completion", "names", "jobs", kubeconfig=config))
    assert names.split() == ["here"]
    assert namespace in ok(caldera(cluster, "completion", "names", "namespaces")).split()
    gone = caldera(None, "completion", "names", "jobs", "--master", "http://127.0.0.1:9")
    assert (gone.returncode, gone.stdout, gone.stderr) == (1, "", "")


async def test_version_shows_client_kubernetes_and_caldera_deployments(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    assert ok(caldera(None, "version", "--client")) == "Client Version: 0.1.0\n"
    labels = {
        "app.kubernetes.io/part-of": "caldera",
        "app.kubernetes.io/component": "scheduler",
        "app.kubernetes.io/version": "0.1.0",
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "caldera-scheduler", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "v"}},
            "template": {
                "metadata": {"labels": {"app": "v"}},
                "spec": {"containers": [{"name": "s", "image": "caldera:0.1.0"}]},
            },
        },
    }
    await kube.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        body=json.dumps(deployment).encode(),
        content_type="application/json",
    )
    report = json.loads(ok(caldera(cluster, "version", "-o", "json")))
    assert report["client"] == "0.1.0"
    assert report["kubernetes"].startswith("v1.")
    assert {
        "namespace": namespace,
        "name": "caldera-scheduler",
        "component": "scheduler",
        "version": "0.1.0",
        "image": "caldera:0.1.0",
    } in report["caldera"]
    text = ok(caldera(cluster, "version")).splitlines()
    assert text[1] == f"Kubernetes Version: {report['kubernetes']}"
    assert f"Caldera Server Version: 0.1.0 (scheduler in {namespace}, image caldera:0.1.0)" in text


async def test_restart_creates_a_restartjob_command(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    ns = ["-n", namespace]
    ok(caldera(cluster, "job", "run", "-N", "again", *ns, *SMALL))
    job = await kube.get(JOB, "again", namespace=namespace)
    out = ok(caldera(cluster, "job", "restart", "again", *ns))
    assert out.startswith("restart job again: command again-restartjob-")
    commands: list[Command] = list((await kube.list(COMMAND, namespace=namespace)).items)
    [command] = commands
    assert command.action == "RestartJob"
    target = command.target
    assert target is not None
    assert (target.kind, target.name, target.uid) == ("Job", "again", job.metadata.uid)
    one_error(caldera(cluster, "job", "restart", "nope", *ns), f"job {namespace}/nope not found")


@pytest.mark.usefixtures("controllers", "scheduled")
async def test_restart_and_wait_through_the_job_controller(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """`job wait` sees the job Running; `job restart`'s Command makes the controller kill and
    recreate its pods with the job's version bumped; `job wait` sees it Running again."""
    ns = ["-n", namespace]
    ok(await acaldera(cluster, "job", "run", "-N", "rs", *ns, "-r", "2", "-m", "2", *SMALL))
    wait = ["job", "wait", "rs", *ns, "--for=Running", "--timeout=90s"]
    assert ok(await acaldera(cluster, *wait)) == f"job {namespace}/rs is Running\n"
    before = await kube.get(JOB, "rs", namespace=namespace)
    ok(await acaldera(cluster, "job", "restart", "rs", *ns))

    async def bumped() -> Job | None:
        job = await kube.get(JOB, "rs", namespace=namespace)
        return job if job.status.version > before.status.version else None

    await eventually(bumped, timeout=90, what="the job's version bumped")
    ok(await acaldera(cluster, *wait))
    assert list((await kube.list(COMMAND, namespace=namespace)).items) == []  # consumed


async def set_phase(kube: KubeClient, namespace: str, name: str, phase: str) -> None:
    await kube.patch_status(JOB, name, {"status": {"state": {"phase": phase}}}, namespace=namespace)


async def test_wait_returns_when_the_phase_is_reached_or_cannot_be(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    ns = ["-n", namespace]
    ok(caldera(cluster, "job", "run", "-N", "w", *ns, *SMALL))
    one_error(
        caldera(cluster, "job", "wait", "w", *ns, "--timeout=1s"),
        f"timed out after 1s waiting for job {namespace}/w to be Completed",
    )
    # The phase changes while `job wait` watches.
    waiting = asyncio.create_task(acaldera(cluster, "job", "wait", "w", *ns, "--timeout=60s"))
    await asyncio.sleep(2)
    assert not waiting.done()
    await set_phase(kube, namespace, "w", "Running")
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await set_phase(kube, namespace, "w", "Completed")
    assert ok(await waiting) == f"job {namespace}/w is Completed\n"
    # Already there, even with no time to wait; another final phase will never come.
    assert ok(caldera(cluster, "job", "wait", "w", *ns, "--for=completed", "--timeout=0"))
    one_error(
        caldera(cluster, "job", "wait", "-N", "w", *ns, "--for=Running"),
        f"job {namespace}/w ended Completed: it will not be Running",
    )
    one_error(caldera(cluster, "job", "wait", "w", *ns, "--for=Done"), "--for: 'Done'")


def event_about(job: Job, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{job.metadata.name}-"},
        "involvedObject": {
            "apiVersion": JOB.api_version,
            "kind": "Job",
            "namespace": job.metadata.namespace,
            "name": job.metadata.name,
            "uid": job.metadata.uid,
        },
        "reason": "Testing",
        "message": message,
        "type": "Normal",
        "source": {"component": "e2e"},
    }


async def test_view_shows_only_the_jobs_own_events(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """Events of an earlier job of the same name, and of another job, are not shown."""
    ns = ["-n", namespace]
    ok(caldera(cluster, "job", "run", "-N", "seen", *ns, *SMALL))
    ok(caldera(cluster, "job", "run", "-N", "other", *ns, *SMALL))
    first = await kube.get(JOB, "seen", namespace=namespace)
    other = await kube.get(JOB, "other", namespace=namespace)
    await kube.create(EVENT, event_about(first, "of-the-first"), namespace=namespace)
    await kube.create(EVENT, event_about(other, "of-another"), namespace=namespace)
    ok(caldera(cluster, "job", "delete", "seen", *ns))
    ok(caldera(cluster, "job", "run", "-N", "seen", *ns, *SMALL))
    second = await kube.get(JOB, "seen", namespace=namespace)
    await kube.create(EVENT, event_about(second, "of-this-one"), namespace=namespace)
    view = ok(caldera(cluster, "job", "view", "seen", *ns))
    events = view[view.index("Events:") :]
    assert "of-this-one" in events
    assert "of-the-first" not in events
    assert "of-another" not in events
