"""Fixtures for tests against a real kube-apiserver.

One control plane per test session (per pytest-xdist worker under ``make test``), started by
``e2e/cluster`` in a temporary directory and stopped at the end; or, when
``CALDERA_E2E_KUBECONFIG`` names a kubeconfig, that existing cluster (for example kind, set up
by ``e2e/kind/up.sh``). Each test gets its own namespace, deleted after it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from caldera.kube.client import ClientOptions, KubeClient
from e2e.cluster.control_plane import ControlPlane, NodeSpec, kubectl
from e2e.waiting import eventually

# The `caldera` processes the tests start import this checkout, not whichever one the
# virtualenv was installed from (a worktree sharing a virtualenv tests its own code).
REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p
)

# Fake nodes every session has: enough room for the example jobs, with a GPU dimension.
NODE_COUNT = 4
NODE_SPEC = NodeSpec(cpu="8", memory="32Gi", pods="110", gpu="4", labels={"caldera.io/e2e": "true"})


@dataclass(frozen=True)
class Cluster:
    """The cluster under test: its kubeconfig, and the local control plane when we run one."""

    kubeconfig: Path
    plane: ControlPlane | None
    nodes: tuple[str, ...]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    external = os.environ.get("CALDERA_E2E_KUBECONFIG")
    if external:
        nodes = tuple(os.environ.get("CALDERA_E2E_NODES", "kwok-node-0").split(","))
        yield Cluster(Path(external), None, nodes)
        return
    plane = ControlPlane(tmp_path_factory.mktemp("cluster"))
    try:
        kubeconfig = plane.up()
        made = plane.create_nodes(NODE_COUNT, NODE_SPEC)
        yield Cluster(kubeconfig, plane, tuple(made))
    finally:
        plane.down()


REPO = Path(__file__).resolve().parent.parent
CRD_DIR = REPO / "charts" / "caldera" / "crds"


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> Path:
    """Caldera's CRDs (generated from the models) applied to the cluster and Established."""
    kubectl_ = [kubectl(), f"--kubeconfig={cluster.kubeconfig}"]
    subprocess.run(
        [*kubectl_, "apply", "--server-side", "-f", str(CRD_DIR)], check=True, capture_output=True
    )
    subprocess.run(
        [*kubectl_, "wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR)],
        check=True,
        capture_output=True,
    )
    return CRD_DIR


@contextlib.contextmanager
def own_plane(directory: Path, why: str) -> Iterator[ControlPlane]:
    """A local control plane of a test module's own in ``directory``, with Caldera's CRDs
    Established, purged at the end; on an external cluster the test is skipped, ``why`` saying
    what it starts the plane for."""
    if os.environ.get("CALDERA_E2E_KUBECONFIG"):
        pytest.skip(why)
    own = ControlPlane(directory)
    try:
        own.up()
        own.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
        own.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD_DIR))
        yield own
    finally:
        own.down(purge=True)


@pytest.fixture
def plane(cluster: Cluster) -> ControlPlane:
    """The local control plane, for tests that restart or compact it (skipped on kind)."""
    if cluster.plane is None:
        pytest.skip("needs the local control plane (CALDERA_E2E_KUBECONFIG is set)")
    return cluster.plane


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """An admin API client (kubernetes-asyncio) for test set-up and checks."""
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(cluster.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    """Caldera's own API client, as admin, with a rate limit that does not slow tests down."""
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(cluster.kubeconfig, options=options) as client:
        yield client


@pytest.fixture
async def namespace(api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace with its default ServiceAccount; deleted (not awaited) afterwards."""
    name = f"e2e-{secrets.token_hex(4)}"
    core = client.CoreV1Api(api)
    await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"caldera.io/e2e": name}))
    )
    await eventually(
        lambda: _exists(core.read_namespaced_service_account("default", name)),
        what=f"the default ServiceAccount of {name}",
    )
    yield name
    await core.delete_namespace(name)


async def _exists(call: Awaitable[object]) -> bool:
    try:
        await call
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
