"""Caldera's own processes on the local control plane, started like the control plane's (pid
files, logs, detached) so that ``down`` stops them too, and the demo: Caldera runs an example
job to completion on fake nodes.

The scheduler serves the visibility API (docs/visibility.md) as in the chart: an APIService
whose Service (ExternalName ``localhost``) names the local process, so ``caldera queue
pending`` and ``kubectl get --raw /apis/visibility.caldera.dev/...`` work on the demo cluster.
It is registered only once the scheduler serves it and removed before the scheduler stops: an
aggregated API that does not answer holds namespace deletion back."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from e2e.cluster.control_plane import REPO, ClusterError, ControlPlane, free_port
from e2e.cluster.dra_demo import stop_driver
from e2e.cluster.pki import write_serving_pair

CALDERA_PROCESSES = ("caldera-webhook", "caldera-controllers", "caldera-scheduler")
CRD_DIR = REPO / "charts" / "caldera" / "crds"
DEMO_JOBS = (REPO / "examples" / "tensorflow-job.yaml", REPO / "examples" / "mpi-job.yaml")
WEBHOOK_CONFIG = "caldera-local"
VISIBILITY_APISERVICE = "v1alpha1.visibility.caldera.dev"
VISIBILITY_SERVICE = "caldera-visibility"
VISIBILITY_NAMESPACE = "kube-system"
# (name, path, API group, version, resource, operations) of Caldera's admission webhooks.
MUTATING = (
    ("mutatejob", "/jobs/mutate", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE"]),
    ("mutatequeue", "/queues/mutate", "scheduling.volcano.sh", "v1beta1", "queues", ["CREATE"]),
    (
        "mutatepodgroup",
        "/podgroups/mutate",
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        ["CREATE"],
    ),
    ("mutatecommand", "/commands/mutate", "bus.volcano.sh", "v1alpha1", "commands", ["CREATE"]),
)
VALIDATING = (
    ("validatejob", "/jobs/validate", "batch.volcano.sh", "v1alpha1", "jobs", ["CREATE", "UPDATE"]),
    (
        "validatequeue",
        "/queues/validate",
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        ["CREATE", "UPDATE", "DELETE"],
    ),
    (
        "validatepodgroup",
        "/podgroups/validate",
        "scheduling.volcano.sh",
        "v1beta1",
        "podgroups",
        ["CREATE"],
    ),
    ("validatepod", "/pods/validate", "", "v1", "pods", ["CREATE"]),
    (
        "validatecronjob",
        "/cronjobs/validate",
        "batch.volcano.sh",
        "v1alpha1",
        "cronjobs",
        ["CREATE", "UPDATE"],
    ),
    (
        "validatejobflow",
        "/jobflows/validate",
        "flow.volcano.sh",
        "v1alpha1",
        "jobflows",
        ["CREATE", "UPDATE"],
    ),
    (
        "validatehypernode",
        "/hypernodes/validate",
        "topology.volcano.sh",
        "v1alpha1",
        "hypernodes",
        ["CREATE", "UPDATE"],
    ),
    (
        "validatecommand",
        "/commands/validate",
        "bus.volcano.sh",
        "v1alpha1",
        "commands",
        ["CREATE", "UPDATE"],
    ),
)


def caldera_exe() -> str:
    exe = Path(sys.prefix) / "bin" / "caldera"
    if not exe.exists():
        raise ClusterError("the caldera command is not installed: run make install")
    return str(exe)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def apply_crds(plane: ControlPlane) -> None:
    """Caldera's CRDs applied server-side and Established."""
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR))


def start_caldera(plane: ControlPlane, timeout: float = 60) -> dict[str, int]:
    """Apply the CRDs, start the webhook, the controllers and the scheduler (those not running
    yet), wait until each is ready and the scheduler has created the default queue, and register
    the webhook with the API server; returns each process's metrics port."""
    apply_crds(plane)
    state_path = plane.dir / "caldera.json"
    state: dict[str, int] = json.loads(state_path.read_text()) if state_path.exists() else {}
    certs = plane.dir / "webhook-certs"
    crt, key = write_serving_pair(plane.pki, certs, ["127.0.0.1", "localhost"])
    visibility_crt, visibility_key = write_serving_pair(
        plane.pki,
        plane.dir / "visibility-certs",
        [f"{VISIBILITY_SERVICE}.{VISIBILITY_NAMESPACE}.svc"],
    )
    for name in CALDERA_PROCESSES:
        if plane.procs.pid(name) is not None:
            continue
        state[name] = free_port()
        command = name.removeprefix("caldera-")
        argv = [
            caldera_exe(),
            command,
            f"--kubeconfig={plane.kubeconfig}",
            "--leader-elect=false",
            "--listen-address=127.0.0.1",
            f"--metrics-port={state[name]}",
            "--log-format=json",
        ]
        if name == "caldera-webhook":
            state["webhook-https"] = free_port()
            argv += [
                f"--port={state['webhook-https']}",
                f"--tls-cert-file={crt}",
                f"--tls-key-file={key}",
            ]
        if name == "caldera-scheduler":
            state["visibility-https"] = free_port()
            argv += [
                "--visibility=true",
                f"--visibility-port={state['visibility-https']}",
                f"--visibility-cert-file={visibility_crt}",
                f"--visibility-key-file={visibility_key}",
            ]
        plane.procs.start(name, argv)
    state_path.write_text(json.dumps(state))
    deadline = time.monotonic() + timeout
    for name in CALDERA_PROCESSES:
        while not _ready(state[name]):
            if plane.procs.pid(name) is None:
                raise ClusterError(f"{name} exited at start:\n{plane.procs.tail(name)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{name} not ready in {timeout:.0f}s:\n{plane.procs.tail(name)}")
            time.sleep(0.2)
    # The scheduler creates the default queue once it leads, which can be a moment after it is
    # ready; a job applied before then is refused by the webhook ("unable to find job queue").
    # Waiting here, before the webhooks are registered, leaves the webhook's cache time to see it.
    plane.kubectl(
        "wait", "--for=create", f"--timeout={timeout:.0f}s", "queues.scheduling.volcano.sh/default"
    )
    ca = plane.pki.ca_crt.read_bytes()
    url = f"https://127.0.0.1:{state['webhook-https']}"
    for doc in webhook_configurations(url, ca):
        plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
    if "visibility-https" in state:  # else a scheduler started before it served the API
        for doc in visibility_registration(state["visibility-https"], ca):
            plane.kubectl("apply", "-f", "-", input=json.dumps(doc))
        plane.kubectl(
            "wait",
            "--for=condition=Available",
            f"--timeout={timeout:.0f}s",
            f"apiservice/{VISIBILITY_APISERVICE}",
        )
    return state


def visibility_registration(
    port: int,
    ca: bytes,
    *,
    namespace: str = VISIBILITY_NAMESPACE,
    service: str = VISIBILITY_SERVICE,
) -> list[dict[str, Any]]:
    """The Service and APIService that route ``visibility.caldera.dev`` to a local scheduler's
    port (the API server resolves an ExternalName Service by its host name); the serving
    certificate must name ``<service>.<namespace>.svc``."""
    return aggregated_api_registration(
        port, ca, "visibility.caldera.dev", "v1alpha1", namespace=namespace, service=service
    )


def aggregated_api_registration(
    port: int, ca: bytes, group: str, version: str, *, namespace: str, service: str
) -> list[dict[str, Any]]:
    """The Service and APIService that route ``group``/``version`` to a local server's port
    (the API server resolves an ExternalName Service by its host name); the serving
    certificate must name ``<service>.<namespace>.svc``."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{version}.{group}"},
            "spec": {
                "group": group,
                "version": version,
                "service": {"namespace": namespace, "name": service, "port": port},
                "caBundle": base64.b64encode(ca).decode(),
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]


NOT_SYSTEM = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
    ]
}


def webhook_configurations(
    url: str,
    ca: bytes,
    *,
    name: str = WEBHOOK_CONFIG,
    namespace_selector: dict[str, Any] = NOT_SYSTEM,
    queue_selector: dict[str, Any] | None = None,
    hook_domain: str = "caldera.io",
) -> list[dict[str, Any]]:
    """Caldera's admission webhooks at a local URL (Mutating and Validating configurations).

    Namespaced objects are matched by ``namespace_selector`` (every namespace but kube-system by
    default); queues are cluster-scoped, so only ``queue_selector`` (an objectSelector) can
    narrow them.
    """

    def hook(
        hook_name: str, path: str, group: str, version: str, resource: str, ops: list[str]
    ) -> dict[str, Any]:
        if resource == "queues":
            selector = {"objectSelector": queue_selector} if queue_selector else {}
        else:
            selector = {"namespaceSelector": namespace_selector}
        return {
            "name": f"{hook_name}.{hook_domain}",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "timeoutSeconds": 10,
            "clientConfig": {"url": url + path, "caBundle": base64.b64encode(ca).decode()},
            "rules": [
                {
                    "apiGroups": [group],
                    "apiVersions": [version],
                    "operations": ops,
                    "resources": [resource],
                }
            ],
            **selector,
        }

    meta = {"name": name}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*h) for h in MUTATING],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [hook(*h) for h in VALIDATING],
        },
    ]


def stop_caldera(plane: ControlPlane) -> list[str]:
    """Unregister the webhook and the visibility API (while the API server still runs), then
    stop the processes."""
    if plane.running().get("kube-apiserver") and plane.kubeconfig.exists():
        registered = (
            ("mutatingwebhookconfiguration", WEBHOOK_CONFIG),
            ("validatingwebhookconfiguration", WEBHOOK_CONFIG),
            ("apiservice", VISIBILITY_APISERVICE),
        )
        for kind, name in registered:
            # The API server is going away anyway if this fails.
            with contextlib.suppress(ClusterError):
                plane.kubectl("delete", kind, name, "--ignore-not-found")
    # The demo's fake DRA driver first: it deletes its ResourceSlices while the API server runs.
    stopped = ["fake-dra-driver"] if stop_driver(plane) else []
    return stopped + [name for name in reversed(CALDERA_PROCESSES) if plane.procs.stop(name)]


FINAL = ("Completed", "Failed", "Aborted", "Terminated")


def run_demo_jobs(
    plane: ControlPlane, manifests: tuple[Path, ...] = DEMO_JOBS, timeout: float = 180
) -> dict[str, str]:
    """Apply the example jobs (again, if they ran before) and follow them to a final phase;
    returns each job's final phase."""
    names = []
    for manifest in manifests:
        plane.kubectl("delete", "-f", str(manifest), "--ignore-not-found", "--wait=true")
        plane.kubectl("apply", "-f", str(manifest))
        names.append(
            json.loads(
                plane.kubectl("create", "--dry-run=client", "-o", "json", "-f", str(manifest))
            )["metadata"]["name"]
        )
    deadline = time.monotonic() + timeout
    last: dict[str, str] = {}
    while time.monotonic() < deadline:
        for name in names:
            job = json.loads(plane.kubectl("get", "jobs.batch.volcano.sh", name, "-o", "json"))
            phase: str = job.get("status", {}).get("state", {}).get("phase", "")
            if phase != last.get(name):
                running = job.get("status", {}).get("running", 0)
                print(
                    f"  job {name}: {phase or 'created'} (running pods: {running})", file=sys.stderr
                )
                last[name] = phase
        if all(last.get(n) in FINAL for n in names):
            return last
        time.sleep(1)
    raise ClusterError(f"jobs did not finish in {timeout:.0f}s (last phases {last})")
