"""``caldera webhook`` behind the real API server: every admission rule and default, applied with
the client, through ValidatingWebhookConfiguration and MutatingWebhookConfiguration objects
(failurePolicy Fail) that point at a local ``caldera webhook`` process.

Isolation: the configurations match only this module's namespace (namespaceSelector on its
`caldera.io/e2e` label) and, for the cluster-scoped Queue, only queues labelled with this module's
token (objectSelector), so other tests' objects never reach this webhook. The configurations are
always deleted at the end, before the queues they protect.

Where the CRD schema already refuses an object (minimum, enum, pattern, minItems), the API server
answers with its own message before the validating webhook runs; those rows assert that the
message names the field. Rules that need the cluster's `root` or `default` queue, or a queue
status written on create, are covered by the unit tests only (this module does not touch queues
other tests own).
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.kinds import CRONJOB, HYPERNODE, JOB, JOBFLOW, POD, PODGROUP, QUEUE, resource_path
from caldera.kube.client import KubeClient
from caldera.kube.errors import ApiError
from caldera.kube.requests import PatchType
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import webhook_configurations
from e2e.cluster.control_plane import free_port, kubectl, run_kubectl
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.waiting import eventually, until
from unit.test_webhook_cronjobs import CRONJOB_RULES
from unit.test_webhook_cronjobs import cronjob as cronjob_dict
from unit.test_webhook_jobflows import JOBFLOW_RULES
from unit.test_webhook_jobflows import jobflow as jobflow_dict
from unit.test_webhook_jobs import CREATE_RULES, UPDATE_RULES
from unit.webhook_fixtures import job_dict, task

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

TOKEN = secrets.token_hex(3)
LABEL = "caldera.io/e2e-webhook"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NIGHTLY: dict[str, Any] = yaml.safe_load((EXAMPLES / "cronjob-nightly.yaml").read_text())


@dataclass(frozen=True)
class Webhook:
    """The running webhook and the objects this module set up for it."""

    namespace: str
    process: CalderaProcess
    open: str
    closed: str
    parent: str
    child: str
    team: str


def _kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    return run_kubectl(cluster.kubeconfig, *args, input=stdin)


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "labels": {LABEL: TOKEN}},
        "spec": spec,
    }


def _configurations(url: str, ca: bytes, namespace: str) -> list[dict[str, Any]]:
    """The demo's configurations, narrowed to this test's namespace and labelled queues."""
    return webhook_configurations(
        url,
        ca,
        name=f"caldera-e2e-{TOKEN}",
        namespace_selector={"matchLabels": {"caldera.io/e2e": namespace}},
        queue_selector={"matchLabels": {LABEL: TOKEN}},
        hook_domain=f"{TOKEN}.caldera.io",
    )


@pytest.fixture(scope="module")
def webhook(
    cluster: Cluster, crds: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Webhook]:
    """A `caldera webhook` process registered with the API server for this module's objects."""
    if cluster.plane is None:
        pytest.skip("the API server must reach a webhook on this machine's loopback")
    tmp = tmp_path_factory.mktemp("webhook")
    crt, key = write_serving_pair(cluster.plane.pki, tmp / "tls", ["127.0.0.1"])
    port = free_port()
    namespace = f"e2e-wh-{TOKEN}"
    names = {k: f"wh-{TOKEN}-{k}" for k in ("open", "closed", "parent", "child", "team")}
    proc = CalderaProcess(
        "webhook",
        [
            f"--port={port}",
            f"--tls-cert-file={crt}",
            f"--tls-key-file={key}",
            "--cert-reload-interval=1",
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp,
    )
    setup = Webhook(namespace=namespace, process=proc, **names)
    config_name = f"caldera-e2e-{TOKEN}"
    try:
        _kubectl(
            cluster,
            "apply",
            "-f",
            "-",
            stdin=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [
                        {
                            "apiVersion": "v1",
                            "kind": "Namespace",
                            "metadata": {
                                "name": namespace,
                                "labels": {"caldera.io/e2e": namespace},
                                "annotations": {"scheduling.volcano.sh/queue-name": setup.open},
                            },
                        },
                        _queue(setup.open),
                        _queue(setup.closed),
                        _queue(setup.parent),
                        _queue(setup.child, parent=setup.parent),
                        _queue(
                            setup.team,
                            capability={"cpu": "50"},
                            deserved={"cpu": "20"},
                            guarantee={"resource": {"cpu": "10"}},
                        ),
                    ],
                }
            ),
        )
        _kubectl(
            cluster,
            "patch",
            "queue",
            setup.closed,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"state":"Closed"}}',
        )
        until(lambda: proc.get("/readyz")[0] == 200, what="the webhook to be ready")
        until(
            lambda: (
                subprocess.run(
                    [
                        kubectl(),
                        f"--kubeconfig={cluster.kubeconfig}",
                        "get",
                        "serviceaccount",
                        "default",
                        "-n",
                        namespace,
                    ],
                    capture_output=True,
                    check=False,
                ).returncode
                == 0
            ),
            what="the namespace's default ServiceAccount",
        )
        ca = cluster.plane.pki.ca_crt.read_bytes()
        configs = _configurations(f"https://127.0.0.1:{port}", ca, namespace)
        _kubectl(
            cluster,
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": configs}),
        )

        def effective() -> bool:
            done = subprocess.run(
                [
                    kubectl(),
                    f"--kubeconfig={cluster.kubeconfig}",
                    "create",
                    "--dry-run=server",
                    "-f",
                    "-",
                ],
                input=json.dumps(
                    {
                        **job_dict(queue="no-such-queue"),
                        "metadata": {"name": "probe", "namespace": namespace},
                    }
                ),
                capture_output=True,
                text=True,
                check=False,
            )
            return "unable to find job queue" in done.stderr

        until(effective, what="the API server to call the webhook")
        yield setup
    finally:
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            _kubectl(cluster, "delete", kind, config_name, "--ignore-not-found")
        _kubectl(cluster, "delete", "queues", "-l", f"{LABEL}={TOKEN}", "--wait=false")
        _kubectl(cluster, "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
        code = proc.stop()
        assert code == 0, f"webhook exited with {code}:\n{proc.log()[-3000:]}"


# --- helpers ------------------------------------------------------------------------------------


def _rename(value: Any, wh: Webhook) -> Any:
    """The unit tables' queue names mapped to this module's queues, in data and messages."""
    mapping = {"default": wh.open, "closed": wh.closed, "parent": wh.parent}
    if isinstance(value, dict):
        return {k: _rename(v, wh) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, wh) for v in value]
    if isinstance(value, str):
        if value in mapping:
            return mapping[value]
        for old, new in mapping.items():
            value = value.replace(f"`{old}`", f"`{new}`")
    return value


def _job(wh: Webhook, data: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = _rename(data, wh)
    meta = body["metadata"]
    meta["namespace"] = wh.namespace
    if name is not None:
        meta["name"] = name
    return body


async def _refusal(kube: KubeClient, kind: Any, body: dict[str, Any], **kw: Any) -> str:
    with pytest.raises(ApiError) as refused:
        await kube.create(kind, body, **kw)
    return refused.value.message


async def _get(kube: KubeClient, kind: Any, name: str, namespace: str | None) -> Any:
    return json.loads(await kube.request("GET", resource_path(kind, namespace, name)))


# Rows whose bad value the CRD schema refuses before the validating webhook is called.
CRD_FIRST = {
    "minAvailable < 0",
    "maxRetry < 0",
    "ttl < 0",
    "no task",
    "replicas < 0",
    "task minAvailable < 0",
    "task name not a label",
    "task maxRetry < 0",
    "job name not qualified",
    "invalid event",
    "mountPath required",
    "bad topologyPolicy",
    "partition size 0",
    "partition count 0",
}
UNIT_ONLY = {"root queue"}  # needs the cluster's own root queue


# --- jobs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "data", "field", "message"),
    [pytest.param(n, d, f, m, id=n) for n, d, f, m in CREATE_RULES if n not in UNIT_ONLY],
)
async def test_job_create_rule(
    webhook: Webhook, kube: KubeClient, rule: str, data: dict[str, Any], field: str, message: str
) -> None:
    """`kubectl apply` of each bad job is refused with the rule's message, naming the field."""
    refusal = await _refusal(kube, JOB, _job(webhook, data))
    assert field in refusal
    if rule in CRD_FIRST:
        return
    assert "denied the request" in refusal
    assert _rename(message, webhook) in refusal


@pytest.mark.parametrize(
    ("spec", "pointer", "value"),
    [
        ({"tasks": [task(""), task("b")]}, "spec.tasks.0.name", "default0"),
        ({}, "spec.schedulerName", "volcano"),
        ({"maxRetry": 0}, "spec.maxRetry", 3),
        ({"tasks": [task("a", 4)]}, "spec.tasks.0.minAvailable", 4),
        ({"tasks": [task("a")]}, "spec.tasks.0.maxRetry", 3),
        ({"tasks": [task("a", 2), task("b", 3, minAvailable=1)]}, "spec.minAvailable", 3),
        (
            {"plugins": {"tensorflow": []}, "tasks": [task("ps"), task("worker")]},
            "spec.plugins",
            {"tensorflow": [], "svc": []},
        ),
        (
            {"plugins": {"pytorch": []}, "tasks": [task("master", 1), task("worker")]},
            "spec.plugins",
            {"pytorch": [], "svc": []},
        ),
        (
            {
                "plugins": {"mpi": ["--port=2222"], "svc": ["--disable-network-policy"]},
                "tasks": [task("master", 1), task("worker")],
            },
            "spec.plugins",
            {"mpi": ["--port=2222"], "svc": ["--disable-network-policy"], "ssh": []},
        ),
        (
            {
                "tasks": [
                    task("a")
                    | {
                        "template": {
                            "spec": {
                                "hostNetwork": True,
                                "containers": [{"name": "c", "image": "busybox"}],
                            }
                        }
                    }
                ]
            },
            "spec.tasks.0.template.spec.dnsPolicy",
            "ClusterFirstWithHostNet",
        ),
    ],
)
async def test_job_default(
    webhook: Webhook, kube: KubeClient, spec: dict[str, Any], pointer: str, value: Any
) -> None:
    """A job created without the field comes back with Volcano's default."""
    name = f"d-{secrets.token_hex(3)}"
    await kube.create(JOB, _job(webhook, job_dict(**spec), name))
    stored: Any = await _get(kube, JOB, name, webhook.namespace)
    for part in pointer.split("."):
        stored = stored[int(part)] if isinstance(stored, list) else stored[part]
    assert stored == value


async def test_queue_default_for_job(webhook: Webhook, kube: KubeClient) -> None:
    """An explicitly empty queue becomes "default": the job then goes to (or, where this cluster
    has no default queue, is refused by) the queue "default"."""
    message, queue = "", ""
    try:
        queue = (await kube.create(JOB, _job(webhook, job_dict(queue=""), "q-empty"))).spec.queue
    except ApiError as refused:
        message = refused.message
    if message:
        assert 'unable to find job queue: queue.scheduling.volcano.sh "default"' in message
    else:
        assert queue == "default"


@pytest.mark.parametrize(
    ("change", "message"), [pytest.param(c, m, id=n) for n, c, m in UPDATE_RULES]
)
async def test_job_update_rule(
    webhook: Webhook, kube: KubeClient, change: dict[str, Any], message: str
) -> None:
    """Updates outside the scaling whitelist are refused; the stored job is unchanged."""
    name = f"u-{secrets.token_hex(3)}"
    before = _job(webhook, job_dict(minAvailable=2, tasks=[task("a", 2, minAvailable=2)]), name)
    await kube.create(JOB, before)
    stored = await _get(kube, JOB, name, webhook.namespace)
    stored["spec"].update(_rename(change, webhook))
    if "tasks" in change:  # keep the defaults the mutating webhook added on create
        for t in stored["spec"]["tasks"]:
            t.setdefault("maxRetry", 3)
    with pytest.raises(ApiError) as refused:
        await kube.replace(JOB, stored, namespace=webhook.namespace)
    text = refused.value.message
    crd_first = "must be >= 0" in message
    assert message.split(":")[0] in text if crd_first else message in text


async def test_job_scaling_update_is_allowed(webhook: Webhook, kube: KubeClient) -> None:
    """Changing replicas, minAvailable and priorityClassName passes the update rules."""
    name = f"s-{secrets.token_hex(3)}"
    await kube.create(JOB, _job(webhook, job_dict(tasks=[task("a", 2)]), name))
    stored = await _get(kube, JOB, name, webhook.namespace)
    stored["spec"]["tasks"][0].update(replicas=5, minAvailable=3)
    stored["spec"].update(minAvailable=3, priorityClassName="high")
    updated = await kube.replace(JOB, stored, namespace=webhook.namespace)
    assert updated.spec.tasks[0].replicas == 5
    assert updated.spec.priority_class_name == "high"


# --- queues -------------------------------------------------------------------------------------


def _q(wh: Webhook, suffix: str, **spec: Any) -> dict[str, Any]:
    return _queue(f"wh-{TOKEN}-{suffix}", **spec)


QUEUE_RULES: list[tuple[str, dict[str, Any], str]] = [
    (
        "bad capability",
        {"capability": {"cpu": "lots"}},
        'spec.capability.cpu: Invalid value: "lots"',
    ),
    ("bad deserved", {"deserved": {"memory": "1GB"}}, "spec.deserved.memory: Invalid value"),
    (
        "guarantee above deserved",
        {"deserved": {"cpu": "1"}, "guarantee": {"resource": {"cpu": "2"}}},
        'spec.guarantee.resource.cpu: Invalid value: "2": guarantee should less equal than '
        "deserved",
    ),
    (
        "deserved above capability",
        {"capability": {"cpu": "1"}, "deserved": {"cpu": "2"}},
        'spec.deserved.cpu: Invalid value: "2": deserved should less equal than capability',
    ),
    ("parent itself", {"parent": "SELF"}, "cannot use itself as parent"),
    (
        "parent missing",
        {"parent": "ghost-parent"},
        'queue.scheduling.volcano.sh "ghost-parent" not found',
    ),
    (
        "capability above ancestor",
        {"parent": "TEAM", "capability": {"cpu": "60"}},
        "spec.capability.cpu: queue SELF capability[cpu]=60 exceeds its ancestor's capability=50",
    ),
    (
        "sibling guarantee sum",
        {"parent": "TEAM", "guarantee": {"resource": {"cpu": "11"}}, "deserved": {"cpu": "11"}},
        "spec.guarantee.resource: parent queue TEAM validation failed: sum of children's "
        "guarantee (cpu 11) exceeds parent's guarantee limit (cpu 10)",
    ),
    (
        "sibling deserved sum",
        {"parent": "TEAM", "deserved": {"cpu": "21"}},
        "spec.deserved: parent queue TEAM validation failed: sum of children's deserved "
        "(cpu 21) exceeds parent's deserved limit (cpu 20)",
    ),
]


@pytest.mark.parametrize(("spec", "message"), [pytest.param(s, m, id=n) for n, s, m in QUEUE_RULES])
async def test_queue_create_rule(
    webhook: Webhook, kube: KubeClient, spec: dict[str, Any], message: str
) -> None:
    """Each bad queue is refused with a message naming the field."""
    name = f"wh-{TOKEN}-q{secrets.token_hex(2)}"

    def fill(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        return v.replace("SELF", name).replace("TEAM", webhook.team) if isinstance(v, str) else v

    refusal = await _refusal(kube, QUEUE, _queue(name, **fill(spec)))
    assert fill(message) in refusal


async def test_queue_hierarchy_annotation_rules(webhook: Webhook, kube: KubeClient) -> None:
    """Unequal hierarchy/weights lengths are refused; a rooted hierarchy is added on create."""
    bad = _q(webhook, "h1")
    bad["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": "a/b",
        "volcano.sh/hierarchy-weights": "1",
    }
    assert "must have the same length with volcano.sh/hierarchy-weights" in await _refusal(
        kube, QUEUE, bad
    )
    good = _q(webhook, "h2")
    good["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": f"x{TOKEN}",
        "volcano.sh/hierarchy-weights": "2",
    }
    created = await kube.create(QUEUE, good)
    assert created.metadata.annotations["volcano.sh/hierarchy"] == f"root/x{TOKEN}"
    assert created.metadata.annotations["volcano.sh/hierarchy-weights"] == "1/2"


async def test_hierarchy_sub_path_is_refused(webhook: Webhook, kube: KubeClient) -> None:
    """A hierarchy that is a path prefix of another queue's is refused, naming that queue."""
    first = _q(webhook, "hp1")
    first["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": f"root/s{TOKEN}/ml",
        "volcano.sh/hierarchy-weights": "1/1/1",
    }
    await kube.create(QUEUE, first)
    second = _q(webhook, "hp2")
    second["metadata"]["annotations"] = {
        "volcano.sh/hierarchy": f"root/s{TOKEN}",
        "volcano.sh/hierarchy-weights": "1/1",
    }

    async def refusal() -> str | None:
        try:
            await kube.create(QUEUE, second, dry_run=True)
        except ApiError as refused:
            return refused.message
        return None  # the webhook's cache has not seen the first queue yet

    message = await eventually(refusal, timeout=10, what="the sub-path refusal")
    assert f"root/s{TOKEN} is not allowed to be in the sub path of root/s{TOKEN}/ml" in message


async def test_parent_with_allocations_cannot_take_children(
    webhook: Webhook, kube: KubeClient
) -> None:
    """A leaf queue holding allocated resources cannot become a parent."""
    busy = await kube.create(QUEUE, _q(webhook, "busy"))
    await kube.patch(
        QUEUE,
        busy.metadata.name,
        {"status": {"allocated": {"cpu": "2"}}},
        patch_type=PatchType.MERGE,
        subresource="status",
    )
    child = _q(webhook, "busy-child", parent=busy.metadata.name)

    async def refusal() -> str | None:
        try:
            await kube.create(QUEUE, child, dry_run=True)
        except ApiError as refused:
            return refused.message
        return None  # the status patch has not reached the webhook's cache yet

    message = await eventually(refusal, timeout=10, what="the allocated-parent refusal")
    assert f"queue {busy.metadata.name} cannot be the parent queue of queue" in message
    assert "because it has allocated Pods: " in message


async def test_queue_defaults(webhook: Webhook, kube: KubeClient) -> None:
    """A new queue gets reclaimable true and weight 1; a queue without spec gets both."""
    created = await kube.create(QUEUE, _q(webhook, "d1"))
    assert created.spec.reclaimable is True
    assert created.spec.weight == 1
    bare = _q(webhook, "d2")
    del bare["spec"]
    created = await kube.create(QUEUE, bare)
    assert (created.spec.reclaimable, created.spec.weight) == (True, 1)
    kept = await kube.create(QUEUE, _q(webhook, "d3", reclaimable=False, weight=4))
    assert (kept.spec.reclaimable, kept.spec.weight) == (False, 4)


async def test_queue_depth_limit(webhook: Webhook, kube: KubeClient) -> None:
    """A queue may sit 5 levels below root, not 6."""
    parent = ""
    for level in range(1, 6):
        name = f"wh-{TOKEN}-l{level}"
        await kube.create(QUEUE, _queue(name, **({"parent": parent} if parent else {})))
        parent = name
    refusal = await _refusal(kube, QUEUE, _queue(f"wh-{TOKEN}-l6", parent=parent))
    assert "exceeds the maximum allowed depth of 5" in refusal


async def test_queue_with_children_cannot_be_deleted(webhook: Webhook, kube: KubeClient) -> None:
    """Deleting a queue that has a child queue is refused; a leaf can be deleted."""
    with pytest.raises(ApiError) as refused:
        await kube.delete(QUEUE, webhook.parent)
    assert f"queue {webhook.parent} can not be deleted because it has 1 child queues: " in (
        refused.value.message
    )
    leaf = await kube.create(QUEUE, _q(webhook, "leaf"))
    await kube.delete(QUEUE, leaf.metadata.name)


async def test_parent_capability_cannot_drop_below_child(
    webhook: Webhook, kube: KubeClient
) -> None:
    """An update lowering a parent's capability below its child's is refused."""
    parent = await kube.create(QUEUE, _q(webhook, "cp", capability={"cpu": "10"}))
    await kube.create(
        QUEUE, _q(webhook, "cc", parent=parent.metadata.name, capability={"cpu": "8"})
    )
    with pytest.raises(ApiError) as refused:
        await kube.patch(
            QUEUE,
            parent.metadata.name,
            {"spec": {"capability": {"cpu": "4"}}},
            patch_type=PatchType.MERGE,
        )
    assert "spec.capability.cpu: queue " in refused.value.message
    assert "capability[cpu]=4 is smaller than its descendants' max capability=8" in (
        refused.value.message
    )


async def test_parent_cycle_is_refused(webhook: Webhook, kube: KubeClient) -> None:
    """Re-parenting a queue under its own child is refused."""
    a = await kube.create(QUEUE, _q(webhook, "cyc-a"))
    await kube.create(QUEUE, _q(webhook, "cyc-b", parent=a.metadata.name))
    b_name = f"wh-{TOKEN}-cyc-b"

    async def refusal() -> str | None:
        try:
            await kube.patch(QUEUE, a.metadata.name, {"spec": {"parent": b_name}}, dry_run=True)
        except ApiError as refused:
            # "not found": the child has not reached the webhook's cache yet.
            return None if "not found" in refused.message else refused.message
        return None

    message = await eventually(refusal, timeout=10, what="the cycle refusal")
    assert f"spec.parent: making {b_name} the parent of {a.metadata.name} would form a cycle" in (
        message
    )


async def test_jobs_to_closed_and_non_leaf_queues(webhook: Webhook, kube: KubeClient) -> None:
    """Jobs are refused by a Closed queue and by a queue with children, admitted by a leaf."""
    closed = await _refusal(kube, JOB, _job(webhook, job_dict(queue=webhook.closed), "c1"))
    assert f"queue `{webhook.closed}` status is `Closed`" in closed
    parent = await _refusal(kube, JOB, _job(webhook, job_dict(queue=webhook.parent), "c2"))
    assert f"queue `{webhook.parent}` has 1 child queues" in parent
    await kube.create(JOB, _job(webhook, job_dict(queue=webhook.child), "c3"))


# --- podgroups and pods -------------------------------------------------------------------------


def _pg(wh: Webhook, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": wh.namespace},
        "spec": {"minMember": 1, **spec},
    }


async def test_podgroup_queue_from_namespace(webhook: Webhook, kube: KubeClient) -> None:
    """A PodGroup of the default queue gets the namespace's annotated queue."""
    created = await kube.create(PODGROUP, _pg(webhook, "pg-default"))
    assert created.spec.queue == webhook.open
    other = await kube.create(PODGROUP, _pg(webhook, "pg-own", queue=webhook.child))
    assert other.spec.queue == webhook.child


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"queue": "ghost"},
            'spec.queue: unable to find queue: queue.scheduling.volcano.sh "ghost"',
        ),
        ({"queue": "CLOSED"}, "can only submit PodGroup to queue with state `Open`"),
        ({"queue": "PARENT"}, "can only submit PodGroup to leaf queue, queue `"),
        (
            {"networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}},
            "spec.networkTopology: must not specify 'highestTierAllowed' and 'highestTierName'",
        ),
        (
            {
                "subGroupPolicy": [
                    {
                        "name": "s",
                        "networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"},
                    }
                ]
            },
            "spec.subGroupPolicy[0].networkTopology: must not specify",
        ),
    ],
)
async def test_podgroup_rule(
    webhook: Webhook, kube: KubeClient, spec: dict[str, Any], message: str
) -> None:
    """Each bad PodGroup is refused with its message."""
    if spec.get("queue") == "CLOSED":
        spec = {"queue": webhook.closed}
    if spec.get("queue") == "PARENT":
        spec = {"queue": webhook.parent}
    refusal = await _refusal(kube, PODGROUP, _pg(webhook, f"pg-{secrets.token_hex(3)}", **spec))
    assert message in refusal


def _pod(wh: Webhook, annotations: dict[str, str], scheduler: str = "volcano") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{secrets.token_hex(3)}",
            "namespace": wh.namespace,
            "annotations": annotations,
        },
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]},
    }


MIN, MAX = "volcano.sh/jdb-min-available", "volcano.sh/jdb-max-unavailable"


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({MIN: "0"}, f"metadata.annotations[{MIN}]: invalid value '0'"),
        ({MAX: "100%"}, "it must be a positive integer or a percentage between 1% and 99%"),
        ({MIN: "1", MAX: "1"}, "not allow configure multiple annotations"),
    ],
)
async def test_pod_rule(
    webhook: Webhook, kube: KubeClient, annotations: dict[str, str], message: str
) -> None:
    """A volcano pod with a bad disruption-budget annotation is refused."""
    assert message in await _refusal(kube, POD, _pod(webhook, annotations))


async def test_pods_admitted(webhook: Webhook, kube: KubeClient) -> None:
    """A valid annotation, and any pod of another scheduler, are admitted."""
    await kube.create(POD, _pod(webhook, {MAX: "50%"}), dry_run=True)
    await kube.create(POD, _pod(webhook, {MIN: "0"}, "default-scheduler"), dry_run=True)


# --- cronjobs -----------------------------------------------------------------------------------

# Rows whose bad values the CRD schema refuses (minimum 0, enum, minItems) before the webhook.
CRONJOB_CRD_FIRST = (
    "spec.startingDeadlineSeconds",
    "spec.successfulJobsHistoryLimit",
    "spec.failedJobsHistoryLimit",
    "spec.concurrencyPolicy",
    "spec.jobTemplate: spec.tasks: No task",
)


def _cronjob(wh: Webhook, changes: dict[str, Any], name: str = "nightly") -> dict[str, Any]:
    body = cronjob_dict(name, **changes)
    body["metadata"]["namespace"] = wh.namespace
    body["spec"]["jobTemplate"]["spec"].setdefault("queue", wh.open)
    return body


@pytest.mark.parametrize(
    ("changes", "message"), [pytest.param(c, m, id=m[:60]) for c, m in CRONJOB_RULES]
)
async def test_cronjob_rule(
    webhook: Webhook, kube: KubeClient, changes: dict[str, Any], message: str
) -> None:
    """Each bad CronJob is refused with its message, which names the field."""
    refusal = await _refusal(kube, CRONJOB, _cronjob(webhook, changes))
    assert message.split(":")[0] in refusal
    if message.startswith(CRONJOB_CRD_FIRST):
        return
    assert "denied the request" in refusal
    assert message in refusal


async def test_example_cronjob_is_admitted(webhook: Webhook, kube: KubeClient) -> None:
    """examples/cronjob-nightly.yaml passes every rule (its template as one of its Jobs)."""
    body = copy.deepcopy(NIGHTLY)
    body["metadata"]["namespace"] = webhook.namespace
    body["spec"]["jobTemplate"]["spec"]["queue"] = webhook.open
    await kube.create(CRONJOB, body, dry_run=True)


async def test_cronjob_name_and_update(webhook: Webhook, kube: KubeClient) -> None:
    """A name too long for its Jobs is refused; a good CronJob is admitted, and an update that
    breaks its schedule is refused."""
    long_name = await _refusal(kube, CRONJOB, _cronjob(webhook, {}, "n" * 53))
    assert "cronJob name must be no more than 52 characters" in long_name
    await kube.create(CRONJOB, _cronjob(webhook, {}, "ok"))
    with pytest.raises(ApiError) as refused:
        await kube.patch(
            CRONJOB, "ok", {"spec": {"schedule": "0 25 * * *"}}, namespace=webhook.namespace
        )
    assert "spec.schedule: schedule is not a valid cron expression" in refused.value.message


# --- jobflows -----------------------------------------------------------------------------------

# Rows whose bad values the CRD schema refuses (enum, minLength) before the webhook.
JOBFLOW_CRD_FIRST = ("spec.jobRetainPolicy", "spec.flows[0].name: Required value")


def _jobflow(wh: Webhook, spec: dict[str, Any], name: str = "pipe") -> dict[str, Any]:
    body = jobflow_dict(name)
    body["metadata"]["namespace"] = wh.namespace
    body["spec"] = copy.deepcopy(spec)
    return body


@pytest.mark.parametrize(
    ("spec", "message"), [pytest.param(c, m, id=m[:60]) for c, m in JOBFLOW_RULES]
)
async def test_jobflow_rule(
    webhook: Webhook, kube: KubeClient, spec: dict[str, Any], message: str
) -> None:
    """Each bad JobFlow (an undefined target, a cycle, a name its Jobs cannot carry) is refused
    with its message."""
    refusal = await _refusal(kube, JOBFLOW, _jobflow(webhook, spec))
    if message.startswith(JOBFLOW_CRD_FIRST):
        assert message.split(":")[0].replace("[0]", "") in refusal.replace("[0]", "")
        return
    assert "denied the request" in refusal
    # The rows hold the whole message or its start (a name check quotes Kubernetes' long one).
    assert message in refusal


def _kubectl_apply(cluster: Cluster, namespace: str, docs: list[dict[str, Any]]) -> tuple[int, str]:
    """kubectl apply of ``docs``: its exit code and everything it printed."""
    result = subprocess.run(
        [kubectl(), f"--kubeconfig={cluster.kubeconfig}", "-n", namespace, "apply", "-f", "-"],
        input=yaml.safe_dump_all(docs),
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


async def test_example_jobflow_is_admitted_and_a_cycle_is_refused_on_update(
    webhook: Webhook, cluster: Cluster, kube: KubeClient
) -> None:
    """examples/jobflow-pipeline.yaml applies as it is (its templates and its flow); an update
    that makes evaluate a target of preprocess is refused naming the cycle; a probe is admitted
    with kubectl's "Warning:" line."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "jobflow-pipeline.yaml").read_text()) if d]
    code, out = _kubectl_apply(cluster, webhook.namespace, docs)
    assert code == 0, out
    assert "jobflow.flow.volcano.sh/pipeline created" in out
    assert "jobtemplate.flow.volcano.sh/train created" in out
    cycle = {"spec": {"flows": [*docs[-1]["spec"]["flows"]]}}
    cycle["spec"]["flows"][0] = {"name": "preprocess", "dependsOn": {"targets": ["evaluate"]}}
    with pytest.raises(ApiError) as refused:
        await kube.patch(JOBFLOW, "pipeline", cycle, namespace=webhook.namespace)
    assert (
        "jobflow Flow is not DAG: the dependencies form a cycle: "
        "preprocess -> evaluate -> train -> preprocess"
    ) in refused.value.message
    probe = {"probe": {"tcpSocketList": [{"port": 22}]}}
    probed = _jobflow(webhook, {"flows": [{"name": "a"}, {"name": "b", "dependsOn": probe}]}, "x")
    code, out = _kubectl_apply(cluster, webhook.namespace, [probed])
    assert code == 0, out
    assert "Warning: spec.flows[1].dependsOn.probe: not acted on (nor by Volcano)" in out


# --- the process --------------------------------------------------------------------------------


async def test_metrics_count_admissions(webhook: Webhook, kube: KubeClient) -> None:
    """The webhook's /metrics counts reviews by path, operation and result, with latency."""
    await _refusal(kube, JOB, _job(webhook, job_dict(queue="ghost"), "m1"))
    denied = webhook.process.metric(
        "caldera_webhook_admission_requests_total",
        {"path": "/jobs/validate", "operation": "CREATE", "result": "denied"},
    )
    assert denied is not None
    assert denied >= 1
    count = webhook.process.metric(
        "caldera_webhook_admission_duration_seconds_count", {"path": "/jobs/validate"}
    )
    assert count is not None
    assert count >= 1


async def test_certificate_rotation(webhook: Webhook, cluster: Cluster, kube: KubeClient) -> None:
    """New certificate files are picked up within the reload interval; admission goes on."""
    assert cluster.plane is not None
    tls_dir = Path(webhook.process.log_path).parent / "tls"
    write_serving_pair(cluster.plane.pki, tls_dir, ["127.0.0.1"])
    until(
        lambda: "serving certificate reloaded" in webhook.process.log(),
        what="the reload",
        timeout=15,
    )
    refusal = await _refusal(kube, JOB, _job(webhook, job_dict(queue="ghost"), "r1"))
    assert "unable to find job queue" in refusal


# --- hypernodes ---------------------------------------------------------------------------------

TOPOLOGY_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "topology-3tier.yaml"
PYTORCH_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pytorch-32-hard.yaml"


def _hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {"tier": tier, "members": members},
    }


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (
            [{"type": "Node", "selector": {}}],
            "member selector must have one of exactMatch, regexMatch, or labelMatch",
        ),
        (
            [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}},
                }
            ],
            "cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)",
        ),
        (
            [{"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-["}}}],
            'spec.members[0].selector.regexMatch.pattern: Invalid value: "gpu-[": '
            "member regexMatch pattern is invalid",
        ),
    ],
)
async def test_hypernode_rule(
    webhook: Webhook, kube: KubeClient, members: list[dict[str, Any]], message: str
) -> None:
    """Each bad HyperNode is refused by /hypernodes/validate with a message naming the field."""
    refusal = await _refusal(kube, HYPERNODE, _hypernode(f"wh-{TOKEN}-bad", 1, members))
    assert "denied the request" in refusal
    assert message in refusal


async def test_hypernode_cycle_and_examples(webhook: Webhook, kube: KubeClient) -> None:
    """The example topology and 32-pod PyTorch job are admitted; a HyperNode that would
    contain its own ancestor is refused (the webhook finds the loop among the HyperNodes it
    has cached); no members at all is refused by the CRD (minItems)."""
    for doc in yaml.safe_load_all(TOPOLOGY_EXAMPLE.read_text()):
        await kube.create(HYPERNODE, doc, dry_run=True)
    job = yaml.safe_load(PYTORCH_EXAMPLE.read_text())
    job["metadata"]["namespace"] = webhook.namespace
    job["spec"]["queue"] = webhook.open
    await kube.create(JOB, job, namespace=webhook.namespace, dry_run=True)

    spine = f"wh-{TOKEN}-spine"
    labelled = {"labelMatch": {"matchLabels": {"caldera.io/e2e-wh": TOKEN}}}
    await kube.create(
        HYPERNODE, _hypernode(spine, 2, [{"type": "HyperNode", "selector": labelled}])
    )
    try:
        loop = _hypernode(
            f"wh-{TOKEN}-loop",
            1,
            [{"type": "HyperNode", "selector": {"exactMatch": {"name": spine}}}],
        )
        loop["metadata"]["labels"] = {"caldera.io/e2e-wh": TOKEN}

        async def refused() -> str | None:
            try:
                await kube.create(HYPERNODE, loop, dry_run=True)
            except ApiError as exc:
                return exc.message
            return None  # the webhook's cache has not seen the spine yet

        message = await eventually(refused, timeout=20, what="the cycle to be refused")
        assert f"hypernode member cycle: wh-{TOKEN}-loop -> {spine} -> wh-{TOKEN}-loop" in message
        empty = await _refusal(kube, HYPERNODE, _hypernode(f"wh-{TOKEN}-empty", 1, []))
        assert "spec.members" in empty
    finally:
        await kube.delete(HYPERNODE, spine)
