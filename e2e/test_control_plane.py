"""The local control plane is a real one: CRDs, kwok pod lifecycles, the garbage collector, the
namespace controller, admission webhooks and RBAC all behave as in a production cluster."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from e2e.cluster.control_plane import ControlPlane, free_port
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


def _pod(name: str, node: str, annotations: dict[str, str]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(
            node_name=node,
            restart_policy="Never",
            containers=[client.V1Container(name="main", image="busybox")],
            tolerations=[client.V1Toleration(operator="Exists")],
        ),
    )


async def test_crd_is_created_and_served(api: client.ApiClient, namespace: str) -> None:
    """A CRD becomes Established and its objects can be created and read back."""
    group = f"e2e{secrets.token_hex(3)}.caldera.io"
    ext = client.ApiextensionsV1Api(api)
    crd: Any = {  # a plain manifest; the client serialises dicts as they are
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
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "default": 3}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    await ext.create_custom_resource_definition(crd)
    try:

        async def established() -> bool:
            got = await ext.read_custom_resource_definition(f"widgets.{group}")
            return any(
                c.type == "Established" and c.status == "True" for c in got.status.conditions or []
            )

        await eventually(established, what="the CRD to be Established")
        objects = client.CustomObjectsApi(api)
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {},
        }

        async def created() -> dict[str, Any] | None:
            # Discovery of a new CRD reaches every handler a moment after Established.
            try:
                result: dict[str, Any] = await objects.create_namespaced_custom_object(
                    group, "v1", namespace, "widgets", body
                )
            except client.ApiException as exc:
                if exc.status == 404:
                    return None
                raise
            return result

        await eventually(created, what="the first Widget to be created")
        got = await objects.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
        assert got["spec"] == {"size": 3}, "the schema default was applied by the server"
    finally:
        await ext.delete_custom_resource_definition(f"widgets.{group}")


@pytest.mark.parametrize(("exit_code", "phase"), [(0, "Succeeded"), (3, "Failed")])
async def test_pod_on_kwok_node_runs_then_exits_with_code(
    api: client.ApiClient, namespace: str, cluster: Cluster, exit_code: int, phase: str
) -> None:
    """A pod bound to a fake node goes Running, then finishes with the exit code it asked for."""
    core = client.CoreV1Api(api)
    annotations = {"kwok.caldera.io/exit-code": str(exit_code), "kwok.caldera.io/run-for": "2s"}
    await core.create_namespaced_pod(namespace, _pod("worker", cluster.nodes[0], annotations))
    seen: set[str] = set()

    async def finished() -> client.V1Pod | None:
        pod = await core.read_namespaced_pod("worker", namespace)
        seen.add(pod.status.phase)
        return pod if pod.status.phase in ("Succeeded", "Failed") else None

    pod = await eventually(finished, interval=0.1, what="the pod to finish")
    assert "Running" in seen, f"the pod ran before it finished (phases seen: {seen})"
    assert pod.status.phase == phase
    terminated = pod.status.container_statuses[0].state.terminated
    assert terminated.exit_code == exit_code


async def test_running_pod_finishes_when_annotated(
    api: client.ApiClient, namespace: str, cluster: Cluster
) -> None:
    """A pod without an exit code keeps running; annotating it later makes it exit."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(namespace, _pod("server", cluster.nodes[1], {}))

    async def phase() -> str:
        pod = await core.read_namespaced_pod("server", namespace)
        return str(pod.status.phase)

    await eventually(lambda: _is(phase(), "Running"), what="the pod to run")
    await asyncio.sleep(1.5)
    assert await phase() == "Running", "without an exit code the pod does not finish"
    patch = {"metadata": {"annotations": {"kwok.caldera.io/exit-code": "0"}}}
    await core.patch_namespaced_pod("server", namespace, patch)
    await eventually(lambda: _is(phase(), "Succeeded"), what="the annotated pod to succeed")


async def _is(value: Any, expected: str) -> bool:
    return bool(await value == expected)


async def test_garbage_collector_deletes_dependents(api: client.ApiClient, namespace: str) -> None:
    """Deleting an owner makes kube-controller-manager's garbage collector delete its dependents."""
    core = client.CoreV1Api(api)
    owner = await core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    await core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dependent", owner_references=[ref])),
    )
    await core.delete_namespaced_config_map("owner", namespace)

    async def gone() -> bool:
        names = {c.metadata.name for c in (await core.list_namespaced_config_map(namespace)).items}
        return "dependent" not in names

    await eventually(gone, timeout=60, what="the dependent to be collected")


async def test_namespace_deletion_completes(api: client.ApiClient, cluster: Cluster) -> None:
    """A namespace holding a running pod is deleted completely (kwok finishes pod deletion)."""
    core = client.CoreV1Api(api)
    name = f"e2e-del-{secrets.token_hex(3)}"
    await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    async def created() -> bool:
        try:
            await core.create_namespaced_pod(name, _pod("p", cluster.nodes[0], {}))
        except client.ApiException as exc:
            if exc.status == 403 and "serviceaccount" in str(exc.body).lower():
                return False  # the namespace's default ServiceAccount is not there yet
            raise
        return True

    await eventually(created, what="a pod to be created in the new namespace")

    async def running() -> bool:
        return str((await core.read_namespaced_pod("p", name)).status.phase) == "Running"

    await eventually(running, what="the pod to run")
    await core.delete_namespace(name)

    async def deleted() -> bool:
        try:
            await core.read_namespace(name)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    await eventually(deleted, timeout=90, what="the namespace to be deleted")


@pytest.fixture
async def webhook_server(
    cluster: Cluster, tmp_path: Path
) -> AsyncIterator[tuple[str, bytes, list[dict[str, Any]]]]:
    """A local HTTPS admission server that labels ConfigMaps; yields (url, ca, requests seen)."""
    if cluster.plane is None:
        pytest.skip("the API server must reach a server on this machine's loopback")
    seen: list[dict[str, Any]] = []

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        seen.append(review)
        patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "e2e"}}]
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }
        return web.json_response({**review, "response": response})

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    crt, key = write_serving_pair(cluster.plane.pki, tmp_path, ["127.0.0.1"])
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    port = free_port()
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx).start()
    try:
        yield f"https://127.0.0.1:{port}/mutate", cluster.plane.pki.ca_crt.read_bytes(), seen
    finally:
        await runner.cleanup()


async def test_mutating_webhook_is_called(
    api: client.ApiClient,
    namespace: str,
    webhook_server: tuple[str, bytes, list[dict[str, Any]]],
) -> None:
    """The API server calls a webhook configuration's local HTTPS URL and applies its patch."""
    url, ca, seen = webhook_server
    admission = client.AdmissionregistrationV1Api(api)
    name = f"e2e-{namespace}"
    config: Any = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "configmaps.e2e.caldera.io",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 5,
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca).decode()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"caldera.io/e2e": namespace}},
            }
        ],
    }
    await admission.create_mutating_webhook_configuration(config)
    core = client.CoreV1Api(api)
    try:
        # The API server picks up a new configuration within a moment; retry until it does.
        async def mutated() -> client.V1ConfigMap | None:
            cm_name = f"cm-{secrets.token_hex(3)}"
            cm = await core.create_namespaced_config_map(
                namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=cm_name))
            )
            return cm if (cm.metadata.labels or {}).get("mutated-by") == "e2e" else None

        cm = await eventually(mutated, timeout=30, interval=0.5, what="a mutated ConfigMap")
        assert any(r["request"]["name"] == cm.metadata.name for r in seen)
        assert all(r["request"]["namespace"] == namespace for r in seen)
    finally:
        await admission.delete_mutating_webhook_configuration(name)


async def test_service_account_without_rights_is_refused(
    api: client.ApiClient, namespace: str, cluster: Cluster
) -> None:
    """RBAC is on: a ServiceAccount's own token authenticates, and it may not list pods (403)."""
    core = client.CoreV1Api(api)
    await core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nobody"))
    )
    token = await core.create_namespaced_service_account_token(
        "nobody",
        namespace,
        client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
    )
    configuration = client.Configuration()
    configuration.host = api.configuration.host
    configuration.ssl_ca_cert = api.configuration.ssl_ca_cert
    configuration.api_key = {"BearerToken": f"Bearer {token.status.token}"}
    async with client.ApiClient(configuration) as as_nobody:
        with pytest.raises(client.ApiException) as refused:
            await client.CoreV1Api(as_nobody).list_namespaced_pod(namespace)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{namespace}:nobody" in str(refused.value.body)


def test_plane_fixture_runs_local_processes(plane: ControlPlane) -> None:
    """The session's control plane runs every process it needs, each with a live pid."""
    running = plane.running()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kwok"):
        assert running[name], f"{name} is not running"
