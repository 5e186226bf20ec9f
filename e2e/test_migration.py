"""Moving from Volcano, on a control plane of its own, by docs/migrating-from-volcano.md.

Volcano v1.13's chart objects and CRDs (``e2e/fixtures/volcano-v1.13``, its CRDs as Volcano ships
them) are installed with Helm, and Volcano's processes are played by Caldera's, with Volcano's
Lease names and without the CRD check: a queue, running jobs, a completed job and a PodGroup of
another tool. Then the page's steps run as written (the shell blocks are read from the page):
webhooks first, the release removed without its CRDs, Caldera's CRDs applied server-side,
Caldera's chart installed and its processes started with the chart's ServiceAccounts. Checked on
the way: what refusing webhooks do when their server is gone, the CRD check refusing Volcano's
CRDs, a field pruned by them; and at the end, that everything is reconciled and nothing lost.

The test runs its own control plane (Volcano's CRDs replace Caldera's there), so it is skipped
on an external cluster (``CALDERA_E2E_KUBECONFIG``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.crdgen import CRDS
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import CRD_DIR, webhook_configurations
from e2e.cluster.control_plane import (
    REPO,
    ClusterError,
    ControlPlane,
    NodeSpec,
    free_port,
    kubectl,
    run_kubectl,
)
from e2e.cluster.identities import CHART, helm_binary, write_token_kubeconfig
from e2e.cluster.pki import write_serving_pair
from e2e.job_fixtures import job, task
from e2e.waiting import until

pytestmark = pytest.mark.e2e

DOC = REPO / "docs" / "migrating-from-volcano.md"
FIXTURE = REPO / "e2e" / "fixtures" / "volcano-v1.13"
VOLCANO_NS = "volcano-system"
CALDERA_NS = "caldera-system"
USERS = "team-a"
# The Leases' default timings (15 s, renew within 10 s): no step waits for a takeover (every
# process is stopped cleanly, which releases its Lease), and a 3 s renew deadline can pass on a
# loaded CI machine, when the leader exits as it must and the test has no one to restart it.
CLAIM = {
    "metadata": {"name": "data"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


def doc_blocks(step: str) -> list[str]:
    """The shell blocks of the page's section whose heading starts with ``step``."""
    text = DOC.read_text()
    start = text.index(f"\n### {step}")
    end = text.find("\n### ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```\n(.*?)```", section, re.DOTALL)


@dataclass
class Switch:
    """The dedicated cluster and the tools the steps run with."""

    plane: ControlPlane
    helm: str
    tmp: Path
    procs: dict[str, CalderaProcess] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return run_kubectl(self.kubeconfig, *args, input=input)

    def shell(self, script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A block of the page, in bash with -e and pipefail, kubectl and helm on PATH."""
        path = f"{Path(self.helm).parent}:{Path(kubectl()).parent}:{os.environ['PATH']}"
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "PATH": path}
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"{script}\nfailed:\n{result.stderr}{result.stdout}")
        return result

    def get(self, kind: str, name: str, namespace: str = USERS) -> dict[str, Any]:
        scope = ["-n", namespace] if namespace else []
        data: dict[str, Any] = json.loads(self.kubectl(*scope, "get", kind, name, "-o", "json"))
        return data

    def phase(self, name: str) -> str:
        state = self.get("jobs.batch.volcano.sh", name).get("status", {}).get("state", {})
        phase: str = state.get("phase", "")
        return phase

    def start(self, name: str, command: str, args: list[str], kubeconfig: Path) -> CalderaProcess:
        proc = CalderaProcess(command, args, kubeconfig=kubeconfig, log_dir=self.tmp)
        self.procs[name] = proc
        return proc

    def ready(self, name: str, timeout: float = 60) -> None:
        proc = self.procs[name]
        until(
            lambda: proc.get("/readyz")[0] == 200 or proc.proc.poll() is not None,
            what=f"{name} ready",
            timeout=timeout,
        )
        assert proc.proc.poll() is None, f"{name} exited:\n{proc.log()[-3000:]}"

    def stop(self, name: str) -> int:
        return self.procs.pop(name).stop()

    def until(self, probe: Callable[[], object], *, what: str, timeout: float = 60) -> None:
        """``until``, failing at once when a process has exited, and with the tails of the
        processes' logs when the time runs out: what is waited for depends on all of them."""

        def running_and(probe_result: Callable[[], object]) -> object:
            for name, proc in self.procs.items():
                if proc.proc.poll() is not None:
                    raise AssertionError(
                        f"{name} exited while waiting for {what}:\n{proc.log()[-3000:]}"
                    )
            return probe_result()

        try:
            until(lambda: running_and(probe), what=what, timeout=timeout)
        except AssertionError as timed_out:
            tails = "".join(f"\n--- {n}:\n{p.log()[-2000:]}" for n, p in self.procs.items())
            raise AssertionError(f"{timed_out}{tails}") from None


@pytest.fixture
def switch(tmp_path: Path) -> Iterator[Switch]:
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip("replaces the cluster's CRDs: needs a local control plane of its own")
    plane = ControlPlane(tmp_path / "cluster")
    plane.up()
    plane.create_nodes(2, NodeSpec(cpu="8", memory="32Gi", pods="110", gpu="4"))
    sw = Switch(plane, helm_binary(), tmp_path)
    try:
        yield sw
    finally:
        for name in list(sw.procs):
            sw.stop(name)
        plane.down()


def _running_forever(name: str, queue: str, replicas: int = 1) -> dict[str, Any]:
    return job(name, [task("worker", replicas)], queue=queue)


def _pods(sw: Switch) -> dict[str, dict[str, Any]]:
    items = json.loads(sw.kubectl("-n", USERS, "get", "pods", "-o", "json"))["items"]
    return {p["metadata"]["name"]: p for p in items}


def _uids(objects: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: obj["metadata"]["uid"] for name, obj in objects.items()}


def _podgroups(sw: Switch) -> dict[str, dict[str, Any]]:
    items = json.loads(sw.kubectl("-n", USERS, "get", "podgroups", "-o", "json"))["items"]
    return {p["metadata"]["name"]: p for p in items}


def _no_refusals(proc: CalderaProcess, name: str) -> None:
    for line in proc.log().splitlines():
        if re.search(r"\b403\b", line) or "forbidden" in line.lower():
            raise AssertionError(f"{name} was refused:\n{line}")


def test_switch_from_volcano_keeps_every_job(switch: Switch) -> None:
    """The page's procedure moves a cluster from Volcano to Caldera with nothing lost: running
    pods are adopted, not restarted; jobs, queues and PodGroups keep their state; a Command
    and a Job created while nothing ran are carried out; Volcano's CRDs are refused until
    Caldera's are applied, and then volumeClaimTemplates are kept."""
    sw = switch
    admin = sw.kubeconfig
    cert_dir = sw.tmp / "webhook-cert"
    crt, key = write_serving_pair(sw.plane.pki, cert_dir, ["127.0.0.1"])
    ca_b64 = base64.b64encode(sw.plane.pki.ca_crt.read_bytes()).decode()
    port = free_port()

    # ---- Volcano: its chart (CRDs as templates, webhook configurations, Deployments) and its
    # processes, played by Caldera's with Volcano's Lease names.
    sw.shell(
        f"helm install volcano {FIXTURE} -n {VOLCANO_NS} --create-namespace "
        f"--set admissionURL=https://127.0.0.1:{port} --set caBundle={ca_b64}"
    )
    sw.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    tls = [f"--port={port}", f"--tls-cert-file={crt}", f"--tls-key-file={key}"]
    sw.start("volcano-admission", "webhook", tls, admin)
    volcano = ["--check-crds=false", f"--leader-election-namespace={VOLCANO_NS}"]
    sw.start(
        "volcano-controllers",
        "controllers",
        [*volcano, "--leader-election-id=vc-controller-manager"],
        admin,
    )
    sw.start(
        "volcano-scheduler",
        "scheduler",
        [*volcano, "--leader-election-id=volcano", "--schedule-period=0.5"],
        admin,
    )
    for name in ("volcano-admission", "volcano-controllers", "volcano-scheduler"):
        sw.ready(name)
    sw.until(lambda: _exists(sw, "queues.scheduling.volcano.sh", "default", ""), what="queues")

    sw.kubectl("create", "namespace", USERS)
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research"},
        "spec": {"weight": 2},
    }
    sw.kubectl("create", "-f", "-", input=json.dumps(queue))
    sw.until(
        lambda: sw.get("queues", "research", "").get("status", {}).get("state") == "Open",
        what="queue research open",
    )
    jobs = [
        _running_forever("train", "research", replicas=2),
        _running_forever("serve", "default"),
        job("done", [task("worker", run_for="1s", exit_code=0)]),
    ]
    # The webhook admits from its own informer cache, a process apart from the queue
    # controller's: its seeing the queue Open says nothing of the webhook's (as in Volcano).
    sw.until(lambda: _admitted(sw, jobs[0]), what="the webhook to see queue research")
    for body in jobs:
        sw.kubectl("-n", USERS, "create", "-f", "-", input=json.dumps(body))
    # A PodGroup of another tool (Spark's, Kubeflow's): a group and a pod naming it.
    spark_pg = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "spark-app"},
        "spec": {"minMember": 1, "queue": "research"},
    }
    spark_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "spark-driver",
            "annotations": {"scheduling.k8s.io/group-name": "spark-app"},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "driver", "image": "spark:3.5"}],
        },
    }
    sw.kubectl("-n", USERS, "create", "-f", "-", input=json.dumps(spark_pg))
    sw.kubectl("-n", USERS, "create", "-f", "-", input=json.dumps(spark_pod))
    sw.until(
        lambda: (
            sw.phase("train") == "Running"
            and sw.phase("serve") == "Running"
            and sw.phase("done") == "Completed"
            and _pods(sw).get("spark-driver", {}).get("status", {}).get("phase") == "Running"
        ),
        what="Volcano's jobs running and done",
    )
    before_pods = _pods(sw)
    before_groups = _podgroups(sw)
    train_before = sw.get("jobs.batch.volcano.sh", "train")["status"]
    for lease in ("vc-controller-manager", "volcano"):
        assert _exists(sw, "lease", lease, VOLCANO_NS)

    # ---- Why the webhooks go first: with Volcano's webhook server gone and its configurations
    # still there, every Volcano Job is refused.
    sw.procs.pop("volcano-admission").kill()
    refused = sw.shell(
        f"kubectl -n {USERS} create --dry-run=server -f - <<'EOF'\n"
        f"{json.dumps(_running_forever('probe', 'default'))}\nEOF",
        check=False,
    )
    assert refused.returncode != 0
    assert 'failed calling webhook "mutatejob.volcano.sh"' in refused.stderr

    # ---- Step 1: the webhook configurations.
    (step1,) = doc_blocks("1.")
    sw.shell(step1)
    sw.shell(
        f"kubectl -n {USERS} create --dry-run=server -f - <<'EOF'\n"
        f"{json.dumps(_running_forever('probe', 'default'))}\nEOF"
    )

    # ---- Step 2: Volcano's processes go, then its release but not its CRDs.
    check_crds, remove = doc_blocks("2.")
    assert sw.shell(check_crds).stdout.strip() == "8"  # helm uninstall would delete them
    assert sw.stop("volcano-controllers") == 0
    assert sw.stop("volcano-scheduler") == 0
    sw.shell(remove)
    assert "volcano" not in sw.shell(f"helm list -n {VOLCANO_NS} -q").stdout
    assert not _exists(sw, "deployment", "volcano-scheduler", VOLCANO_NS)
    assert not _exists(sw, "serviceaccount", "volcano-admission-init", VOLCANO_NS)
    crds = sw.kubectl("get", "crd", "-o", "name").split()
    # Every CRD Volcano v1.13 had stays (NodeShard is v1.14's: Caldera's chart brings it).
    volcanos = [
        c
        for c in CRDS
        if (FIXTURE / "templates" / f"crd-{c.info.group}_{c.info.plural}.yaml").exists()
    ]
    assert len(volcanos) == 8
    assert {
        f"customresourcedefinition.apiextensions.k8s.io/{c.info.resource}" for c in volcanos
    } <= (set(crds))
    assert _uids(_pods(sw)) == _uids(before_pods)

    # ---- The gap: nothing runs. A Command and a Job wait; Volcano's schema drops a field.
    serve_uid = sw.get("jobs.batch.volcano.sh", "serve")["metadata"]["uid"]
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": "serve-abortjob-",
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": "serve",
                    "uid": serve_uid,
                    "controller": True,
                }
            ],
        },
        "action": "AbortJob",
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "serve",
            "uid": serve_uid,
            "controller": True,
        },
    }
    sw.kubectl("-n", USERS, "create", "-f", "-", input=json.dumps(command))
    sw.kubectl(
        "-n", USERS, "create", "-f", "-", input=json.dumps(_running_forever("late", "research"))
    )
    # kubectl validates strictly and refuses the field Volcano's schema lacks; a client that
    # does not (a controller, a library) has it dropped, with at most a warning.
    pruned = json.dumps(job("early-claims", [task("w", 1, volumeClaimTemplates=[CLAIM])]))
    strict = sw.shell(f"kubectl -n {USERS} create -f - <<'EOF'\n{pruned}\nEOF", check=False)
    assert 'unknown field "spec.tasks[0].volumeClaimTemplates"' in strict.stderr
    lax = sw.shell(f"kubectl -n {USERS} create --validate=warn -f - <<'EOF'\n{pruned}\nEOF")
    assert "unknown field" in lax.stderr
    stored = sw.get("jobs.batch.volcano.sh", "early-claims")["spec"]["tasks"][0]
    assert "volumeClaimTemplates" not in stored

    # Caldera's controllers refuse Volcano's CRDs, naming the CRD and the field.
    refusing = sw.start("refusing", "controllers", ["--leader-elect=false"], admin)
    until(lambda: refusing.proc.poll() is not None, what="the CRD check to stop the process")
    log = refusing.log()
    assert sw.stop("refusing") == 1, log
    assert "jobs.batch.volcano.sh" in log
    assert "spec.tasks[].volumeClaimTemplates" in log
    assert "kubectl apply --server-side --force-conflicts" in log

    # ---- Step 3: Caldera's CRDs, server-side; Volcano's Helm ownership removed.
    apply, annotate = doc_blocks("3.")
    apply_lines = [line for line in apply.splitlines() if line.startswith("kubectl")]
    sw.shell("\n".join(apply_lines).replace("caldera/crds/", f"{CRD_DIR}/"))
    sw.shell(annotate)
    jobs_crd = json.loads(sw.kubectl("get", "crd", "jobs.batch.volcano.sh", "-o", "json"))
    assert "meta.helm.sh/release-name" not in jobs_crd["metadata"].get("annotations", {})
    assert sw.phase("train") == "Running"  # objects untouched by the schema change

    # ---- Step 4: Caldera's chart. Its webhook configurations would call a Service without
    # pods here, so they match nothing; the webhook process registers itself at a local URL.
    # The visibility APIService would point at a Service without pods too: an aggregated API
    # that never answers holds every namespace's deletion back (step 6), so it is left out.
    values = sw.tmp / "caldera-values.yaml"
    no_admission = {"objectSelector": {"matchLabels": {"caldera.io/e2e-never": "x"}}}
    no_visibility = {"visibility": {"enabled": False}}
    values.write_text(
        yaml.safe_dump({"webhook": {"admission": no_admission}, "scheduler": no_visibility})
    )
    sw.shell(
        f"helm install caldera {CHART} --namespace {CALDERA_NS} --create-namespace -f {values}"
    )
    kubeconfigs = {}
    for process in ("controllers", "scheduler", "webhook"):
        sa = f"caldera-{process}"
        token = sw.kubectl("-n", CALDERA_NS, "create", "token", sa, "--duration=1h").strip()
        kubeconfigs[process] = write_token_kubeconfig(
            admin, sw.tmp / f"{process}.kubeconfig", user=sa, token=token
        )
    leader = [f"--leader-election-namespace={CALDERA_NS}"]
    sw.start("caldera-webhook", "webhook", tls, kubeconfigs["webhook"])
    sw.start("caldera-controllers", "controllers", leader, kubeconfigs["controllers"])
    sw.start(
        "caldera-scheduler",
        "scheduler",
        [*leader, "--schedule-period=0.5"],
        kubeconfigs["scheduler"],
    )
    for name in ("caldera-webhook", "caldera-controllers", "caldera-scheduler"):
        sw.ready(name)
    for doc in webhook_configurations(
        f"https://127.0.0.1:{port}", sw.plane.pki.ca_crt.read_bytes(), name="caldera-e2e"
    ):
        sw.kubectl("apply", "-f", "-", input=json.dumps(doc))

    # ---- Step 5: everything reconciled, nothing lost.
    sw.until(lambda: sw.phase("serve") == "Aborted", what="the Command of the gap carried out")
    sw.until(lambda: sw.phase("late") == "Running", what="the Job of the gap started")
    assert not json.loads(sw.kubectl("-n", USERS, "get", "commands", "-o", "json"))["items"]
    after_pods = _pods(sw)
    for name in ("train-worker-0", "train-worker-1", "spark-driver"):
        assert after_pods[name]["metadata"]["uid"] == before_pods[name]["metadata"]["uid"], name
        assert after_pods[name]["spec"]["nodeName"] == before_pods[name]["spec"]["nodeName"]
        assert after_pods[name]["status"]["phase"] == "Running"
    train = sw.get("jobs.batch.volcano.sh", "train")["status"]
    assert train["state"]["phase"] == "Running"
    assert (train.get("version", 0), train.get("retryCount", 0)) == (
        train_before.get("version", 0),
        train_before.get("retryCount", 0),
    )
    assert sw.phase("done") == "Completed"
    after_groups = _podgroups(sw)
    # The running jobs' PodGroups and the other tool's are the same objects (serve's went with
    # its abort, as Volcano's job controller deletes it too).
    kept = [n for n in before_groups if n.startswith(("train-", "spark-app"))]
    assert len(kept) == 2, list(before_groups)
    for name in kept:
        uid = before_groups[name]["metadata"]["uid"]
        assert after_groups[name]["metadata"]["uid"] == uid, name
    assert after_groups["spark-app"]["status"]["phase"] == "Running"
    research = sw.get("queues", "research", "")
    assert (research["spec"]["weight"], research["spec"]["parent"]) == (2, "root")
    assert research["status"]["state"] == "Open"
    for process in ("controllers", "scheduler"):
        holder = sw.get("lease", f"caldera-{process}", CALDERA_NS)["spec"]["holderIdentity"]
        assert holder, process

    # Caldera's CRDs keep what Volcano's dropped: a Job's claim templates get their PVCs.
    claims = job("claims", [task("w", 1, volumeClaimTemplates=[CLAIM])])
    sw.kubectl("-n", USERS, "create", "-f", "-", input=json.dumps(claims))
    stored = sw.get("jobs.batch.volcano.sh", "claims")["spec"]["tasks"][0]
    assert stored["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    sw.until(lambda: _exists(sw, "pvc", "data-claims-w-0"), what="the claim template's PVC")

    # ---- Step 6: Volcano's leftovers.
    (cleanup,) = doc_blocks("6.")
    sw.shell(cleanup)
    assert not _exists(sw, "namespace", VOLCANO_NS, "") or _terminating(sw, VOLCANO_NS)

    for name in ("caldera-controllers", "caldera-scheduler", "caldera-webhook"):
        proc = sw.procs[name]
        _no_refusals(proc, name)
        assert sw.stop(name) == 0, proc.log()[-3000:]


def _exists(sw: Switch, kind: str, name: str, namespace: str = USERS) -> bool:
    scope = ["-n", namespace] if namespace else []
    found = sw.kubectl(*scope, "get", kind, name, "--ignore-not-found", "-o", "name")
    return bool(found.strip())


def _admitted(sw: Switch, body: dict[str, Any]) -> bool:
    """Whether the webhook admits ``body`` in a server-side dry run; False while it refuses
    for a queue its cache has not seen, any other refusal fails the test."""
    try:
        sw.kubectl("-n", USERS, "create", "--dry-run=server", "-f", "-", input=json.dumps(body))
    except ClusterError as refused:
        if "unable to find job queue" in str(refused):
            return False
        raise
    return True


def _terminating(sw: Switch, namespace: str) -> bool:
    phase = sw.kubectl("get", "namespace", namespace, "-o", "jsonpath={.status.phase}")
    return phase.strip() == "Terminating"


def test_the_page_has_the_steps_the_test_runs() -> None:
    """The blocks the switch runs are where it reads them (a reworded heading or a merged
    block must not silently skip a step)."""
    assert [len(doc_blocks(step)) for step in ("1.", "2.", "3.", "6.")] == [1, 2, 2, 1]
    assert "helm uninstall" not in "".join(doc_blocks("2."))
