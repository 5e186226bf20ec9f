"""caldera.kube against the real API server: reads, pagination, writes and their typed errors,
every patch type, the status subresource, watches (order, bookmarks, 410 after compaction),
binding and eviction on kwok nodes, RBAC refusals, and the Event recorder's aggregation."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s
from prometheus_client import CollectorRegistry

from caldera.api.core import ConfigMap, Container, Event, Pod, PodSpec, Toleration
from caldera.api.kinds import CONFIGMAP, EVENT, POD, KindInfo
from caldera.api.meta import (
    Condition,
    Model,
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    Status,
    type_meta,
)
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    TooManyRequests,
    error_from_status,
)
from caldera.kube.events import EventRecorder
from caldera.kube.requests import PatchType, PropagationPolicy
from e2e.cluster.control_plane import ControlPlane
from e2e.conftest import Cluster
from e2e.waiting import eventually, gone

pytestmark = pytest.mark.e2e


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def kube(cluster: Cluster, registry: CollectorRegistry) -> AsyncIterator[KubeClient]:
    options = ClientOptions(qps=500, burst=500)
    async with KubeClient.from_kubeconfig(
        cluster.kubeconfig, options=options, registry=registry
    ) as client:
        yield client


def cm(name: str, **labels: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, labels=labels), data={"k": "v"})


def pod(name: str, node: str = "", **labels: str) -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, labels=labels),
        spec=PodSpec(
            node_name=node,
            restart_policy="Never",
            containers=(Container(name="main", image="busybox"),),
            tolerations=(Toleration(operator="Exists"),),
        ),
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


# --- reads --------------------------------------------------------------------------------------


async def test_get_and_paginated_list(kube: KubeClient, namespace: str) -> None:
    """A LIST with a small limit follows continue tokens: every object once, pages of `limit`,
    one resourceVersion for the whole snapshot; GET decodes one object."""
    names = [f"page-{i:02d}" for i in range(13)]
    for name in names:
        await kube.create(CONFIGMAP, cm(name, group="paged"), namespace=namespace)

    pages = [
        page
        async for page in kube.list_pages(
            CONFIGMAP, namespace=namespace, label_selector="group=paged", limit=5
        )
    ]
    assert [len(p.items) for p in pages] == [5, 5, 3]
    assert pages[-1].metadata.continue_ == ""
    listed = await kube.list(CONFIGMAP, namespace=namespace, label_selector="group=paged", limit=5)
    assert sorted(c.metadata.name for c in listed.items) == names
    assert int(listed.resource_version) > 0

    got = await kube.get(CONFIGMAP, "page-07", namespace=namespace)
    assert got.data == {"k": "v"}
    assert got.metadata.labels == {"group": "paged"}
    assert got.metadata.uid


async def test_not_found_is_typed(kube: KubeClient, namespace: str) -> None:
    """GET of a missing object raises NotFound with the server's message."""
    with pytest.raises(NotFound, match=r'configmaps "nope" not found'):
        await kube.get(CONFIGMAP, "nope", namespace=namespace)


# --- create / delete ----------------------------------------------------------------------------


async def test_create_twice_is_already_exists(kube: KubeClient, namespace: str) -> None:
    """A second create with the same name raises AlreadyExists (not Conflict)."""
    await kube.create(CONFIGMAP, cm("twice"), namespace=namespace)
    with pytest.raises(AlreadyExists) as err:
        await kube.create(CONFIGMAP, cm("twice"), namespace=namespace)
    assert not isinstance(err.value, Conflict)
    assert 'configmaps "twice" already exists' in str(err.value)
    assert err.value.details is not None
    assert err.value.details.name == "twice"


async def test_invalid_object_carries_the_server_message(kube: KubeClient, namespace: str) -> None:
    """An invalid name raises Invalid whose text is the API server's own explanation."""
    with pytest.raises(Invalid) as err:
        await kube.create(CONFIGMAP, cm("Bad_Name"), namespace=namespace)
    text = str(err.value)
    assert 'metadata.name: Invalid value: "Bad_Name"' in text
    assert "RFC 1123 subdomain" in text
    assert any(field == "metadata.name" for _, _, field in err.value.causes)


async def test_delete_with_preconditions(kube: KubeClient, namespace: str) -> None:
    """A wrong uid or a stale resourceVersion precondition is a Conflict and deletes nothing;
    the right uid deletes; deleting again is NotFound."""
    created = await kube.create(CONFIGMAP, cm("guarded"), namespace=namespace)
    old_rv = created.metadata.resource_version
    await kube.patch(CONFIGMAP, "guarded", {"data": {"k": "v2"}}, namespace=namespace)

    with pytest.raises(Conflict, match=r"the UID in the precondition \(wrong\) does not match"):
        await kube.delete(CONFIGMAP, "guarded", namespace=namespace, uid="wrong")
    with pytest.raises(Conflict, match="the ResourceVersion in the precondition"):
        await kube.delete(CONFIGMAP, "guarded", namespace=namespace, resource_version=old_rv)
    assert (await kube.get(CONFIGMAP, "guarded", namespace=namespace)).data == {"k": "v2"}

    await kube.delete(CONFIGMAP, "guarded", namespace=namespace, uid=created.metadata.uid)
    with pytest.raises(NotFound):
        await kube.get(CONFIGMAP, "guarded", namespace=namespace)
    with pytest.raises(NotFound):
        await kube.delete(CONFIGMAP, "guarded", namespace=namespace)


async def _owner_and_dependent(
    kube: KubeClient, namespace: str, prefix: str, finalizers: tuple[str, ...] = ()
) -> tuple[ConfigMap, ConfigMap]:
    owner = await kube.create(CONFIGMAP, cm(f"{prefix}-owner"), namespace=namespace)
    # blockOwnerDeletion: a foreground owner waits only for dependents that block it.
    ref = OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name=owner.metadata.name,
        uid=owner.metadata.uid,
        block_owner_deletion=True,
    )
    dependent = ConfigMap(
        metadata=ObjectMeta(
            name=f"{prefix}-dependent", owner_references=(ref,), finalizers=finalizers
        )
    )
    return owner, await kube.create(CONFIGMAP, dependent, namespace=namespace)


async def test_delete_propagation_policies(kube: KubeClient, namespace: str) -> None:
    """Orphan keeps the dependent (the GC drops its owner reference), Background collects it,
    Foreground keeps the owner (finalizer foregroundDeletion) until the dependent is gone."""
    await _owner_and_dependent(kube, namespace, "orphan")
    await kube.delete(
        CONFIGMAP, "orphan-owner", namespace=namespace, propagation_policy=PropagationPolicy.ORPHAN
    )

    async def orphaned() -> bool:
        dep = await kube.get(CONFIGMAP, "orphan-dependent", namespace=namespace)
        return not dep.metadata.owner_references

    await eventually(orphaned, timeout=60, what="the dependent to be orphaned")
    # The GC removes the owner's orphan finalizer just after it updates the dependents.
    await eventually(
        lambda: gone(kube, CONFIGMAP, "orphan-owner", namespace), timeout=30, what="the owner to go"
    )

    await _owner_and_dependent(kube, namespace, "bg")
    await kube.delete(
        CONFIGMAP, "bg-owner", namespace=namespace, propagation_policy=PropagationPolicy.BACKGROUND
    )
    await eventually(
        lambda: gone(kube, CONFIGMAP, "bg-dependent", namespace),
        timeout=60,
        what="the dependent to be collected",
    )

    # A finalizer on the dependent holds it, so the foreground owner must wait for it.
    await _owner_and_dependent(kube, namespace, "fg", finalizers=("caldera.io/hold",))
    await kube.delete(
        CONFIGMAP, "fg-owner", namespace=namespace, propagation_policy=PropagationPolicy.FOREGROUND
    )
    owner = await kube.get(CONFIGMAP, "fg-owner", namespace=namespace)
    assert owner.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in owner.metadata.finalizers

    async def dependent_deleting() -> bool:
        dep = await kube.get(CONFIGMAP, "fg-dependent", namespace=namespace)
        return dep.metadata.deletion_timestamp is not None

    await eventually(dependent_deleting, timeout=60, what="the GC to delete the dependent")
    await kube.patch(
        CONFIGMAP, "fg-dependent", {"metadata": {"finalizers": None}}, namespace=namespace
    )
    await eventually(
        lambda: gone(kube, CONFIGMAP, "fg-owner", namespace), timeout=60, what="the owner to go"
    )


# --- patches ------------------------------------------------------------------------------------


async def test_merge_and_json_patches(kube: KubeClient, namespace: str) -> None:
    """A merge patch merges maps and deletes with null; a JSON patch applies its operations,
    and a failing `test` operation changes nothing."""
    await kube.create(CONFIGMAP, cm("patched"), namespace=namespace)
    merged = await kube.patch(
        CONFIGMAP,
        "patched",
        {"metadata": {"labels": {"a": "1"}}, "data": {"x": "1", "k": None}},
        namespace=namespace,
    )
    assert merged.metadata.labels == {"a": "1"}
    assert merged.data == {"x": "1"}

    ops = [
        {"op": "add", "path": "/data/y", "value": "2"},
        {"op": "replace", "path": "/data/x", "value": "3"},
    ]
    patched = await kube.patch(
        CONFIGMAP, "patched", ops, namespace=namespace, patch_type=PatchType.JSON
    )
    assert patched.data == {"x": "3", "y": "2"}

    failing = [
        {"op": "test", "path": "/data/x", "value": "not-3"},
        {"op": "remove", "path": "/data/x"},
    ]
    with pytest.raises(Invalid, match="rejected our request"):
        await kube.patch(
            CONFIGMAP, "patched", failing, namespace=namespace, patch_type=PatchType.JSON
        )
    assert (await kube.get(CONFIGMAP, "patched", namespace=namespace)).data == {"x": "3", "y": "2"}


async def test_strategic_merge_patch_merges_lists_by_key(kube: KubeClient, namespace: str) -> None:
    """A strategic merge patch of one container (by name) keeps the other containers, where a
    merge patch of the same body would replace the whole list."""
    body = pod("two-containers")
    two = PodSpec(
        restart_policy="Never",
        containers=(
            Container(name="main", image="busybox:1.36"),
            Container(name="side", image="busybox:1.36"),
        ),
    )
    await kube.create(POD, Pod(metadata=body.metadata, spec=two), namespace=namespace)
    patch = {"spec": {"containers": [{"name": "side", "image": "busybox:1.37"}]}}
    patched = await kube.patch(
        POD, "two-containers", patch, namespace=namespace, patch_type=PatchType.STRATEGIC
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "busybox:1.36"),
        ("side", "busybox:1.37"),
    ]
    # The same body as a merge patch drops "main", which pod validation refuses.
    with pytest.raises(Invalid):
        await kube.patch(POD, "two-containers", patch, namespace=namespace)


async def test_server_side_apply_conflicts_and_force(kube: KubeClient, namespace: str) -> None:
    """Apply creates the object; another manager changing an owned field gets a Conflict that
    names the owner; with force it takes the field over."""
    intent = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied"},
        "data": {"a": "1"},
    }
    first = await kube.patch(
        CONFIGMAP,
        "applied",
        intent,
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="caldera-a",
    )
    assert first.data == {"a": "1"}

    other = {**intent, "data": {"a": "2"}}
    with pytest.raises(Conflict) as err:
        await kube.patch(
            CONFIGMAP,
            "applied",
            other,
            namespace=namespace,
            patch_type=PatchType.APPLY,
            field_manager="caldera-b",
        )
    assert 'conflict with "caldera-a"' in str(err.value)
    forced = await kube.patch(
        CONFIGMAP,
        "applied",
        other,
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="caldera-b",
        force=True,
    )
    assert forced.data == {"a": "2"}

    # A model as the apply body: only the fields it sets are part of the intent.
    applied = await kube.patch(
        CONFIGMAP,
        "applied",
        ConfigMap(metadata=ObjectMeta(name="applied"), data={"a": "2", "b": "3"}),
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="caldera-b",
    )
    assert applied.data == {"a": "2", "b": "3"}


# --- status subresource (own objects: a CRD with a complete model) ------------------------------


class WidgetSpec(Model, frozen=True):
    size: int = 0


class WidgetStatus(Model, frozen=True):
    phase: str = ""
    conditions: tuple[Condition, ...] = ()


class Widget(Model, frozen=True):
    api_version: str = ""  # the group is random per test: always given explicitly
    kind: str = type_meta("Widget")
    metadata: ObjectMeta = ObjectMeta()
    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus = WidgetStatus()


class CrdCondition(Model, frozen=True):
    type: str = ""
    status: str = ""


class CrdStatus(Model, frozen=True):
    conditions: tuple[CrdCondition, ...] | None = None  # null on a fresh CRD (no omitempty)


class Crd(Model, frozen=True):
    metadata: ObjectMeta = ObjectMeta()
    status: CrdStatus = CrdStatus()


CRDS: KindInfo[Crd] = KindInfo(
    "CustomResourceDefinition",
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    False,
    Crd,
)


@pytest.fixture
async def widgets(kube: KubeClient) -> AsyncIterator[KindInfo[Widget]]:
    """A namespaced CRD with a status subresource, served and established; deleted afterwards."""
    group = f"e2e{secrets.token_hex(3)}.caldera.io"
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "status": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
    await kube.create(CRDS, crd)

    async def established() -> bool:
        got = await kube.get(CRDS, f"widgets.{group}")
        conditions = got.status.conditions or ()
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    await eventually(established, what="the Widget CRD to be established")
    try:
        yield KindInfo("Widget", group, "v1", "widgets", True, Widget)
    finally:
        await kube.delete(CRDS, f"widgets.{group}")


async def test_status_subresource(
    kube: KubeClient, namespace: str, widgets: KindInfo[Widget]
) -> None:
    """PUT and PATCH of /status change only the status; PUT of the object changes only the spec;
    a stale resourceVersion is a Conflict."""
    api_version = f"{widgets.group}/v1"
    body = Widget(api_version=api_version, metadata=ObjectMeta(name="w"), spec=WidgetSpec(size=1))

    async def created() -> Widget | None:
        try:  # the new kind reaches every API server handler a moment after Established
            return await kube.create(widgets, body, namespace=namespace)
        except NotFound:
            return None

    widget = await eventually(created, what="the first Widget to be created")
    assert widget.status == WidgetStatus()

    asked = Widget(
        api_version=api_version,
        metadata=widget.metadata,
        spec=WidgetSpec(size=99),
        status=WidgetStatus(phase="Running"),
    )
    updated = await kube.update_status(widgets, asked)
    assert updated.status.phase == "Running"
    assert updated.spec.size == 1, "the status subresource ignores the spec"

    with pytest.raises(Conflict, match="the object has been modified"):
        await kube.update_status(widgets, asked)  # carries the old resourceVersion

    patched = await kube.patch_status(
        widgets, "w", {"status": {"phase": "Done"}}, namespace=namespace
    )
    assert patched.status.phase == "Done"

    replaced = await kube.replace(
        widgets,
        Widget(
            api_version=api_version,
            metadata=patched.metadata,
            spec=WidgetSpec(size=3),
            status=WidgetStatus(phase="ignored"),
        ),
    )
    assert replaced.spec.size == 3
    assert replaced.status.phase == "Done", "a PUT of the object ignores the status"


async def test_patch_status_of_a_pod(kube: KubeClient, namespace: str) -> None:
    """A merge patch of pods/status adds a condition (how Caldera writes status it does not own)."""
    await kube.create(POD, pod("status-me"), namespace=namespace)
    condition = {"type": "caldera.io/Checked", "status": "True", "reason": "E2E"}
    patched = await kube.patch_status(
        POD,
        "status-me",
        {"status": {"conditions": [condition]}},
        namespace=namespace,
        patch_type=PatchType.STRATEGIC,
    )
    types = {c.type: c.status for c in patched.status.conditions}
    assert types["caldera.io/Checked"] == "True"


# --- watch --------------------------------------------------------------------------------------


async def test_watch_delivers_changes_in_order(kube: KubeClient, namespace: str) -> None:
    """Watching from a list's resourceVersion yields ADDED, MODIFIED, DELETED of an object in
    order, with increasing resourceVersions, and nothing from before the list."""
    await kube.create(CONFIGMAP, cm("before"), namespace=namespace)
    listed = await kube.list(CONFIGMAP, namespace=namespace)
    seen: list[tuple[str, str, int]] = []
    async with kube.watch(
        CONFIGMAP, namespace=namespace, resource_version=listed.resource_version, timeout_seconds=60
    ) as events:
        await kube.create(CONFIGMAP, cm("watched"), namespace=namespace)
        await kube.patch(CONFIGMAP, "watched", {"data": {"k": "v2"}}, namespace=namespace)
        await kube.delete(CONFIGMAP, "watched", namespace=namespace)
        async with asyncio.timeout(30):
            async for event in events:
                if event.type == "BOOKMARK":
                    continue
                assert isinstance(event.object, ConfigMap)
                meta = event.object.metadata
                if meta.name == "kube-root-ca.crt":
                    continue  # kube-controller-manager publishes it into new namespaces, late
                seen.append((event.type, meta.name, int(meta.resource_version)))
                if event.type == "DELETED":
                    break
    assert [(t, n) for t, n, _ in seen] == [
        ("ADDED", "watched"),
        ("MODIFIED", "watched"),
        ("DELETED", "watched"),
    ]
    versions = [rv for _, _, rv in seen]
    assert versions == sorted(versions)
    assert len(set(versions)) == 3
    assert versions[0] > int(listed.resource_version)


async def test_watch_initial_events_end_with_a_bookmark(kube: KubeClient, namespace: str) -> None:
    """A watch with sendInitialEvents streams the current objects as ADDED, then a BOOKMARK
    (annotated initial-events-end) whose object decodes into the model with its resourceVersion."""
    for i in range(3):
        await kube.create(CONFIGMAP, cm(f"initial-{i}", group="initial"), namespace=namespace)
    added: list[str] = []
    bookmark: ConfigMap | None = None
    async with kube.watch(
        CONFIGMAP,
        namespace=namespace,
        label_selector="group=initial",
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
        timeout_seconds=60,
    ) as events:
        async with asyncio.timeout(30):
            async for event in events:
                assert isinstance(event.object, ConfigMap)
                if event.type == "ADDED":
                    added.append(event.object.metadata.name)
                elif event.type == "BOOKMARK":
                    bookmark = event.object
                    break
    assert sorted(added) == ["initial-0", "initial-1", "initial-2"]
    assert bookmark is not None
    assert bookmark.metadata.annotations.get("k8s.io/initial-events-end") == "true"
    assert int(bookmark.metadata.resource_version) > 0
    assert bookmark.metadata.name == ""


async def test_watch_from_compacted_history_reports_gone(
    kube: KubeClient, namespace: str, plane: ControlPlane
) -> None:
    """After etcd compaction, a watch from an older resourceVersion gets an ERROR event whose
    Status (410 Expired) maps to Gone; a LIST at that exact version is Gone too. Events are
    used because the API server does not keep them in its watch cache, so the request reaches
    etcd's history."""
    recorder_ref = ObjectReference(
        api_version="v1", kind="ConfigMap", namespace=namespace, name="x"
    )
    first = Event(
        metadata=ObjectMeta(name="x.1"),
        involved_object=recorder_ref,
        reason="E2E",
        message="first",
        type="Normal",
    )
    old = await kube.create(EVENT, first, namespace=namespace)
    # Two later writes: the watch starts at old + 1, which must be older than the compaction.
    for n in (2, 3):
        later = Event(
            metadata=ObjectMeta(name=f"x.{n}"),
            involved_object=recorder_ref,
            reason="E2E",
            message=f"write {n}",
            type="Normal",
        )
        await kube.create(EVENT, later, namespace=namespace)
    await asyncio.to_thread(plane.compact_etcd)

    async with kube.watch(
        EVENT, namespace=namespace, resource_version=old.metadata.resource_version
    ) as events:
        async with asyncio.timeout(30):
            event = await anext(events)
    assert event.type == "ERROR"
    assert isinstance(event.object, Status)
    error = error_from_status(event.object)
    assert isinstance(error, Gone)
    assert error.status == 410

    with pytest.raises(Gone):
        await kube.list(
            EVENT,
            namespace=namespace,
            resource_version=old.metadata.resource_version,
            resource_version_match="Exact",
        )


# --- scheduling verbs ---------------------------------------------------------------------------


async def _phase(kube: KubeClient, namespace: str, name: str) -> str:
    return (await kube.get(POD, name, namespace=namespace)).status.phase


async def test_bind_pod_to_a_kwok_node(kube: KubeClient, namespace: str, cluster: Cluster) -> None:
    """Binding a pending pod to a kwok node sets its nodeName and the pod runs; binding it
    again is a Conflict, and a binding for another incarnation (uid) is refused."""
    created = await kube.create(POD, pod("bound"), namespace=namespace)
    assert created.spec.node_name == ""
    with pytest.raises(Conflict):
        await kube.bind(namespace, "bound", cluster.nodes[0], uid="not-the-pod")
    await kube.bind(namespace, "bound", cluster.nodes[0], uid=created.metadata.uid)
    assert (await kube.get(POD, "bound", namespace=namespace)).spec.node_name == cluster.nodes[0]

    async def running() -> bool:
        return await _phase(kube, namespace, "bound") == "Running"

    await eventually(running, what="the bound pod to run")
    with pytest.raises(Conflict, match="already assigned"):
        await kube.bind(namespace, "bound", cluster.nodes[1])


async def test_evict_pod_and_disruption_budget(
    kube: KubeClient, namespace: str, cluster: Cluster, registry: CollectorRegistry
) -> None:
    """An eviction deletes a running pod; one blocked by a PodDisruptionBudget raises
    TooManyRequests at once (no retries: it is an answer, not throttling)."""
    await kube.create(POD, pod("evicted", cluster.nodes[0]), namespace=namespace)
    await kube.create(POD, pod("guarded", cluster.nodes[0], app="guarded"), namespace=namespace)
    for name in ("evicted", "guarded"):
        await eventually(_phase_is(kube, namespace, name, "Running"), what=f"{name} to run")

    await kube.evict(namespace, "evicted")
    await eventually(
        lambda: _pod_gone(kube, namespace, "evicted"), timeout=60, what="the evicted pod to go"
    )

    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    await kube.request(
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        body=json.dumps(pdb).encode(),
    )
    before = sample(registry, "caldera_rest_client_requests_total", verb="POST", code="429")
    with pytest.raises(TooManyRequests, match="disruption budget"):
        await kube.evict(namespace, "guarded")
    after = sample(registry, "caldera_rest_client_requests_total", verb="POST", code="429")
    assert after - before == 1, "a disruption budget refusal is not retried"
    assert await _phase(kube, namespace, "guarded") == "Running"


def _phase_is(
    kube: KubeClient, namespace: str, name: str, phase: str
) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return await _phase(kube, namespace, name) == phase

    return probe


async def _pod_gone(kube: KubeClient, namespace: str, name: str) -> bool:
    try:
        await kube.get(POD, name, namespace=namespace)
    except NotFound:
        return True
    return False


# --- authorization ------------------------------------------------------------------------------


async def test_service_account_without_rights_is_forbidden(
    api: k8s.ApiClient, cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """A kubeconfig with a ServiceAccount token authenticates as that account; listing pods
    without RBAC rights raises Forbidden naming the account and the verb."""
    core = k8s.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="nobody"))
    )
    token = await core.create_namespaced_service_account_token(
        "nobody",
        namespace,
        k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(audiences=[])),
    )
    admin: dict[str, Any] = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    the_cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [the_cluster],
        "users": [{"name": "nobody", "user": {"token": token.status.token}}],
        "contexts": [
            {"name": "nobody", "context": {"cluster": the_cluster["name"], "user": "nobody"}}
        ],
        "current-context": "nobody",
    }
    path = tmp_path / "nobody.kubeconfig"
    path.write_text(json.dumps(kubeconfig))

    async with KubeClient.from_kubeconfig(path, registry=CollectorRegistry()) as as_nobody:
        with pytest.raises(Forbidden) as err:
            await as_nobody.list(POD, namespace=namespace)
    text = str(err.value)
    assert f'User "system:serviceaccount:{namespace}:nobody" cannot list resource "pods"' in text
    assert err.value.status == 403


# --- events -------------------------------------------------------------------------------------


async def test_event_recorder_aggregates_repeats(kube: KubeClient, namespace: str) -> None:
    """Repeats of one (object, type, reason, message) update a single Event's count and
    lastTimestamp; a different message is another Event."""
    subject = await kube.create(CONFIGMAP, cm("subject"), namespace=namespace)
    ref = ObjectReference(
        api_version="v1",
        kind="ConfigMap",
        namespace=namespace,
        name="subject",
        uid=subject.metadata.uid,
    )
    registry = CollectorRegistry()
    recorder = EventRecorder(kube, "caldera-e2e", "host-1", registry=registry)
    try:
        recorder.record(ref, "Warning", "Unschedulable", "0/4 nodes are available")
        await recorder.flush()  # created
        recorder.record(ref, "Warning", "Unschedulable", "0/4 nodes are available")
        await recorder.flush()  # patched: count 2
        for _ in range(3):  # coalesced into at most two writes
            recorder.record(ref, "Warning", "Unschedulable", "0/4 nodes are available")
        recorder.record(ref, "Normal", "Scheduled", "bound to a node")
        recorder.record(ref, "Bogus", "Ignored", "not a valid event type")  # dropped, no raise
        await recorder.flush()
    finally:
        await recorder.close()

    listed = await kube.list(
        EVENT, namespace=namespace, field_selector="involvedObject.name=subject"
    )
    by_reason = {e.reason: e for e in listed.items}
    assert sorted(by_reason) == ["Scheduled", "Unschedulable"]
    repeated = by_reason["Unschedulable"]
    assert repeated.count == 5
    assert repeated.type == "Warning"
    assert repeated.message == "0/4 nodes are available"
    assert repeated.involved_object.uid == subject.metadata.uid
    assert repeated.source.component == "caldera-e2e"
    assert repeated.source.host == "host-1"
    assert repeated.first_timestamp is not None
    assert repeated.last_timestamp is not None
    assert repeated.first_timestamp <= repeated.last_timestamp
    assert by_reason["Scheduled"].count == 1
    assert sample(registry, "caldera_events_recorded_total", result="created") == 2
    assert sample(registry, "caldera_events_recorded_total", result="dropped") == 1
    assert sample(registry, "caldera_events_recorded_total", result="failed") == 0


async def test_event_recorder_never_raises(kube: KubeClient) -> None:
    """An Event the server refuses (its namespace does not exist) is logged and counted, and
    neither record() nor flush() raises."""
    registry = CollectorRegistry()
    recorder = EventRecorder(kube, "caldera-e2e", registry=registry)
    ref = ObjectReference(api_version="v1", kind="Pod", namespace="no-such-namespace", name="p")
    recorder.record(ref, "Normal", "Started", "hello")
    await recorder.flush()
    await recorder.close()
    assert sample(registry, "caldera_events_recorded_total", result="failed") == 1
