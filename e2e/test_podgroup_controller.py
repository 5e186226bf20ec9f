"""The podgroup controller against the real API server, with kube-controller-manager creating the
pods of Deployments and batch Jobs: one PodGroup per owner, pods annotated, scaling to zero, the
garbage collector removing the PodGroup with its owner, and pods of other schedulers left alone.

kube-scheduler does not run, so the pods stay Pending; that is all these tests need.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Pod
from caldera.api.kinds import EVENT, POD, PODGROUP, KindInfo
from caldera.api.meta import Model, ObjectMeta, type_meta
from caldera.api.volcano import PodGroup
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from caldera.settings import ControllersSettings
from controllers.podgroup.controller import PodGroupController
from controllers.podgroup.kinds import BATCH_JOB, REPLICASET
from controllers.runtime import ControllerContext
from e2e.controller_harness import run_controllers
from e2e.waiting import eventually

pytestmark = pytest.mark.e2e


class Deployment(Model, frozen=True):
    """apps/v1 Deployment, only as far as the test reads it."""

    api_version: str = type_meta("apps/v1")
    kind: str = type_meta("Deployment")
    metadata: ObjectMeta = ObjectMeta()


DEPLOYMENT = KindInfo("Deployment", "apps", "v1", "deployments", True, Deployment)
GROUP_KEY = "scheduling.k8s.io/group-name"
MIN_MEMBER_KEY = "scheduling.volcano.sh/group-min-member"


@pytest.fixture
async def controller(kube: KubeClient, crds: Path) -> AsyncIterator[ControllerContext]:
    settings = ControllersSettings(leader_elect=False, scheduler_name="volcano, caldera-test")
    async with run_controllers(kube, PodGroupController, settings=settings) as ctx:
        yield ctx


def _pod_spec(scheduler: str = "volcano", restart: str = "Always") -> dict[str, Any]:
    return {
        "schedulerName": scheduler,
        "restartPolicy": restart,
        "priorityClassName": "system-cluster-critical",
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
            }
        ],
    }


def _deployment(name: str, replicas: int, annotations: dict[str, str]) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"scheduling.volcano.sh/queue-name": "default"},
                },
                "spec": _pod_spec(),
            },
        },
    }


async def _pods(kube: KubeClient, namespace: str, selector: str) -> tuple[Pod, ...]:
    return (await kube.list(POD, namespace=namespace, label_selector=selector)).items


async def _group(kube: KubeClient, namespace: str, name: str) -> PodGroup | None:
    try:
        return await kube.get(PODGROUP, name, namespace=namespace)
    except NotFound:
        return None


async def _no_group(kube: KubeClient, namespace: str, name: str) -> bool:
    return await _group(kube, namespace, name) is None


async def _all_annotated(
    kube: KubeClient, namespace: str, selector: str, count: int, group: str
) -> tuple[Pod, ...] | None:
    pods = await _pods(kube, namespace, selector)
    annotated = [p for p in pods if p.metadata.annotations.get(GROUP_KEY) == group]
    return pods if len(pods) == count and len(annotated) == count else None


async def test_deployment_pods_get_one_podgroup_that_follows_the_replicaset(
    kube: KubeClient, namespace: str, controller: ControllerContext
) -> None:
    """A Deployment of 3 volcano pods gets PodGroup podgroup-<rs uid> (minMember from the
    annotation, minResources = requests x minMember, queue and priority class from the pod,
    owned by the ReplicaSet) and every pod names it; a changed annotation updates minMember;
    scaling to zero deletes the PodGroup."""
    deployment = _deployment("web", 3, {MIN_MEMBER_KEY: "3"})
    await kube.create(DEPLOYMENT, deployment, namespace=namespace)

    async def replicaset() -> Any:
        sets = (await kube.list(REPLICASET, namespace=namespace)).items
        return sets[0] if sets else None

    # kube-controller-manager makes the ReplicaSet and its pods at 20 requests/s for all its
    # controllers: behind another test's namespace deletions on a busy worker, that can take
    # more than the usual 30 s.
    rs = await eventually(replicaset, timeout=120, what="the Deployment's ReplicaSet")
    group = f"podgroup-{rs.metadata.uid}"
    pods = await eventually(
        lambda: _all_annotated(kube, namespace, "app=web", 3, group),
        timeout=120,
        what="3 pods annotated with their group",
    )
    assert len(pods) == 3
    pg = await _group(kube, namespace, group)
    assert pg is not None
    assert pg.spec.min_member == 3
    assert pg.spec.min_resources == {"cpu": "750m", "memory": "192Mi"}
    assert pg.spec.queue == "default"
    assert pg.spec.priority_class_name == "system-cluster-critical"
    assert pg.status.phase == "Pending"
    (ref,) = pg.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid) == ("ReplicaSet", rs.metadata.name, rs.metadata.uid)
    groups = (await kube.list(PODGROUP, namespace=namespace)).items
    assert [g.metadata.name for g in groups] == [group], "one PodGroup for the whole Deployment"

    # Deployment annotations are copied to its ReplicaSet, whose PodGroup follows them.
    patch = {"metadata": {"annotations": {MIN_MEMBER_KEY: "2"}}}
    await kube.patch(DEPLOYMENT, "web", patch, namespace=namespace)

    async def min_member_is(value: int) -> bool:
        current = await _group(kube, namespace, group)
        return current is not None and current.spec.min_member == value

    await eventually(lambda: min_member_is(2), what="minMember 2")

    await kube.patch(DEPLOYMENT, "web", {"spec": {"replicas": 0}}, namespace=namespace)
    await eventually(lambda: _no_group(kube, namespace, group), what="PodGroup deleted at 0")


async def test_batch_job_podgroup_is_garbage_collected_with_the_job(
    kube: KubeClient, namespace: str, controller: ControllerContext
) -> None:
    """A batch/v1 Job's pods share podgroup-<job uid>, owned by the Job; deleting the Job
    deletes the PodGroup (Kubernetes' garbage collector)."""
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "annotations": {MIN_MEMBER_KEY: "2"}},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {"labels": {"job": "train"}},
                "spec": _pod_spec(restart="Never"),
            },
        },
    }
    await kube.create(BATCH_JOB, body, namespace=namespace)
    job = await kube.get(BATCH_JOB, "train", namespace=namespace)
    group = f"podgroup-{job.metadata.uid}"
    await eventually(
        lambda: _all_annotated(kube, namespace, "job=train", 2, group), what="2 pods annotated"
    )
    pg = await _group(kube, namespace, group)
    assert pg is not None
    assert pg.spec.min_member == 2
    (ref,) = pg.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.uid) == ("batch/v1", "Job", job.metadata.uid)

    await kube.delete(BATCH_JOB, "train", namespace=namespace, propagation_policy="Background")
    await eventually(
        lambda: _no_group(kube, namespace, group), timeout=60, what="PodGroup garbage-collected"
    )


async def test_bare_pods_and_other_schedulers(
    kube: KubeClient, namespace: str, controller: ControllerContext
) -> None:
    """A bare pod of a second configured scheduler name gets podgroup-<pod uid> owned by the
    pod, in the queue its annotation names; a pod of another scheduler and a pod that already
    names a group are left alone; a bad min-member annotation is reported with an Event, and a
    PodGroup the API server rejects (invalid queue name) with a FailedCreate Event."""

    def pod(name: str, scheduler: str, annotations: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations},
            "spec": _pod_spec(scheduler),
        }

    solo = await kube.create(
        POD,
        pod(
            "solo",
            "caldera-test",
            {"scheduling.volcano.sh/queue-name": "team-a", MIN_MEMBER_KEY: "lots"},
        ),
        namespace=namespace,
    )
    other = await kube.create(POD, pod("other", "default-scheduler", {}), namespace=namespace)
    named = await kube.create(
        POD, pod("named", "volcano", {GROUP_KEY: "mine"}), namespace=namespace
    )
    group = f"podgroup-{solo.metadata.uid}"

    async def solo_annotated() -> bool:
        current = await kube.get(POD, "solo", namespace=namespace)
        return current.metadata.annotations.get(GROUP_KEY) == group

    await eventually(solo_annotated, what="the bare pod annotated")
    pg = await _group(kube, namespace, group)
    assert pg is not None
    assert pg.spec.queue == "team-a"
    assert pg.spec.min_member == 1
    (ref,) = pg.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid) == ("Pod", "solo", solo.metadata.uid)

    async def warned() -> bool:
        events = await kube.list(
            EVENT, namespace=namespace, field_selector=f"involvedObject.name={group}"
        )
        return any(e.type == "Warning" and "group-min-member" in e.message for e in events.items)

    await eventually(warned, what="a Warning event about the annotation")

    groups = (await kube.list(PODGROUP, namespace=namespace)).items
    assert [g.metadata.name for g in groups] == [group]
    assert GROUP_KEY not in (await kube.get(POD, "other", namespace=namespace)).metadata.annotations
    assert (await kube.get(POD, "named", namespace=namespace)).metadata.annotations[
        GROUP_KEY
    ] == "mine"
    bad = await kube.create(
        POD,
        pod("bad", "volcano", {"scheduling.volcano.sh/queue-name": "Not_A_Queue"}),
        namespace=namespace,
    )
    bad_group = f"podgroup-{bad.metadata.uid}"

    async def rejected() -> bool:
        events = await kube.list(
            EVENT, namespace=namespace, field_selector=f"involvedObject.name={bad_group}"
        )
        return any(e.type == "Warning" and e.reason == "FailedCreate" for e in events.items)

    await eventually(rejected, what="a FailedCreate event for an invalid queue name")
    assert GROUP_KEY not in (await kube.get(POD, "bad", namespace=namespace)).metadata.annotations
    for p in (other, named, bad):
        with contextlib.suppress(NotFound):
            await kube.delete(POD, p.metadata.name, namespace=namespace)
