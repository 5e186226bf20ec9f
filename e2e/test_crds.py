"""Caldera's CRDs (charts/caldera/crds, generated from the models) on a real API server.

- Round trip: an object with every field of its model set, created with Caldera's client, its
  status written the way Caldera writes it (the status subresource; a plain update for PodGroup,
  which has none, as in Volcano), and read back, has lost nothing: a field the schema does not
  declare would be pruned silently by the server.
- The defaults the CRDs declare (Volcano's: Job queue "default" and maxRetry 3, Queue weight 1,
  ...), and none of the webhook's defaults, are applied by the server itself.
- Printer columns and short names are Volcano's, as kubectl shows them.
- Every Volcano example manifest of these kinds passes the schema unchanged (server-side dry run
  with strict field validation).
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import pytest
import yaml

from caldera.api import volcano
from caldera.api.codec import encode
from caldera.api.kinds import (
    COMMAND,
    CONFIGMAP,
    CRONJOB,
    JOB,
    JOBFLOW,
    JOBTEMPLATE,
    NAMESPACE,
    PODGROUP,
    QUEUE,
    KindInfo,
    resource_path,
)
from caldera.api.meta import ObjectMeta
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.cluster.control_plane import kubectl
from e2e.conftest import Cluster
from unit.test_models import EXAMPLE_DOCS, FULL_OBJECTS

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

T = TypeVar("T", bound=msgspec.Struct)

# Metadata the API server sets on every write; everything else must come back as sent.
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
FINALIZER = "e2e.caldera.io/keep"
SAMPLES: dict[type[msgspec.Struct], dict[str, Any]] = dict(FULL_OBJECTS)

POD_TEMPLATE: dict[str, Any] = {
    "spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}
}


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def comparable(obj: object) -> dict[str, Any]:
    """The JSON of `obj` as Caldera encodes it, without the metadata the server sets."""
    data: dict[str, Any] = json.loads(encode(obj))
    for key in SERVER_SET:
        data.get("metadata", {}).pop(key, None)
    return data


def without_server_metadata(obj: T) -> T:
    """`obj` with the metadata fields the server sets cleared (managedFields is not modelled)."""
    meta = obj.metadata  # type: ignore[attr-defined]
    cleared = msgspec.structs.replace(
        meta, uid="", resource_version="", generation=0, creation_timestamp=None
    )
    return msgspec.structs.replace(obj, metadata=cleared)


def missing(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Every key and value of `sent` that `stored` lacks or changed (extra keys are fine)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [f"{path}: {sent!r} became {stored!r}"]
        lost: list[str] = []
        for key, value in sent.items():
            if key not in stored:
                lost.append(f"{path}.{key} was dropped")
            else:
                lost += missing(value, stored[key], f"{path}.{key}")
        return lost
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [f"{path}: {sent!r} became {stored!r}"]
        return [
            p
            for i, (a, b) in enumerate(zip(sent, stored, strict=True))
            for p in missing(a, b, f"{path}[{i}]")
        ]
    if sent != stored or type(sent) is not type(stored):
        return [f"{path}: {sent!r} became {stored!r}"]
    return []


async def raw_get(kube: KubeClient, kind: KindInfo[Any], name: str, namespace: str | None) -> Any:
    """The object exactly as the server stores it (not through the model)."""
    return json.loads(await kube.request("GET", resource_path(kind, namespace, name)))


@dataclass
class Cleanup:
    """Objects to release (finalizer removed) and delete after the test, most recent first."""

    kube: KubeClient
    items: list[tuple[KindInfo[Any], str, str | None]] = field(default_factory=list)

    def add(self, kind: KindInfo[Any], name: str, namespace: str | None) -> None:
        self.items.append((kind, name, namespace))

    async def run(self) -> None:
        for kind, name, namespace in reversed(self.items):
            try:
                await self.kube.patch(
                    kind, name, {"metadata": {"finalizers": None}}, namespace=namespace
                )
                await self.kube.delete(kind, name, namespace=namespace)
            except NotFound:
                pass


@pytest.fixture
async def cleanup(kube: KubeClient) -> AsyncIterator[Cleanup]:
    tracker = Cleanup(kube)
    yield tracker
    await tracker.run()


async def full_metadata(
    kube: KubeClient, kind: KindInfo[Any], namespace: str, name: str
) -> dict[str, Any]:
    """Every writable ObjectMeta field set; the owner is real (a ConfigMap in the namespace, or
    the namespace itself for a cluster-scoped object), so the garbage collector leaves it be."""
    if kind.namespaced:
        owner = await kube.create(
            CONFIGMAP, {"metadata": {"name": unique("owner")}}, namespace=namespace
        )
        owner_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name}
        uid = owner.metadata.uid
    else:
        ns = await kube.get(NAMESPACE, namespace)
        owner_ref = {"apiVersion": "v1", "kind": "Namespace", "name": namespace}
        uid = ns.metadata.uid
    meta: dict[str, Any] = {
        "name": name,
        "generateName": name[:-6],
        "labels": {"app": "e2e", "caldera.io/test": "crds"},
        "annotations": {"volcano.sh/hierarchy": "root/eng", "note": "round trip"},
        "ownerReferences": [
            {**owner_ref, "uid": uid, "controller": True, "blockOwnerDeletion": True}
        ],
        "finalizers": [FINALIZER],
    }
    if kind.namespaced:
        meta["namespace"] = namespace
    return meta


@dataclass(frozen=True)
class RoundTrip:
    kind: KindInfo[Any]
    sent: Any  # the full model object, status included
    created: Any  # what the create returned
    stored: Any  # what a GET returns after the status was written


StatusWriter = Callable[[KubeClient, Any, Any], Awaitable[object]]


async def patch_status(kube: KubeClient, created: Any, sent: Any) -> object:
    """A merge patch of the status subresource (how the controllers write status)."""
    kind = _kind_of(created)
    status = json.loads(encode(sent))["status"]
    return await kube.patch_status(
        kind, created.metadata.name, {"status": status}, namespace=created.metadata.namespace
    )


async def update_status(kube: KubeClient, created: Any, sent: Any) -> object:
    """A PUT of the status subresource carrying the created object's resourceVersion."""
    body = msgspec.structs.replace(created, status=sent.status)
    return await kube.update_status(
        _kind_of(created), body, namespace=created.metadata.namespace or None
    )


async def plain_update(kube: KubeClient, created: Any, sent: Any) -> object:
    """A PUT of the whole object (PodGroup: its CRD has no status subresource)."""
    body = msgspec.structs.replace(created, status=sent.status)
    return await kube.replace(_kind_of(created), body, namespace=created.metadata.namespace)


KINDS: dict[type[Any], KindInfo[Any]] = {
    info.type: info for info in (JOB, CRONJOB, QUEUE, PODGROUP, COMMAND, JOBFLOW, JOBTEMPLATE)
}


def _kind_of(obj: Any) -> KindInfo[Any]:
    return KINDS[type(obj)]


async def round_trip(
    kube: KubeClient,
    cleanup: Cleanup,
    namespace: str,
    kind: KindInfo[Any],
    write_status: StatusWriter | None,
) -> RoundTrip:
    doc = copy.deepcopy(SAMPLES[kind.type])
    name = unique("full")
    doc["metadata"] = await full_metadata(kube, kind, namespace, name)
    sent = msgspec.convert(doc, kind.type)
    ns = namespace if kind.namespaced else None
    # Status is written separately (a create ignores it where there is a status subresource).
    spec_only = msgspec.structs.replace(sent, status=kind.type().status) if write_status else sent
    created = await kube.create(kind, spec_only, namespace=ns)
    cleanup.add(kind, name, ns)
    if write_status is not None:
        await write_status(kube, created, sent)
    stored = await kube.get(kind, name, namespace=ns)
    raw = await raw_get(kube, kind, name, ns)
    assert missing(comparable(sent), raw) == []
    return RoundTrip(kind, sent, created, stored)


# --- every field survives ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "write_status"),
    [
        (JOB, patch_status),
        (CRONJOB, patch_status),
        (QUEUE, update_status),
        (PODGROUP, plain_update),
        (COMMAND, None),
        (JOBFLOW, update_status),
        (JOBTEMPLATE, update_status),
    ],
    ids=["Job", "CronJob", "Queue", "PodGroup", "Command", "JobFlow", "JobTemplate"],
)
async def test_full_object_round_trips_without_loss(
    kube: KubeClient,
    namespace: str,
    cleanup: Cleanup,
    kind: KindInfo[Any],
    write_status: StatusWriter | None,
) -> None:
    """An object with every field set, created through KubeClient and its status written as
    Caldera writes it, reads back equal to what was sent: the schema prunes nothing."""
    result = await round_trip(kube, cleanup, namespace, kind, write_status)
    # Every key Caldera sent comes back with its value (the paths name what differs)...
    assert missing(comparable(result.sent), comparable(result.stored)) == []
    # ...and the object read back is the one sent, field by field. (Not the encodings compared
    # the other way: msgspec omits a default by identity, so a decoded "default" string that the
    # server filled in is encoded, while the default a model was built with is not.)
    assert without_server_metadata(result.stored) == without_server_metadata(result.sent)
    assert result.stored.metadata.uid == result.created.metadata.uid


def test_full_samples_set_every_status_field() -> None:
    """The samples exercise status too (so the round trip of status is not vacuous)."""
    for kind in (JOB, CRONJOB, QUEUE, PODGROUP, JOBFLOW, JOBTEMPLATE):
        sample = SAMPLES[kind.type]
        model = msgspec.convert(sample, kind.type)
        assert json.loads(encode(model))["status"] == sample["status"], kind.kind


async def test_status_subresource_ignores_status_on_create(
    kube: KubeClient, namespace: str, cleanup: Cleanup
) -> None:
    """Job (status subresource): a create drops the status and a plain update cannot set it;
    only the status subresource writes it."""
    sent = msgspec.convert(SAMPLES[volcano.Job], volcano.Job)
    name = unique("sub")
    bare = msgspec.structs.replace(sent, metadata=ObjectMeta(name=name, namespace=namespace))
    assert bare.status != volcano.JobStatus()
    created = await kube.create(JOB, bare, namespace=namespace)
    cleanup.add(JOB, name, namespace)
    assert created.status == volcano.JobStatus()
    updated = await kube.replace(JOB, msgspec.structs.replace(created, status=sent.status))
    assert updated.status == volcano.JobStatus()
    patched = await kube.patch_status(
        JOB, name, {"status": {"state": {"phase": "Running"}}}, namespace=namespace
    )
    assert patched.status.state.phase == volcano.JobPhase.RUNNING


async def test_podgroup_has_no_status_subresource(
    kube: KubeClient, namespace: str, cleanup: Cleanup
) -> None:
    """As in Volcano, PodGroup has no status subresource (404) and keeps the status a create
    or plain update carries, which is how the scheduler writes it."""
    name = unique("pg")
    body = volcano.PodGroup(
        metadata=ObjectMeta(name=name),
        spec=volcano.PodGroupSpec(min_member=1),
        status=volcano.PodGroupStatus(phase=volcano.PodGroupPhase.PENDING),
    )
    created = await kube.create(PODGROUP, body, namespace=namespace)
    cleanup.add(PODGROUP, name, namespace)
    assert created.status.phase == volcano.PodGroupPhase.PENDING
    with pytest.raises(NotFound):
        await kube.patch_status(
            PODGROUP, name, {"status": {"phase": "Running"}}, namespace=namespace
        )


# --- CRD defaults ------------------------------------------------------------------------------


def _task() -> dict[str, Any]:
    return {"name": "t", "replicas": 1, "template": POD_TEMPLATE}


@dataclass(frozen=True)
class DefaultCase:
    name: str
    kind: KindInfo[Any]
    body: dict[str, Any]
    expected: dict[str, Any]  # path (dot-separated, [i] for list items) -> value
    absent: tuple[str, ...] = ()  # paths the server must not fill (webhook defaults)


DEFAULT_CASES = [
    DefaultCase(
        "job",
        JOB,
        {"spec": {"tasks": [_task()]}},
        {"spec.queue": "default", "spec.maxRetry": 3},
        absent=(
            "spec.schedulerName",
            "spec.minAvailable",
            "spec.tasks[0].maxRetry",
            "spec.tasks[0].minAvailable",
            "spec.ttlSecondsAfterFinished",
        ),
    ),
    DefaultCase(
        "job nested",
        JOB,
        {
            "spec": {
                "networkTopology": {"highestTierAllowed": 1},
                "tasks": [
                    {**_task(), "partitionPolicy": {"totalPartitions": 1, "partitionSize": 1}}
                ],
            }
        },
        {
            "spec.networkTopology.mode": "hard",
            "spec.tasks[0].partitionPolicy.minPartitions": 0,
        },
    ),
    DefaultCase(
        "queue",
        QUEUE,
        {"spec": {}},
        {"spec.weight": 1, "spec.dequeueStrategy": "traverse"},
        absent=("spec.reclaimable", "spec.parent", "status"),
    ),
    DefaultCase(
        "podgroup",
        PODGROUP,
        {
            "spec": {
                "minMember": 1,
                "networkTopology": {},
                "subGroupPolicy": [{"name": "sg"}],
            }
        },
        {
            "spec.queue": "default",
            "spec.networkTopology.mode": "hard",
            "spec.subGroupPolicy[0].subGroupSize": 1,
            "spec.subGroupPolicy[0].minSubGroups": 0,
        },
    ),
    DefaultCase(
        "cronjob",
        CRONJOB,
        {"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": [_task()]}}}},
        {
            "spec.concurrencyPolicy": "Allow",
            "spec.suspend": False,
            "spec.successfulJobsHistoryLimit": 3,
            "spec.failedJobsHistoryLimit": 1,
            "spec.jobTemplate.spec.queue": "default",
            "spec.jobTemplate.spec.maxRetry": 3,
        },
        absent=("spec.startingDeadlineSeconds", "spec.timeZone"),
    ),
    DefaultCase(
        "jobtemplate",
        JOBTEMPLATE,
        {"spec": {"tasks": [_task()]}},
        {"spec.queue": "default", "spec.maxRetry": 3},
        absent=("spec.schedulerName", "spec.minAvailable", "status"),
    ),
    DefaultCase(
        "jobflow",
        JOBFLOW,
        {"spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]}},
        {"spec.flows[1].dependsOn.targets[0]": "a"},
        absent=("spec.jobRetainPolicy", "spec.flows[0].patch", "status"),
    ),
]


def at(data: Any, path: str) -> Any:
    """The value at a path like "spec.tasks[0].maxRetry"; KeyError if any step is absent."""
    for part in path.split("."):
        name, _, index = part.partition("[")
        data = data[name]
        if index:
            data = data[int(index.rstrip("]"))]
    return data


@pytest.mark.parametrize("case", DEFAULT_CASES, ids=[c.name for c in DEFAULT_CASES])
async def test_crd_defaults_are_applied_by_the_server(
    kube: KubeClient, namespace: str, cleanup: Cleanup, case: DefaultCase
) -> None:
    """A minimal manifest, stored, carries the defaults Volcano's CRDs declare, and none of the
    defaults that only Volcano's mutating webhook applies."""
    name = unique("defaults")
    ns = namespace if case.kind.namespaced else None
    body = {
        "apiVersion": case.kind.api_version,
        "kind": case.kind.kind,
        "metadata": {"name": name},
        **copy.deepcopy(case.body),
    }
    await kube.create(case.kind, body, namespace=ns)
    cleanup.add(case.kind, name, ns)
    stored = await raw_get(kube, case.kind, name, ns)
    assert {path: at(stored, path) for path in case.expected} == case.expected
    for path in case.absent:
        with pytest.raises(KeyError):
            at(stored, path)


# --- kubectl: printer columns and short names --------------------------------------------------


async def run_kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    result = await asyncio.to_thread(
        subprocess.run,
        [kubectl(), f"--kubeconfig={cluster.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def table(output: str) -> dict[str, str]:
    """kubectl's table of one object as {column: value} (values here have no spaces)."""
    header, row = output.strip().splitlines()
    return dict(zip(header.split(), row.split(), strict=True))


async def test_printer_columns(
    cluster: Cluster, kube: KubeClient, namespace: str, cleanup: Cleanup
) -> None:
    """kubectl get shows Volcano's columns: Job STATUS, minAvailable, RUNNINGS, AGE (+QUEUE
    with -o wide), PodGroup STATUS, minMember, RUNNINGS, AGE (+QUEUE), Queue PARENT, JobFlow
    Status, Age."""
    job = await round_trip(kube, cleanup, namespace, JOB, patch_status)
    pg = await round_trip(kube, cleanup, namespace, PODGROUP, plain_update)
    queue = await round_trip(kube, cleanup, namespace, QUEUE, update_status)
    job_name, pg_name = job.sent.metadata.name, pg.sent.metadata.name

    columns = table(await run_kubectl(cluster, "get", "vcjob", job_name, "-n", namespace))
    assert list(columns) == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE"]
    assert [columns["NAME"], columns["STATUS"], columns["MINAVAILABLE"], columns["RUNNINGS"]] == [
        job_name,
        "Running",
        "2",
        "4",
    ]
    wide = table(
        await run_kubectl(cluster, "get", "vcjob", job_name, "-n", namespace, "-o", "wide")
    )
    assert list(wide) == ["NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "AGE", "QUEUE"]
    assert wide["QUEUE"] == "q1"

    columns = table(await run_kubectl(cluster, "get", "pg", pg_name, "-n", namespace))
    assert list(columns) == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"]
    assert [columns["STATUS"], columns["MINMEMBER"], columns["RUNNINGS"]] == ["Inqueue", "3", "1"]
    wide = table(await run_kubectl(cluster, "get", "pg", pg_name, "-n", namespace, "-o", "wide"))
    assert list(wide) == ["NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE", "QUEUE"]
    assert wide["QUEUE"] == "q1"

    columns = table(await run_kubectl(cluster, "get", "q", queue.sent.metadata.name))
    assert columns == {"NAME": queue.sent.metadata.name, "PARENT": "root"}

    flow = await round_trip(kube, cleanup, namespace, JOBFLOW, update_status)
    flow_name = flow.sent.metadata.name
    columns = table(await run_kubectl(cluster, "get", "jf", flow_name, "-n", namespace))
    assert list(columns) == ["NAME", "STATUS", "AGE"]
    assert columns["STATUS"] == "Running"


@pytest.mark.parametrize(
    ("kind", "short_names"),
    [
        (JOB, ("vcjob", "vj")),
        (CRONJOB, ("cronvcjob", "cronvj")),
        (PODGROUP, ("pg", "podgroup-v1beta1")),
        (QUEUE, ("q", "queue-v1beta1")),
        (JOBFLOW, ("jf",)),
        (JOBTEMPLATE, ("jt",)),
    ],
    ids=["Job", "CronJob", "PodGroup", "Queue", "JobFlow", "JobTemplate"],
)
async def test_short_names(
    cluster: Cluster,
    kube: KubeClient,
    namespace: str,
    cleanup: Cleanup,
    kind: KindInfo[Any],
    short_names: tuple[str, ...],
) -> None:
    """Volcano's short names reach the kinds: `kubectl get vcjob`, `vj`, `pg`, `q`, ..."""
    writer = {JOB: patch_status, CRONJOB: patch_status, PODGROUP: plain_update}.get(
        kind, update_status
    )
    result = await round_trip(kube, cleanup, namespace, kind, writer)
    name = result.sent.metadata.name
    scope = ["-n", namespace] if kind.namespaced else []
    for short in short_names:
        out = await run_kubectl(cluster, "get", short, name, *scope, "-o", "name")
        assert out.strip() == f"{kind.kind.lower()}.{kind.group}/{name}", short


# --- Volcano's examples ------------------------------------------------------------------------


def test_examples_include_the_webhook_rejected_jobs() -> None:
    """The example set has the three invalid_jobs_* manifests and Jobs and Queues."""
    names = [name for name, _ in EXAMPLE_DOCS]
    assert sum(name.startswith("invalid_jobs_") for name in names) == 3
    assert {doc["kind"] for _, doc in EXAMPLE_DOCS} >= {"Job", "Queue"}


async def test_volcano_examples_pass_the_schema(cluster: Cluster, namespace: str) -> None:
    """Every Job/Queue/PodGroup/Command/CronJob of Volcano's examples is accepted unchanged by
    the API server (dry run, strict field validation: an unknown field would be an error);
    the invalid_jobs_* are only rejected by the webhook, so they pass here too."""
    docs = [doc for _, doc in EXAMPLE_DOCS]
    out = await run_kubectl(
        cluster,
        "apply",
        "--dry-run=server",
        "--validate=strict",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=yaml.safe_dump_all(docs, sort_keys=False),
    )
    accepted = [line for line in out.splitlines() if line.endswith("(server dry run)")]
    assert len(accepted) == len(docs), out
    for doc in docs:
        group = doc["apiVersion"].split("/")[0]
        kind = doc["kind"].lower()
        assert any(
            line.startswith(f"{kind}.{group}/{doc['metadata']['name']} ") for line in accepted
        ), doc["metadata"]["name"]
