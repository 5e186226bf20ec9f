"""The vcctl-style commands (``caldera job|queue|pod``) against the real API server, run as the
user runs them: the ``caldera`` console script as a subprocess, checked by its output and exit
code, and by the objects it leaves in the cluster (Jobs, Queues, Commands)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import queue as queue_mod
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from caldera.api.kinds import (
    COMMAND,
    CRONJOB,
    EVENT,
    JOB,
    JOBFLOW,
    JOBTEMPLATE,
    POD,
    PODGROUP,
    QUEUE,
)
from caldera.api.volcano import Command, Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from cli.output import JOB_COLUMNS, POD_COLUMNS, QUEUE_COLUMNS, QUEUE_WIDE_COLUMNS
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.standin_scheduler import standin_scheduler
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NIGHTLY: dict[str, Any] = yaml.safe_load((EXAMPLES / "cronjob-nightly.yaml").read_text())
PIPELINE = EXAMPLES / "jobflow-pipeline.yaml"

CALDERA = str(Path(sys.prefix) / "bin" / "caldera")


def caldera(
    cluster: Cluster | None, *args: str, kubeconfig: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``caldera ARGS --kubeconfig=...`` and return the finished process."""
    config = kubeconfig or (cluster.kubeconfig if cluster else None)
    argv = [CALDERA, *args] + ([f"--kubeconfig={config}"] if config else [])
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, input=stdin
    )


async def acaldera(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`caldera` in a thread, so background tasks of the test keep running."""
    return await asyncio.to_thread(caldera, cluster, *args)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a run that must succeed without writing to stderr."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def one_error(result: subprocess.CompletedProcess[str], text: str) -> str:
    """A failed run: exit 1, one line on stderr naming the problem, no traceback."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("caldera: error: "), lines[0]
    assert text in lines[0], lines[0]
    return lines[0]


def table(text: str) -> list[list[str]]:
    """A table's rows split into cells (cells never contain spaces here)."""
    return [line.split() for line in text.strip().splitlines()]


def rows_by_name(text: str, column: int = 0) -> dict[str, list[str]]:
    return {row[column]: row for row in table(text)[1:]}


# --- help -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ([], ["job", "queue", "pod", "completion", "controllers"]),
        (
            ["job"],
            ["run", "list", "view", "why", "wait", "suspend", "resume", "restart", "delete"],
        ),
        (
            ["job", "run"],
            ["-i", "--image", "-n", "-N", "-m", "-r", "-R", "-L", "-S", "-f", "--kubeconfig"],
        ),
        (
            ["job", "list"],
            [
                "-n",
                "-A",
                "-q",
                "-S",
                "--all-namespaces",
                "--selector",
                "--watch",
                "-o",
                "--context",
            ],
        ),
        (["job", "view"], ["NAME", "-n", "-N", "-o"]),
        (["job", "wait"], ["NAME", "-n", "-N", "--for", "--timeout"]),
        (["job", "restart"], ["NAME", "-n", "-N", "RestartJob"]),
        (["version"], ["--client", "-o", "--kubeconfig"]),
        (["job", "why"], ["NAME", "-n", "-N", "-o"]),
        (["job", "suspend"], ["-n", "-N", "AbortJob"]),
        (["job", "resume"], ["-n", "-N", "ResumeJob"]),
        (["job", "delete"], ["-n", "-N"]),
        (["queue"], ["create", "delete", "operate", "list", "get"]),
        (["queue", "create"], ["-n", "-w", "-S", "--state"]),
        (["queue", "operate"], ["-n", "-a", "-w", "open", "close", "update"]),
        (["queue", "list"], ["-o", "--master", "--context"]),
        (["queue", "get"], ["-n", "-o"]),
        (["pod", "list"], ["-n", "-j", "--job", "-q", "--all-namespaces", "-o"]),
        (["completion"], ["bash", "zsh", "names"]),
        (["cronjob"], ["list", "get", "suspend", "resume"]),
        (["cronjob", "list"], ["-n", "--all-namespaces", "-o"]),
        (["cronjob", "suspend"], ["NAME", "-n", "-N"]),
        (["jobflow"], ["create", "list", "get", "describe", "delete"]),
        (["jobflow", "create"], ["-f", "--file", "-n", "--kubeconfig", "--master"]),
        (["jobflow", "list"], ["-n", "--all-namespaces", "-o"]),
        (["jobflow", "get"], ["NAME", "-N", "-n", "-o"]),
        (["jobflow", "describe"], ["-N", "-n", "-o", "--format"]),
        (["jobflow", "delete"], ["-N", "-n", "-f"]),
        (["jobtemplate"], ["create", "list", "get", "describe", "delete"]),
        (["jobtemplate", "describe"], ["-N", "-n", "-o", "--format"]),
        (["jobtemplate", "delete"], ["-N", "-n", "-f"]),
    ],
)
def test_help_shows_vcctls_commands_and_flags(command: list[str], expected: list[str]) -> None:
    """``--help`` of every command names its subcommands and vcctl's flags, and exits 0."""
    out = ok(caldera(None, *command, "--help"))
    assert out.startswith(f"usage: caldera {' '.join(command)}".rstrip())
    for word in expected:
        assert word in out, f"{word} missing from help of {command}"


@pytest.mark.parametrize("command", ["job", "queue", "pod"])
def test_group_without_subcommand_prints_usage_and_exits_2(command: str) -> None:
    result = caldera(None, command)
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: caldera {command}")


# --- jobs -------------------------------------------------------------------------------------


JOB_FILE = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: from-file
spec:
  minAvailable: 1
  schedulerName: volcano
  queue: default
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: worker
              image: busybox:1.36
"""


@pytest.mark.usefixtures("crds")
async def test_job_run_list_and_delete(
    cluster: Cluster, namespace: str, kube: KubeClient, tmp_path: Path
) -> None:
    """run builds vcctl's job; list shows vcctl's columns with its filters and -o formats;
    delete removes it; unknown and duplicate names are one-line errors."""
    ns = ["-n", namespace]
    assert ok(caldera(cluster, "job", "list", *ns)) == "No resources found\n"

    out = ok(caldera(cluster, "job", "run", "-N", "demo", *ns, "-r", "3", "-m", "2", "-i", "nginx"))
    assert out == "run job demo successfully\n"
    job = await kube.get(JOB, "demo", namespace=namespace)
    assert job.spec.min_available == 2
    assert job.spec.scheduler_name == "volcano"
    [task] = job.spec.tasks
    assert (task.name, task.replicas) == ("default0", 3)
    container = task.template["spec"]["containers"][0]
    assert container["image"] == "nginx"
    assert container["resources"]["requests"] == {"cpu": "1000m", "memory": "100Mi"}
    one_error(
        caldera(cluster, "job", "run", "-N", "demo", *ns), f"job {namespace}/demo already exists"
    )

    path = tmp_path / "job.yaml"
    path.write_text(JOB_FILE)
    assert ok(caldera(cluster, "job", "run", "-f", str(path), *ns)) == (
        "run job from-file successfully\n"
    )
    # -N renames a job from a file; '-' reads stdin
    assert (
        ok(caldera(cluster, "job", "run", "-f", "-", "-N", "piped", *ns, stdin=JOB_FILE))
        == "run job piped successfully\n"
    )

    rows = table(ok(caldera(cluster, "job", "list", *ns)))
    assert rows[0] == list(JOB_COLUMNS)
    by_name = {r[0]: r for r in rows[1:]}
    assert sorted(by_name) == ["demo", "from-file", "piped"]
    # Name Creation Phase(empty: no controller) JobType Replicas Min Pending ... RetryCount
    assert by_name["demo"][2:] == ["Batch", "3", "0", "0", "0", "0", "0", "0", "0"]
    assert by_name["from-file"][3] == "2"

    assert sorted(rows_by_name(ok(caldera(cluster, "job", "list", *ns, "--selector", "i")))) == [
        "from-file",
        "piped",
    ]
    assert ok(caldera(cluster, "job", "list", *ns, "-q", "other")) == "No resources found\n"
    assert ok(caldera(cluster, "job", "list", *ns, "-S", "kube")) == "No resources found\n"
    assert len(table(ok(caldera(cluster, "job", "list", *ns, "-S", "volcano")))) == 4

    everywhere = table(ok(caldera(cluster, "job", "list", "--all-namespaces")))
    assert everywhere[0] == ["Namespace", *JOB_COLUMNS]
    assert [namespace, "demo"] in [row[:2] for row in everywhere[1:]]

    wide = table(ok(caldera(cluster, "job", "list", *ns, "-o", "wide")))
    assert wide[0][-5:] == ["Queue", "Scheduler", "Terminating", "Version", "Age"]
    listed = json.loads(ok(caldera(cluster, "job", "list", *ns, "-o", "json")))
    assert listed["kind"] == "List"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["demo", "from-file", "piped"]
    assert all(i["kind"] == "Job" and "managedFields" not in i["metadata"] for i in listed["items"])
    as_yaml = yaml.safe_load(ok(caldera(cluster, "job", "list", *ns, "-o", "yaml")))
    assert as_yaml == listed

    assert ok(caldera(cluster, "job", "delete", "-N", "demo", *ns)) == (
        "delete job demo successfully\n"
    )
    with pytest.raises(NotFound):
        await kube.get(JOB, "demo", namespace=namespace)
    one_error(
        caldera(cluster, "job", "delete", "-N", "demo", *ns), f"job {namespace}/demo not found"
    )
    one_error(caldera(cluster, "job", "view", "-N", "demo", *ns), f"job {namespace}/demo not found")
    one_error(caldera(cluster, "job", "suspend", "-N", "demo", *ns), "not found")
    one_error(caldera(cluster, "job", "view", *ns), "job name must be specified")
    one_error(caldera(cluster, "job", "list", *ns, "-w", "-o", "json"), "--watch prints table")
    one_error(caldera(cluster, "job", "run", *ns), "job name must be specified")
    one_error(caldera(cluster, "job", "run", "-N", "x", "-R", "cpu=lots", *ns), "--requests")
    one_error(caldera(cluster, "job", "run", "-f", str(tmp_path / "nope.yaml"), *ns), "cannot read")


@pytest.mark.usefixtures("crds")
async def test_job_view_shows_tasks_podgroup_reason_pods_and_events(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """view: spec and status, tasks, the PodGroup with why its gang is unschedulable, the job's
    pods, and the events of all three; -o yaml is the Job itself."""
    ok(caldera(cluster, "job", "run", "-N", "gang", "-n", namespace, "-r", "2", "-m", "2"))
    job = await kube.get(JOB, "gang", namespace=namespace)
    owner = {
        "apiVersion": JOB.api_version,
        "kind": "Job",
        "name": "gang",
        "uid": job.metadata.uid,
        "controller": True,
    }
    pg_name = f"gang-{job.metadata.uid}"
    group = await kube.create(
        PODGROUP,
        {
            "apiVersion": PODGROUP.api_version,
            "kind": "PodGroup",
            "metadata": {"name": pg_name, "namespace": namespace, "ownerReferences": [owner]},
            "spec": {"minMember": 2, "queue": "default"},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "reason": "NotEnoughResources",
                        "message": "2/2 tasks in gang unschedulable: 2 Insufficient cpu",
                        "transitionID": "t1",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        },
        namespace=namespace,
    )
    await kube.create(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "gang-default0-0",
                "namespace": namespace,
                "labels": {"volcano.sh/job-name": "gang"},
                "ownerReferences": [owner],
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
        namespace=namespace,
    )
    for obj, kind, name, reason, message in (
        (job.metadata.uid, "Job", "gang", "CommandIssued", "Start to execute command AbortJob"),
        (group.metadata.uid, "PodGroup", pg_name, "Unschedulable", "0/2 nodes are available"),
    ):
        await kube.create(
            EVENT,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{reason.lower()}", "namespace": namespace},
                "involvedObject": {
                    "kind": kind,
                    "name": name,
                    "namespace": namespace,
                    "uid": obj,
                },
                "reason": reason,
                "message": message,
                "type": "Warning",
                "source": {"component": "caldera"},
                "firstTimestamp": "2026-01-01T00:00:00Z",
                "lastTimestamp": "2026-01-01T00:00:00Z",
                "count": 1,
            },
            namespace=namespace,
        )

    out = ok(caldera(cluster, "job", "view", "-N", "gang", "-n", namespace))
    lines = out.splitlines()
    assert "Name:          gang" in lines
    assert f"Namespace:     {namespace}" in lines
    assert "Min Available: 2" in lines
    tasks = table("\n".join(lines[lines.index("Tasks:") + 1 : lines.index("PodGroup:")]))
    assert tasks[1][:3] == ["default0", "2", "2"]
    assert any(line.startswith(f"  {pg_name}: phase Pending, minMember 2") for line in lines)
    assert (
        "Unschedulable: NotEnoughResources: 2/2 tasks in gang unschedulable: 2 Insufficient cpu"
    ) in lines
    pods = table("\n".join(lines[lines.index("Pods:") + 1 : lines.index("Events:")]))
    assert pods[1][:3] == ["gang-default0-0", "0/1", "Pending"]
    events = lines[lines.index("Events:") + 1 :]
    assert any("CommandIssued" in e and "job/gang" in e for e in events), events
    assert any("0/2 nodes are available" in e and "podgroup/" in e for e in events), events

    raw = yaml.safe_load(
        ok(caldera(cluster, "job", "view", "-N", "gang", "-n", namespace, "-o", "yaml"))
    )
    assert raw["kind"] == "Job"
    assert raw["metadata"]["uid"] == job.metadata.uid
    as_json = json.loads(
        ok(caldera(cluster, "job", "view", "-N", "gang", "-n", namespace, "-o", "json"))
    )
    assert as_json["spec"]["minAvailable"] == 2


async def _commands(kube: KubeClient, namespace: str) -> list[Command]:
    return list((await kube.list(COMMAND, namespace=namespace)).items)


@pytest.mark.usefixtures("crds")
async def test_suspend_and_resume_create_vcctls_commands(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """Without a controller the Commands stay: AbortJob / ResumeJob with generateName
    ``<job>-<action>-``, a controller ownerRef to the job and the same ref as target."""
    ok(caldera(cluster, "job", "run", "-N", "sleepy", "-n", namespace))
    job = await kube.get(JOB, "sleepy", namespace=namespace)
    out = ok(caldera(cluster, "job", "suspend", "-N", "sleepy", "-n", namespace))
    assert out.startswith("suspend job sleepy: command sleepy-abortjob-")
    ok(caldera(cluster, "job", "resume", "-N", "sleepy", "-n", namespace))
    commands = sorted(await _commands(kube, namespace), key=lambda c: c.action)
    assert [c.action for c in commands] == ["AbortJob", "ResumeJob"]
    for command in commands:
        assert command.metadata.generate_name == f"sleepy-{command.action.lower()}-"
        assert command.metadata.name.startswith(command.metadata.generate_name)
        [ref] = command.metadata.owner_references
        assert (ref.api_version, ref.kind, ref.name, ref.uid) == (
            "batch.volcano.sh/v1alpha1",
            "Job",
            "sleepy",
            job.metadata.uid,
        )
        assert ref.controller is True
        assert command.target == ref
    one_error(caldera(cluster, "job", "resume", "-N", "ghost", "-n", namespace), "not found")


@pytest.fixture
def controllers(cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[CalderaProcess]:
    """``caldera controllers --controllers=job,queue`` for one test, trusting namespace default
    with queue Commands (where ``caldera queue operate`` puts them; no webhook stamps them
    here); it must exit cleanly."""
    proc = CalderaProcess(
        "controllers",
        ["--controllers=job,queue", "--leader-elect=false", "--queue-command-namespaces=default"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    yield proc
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]


@pytest.fixture
async def scheduled(kube: KubeClient, namespace: str, cluster: Cluster) -> AsyncIterator[None]:
    """The stand-in scheduler: PodGroups to Inqueue, pods bound to kwok nodes."""
    async with standin_scheduler(kube, namespace, cluster.nodes):
        yield


async def _phase(kube: KubeClient, namespace: str, name: str, phase: str) -> Job:
    async def probe() -> Job | None:
        job = await kube.get(JOB, name, namespace=namespace)
        return job if job.status.state.phase == phase else None

    return await eventually(probe, timeout=60, what=f"job {name} {phase}")


@pytest.mark.usefixtures("controllers", "scheduled")
async def test_suspend_and_resume_through_the_job_controller(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """The controller consumes the CLI's Commands: suspend → Aborted without pods; resume →
    Running again with a retry counted; job list and pod list follow."""
    ns = ["-n", namespace]
    small = ["-R", "cpu=100m", "-L", "cpu=100m"]
    ok(await acaldera(cluster, "job", "run", "-N", "cmd", *ns, "-r", "2", "-m", "2", *small))
    await _phase(kube, namespace, "cmd", "Running")
    row = rows_by_name(ok(await acaldera(cluster, "job", "list", *ns)))["cmd"]
    assert row[2] == "Running"
    assert row[7] == "2"  # Running pods
    pods = rows_by_name(ok(await acaldera(cluster, "pod", "list", *ns, "-j", "cmd")))
    assert sorted(pods) == ["cmd-default0-0", "cmd-default0-1"]

    ok(await acaldera(cluster, "job", "suspend", "-N", "cmd", *ns))
    aborted = await _phase(kube, namespace, "cmd", "Aborted")
    assert aborted.status.retry_count == 0
    assert await _commands(kube, namespace) == []  # consumed
    assert rows_by_name(ok(await acaldera(cluster, "job", "list", *ns)))["cmd"][2] == "Aborted"

    ok(await acaldera(cluster, "job", "resume", "-N", "cmd", *ns))
    back = await _phase(kube, namespace, "cmd", "Running")
    assert back.status.retry_count == 1
    assert await _commands(kube, namespace) == []
    view = ok(await acaldera(cluster, "job", "view", "-N", "cmd", *ns))
    assert "Retry Count:   1" in view
    assert "Start to execute command AbortJob" in view
    assert "Start to execute command ResumeJob" in view


def _start(*args: str) -> subprocess.Popen[str]:
    """``caldera ARGS`` running in the background, its stdout and stderr piped."""
    return subprocess.Popen(
        [CALDERA, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.usefixtures("crds")
async def test_job_list_watch_prints_a_row_per_change(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """list --watch prints the table, then a row each time a job's row changes."""
    ok(caldera(cluster, "job", "run", "-N", "watched", "-n", namespace))
    proc = _start("job", "list", "-n", namespace, "--watch", f"--kubeconfig={cluster.kubeconfig}")
    lines: queue_mod.Queue[str] = queue_mod.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def read() -> None:
        for line in stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    async def next_line() -> str:
        return await asyncio.to_thread(lines.get, True, 30)

    try:
        assert (await next_line()).split() == list(JOB_COLUMNS)
        first = (await next_line()).split()
        assert first[0] == "watched"
        assert first[2] == "Batch"  # no phase yet: the cell is empty
        await asyncio.sleep(1)  # the watch is open once the table is out; give it a moment
        for phase, running in (("Pending", 0), ("Running", 1)):
            await kube.patch_status(
                JOB,
                "watched",
                {"status": {"state": {"phase": phase}, "running": running}},
                namespace=namespace,
            )
            row = (await next_line()).split()
            assert row[:3] == ["watched", row[1], phase]
            assert row[7] == str(running)
        ok(caldera(cluster, "job", "run", "-N", "later", "-n", namespace))
        assert (await next_line()).split()[0] == "later"
    finally:
        proc.terminate()
        proc.wait(10)
        reader.join(10)
        assert proc.stderr is not None
        errors = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == 0, errors
    assert errors == ""


# --- queues -----------------------------------------------------------------------------------


@pytest.fixture
async def queue_names(kube: KubeClient, namespace: str, crds: Path) -> AsyncIterator[list[str]]:
    """Unique queue names for this test (queues are cluster-scoped); deleted afterwards, with
    the Commands made for them (so the CRDs must be there, also when this test runs alone)."""
    names = [f"{namespace}-a", f"{namespace}-b"]
    yield names
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(QUEUE, name)
    for command in await _commands(kube, "default"):
        if command.target is not None and command.target.name in names:
            with contextlib.suppress(NotFound):
                await kube.delete(COMMAND, command.metadata.name, namespace="default")


async def _podgroup(kube: KubeClient, namespace: str, name: str, queue: str, phase: str) -> None:
    await kube.create(
        PODGROUP,
        {
            "apiVersion": PODGROUP.api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": 1, "queue": queue},
            "status": {"phase": phase},
        },
        namespace=namespace,
    )


@pytest.mark.usefixtures("crds")
async def test_cronjob_list_get_suspend_resume(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """kubectl's columns for real CronJobs; suspend and resume flip spec.suspend; -o json and
    a missing name are as for the other commands."""
    body = copy.deepcopy(NIGHTLY)
    await kube.create(CRONJOB, body, namespace=namespace)
    rows = table(ok(caldera(cluster, "cronjob", "list", "-n", namespace)))
    assert rows[0] == ["NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    assert rows[1][:9] == ["nightly-train", "30", "2", "*", "*", "*", "False", "0", "<none>"]
    everywhere = table(ok(caldera(cluster, "cronjob", "list", "--all-namespaces")))
    assert [namespace, "nightly-train"] in [r[:2] for r in everywhere[1:]]
    assert ok(caldera(cluster, "cronjob", "suspend", "nightly-train", "-n", namespace)) == (
        f"cronjob {namespace}/nightly-train suspended\n"
    )
    assert (await kube.get(CRONJOB, "nightly-train", namespace=namespace)).spec.suspend
    got = json.loads(
        ok(caldera(cluster, "cronjob", "get", "-N", "nightly-train", "-n", namespace, "-o", "json"))
    )
    assert (got["kind"], got["spec"]["suspend"]) == ("CronJob", True)
    ok(caldera(cluster, "cronjob", "resume", "-N", "nightly-train", "-n", namespace))
    assert not (await kube.get(CRONJOB, "nightly-train", namespace=namespace)).spec.suspend
    one_error(caldera(cluster, "cronjob", "get", "ghost", "-n", namespace), f"{namespace}/ghost")
    one_error(caldera(cluster, "cronjob", "suspend", "-n", namespace), "must be specified")


@pytest.mark.usefixtures("crds")
async def test_jobtemplate_and_jobflow_commands(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """vcctl's jobtemplate and jobflow commands on examples/jobflow-pipeline.yaml: create from
    the file (each command takes its kind), list, get, describe and delete, with vcctl's lines,
    columns and errors."""
    made = caldera(cluster, "jobtemplate", "create", "-f", str(PIPELINE), "-n", namespace)
    assert made.returncode == 0, made.stderr
    assert made.stdout == "".join(
        f"Created JobTemplate: {namespace}/{n}\n" for n in ("preprocess", "train", "evaluate")
    )
    assert made.stderr == "skipped JobFlow pipeline: not a JobTemplate\n"
    made = caldera(cluster, "jobflow", "create", "-f", str(PIPELINE), "-n", namespace)
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"Created JobFlow: {namespace}/pipeline\n"
    assert made.stderr.count("skipped JobTemplate") == 3
    # The phase the jobflow controller would write (none runs here).
    status = {"status": {"state": {"phase": "Running"}, "runningJobs": ["pipeline-preprocess"]}}
    await kube.patch_status(JOBFLOW, "pipeline", status, namespace=namespace)

    rows = table(ok(caldera(cluster, "jobflow", "list", "-n", namespace)))
    assert rows[0] == ["Name", "Namespace", "Phase", "Age"]
    assert rows[1][:3] == ["pipeline", namespace, "Running"]
    wide = table(ok(caldera(cluster, "jobflow", "get", "pipeline", "-n", namespace, "-o", "wide")))
    assert wide[0][4:] == ["Pending", "Running", "Completed", "Failed", "Terminated", "Unknown"]
    assert wide[1][4:] == ["0", "1", "0", "0", "0", "0"]
    everywhere = rows_by_name(ok(caldera(cluster, "jobflow", "list", "--all-namespaces")))
    assert everywhere["pipeline"][1] == namespace
    templates = rows_by_name(ok(caldera(cluster, "jobtemplate", "list", "-n", namespace)))
    assert sorted(templates) == ["evaluate", "preprocess", "train"]
    got = json.loads(
        ok(caldera(cluster, "jobtemplate", "get", "-N", "train", "-n", namespace, "-o", "json"))
    )
    assert (got["kind"], got["spec"]["minAvailable"]) == ("JobTemplate", 3)

    described = yaml.safe_load(
        ok(caldera(cluster, "jobflow", "describe", "-N", "pipeline", "-n", namespace))
    )
    assert (described["kind"], described["apiVersion"]) == ("JobFlow", JOBFLOW.api_version)
    assert [f["name"] for f in described["spec"]["flows"]] == ["preprocess", "train", "evaluate"]
    assert "managedFields" not in described["metadata"]
    every = ok(caldera(cluster, "jobtemplate", "describe", "-n", namespace, "-o", "json"))
    assert every.count('"kind": "JobTemplate"') == 3

    again = caldera(cluster, "jobflow", "create", "-f", str(PIPELINE), "-n", namespace)
    assert again.returncode == 1
    assert 'Failed to create JobFlow: jobflows.flow.volcano.sh "pipeline" already exists' in (
        again.stderr
    )
    one_error(caldera(cluster, "jobflow", "get", "-n", namespace), "name is mandatory")
    one_error(caldera(cluster, "jobflow", "delete", "-n", namespace), "jobflow name must be")
    one_error(caldera(cluster, "jobtemplate", "get", "ghost", "-n", namespace), "ghost not found")
    one_error(caldera(cluster, "jobflow", "create", "-f", str(EXAMPLES / "queue.yaml")), "holds no")

    deleted = ok(caldera(cluster, "jobflow", "delete", "-N", "pipeline", "-n", namespace))
    assert deleted == f"Deleted JobFlow: {namespace}/pipeline\n"
    removed = caldera(cluster, "jobtemplate", "delete", "-f", str(PIPELINE), "-n", namespace)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.count("Deleted JobTemplate: ") == 3

    async def all_gone() -> bool:
        flows = (await kube.list(JOBFLOW, namespace=namespace)).items
        left = (await kube.list(JOBTEMPLATE, namespace=namespace)).items
        return not flows and not left

    await eventually(all_gone, what="the flow and the templates deleted")
    assert ok(caldera(cluster, "jobflow", "list", "-n", namespace)) == "No resources found\n"


async def test_queue_create_get_list_operate_delete(
    cluster: Cluster, namespace: str, kube: KubeClient, queue_names: list[str]
) -> None:
    """vcctl's queue commands: counts come from PodGroups; open/close are Commands; update
    patches the weight; -o json|yaml|wide; errors are one line."""
    qa, qb = queue_names
    assert ok(caldera(cluster, "queue", "create", "-n", qa, "-w", "3")) == (
        f"create queue {qa} successfully\n"
    )
    ok(caldera(cluster, "queue", "create", "-n", qb, "-S", "Closed"))
    one_error(caldera(cluster, "queue", "create", "-n", qa), f"queue {qa} already exists")
    created = await kube.get(QUEUE, qb)
    assert created.status.state == "Closed"

    for i, phase in enumerate(["Inqueue", "Pending", "Pending", "Running", "Unknown", "Completed"]):
        await _podgroup(kube, namespace, f"pg{i}", qa, phase)
    await _podgroup(kube, namespace, "other", qb, "Running")

    rows = table(ok(caldera(cluster, "queue", "list")))
    assert rows[0] == list(QUEUE_COLUMNS)
    by_name = {r[0]: r for r in rows[1:]}
    # Name Weight State (Parent empty: no controller) Inqueue Pending Running Unknown Completed
    assert by_name[qa] == [qa, "3", "Open", "1", "2", "1", "1", "1"]
    assert by_name[qb] == [qb, "1", "Closed", "0", "0", "1", "0", "0"]
    assert table(ok(caldera(cluster, "queue", "get", "-n", qa))) == [
        list(QUEUE_COLUMNS),
        by_name[qa],
    ]

    wide = table(ok(caldera(cluster, "queue", "list", "-o", "wide")))
    assert wide[0] == [*QUEUE_COLUMNS, *QUEUE_WIDE_COLUMNS]
    # no pods in the queue: it deserves and holds nothing, share 0
    assert {r[0]: r for r in wide[1:]}[qa][-2:] == ["<none>", "0.00"]
    assert {r[0]: r for r in wide[1:]}[qa][-5:-3] == ["0", "traverse"]  # the CRD's defaults
    got = json.loads(ok(caldera(cluster, "queue", "get", "-n", qa, "-o", "json")))
    assert (got["kind"], got["spec"]["weight"]) == ("Queue", 3)
    listed = yaml.safe_load(ok(caldera(cluster, "queue", "list", "-o", "yaml")))
    assert {qa, qb} <= {i["metadata"]["name"] for i in listed["items"]}

    assert ok(caldera(cluster, "queue", "operate", "-n", qa, "-a", "update", "-w", "7")) == (
        f"update queue {qa} weight to 7\n"
    )
    assert (await kube.get(QUEUE, qa)).spec.weight == 7
    one_error(
        caldera(cluster, "queue", "operate", "-n", qa, "-a", "update"), "weight must be specified"
    )
    one_error(caldera(cluster, "queue", "operate", "-n", qa, "-a", "bogus"), "action bogus invalid")
    one_error(caldera(cluster, "queue", "operate", "-n", qa), "action can not be null")
    one_error(
        caldera(cluster, "queue", "operate", "-n", "no-such-q", "-a", "close"),
        "queue no-such-q not found",
    )

    queue = await kube.get(QUEUE, qa)
    ok(caldera(cluster, "queue", "operate", "-n", qa, "-a", "close"))
    ok(caldera(cluster, "queue", "operate", "-n", qa, "-a", "open"))
    mine = [c for c in await _commands(kube, "default") if c.target and c.target.name == qa]
    assert sorted(c.action for c in mine) == ["CloseQueue", "OpenQueue"]
    for command in mine:
        assert command.metadata.generate_name == f"{qa}-{command.action.lower()}-"
        assert command.target is not None
        assert (command.target.api_version, command.target.kind, command.target.uid) == (
            "scheduling.volcano.sh/v1beta1",
            "Queue",
            queue.metadata.uid,
        )
        assert command.metadata.owner_references == (command.target,)

    assert ok(caldera(cluster, "queue", "delete", "-n", qb)) == f"delete queue {qb} successfully\n"
    one_error(caldera(cluster, "queue", "delete", "-n", qb), f"queue {qb} not found")
    one_error(caldera(cluster, "queue", "get", "-n", qb), f"queue {qb} not found")
    one_error(caldera(cluster, "queue", "delete"), "queue name must be specified")


@pytest.mark.usefixtures("controllers")
async def test_queue_close_and_open_through_the_queue_controller(
    cluster: Cluster, kube: KubeClient, queue_names: list[str]
) -> None:
    """The queue controller consumes the CLI's CloseQueue / OpenQueue Commands."""
    qa = queue_names[0]
    ok(await acaldera(cluster, "queue", "create", "-n", qa))

    async def state(wanted: str) -> bool:
        q = await kube.get(QUEUE, qa)
        mine = [c for c in await _commands(kube, "default") if c.target and c.target.name == qa]
        return q.status.state == wanted and not mine

    ok(await acaldera(cluster, "queue", "operate", "-n", qa, "-a", "close"))
    await eventually(lambda: state("Closed"), timeout=60, what=f"{qa} Closed")
    assert rows_by_name(ok(await acaldera(cluster, "queue", "list")))[qa][2] == "Closed"
    ok(await acaldera(cluster, "queue", "operate", "-n", qa, "-a", "open"))
    await eventually(lambda: state("Open"), timeout=60, what=f"{qa} Open")
    # the controller gives every queue the root parent
    await eventually(lambda: _has_parent(kube, qa), timeout=30, what=f"{qa} under root")
    assert rows_by_name(ok(await acaldera(cluster, "queue", "get", "-n", qa)))[qa][3] == "root"


async def _has_parent(kube: KubeClient, name: str) -> bool:
    return (await kube.get(QUEUE, name)).spec.parent == "root"


# --- pods -------------------------------------------------------------------------------------


async def _pod(
    kube: KubeClient,
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    await kube.create(
        POD,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": labels or {},
                "annotations": annotations or {},
            },
            "spec": {
                "schedulerName": "volcano",
                "containers": [{"name": "c", "image": "busybox"}],
            },
        },
        namespace=namespace,
    )


@pytest.mark.usefixtures("crds")
async def test_pod_list_by_job_and_queue(
    cluster: Cluster, namespace: str, kube: KubeClient
) -> None:
    """pod list: all jobs' pods, one job's (-j), one queue's (-q: job pods by label, other pods
    by annotation), in all namespaces; -j with another queue is an error."""
    await _pod(kube, namespace, "a-0", {"volcano.sh/job-name": "a", "volcano.sh/queue-name": "q1"})
    await _pod(kube, namespace, "b-0", {"volcano.sh/job-name": "b", "volcano.sh/queue-name": "q2"})
    await _pod(kube, namespace, "plain-q1", annotations={"scheduling.volcano.sh/queue-name": "q1"})
    await _pod(kube, namespace, "plain")
    ns = ["-n", namespace]

    rows = table(ok(caldera(cluster, "pod", "list", *ns)))
    assert rows[0] == list(POD_COLUMNS)
    assert [r[:4] for r in rows[1:]] == [
        ["a-0", "0/1", "Pending", "0"],
        ["b-0", "0/1", "Pending", "0"],
    ]
    assert sorted(rows_by_name(ok(caldera(cluster, "pod", "list", *ns, "-j", "a")))) == ["a-0"]
    assert sorted(rows_by_name(ok(caldera(cluster, "pod", "list", *ns, "-q", "q1")))) == [
        "a-0",
        "plain-q1",
    ]
    both = ok(caldera(cluster, "pod", "list", *ns, "-j", "a", "-q", "q1"))
    assert sorted(rows_by_name(both)) == ["a-0"]
    one_error(
        caldera(cluster, "pod", "list", *ns, "-j", "a", "-q", "q2"), "does not match the queue q2"
    )
    assert ok(caldera(cluster, "pod", "list", *ns, "-j", "nope")) == "No resources found\n"

    everywhere = table(ok(caldera(cluster, "pod", "list", "--all-namespaces", "-j", "b")))
    assert everywhere[0] == ["Namespace", *POD_COLUMNS]
    assert [namespace, "b-0"] in [r[:2] for r in everywhere[1:]]
    wide = rows_by_name(ok(caldera(cluster, "pod", "list", *ns, "-o", "wide")))
    assert wide["a-0"][-5:] == ["a", "<none>", "q1", "<none>", "<none>"]
    listed = json.loads(ok(caldera(cluster, "pod", "list", *ns, "-q", "q1", "-o", "json")))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a-0", "plain-q1"]
    assert listed["items"][0]["spec"]["containers"][0]["image"] == "busybox"


# --- connection and permission errors ---------------------------------------------------------


def _kubeconfig(path: Path, contexts: dict[str, dict[str, Any]], current: str) -> Path:
    """A kubeconfig with one cluster/user/context per entry of `contexts`."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": n, "cluster": c["cluster"]} for n, c in contexts.items()],
                "users": [{"name": n, "user": c["user"]} for n, c in contexts.items()],
                "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in contexts],
                "current-context": current,
            }
        )
    )
    return path


UNREACHABLE = {"cluster": {"server": "http://127.0.0.1:9"}, "user": {"token": "t"}}


def _admin_entry(cluster: Cluster) -> dict[str, Any]:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    the_cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    return {"cluster": the_cluster["cluster"], "user": user["user"]}


@pytest.mark.parametrize(
    "command",
    [
        ["job", "list"],
        ["job", "view", "-N", "x"],
        ["queue", "list"],
        ["pod", "list"],
    ],
)
def test_no_cluster_is_one_line(tmp_path: Path, command: list[str]) -> None:
    """An API server that does not answer: exit 1 and one line naming its address, quickly."""
    config = _kubeconfig(tmp_path / "kc", {"gone": UNREACHABLE}, "gone")
    started = time.monotonic()
    one_error(
        caldera(None, *command, kubeconfig=config),
        "cannot reach the API server at http://127.0.0.1:9",
    )
    assert time.monotonic() - started < 20


def test_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    one_error(caldera(None, "job", "list", kubeconfig=tmp_path / "missing"), "kubeconfig")


@pytest.mark.usefixtures("crds")
def test_context_selects_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """--context picks a context other than the current one, as kubectl does."""
    config = _kubeconfig(
        tmp_path / "kc", {"broken": UNREACHABLE, "good": _admin_entry(cluster)}, "broken"
    )
    one_error(caldera(None, "queue", "list", kubeconfig=config), "cannot reach the API server")
    ok(caldera(None, "queue", "list", "--context", "good", kubeconfig=config))
    one_error(
        caldera(None, "queue", "list", "--context", "nope", kubeconfig=config),
        "has no context 'nope'",
    )
    # -s/--master overrides the address of the kubeconfig's cluster (credentials stay)
    admin = _admin_entry(cluster)
    moved = {**admin, "cluster": {**admin["cluster"], "server": "https://127.0.0.1:9"}}
    moved_config = _kubeconfig(tmp_path / "moved", {"moved": moved}, "moved")
    one_error(caldera(None, "queue", "list", kubeconfig=moved_config), "127.0.0.1:9")
    ok(caldera(None, "queue", "list", "-s", admin["cluster"]["server"], kubeconfig=moved_config))


@pytest.mark.usefixtures("crds")
async def test_no_permission_is_one_line(
    cluster: Cluster, namespace: str, api: client.ApiClient, tmp_path: Path
) -> None:
    """A ServiceAccount without rights: each command ends with the server's forbidden line."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    token = await core.create_namespaced_service_account_token(
        "nobody",
        namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    )
    entry = _admin_entry(cluster)
    entry = {"cluster": entry["cluster"], "user": {"token": token.status.token}}
    config = _kubeconfig(tmp_path / "kc", {"nobody": entry}, "nobody")
    who = f"system:serviceaccount:{namespace}:nobody"
    for command in (
        ["job", "list", "-n", namespace],
        ["job", "run", "-N", "x", "-n", namespace],
        ["job", "suspend", "-N", "x", "-n", namespace],
        ["queue", "list"],
        ["queue", "create", "-n", f"{namespace}-forbidden"],
        ["pod", "list", "-n", namespace],
    ):
        line = one_error(caldera(None, *command, kubeconfig=config), "forbidden")
        assert who in line, line


# --- completion -------------------------------------------------------------------------------


def _complete(words: list[str]) -> list[str]:
    """What bash completes for `words` (the last one being typed) with our script loaded."""
    script = caldera(None, "completion", "bash").stdout
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; "
        '_caldera_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, check=True, timeout=30
    )
    return sorted(filter(None, result.stdout.splitlines()))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion_completes_commands_flags_and_values() -> None:
    assert _complete(["caldera", "jo"]) == ["job", "jobflow", "jobtemplate"]
    assert _complete(["caldera", "job", ""]) == [
        "delete",
        "list",
        "restart",
        "resume",
        "run",
        "suspend",
        "view",
        "wait",
        "why",
    ]
    assert _complete(["caldera", "queue", "op"]) == ["operate"]
    assert "--all-namespaces" in _complete(["caldera", "job", "list", "--a"])
    assert _complete(["caldera", "job", "list", "-n", "ns", "-o", ""]) == ["json", "wide", "yaml"]
    assert _complete(["caldera", "queue", "create", "--state", ""]) == ["Closed", "Open"]
    assert _complete(["caldera", "completion", ""]) == ["bash", "names", "zsh"]
    zsh = ok(caldera(None, "completion", "zsh"))
    assert "bashcompinit" in zsh
    assert "complete -o default -F _caldera_complete caldera" in zsh
