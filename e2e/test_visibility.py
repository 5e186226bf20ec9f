"""The visibility API end to end: ``caldera scheduler --visibility`` registered with the real
API server as the APIService ``v1alpha1.visibility.caldera.dev`` (through the local control
plane's front proxy, which authenticates and authorises every read), jobs that wait at a
queue's capability, their positions read as an administrator and as a ServiceAccount that may
read only its namespace, ``caldera queue pending``, ``caldera job view`` and the dashboard's
queue page; then room is made for one job at a time and the jobs are admitted in the order of
their positions.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caldera.api.kinds import JOB, POD, PODGROUP
from caldera.api.visibility import (
    PENDING_JOB_DECODER,
    PENDING_JOB_LIST_DECODER,
    PendingJob,
    PendingJobList,
    namespace_path,
    queue_path,
)
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import ApiError, Forbidden, NotFound
from e2e.caldera_process import CalderaProcess
from e2e.cluster.caldera_processes import VISIBILITY_APISERVICE, visibility_registration
from e2e.cluster.control_plane import ControlPlane, free_port, run_kubectl
from e2e.cluster.identities import write_token_kubeconfig
from e2e.cluster.pki import write_serving_pair
from e2e.conftest import Cluster
from e2e.job_fixtures import job, task
from e2e.test_cli import acaldera, ok
from e2e.test_dashboard_browser import running_dashboard
from e2e.waiting import eventually
from scheduler.visibility.routing import LEADER_LABEL

pytestmark = pytest.mark.e2e

APISERVICE = VISIBILITY_APISERVICE
SERVICE = "caldera-visibility"
SCHEDULER_POD = "caldera-scheduler-0"


@dataclass(frozen=True)
class Setup:
    queue: str
    team: str  # the restricted ServiceAccount's namespace
    other: str
    high: str  # PriorityClass names
    low: str


def _apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    run_kubectl(cluster.kubeconfig, "apply", "-f", "-", input=json.dumps(items))


def _available(cluster: Cluster) -> bool:
    text = run_kubectl(cluster.kubeconfig, "get", "apiservice", APISERVICE, "-o", "json")
    conditions = json.loads(text).get("status", {}).get("conditions", [])
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


@pytest.fixture
async def served(
    cluster: Cluster,
    plane: ControlPlane,
    crds: Path,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[CalderaProcess]:
    """The job and queue controllers, and the scheduler serving the visibility API behind an
    APIService whose Service (ExternalName localhost) names the local process. The scheduler
    is told (POD_NAME, POD_NAMESPACE) that it runs in the pod ``SCHEDULER_POD``, which carries
    a stale leader label, as a restarted container's pod would."""
    port = free_port()
    _apply(
        cluster,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": SCHEDULER_POD,
                "namespace": namespace,
                "labels": {LEADER_LABEL: "stale"},
            },
            "spec": {
                "schedulerName": "nobody",  # stays Pending: only its labels matter
                "containers": [{"name": "c", "image": "scheduler"}],
            },
        },
    )
    crt, key = write_serving_pair(
        plane.pki, tmp_path / "visibility", [f"{SERVICE}.{namespace}.svc"]
    )
    controllers = CalderaProcess(
        "controllers",
        ["--controllers=job,queue", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    # The scheduler's only (the controllers would read POD_NAMESPACE as their own namespace).
    monkeypatch.setenv("POD_NAME", SCHEDULER_POD)
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    scheduler = CalderaProcess(
        "scheduler",
        [
            "--leader-elect=false",
            "--schedule-period=0.5",
            "--visibility=true",
            f"--visibility-port={port}",
            f"--visibility-cert-file={crt}",
            f"--visibility-key-file={key}",
        ],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    _apply(
        cluster,
        *visibility_registration(
            port, plane.pki.ca_crt.read_bytes(), namespace=namespace, service=SERVICE
        ),
    )
    try:

        async def available() -> bool:
            return await asyncio.to_thread(_available, cluster)

        await eventually(available, timeout=60, what="the APIService Available")
        yield scheduler
    finally:
        # First: an unavailable aggregated API would hold namespace deletion back.
        run_kubectl(cluster.kubeconfig, "delete", "apiservice", APISERVICE, "--wait=false")
        codes = scheduler.stop(), controllers.stop()
        assert codes == (0, 0), scheduler.log()[-3000:] + controllers.log()[-3000:]


@pytest.fixture
async def setup(cluster: Cluster, namespace: str) -> AsyncIterator[Setup]:
    """A queue with room for one 1-cpu job, two PriorityClasses, a second namespace."""
    s = Setup(
        queue=f"vis-{namespace}",
        team=namespace,
        other=f"{namespace}-b",
        high=f"{namespace}-high",
        low=f"{namespace}-low",
    )
    _apply(
        cluster,
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": s.queue},
            "spec": {"weight": 1, "reclaimable": True, "capability": {"cpu": "1"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.other}},
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": s.high},
            "value": 1000,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": s.low},
            "value": 10,
        },
    )
    yield s
    for args in (
        ("delete", "namespace", s.other, "--wait=false"),
        ("delete", "queue.scheduling.volcano.sh", s.queue, "--wait=false"),
        ("delete", "priorityclass", s.high, s.low, "--wait=false"),
    ):
        run_kubectl(cluster.kubeconfig, *args)


def _one_cpu_job(name: str, queue: str, priority_class: str) -> dict[str, Any]:
    spec = task("worker", 1)
    container = spec["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1", "memory": "64Mi"}}
    spec["template"]["spec"]["priorityClassName"] = priority_class
    return job(name, [spec], queue=queue, priorityClassName=priority_class)


async def _admitted(kube: KubeClient, namespaces: list[str], queue: str) -> set[str]:
    """The jobs of ``queue`` whose PodGroup left Pending."""
    names = set()
    for ns in namespaces:
        for pg in (await kube.list(PODGROUP, namespace=ns)).items:
            if pg.spec.queue == queue and pg.status.phase not in ("", "Pending"):
                names.add(f"{ns}/{pg.metadata.owner_references[0].name}")
    return names


def _read_page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - the test's own URL
        text: str = response.read().decode()
        return text


async def _listed(client: KubeClient, path: str) -> PendingJobList:
    return PENDING_JOB_LIST_DECODER.decode(await client.request("GET", path))


def _restricted(cluster: Cluster, s: Setup, tmp_path: Path) -> Path:
    """A ServiceAccount of ``s.team`` that may read pendingjobs there and ask about queues."""
    account = "pending-reader"
    _apply(
        cluster,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": s.team},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": account, "namespace": s.team},
            "rules": [
                {
                    "apiGroups": ["visibility.caldera.dev"],
                    "resources": ["pendingjobs"],
                    "verbs": ["get", "list"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": account, "namespace": s.team},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": s.team}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": f"{s.team}-queue-pending"},
            "rules": [
                {
                    "apiGroups": ["visibility.caldera.dev"],
                    "resources": ["queues/pendingjobs"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{s.team}-queue-pending"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{s.team}-queue-pending",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": s.team}],
        },
    )
    token = run_kubectl(
        cluster.kubeconfig, "-n", s.team, "create", "token", account, "--duration=1h"
    ).strip()
    return write_token_kubeconfig(
        cluster.kubeconfig, tmp_path / "restricted.kubeconfig", user=account, token=token
    )


async def test_positions_by_rbac_and_jobs_start_in_their_order(
    kube: KubeClient,
    cluster: Cluster,
    served: CalderaProcess,
    setup: Setup,
    tmp_path: Path,
) -> None:
    """Four jobs wait behind a running one in a queue with room for one: the positions put
    the high-priority jobs first, older first; an administrator sees all four, a
    ServiceAccount of one namespace sees its two by name and the other two hidden in their
    places; and as room is made for one job at a time, they start in that order."""
    s = setup
    both = [s.team, s.other]
    await kube.create(JOB, _one_cpu_job("hold", s.queue, s.low), namespace=s.team)

    async def holding() -> bool:
        return f"{s.team}/hold" in await _admitted(kube, both, s.queue)

    await eventually(holding, timeout=60, what="the first job admitted")
    # Created one by one, a second apart: creation times (whole seconds) decide among equals.
    waiting = [(s.team, "a1", s.low), (s.other, "b1", s.high), (s.team, "a2", s.high)]
    waiting.append((s.other, "b2", s.low))
    for ns, name, priority in waiting:
        await kube.create(JOB, _one_cpu_job(name, s.queue, priority), namespace=ns)
        await asyncio.sleep(1.1)
    expected = [f"{s.other}/b1", f"{s.team}/a2", f"{s.team}/a1", f"{s.other}/b2"]

    async def four_waiting() -> PendingJobList | None:
        try:
            listed = await _listed(kube, queue_path(s.queue))
        except ApiError:
            return None
        return listed if len(listed.items) == 4 else None

    listed = await eventually(four_waiting, timeout=60, what="four jobs in the queue's order")
    assert [f"{i.metadata.namespace}/{i.job}" for i in listed.items] == expected
    assert [i.position_in_queue for i in listed.items] == [1, 2, 3, 4]
    assert [i.priority for i in listed.items] == [1000, 1000, 10, 10]
    for item in listed.items:
        assert item.queue == s.queue
        assert item.phase == "Pending"
        assert not item.hidden
        assert item.waiting_for is not None
        assert item.waiting_for.stage == "enqueue"
        assert item.waiting_since.endswith("Z")

    options = ClientOptions(qps=100, burst=100)
    restricted = _restricted(cluster, s, tmp_path)
    async with KubeClient.from_kubeconfig(restricted, options=options) as reader:

        async def own_namespace() -> PendingJobList | None:
            try:
                return await _listed(reader, namespace_path(s.team))
            except Forbidden:
                return None  # the RoleBinding is not in effect yet

        mine = await eventually(own_namespace, timeout=30, what="the reader's namespace list")
        assert [(i.job, i.position_in_queue) for i in mine.items] == [("a2", 2), ("a1", 3)]
        with pytest.raises(Forbidden):
            await _listed(reader, namespace_path(s.other))
        mixed = await _listed(reader, queue_path(s.queue))
        assert [(i.hidden, i.job, i.position_in_queue) for i in mixed.items] == [
            (True, "", 1),
            (False, "a2", 2),
            (False, "a1", 3),
            (True, "", 4),
        ]
        assert mixed.items[0].metadata.namespace == ""
        assert mixed.items[0].waiting_for is None
        one: PendingJob = PENDING_JOB_DECODER.decode(
            await reader.request("GET", namespace_path(s.team, mine.items[0].pod_group))
        )
        # Other tests' jobs may wait in other queues of this cluster: in the cluster a2 comes
        # at least where it stands in its queue.
        assert (one.job, one.position_in_queue) == ("a2", 2)
        assert one.position_in_cluster >= 2

    table = ok(await acaldera(cluster, "queue", "pending", s.queue))
    rows = [line.split() for line in table.splitlines()[1:]]
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("1", "b1", s.other),
        ("2", "a2", s.team),
        ("3", "a1", s.team),
        ("4", "b2", s.other),
    ], table
    view = ok(await acaldera(cluster, "job", "view", "a2", "-n", s.team))
    in_queue = rf"Position:\n  2 in queue {re.escape(s.queue)}, (\d+) in the cluster"
    position = re.search(in_queue, view)
    assert position is not None, view
    assert int(position.group(1)) >= 2, view  # other tests' jobs may wait ahead in the cluster
    # The dashboard's queue page, locally with the admin's kubeconfig, in the same order.
    with running_dashboard(cluster.kubeconfig, tmp_path / "dashboard.log") as url:
        page = await asyncio.to_thread(_read_page, f"{url}queues/{s.queue}")
    assert ">Position</th>" in page, page
    links = [page.index(f'href="/jobs/{job_key}"') for job_key in expected]
    assert links == sorted(links), page

    # Room for one job at a time: each time the running job goes, the next one starts.
    started: list[str] = []
    running = f"{s.team}/hold"
    for _ in expected:
        ns, _, name = running.partition("/")
        await kube.delete(JOB, name, namespace=ns)
        seen = {running, *started}

        async def next_started(seen: set[str] = seen) -> str | None:
            new = await _admitted(kube, both, s.queue) - seen
            assert len(new) <= 1, f"more than one job admitted at once: {new}"
            return next(iter(new), None)

        running = await eventually(next_started, timeout=90, what="the next job admitted")
        started.append(running)
    assert started == expected


async def test_a_namespace_list_of_a_user_without_rights_is_refused_by_the_api_server(
    kube: KubeClient, cluster: Cluster, served: CalderaProcess, setup: Setup, tmp_path: Path
) -> None:
    """RBAC is the API server's: a ServiceAccount with no role reads nothing, and a job that
    does not wait is not found. The scheduler, leading, labels its own pod (the label the
    chart's Service selects), replacing the stale value it found."""

    async def labelled() -> bool:
        pod = await kube.get(POD, SCHEDULER_POD, namespace=setup.team)
        return pod.metadata.labels.get(LEADER_LABEL) == "true"

    await eventually(labelled, timeout=30, what="the leader label on the scheduler's pod")
    token = run_kubectl(
        cluster.kubeconfig, "-n", setup.team, "create", "token", "default", "--duration=1h"
    ).strip()
    path = write_token_kubeconfig(
        cluster.kubeconfig, tmp_path / "nobody.kubeconfig", user="nobody", token=token
    )
    async with KubeClient.from_kubeconfig(path) as nobody:
        with pytest.raises(Forbidden):
            await nobody.request("GET", namespace_path(setup.team))
        with pytest.raises(Forbidden):
            await nobody.request("GET", queue_path(setup.queue))

    async def answered() -> bool:
        try:
            await kube.request("GET", namespace_path(setup.team, "no-such-job"))
        except NotFound:
            return True
        except ApiError:
            return False  # 503 until the first session
        return False

    assert await eventually(answered, timeout=30, what="a 404 for a job that does not wait")
