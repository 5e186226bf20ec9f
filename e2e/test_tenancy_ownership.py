"""Objects made on a Job's behalf, on the real API server (docs/reliability.md, "Objects made
on a Job's behalf"): the job controller runs with exactly the chart's rights, the tenant is a
ServiceAccount bound to `edit` in its own namespace, and nothing of the tenant's that happens to
bear a name the controller wants is modified, mounted or deleted, before or after the Job
finishes, nor after the controllers restart; claims of a deleted namesake Job or of a
StatefulSet are never adopted."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import (
    COMMAND,
    CONFIGMAP,
    EVENT,
    JOB,
    NETWORK_POLICY,
    POD,
    PVC,
    SECRET,
    SERVICE,
    KindInfo,
)
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import ApiError, Conflict, Invalid, NotFound
from caldera.kube.requests import PropagationPolicy
from e2e.caldera_process import CalderaProcess
from e2e.cluster.identities import (
    Identities,
    bound_account_kubeconfig,
    create_identities,
    delete_identities,
)
from e2e.conftest import Cluster
from e2e.job_fixtures import (  # noqa: F401 - fixtures
    get_pod,
    in_phase,
    job,
    pods_of,
    running_pods,
    scheduled,
    task,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds", "scheduled")]


@pytest.fixture(scope="module")
def chart_rights(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Identities]:
    """The chart's RBAC applied under a release of this module's own (its user roles aggregate
    into `edit`), with a kubeconfig per process."""
    release = f"own-{secrets.token_hex(3)}"
    ids = create_identities(
        cluster.kubeconfig,
        tmp_path_factory.mktemp("rights"),
        release=release,
        namespace=f"{release}-system",
    )
    yield ids
    delete_identities(cluster.kubeconfig, ids)


class Controllers:
    """``caldera controllers --controllers=job`` as the chart's controllers ServiceAccount;
    ``restart`` stops it (it must exit cleanly) and starts another."""

    def __init__(self, kubeconfig: Path, log_dir: Path) -> None:
        self._kubeconfig, self._log_dir = kubeconfig, log_dir
        self.proc = self._start()
        self.logs: list[str] = []

    def _start(self) -> CalderaProcess:
        args = ["--controllers=job", "--leader-elect=false", "--log-level=debug"]
        return CalderaProcess(
            "controllers", args, kubeconfig=self._kubeconfig, log_dir=self._log_dir
        )

    def stop(self) -> None:
        code = self.proc.stop()
        self.logs.append(self.proc.log())
        assert code == 0, self.proc.log()[-3000:]

    async def restart_and_sync(self, kube: KubeClient, namespace: str, job_name: str) -> None:
        """Restart, wait until ready (caches synced, the Job's first sync queued), make the
        Job sync once more (a label change), and give both syncs time to act."""
        self.stop()
        self.proc = self._start()

        async def ready() -> bool:
            status, _ = await asyncio.to_thread(self.proc.get, "/readyz")
            return status == 200

        await eventually(ready, timeout=60, what="the restarted controllers ready")
        patch = {"metadata": {"labels": {"poked": secrets.token_hex(2)}}}
        await kube.patch(JOB, job_name, patch, namespace=namespace)
        await asyncio.sleep(3)


@pytest.fixture
def controllers(chart_rights: Identities, tmp_path: Path) -> Iterator[Controllers]:
    running = Controllers(chart_rights.kubeconfigs["controllers"], tmp_path)
    yield running
    running.stop()
    log = "\n".join(running.logs)
    # Every read and write the ownership checks add is in the chart's role (a namespace being
    # deleted at the end answers 403 too, without naming a user).
    assert "is forbidden: User" not in log, log[-3000:]


@pytest.fixture
async def tenant(
    cluster: Cluster, namespace: str, chart_rights: Identities, tmp_path: Path
) -> AsyncIterator[KubeClient]:
    """A ServiceAccount bound to the built-in `edit` in the test's namespace, as a client."""
    path = bound_account_kubeconfig(
        cluster.kubeconfig, namespace, "tenant", "edit", tmp_path / "tenant.kubeconfig"
    )
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(path, options=options) as client:

        async def may_create_jobs() -> bool:  # the aggregation into `edit` is asynchronous
            try:
                await client.list(JOB, namespace=namespace)
            except ApiError:
                return False
            return True

        await eventually(may_create_jobs, timeout=30, what="edit to include Volcano Jobs")
        yield client


def _user_objects(ns: str, job_name: str) -> list[tuple[KindInfo[Any], dict[str, Any]]]:
    """The tenant's own objects under the names the svc and ssh plugins want."""
    meta = {"namespace": ns, "labels": {"owner": "tenant"}}
    return [
        (
            CONFIGMAP,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {**meta, "name": f"{job_name}-svc"},
                "data": {"mine": "yes"},
            },
        ),
        (
            SERVICE,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {**meta, "name": job_name},
                "spec": {"selector": {"app": "mine"}, "ports": [{"port": 80}]},
            },
        ),
        (
            SECRET,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {**meta, "name": f"{job_name}-ssh"},
                "stringData": {"id_rsa": "not the job's key"},
            },
        ),
        (
            NETWORK_POLICY,
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {**meta, "name": job_name},
                "spec": {"podSelector": {"matchLabels": {"app": "mine"}}},
            },
        ),
    ]


async def _versions(
    kube: KubeClient, ns: str, objects: list[tuple[KindInfo[Any], str]]
) -> dict[str, tuple[str, str]]:
    """kind/name -> (uid, resourceVersion): any write or a delete-and-recreate changes it."""
    out: dict[str, tuple[str, str]] = {}
    for kind, name in objects:
        obj: Any = await kube.get(kind, name, namespace=ns)
        out[f"{kind.kind}/{name}"] = (obj.metadata.uid, obj.metadata.resource_version)
    return out


async def _warnings(kube: KubeClient, ns: str, name: str, reason: str) -> list[str]:
    events = await kube.list(EVENT, namespace=ns)
    return [
        e.message
        for e in events.items
        if e.involved_object.name == name and e.reason == reason and e.type == "Warning"
    ]


def _plugin_job(name: str) -> dict[str, Any]:
    body = job(name, [task("w", 2)])
    body["spec"]["plugins"] = {"svc": [], "ssh": []}
    return body


async def _command(kube: KubeClient, ns: str, job_name: str, action: str) -> None:
    body = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": f"{job_name}-", "namespace": ns},
        "action": action,
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": job_name,
            "uid": (await kube.get(JOB, job_name, namespace=ns)).metadata.uid,
        },
    }
    await kube.create(COMMAND, body, namespace=ns)


async def test_a_tenants_namesakes_are_neither_changed_nor_deleted(
    kube: KubeClient, tenant: KubeClient, namespace: str, controllers: Controllers
) -> None:
    """The tenant owns ConfigMap `<job>-svc`, Service `<job>`, Secret `<job>-ssh` and
    NetworkPolicy `<job>`, then creates a Job with the svc and ssh plugins: the Job gets one
    Warning Event per object, naming it, its pods are held (none made, the reason in
    status.state.message), and none of the four is written or deleted: not while the Job is
    held, not after it is terminated, not after the controllers restart."""
    name = "tj"
    for kind, body in _user_objects(namespace, name):
        await tenant.create(kind, body, namespace=namespace)
    mine = [(kind, body["metadata"]["name"]) for kind, body in _user_objects(namespace, name)]
    before = await _versions(kube, namespace, mine)
    await tenant.create(JOB, _plugin_job(name), namespace=namespace)

    async def all_reported() -> list[str] | None:
        found = await _warnings(kube, namespace, name, "PluginError")
        named = [f"{k}/{n}" for k, n in ((kind.kind, n) for kind, n in mine)]
        # The Secret clash stops the ssh plugin before its Secret is created, the svc objects
        # clash at create: both are reported.
        return found if all(any(n in m for m in found) for n in named) else None

    found = await eventually(all_reported, timeout=30, what="Warning Events naming the objects")
    assert all("is not controlled by Job tj" in m for m in found), found
    held = await kube.get(JOB, name, namespace=namespace)
    assert "[held: " in held.status.state.message, held.status
    await asyncio.sleep(3)  # a few syncs
    assert await pods_of(kube, namespace, name) == {}
    assert await _versions(kube, namespace, mine) == before
    events_before = await _warnings(kube, namespace, name, "PluginError")

    await _command(tenant, namespace, name, "TerminateJob")
    await eventually(lambda: in_phase(kube, namespace, name, "Terminated"), timeout=30)
    await asyncio.sleep(2)
    assert await _versions(kube, namespace, mine) == before

    await controllers.restart_and_sync(kube, namespace, name)
    assert await _versions(kube, namespace, mine) == before
    cm = await kube.get(CONFIGMAP, f"{name}-svc", namespace=namespace)
    assert cm.data == {"mine": "yes"}
    # Once per change, not per sync: the restart added no new clash Event.
    assert len(await _warnings(kube, namespace, name, "PluginError")) == len(events_before)


async def test_a_finished_job_deletes_its_objects_once(
    kube: KubeClient, tenant: KubeClient, namespace: str, controllers: Controllers
) -> None:
    """A Job's own plugin objects go when it finishes, and its controlledResources forget the
    plugins; a tenant's ConfigMap and Service made afterwards under the same names survive
    later syncs and a controllers restart (Volcano deletes once, too)."""
    name = "tf"
    body = _plugin_job(name)
    body["spec"]["tasks"] = [task("w", 2, run_for="1s", exit_code=0)]
    await tenant.create(JOB, body, namespace=namespace)
    done = await eventually(lambda: in_phase(kube, namespace, name, "Completed"), timeout=60)

    async def plugins_forgotten() -> bool:
        j = await kube.get(JOB, name, namespace=namespace)
        return not any(k.startswith("plugin-") for k in j.status.controlled_resources)

    await eventually(plugins_forgotten, timeout=30, what="plugin entries dropped")

    async def gone() -> bool:
        owned: list[tuple[KindInfo[Any], str]] = [
            (CONFIGMAP, f"{name}-svc"),
            (SERVICE, name),
            (SECRET, f"{name}-ssh"),
        ]
        for kind, obj_name in owned:
            try:
                await kube.get(kind, obj_name, namespace=namespace)
            except NotFound:
                continue
            return False
        return True

    await eventually(gone, timeout=30, what="the Job's own objects deleted")
    assert done.metadata.uid

    later = [(k, b) for k, b in _user_objects(namespace, name) if k in (CONFIGMAP, SERVICE)]
    for kind, obj in later:
        await tenant.create(kind, obj, namespace=namespace)
    mine = [(kind, obj["metadata"]["name"]) for kind, obj in later]
    before = await _versions(kube, namespace, mine)
    # A pod event makes the finished Job sync (and plan its kill) again.
    for pod in (await pods_of(kube, namespace, name)).values():
        await kube.patch(
            POD, pod.metadata.name, {"metadata": {"labels": {"poke": "1"}}}, namespace=namespace
        )
    await controllers.restart_and_sync(kube, namespace, name)
    assert await _versions(kube, namespace, mine) == before


def _claim_job(name: str, replicas: int = 1) -> dict[str, Any]:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    return job(name, [task("w", replicas, volumeClaimTemplates=[claim])])


HOLD = "e2e.caldera.io/hold"


async def test_a_recreated_job_never_gets_the_old_terminating_claims(
    kube: KubeClient, tenant: KubeClient, namespace: str, controllers: Controllers
) -> None:
    """`kubectl delete vcjob pv && kubectl apply` at once: the new Job's pod waits (PVCError
    naming the claim) while the old Job's claim is Terminating, never mounts it, and gets a
    fresh claim of its own once the old one is gone."""
    name = "pv"
    await tenant.create(JOB, _claim_job(name), namespace=namespace)
    await eventually(lambda: running_pods(kube, namespace, name, 1), timeout=60, what="pod")
    claim = f"data-{name}-w-0"
    old = await kube.get(PVC, claim, namespace=namespace)
    # A finalizer keeps the old claim Terminating as long as the test wants.
    await kube.patch(PVC, claim, {"metadata": {"finalizers": [HOLD]}}, namespace=namespace)
    await tenant.delete(
        JOB, name, namespace=namespace, propagation_policy=PropagationPolicy.BACKGROUND
    )
    await tenant.create(JOB, _claim_job(name), namespace=namespace)
    new = await kube.get(JOB, name, namespace=namespace)

    async def waiting() -> list[str] | None:
        found = await _warnings(kube, namespace, name, "PVCError")
        return [m for m in found if f"PersistentVolumeClaim/{claim}" in m] or None

    async def terminating() -> bool:
        pvc = await kube.get(PVC, claim, namespace=namespace)
        return pvc.metadata.deletion_timestamp is not None

    await eventually(terminating, timeout=90, what="the old claim Terminating")
    found = await eventually(waiting, timeout=60, what="a PVCError naming the old claim")
    assert any("being deleted" in m for m in found), found
    pod = await get_pod(kube, namespace, f"{name}-w-0")
    assert pod is None or pod.metadata.uid != new.metadata.uid
    if pod is not None:  # the old Job's pod on its way out, never one of the new Job's
        assert [r.uid for r in pod.metadata.owner_references] != [new.metadata.uid]

    await kube.patch(PVC, claim, {"metadata": {"finalizers": None}}, namespace=namespace)

    async def fresh() -> Any:
        try:
            pvc = await kube.get(PVC, claim, namespace=namespace)
        except NotFound:
            return None
        return pvc if pvc.metadata.uid != old.metadata.uid else None

    made = await eventually(fresh, timeout=90, what="a fresh claim")
    assert [r.uid for r in made.metadata.owner_references] == [new.metadata.uid]
    running = await eventually(
        lambda: running_pods(kube, namespace, name, 1), timeout=90, what="the new pod"
    )
    assert [r.uid for r in running[f"{name}-w-0"].metadata.owner_references] == [new.metadata.uid]


async def test_a_statefulset_style_claim_is_left_alone(
    kube: KubeClient, tenant: KubeClient, namespace: str, controllers: Controllers
) -> None:
    """A claim `data-st-w-0` with no owner (what a StatefulSet `st-w` with template `data` makes)
    is neither adopted nor written: the pod that would mount it is not created, with a PVCError
    naming the claim."""
    name = "st"
    claim = f"data-{name}-w-0"
    body = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": namespace, "labels": {"app": "st-w"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await tenant.create(PVC, body, namespace=namespace)
    before = await _versions(kube, namespace, [(PVC, claim)])
    await tenant.create(JOB, _claim_job(name, replicas=2), namespace=namespace)

    async def reported() -> list[str] | None:
        found = await _warnings(kube, namespace, name, "PVCError")
        return [m for m in found if f"PersistentVolumeClaim/{claim}" in m] or None

    found = await eventually(reported, timeout=30, what="a PVCError naming the claim")
    assert "not controlled by this Job" in found[0]
    await asyncio.sleep(3)
    assert await get_pod(kube, namespace, f"{name}-w-0") is None
    assert await get_pod(kube, namespace, f"{name}-w-1") is not None  # its own claim: made
    assert await _versions(kube, namespace, [(PVC, claim)]) == before
    pvc = await kube.get(PVC, claim, namespace=namespace)
    assert pvc.metadata.owner_references == ()


async def test_uid_in_a_merge_patch_is_a_precondition(kube: KubeClient, namespace: str) -> None:
    """What the controllers' patches of their own objects rely on: a merge patch carrying a
    stale metadata.uid is refused by the API server, nothing is written."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "p", "namespace": namespace},
        "data": {"a": "1"},
    }
    made = await kube.create(CONFIGMAP, cm, namespace=namespace)
    with pytest.raises((Conflict, Invalid)):
        await kube.patch(
            CONFIGMAP, "p", {"metadata": {"uid": "stale"}, "data": {"a": "2"}}, namespace=namespace
        )
    after = await kube.get(CONFIGMAP, "p", namespace=namespace)
    assert after.data == {"a": "1"}
    await kube.patch(
        CONFIGMAP,
        "p",
        {"metadata": {"uid": made.metadata.uid}, "data": {"a": "3"}},
        namespace=namespace,
    )
    assert (await kube.get(CONFIGMAP, "p", namespace=namespace)).data == {"a": "3"}


async def test_controllers_may_set_block_owner_deletion(
    kube: KubeClient, chart_rights: Identities
) -> None:
    """The owner references the controllers write carry blockOwnerDeletion (as Volcano's); the
    OwnerReferencesPermissionEnforcement admission plugin (OpenShift) allows that only to who
    may update the owner's finalizers, which the chart grants, as Volcano's chart does."""
    user = chart_rights.usernames["controllers"]
    for group, resource in (
        ("batch.volcano.sh", "jobs"),
        ("batch.volcano.sh", "cronjobs"),
        ("flow.volcano.sh", "jobflows"),
    ):
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "namespace": "anywhere",
                    "verb": "update",
                    "group": group,
                    "resource": resource,
                    "subresource": "finalizers",
                    "name": "x",
                },
            },
        }
        answer = await kube.request(  # kube: an admin may ask about anyone
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            body=json.dumps(review).encode(),
        )
        assert b'"allowed":true' in answer, (resource, answer)


async def test_a_tenants_pod_of_a_job_pods_name_is_left_alone(
    kube: KubeClient, tenant: KubeClient, namespace: str, controllers: Controllers
) -> None:
    """A tenant's pod `<job>-w-0` (no owner) is not counted as the Job's, not marked, not
    deleted; the Job's other pod runs and the Job gets a FailedCreate Warning naming the pod."""
    name = "tp"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-w-0", "namespace": namespace, "labels": {"app": "mine"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    made = await tenant.create(POD, pod, namespace=namespace)
    await tenant.create(JOB, job(name, [task("w", 2)], minAvailable=1), namespace=namespace)

    async def reported() -> list[str] | None:
        found = await _warnings(kube, namespace, name, "FailedCreate")
        return [m for m in found if f"Pod/{name}-w-0 exists and is not controlled" in m] or None

    await eventually(reported, timeout=30, what="a FailedCreate naming the pod")
    await eventually(lambda: get_pod(kube, namespace, f"{name}-w-1"), timeout=30, what="w-1")
    await _command(tenant, namespace, name, "TerminateJob")
    await eventually(lambda: in_phase(kube, namespace, name, "Terminated"), timeout=30)
    await asyncio.sleep(2)
    # The stand-in scheduler and kwok run it (its status moves); the Job never touched it.
    after = await kube.get(POD, f"{name}-w-0", namespace=namespace)
    assert after.metadata.uid == made.metadata.uid
    assert after.metadata.deletion_timestamp is None
    assert after.metadata.annotations == made.metadata.annotations
    assert after.metadata.labels == {"app": "mine"}
