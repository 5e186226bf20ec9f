"""Objects the other controllers make, on the real API server (docs/reliability.md, "Objects the
other controllers make"): the cronjob, jobflow, hypernode and podgroup controllers run
in-process with exactly the chart's rights; a ServiceAccount bound to `edit` in its own
namespace makes Jobs under the names a CronJob or a JobFlow wants (or would delete), and an
administrator writes a HyperNode that looks like a discovered one. None of them is changed,
adopted, counted or deleted; the CronJob and the JobFlow get a Warning naming the Job, and go on
working. A Deployment's group-min-member raised over the PodGroup bound is told once, not
retried."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.cron import job_name
from caldera.api.kinds import CRONJOB, EVENT, HYPERNODE, JOB, JOBFLOW, JOBTEMPLATE, PODGROUP
from caldera.api.topology import NETWORK_TOPOLOGY_SOURCE_KEY
from caldera.kube.client import ClientOptions, KubeClient
from caldera.kube.errors import NotFound
from caldera.settings import ControllersSettings
from controllers.cronjob.controller import CronJobController
from controllers.hypernode.controller import HyperNodeController
from controllers.jobflow.controller import JobFlowController
from controllers.podgroup.controller import PodGroupController
from controllers.podgroup.kinds import REPLICASET
from e2e.cluster.control_plane import LABEL_DISCOVERY, RACK_LABEL, SPINE_LABEL, NodeSpec
from e2e.cluster.identities import Identities
from e2e.conftest import Cluster
from e2e.controller_harness import run_controllers
from e2e.job_fixtures import job, task
from e2e.test_podgroup_controller import DEPLOYMENT, MIN_MEMBER_KEY, _deployment
from e2e.test_tenancy_ownership import chart_rights, tenant  # noqa: F401 - fixtures
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]


@pytest.fixture
async def as_controllers(chart_rights: Identities) -> AsyncIterator[KubeClient]:  # noqa: F811
    """A client with the chart's controllers ServiceAccount's token (its rights only)."""
    path = chart_rights.kubeconfigs["controllers"]
    options = ClientOptions(qps=1000, burst=1000)
    async with KubeClient.from_kubeconfig(path, options=options) as client:
        yield client


async def _version(kube: KubeClient, name: str, ns: str) -> tuple[str, str]:
    got = await kube.get(JOB, name, namespace=ns)
    return got.metadata.uid, got.metadata.resource_version


async def _warning(kube: KubeClient, ns: str, involved: str, reason: str, text: str) -> str:
    async def probe() -> str | None:
        for e in (await kube.list(EVENT, namespace=ns)).items:
            if e.involved_object.name == involved and e.reason == reason and text in e.message:
                return e.message
        return None

    return await eventually(probe, timeout=30, what=f"a {reason} Warning naming {text}")


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


async def test_a_cronjob_leaves_a_tenants_namesakes_alone(
    kube: KubeClient,
    tenant: KubeClient,  # noqa: F811
    as_controllers: KubeClient,
    namespace: str,
) -> None:
    """The tenant's Job named for the CronJob's next time is not adopted (the time is given up
    with a ForeignJob Warning naming it), and its Completed Job named like an old one is not
    deleted by a history limit of 0; the next time starts the CronJob's own Job."""
    name = "nightly"
    template = job("x", [task("w", 1)])
    cronjob = {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": "Replace",
            "successfulJobsHistoryLimit": 0,
            "jobTemplate": {"spec": template["spec"]},
        },
    }
    await tenant.create(CRONJOB, cronjob, namespace=namespace)
    hour = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    nxt, old = hour + dt.timedelta(hours=1), hour - dt.timedelta(hours=1)
    for when in (nxt, old):
        await tenant.create(JOB, job(job_name(name, when), [task("w", 1)]), namespace=namespace)
    done = {
        "status": {"state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}}
    }
    await kube.patch_status(JOB, job_name(name, old), done, namespace=namespace)
    theirs = [job_name(name, nxt), job_name(name, old)]
    before = [await _version(kube, n, namespace) for n in theirs]

    clock = Clock(nxt + dt.timedelta(seconds=5))
    async with run_controllers(as_controllers, CronJobController, clock=clock):
        message = await _warning(kube, namespace, name, "ForeignJob", theirs[0])
        assert "not owned by this CronJob" in message, message
        given_up = await kube.get(CRONJOB, name, namespace=namespace)
        assert given_up.status.active == ()
        assert [await _version(kube, n, namespace) for n in theirs] == before

        # The next time is the CronJob's own.
        clock.now = nxt + dt.timedelta(hours=1, seconds=5)
        tick = {"metadata": {"annotations": {"tick": secrets.token_hex(2)}}}
        await kube.patch(CRONJOB, name, tick, namespace=namespace)
        ours = job_name(name, nxt + dt.timedelta(hours=1))

        async def started() -> bool:
            try:
                got = await kube.get(JOB, ours, namespace=namespace)
            except NotFound:
                return False
            return got.metadata.owner_references[0].uid == given_up.metadata.uid

        await eventually(started, timeout=30, what=f"the CronJob's own job {ours}")
    assert [await _version(kube, n, namespace) for n in theirs] == before


async def test_a_jobflow_waits_for_a_tenants_namesake_to_go(
    kube: KubeClient,
    tenant: KubeClient,  # noqa: F811
    as_controllers: KubeClient,
    namespace: str,
) -> None:
    """The tenant's Job `pipe-step` exists before the JobFlow `pipe` wants it: a ForeignJob
    Warning names it and it is neither written nor counted; once the tenant deletes it, the
    flow creates its own."""
    spec = job("x", [task("w", 1)])["spec"]
    template = {"apiVersion": JOBTEMPLATE.api_version, "kind": "JobTemplate", "spec": spec}
    template["metadata"] = {"name": "step"}
    await kube.create(JOBTEMPLATE, template, namespace=namespace)
    await tenant.create(JOB, job("pipe-step", [task("w", 1)]), namespace=namespace)
    before = await _version(kube, "pipe-step", namespace)
    flow = {
        "apiVersion": JOBFLOW.api_version,
        "kind": "JobFlow",
        "metadata": {"name": "pipe"},
        "spec": {"flows": [{"name": "step"}], "jobRetainPolicy": "delete"},
    }
    created = await kube.create(JOBFLOW, flow, namespace=namespace)
    async with run_controllers(as_controllers, JobFlowController):
        await _warning(kube, namespace, "pipe", "ForeignJob", "pipe-step")
        assert await _version(kube, "pipe-step", namespace) == before
        status = (await kube.get(JOBFLOW, "pipe", namespace=namespace)).status
        assert "pipe-step" not in {e.name for e in status.job_status_list}

        await tenant.delete(JOB, "pipe-step", namespace=namespace)

        async def own() -> bool:
            try:
                got = await kube.get(JOB, "pipe-step", namespace=namespace)
            except NotFound:
                return False
            return any(r.uid == created.metadata.uid for r in got.metadata.owner_references)

        await eventually(own, timeout=30, what="the JobFlow's own pipe-step")


@pytest.fixture
def one_node(cluster: Cluster, namespace: str) -> Iterator[tuple[str, str]]:
    """A fake node in rack `<ns>-r0` (node name, rack); deleted afterwards."""
    if cluster.plane is None:
        pytest.skip("creates and labels fake nodes")
    where = cluster.plane.create_topology_nodes(1, 1, 1, NodeSpec(), prefix=f"{namespace}-")
    ((node, (rack, _spine)),) = where.items()
    yield node, rack
    cluster.plane.kubectl("delete", "node", "--wait=false", "--ignore-not-found", node)


async def _discovered_rack(kube: KubeClient, rack: str) -> Any:
    for hn in (await kube.list(HYPERNODE)).items:
        if hn.metadata.labels.get(RACK_LABEL) == rack and hn.metadata.name.startswith("hypernode-"):
            return hn
    return None


async def test_discovery_leaves_an_administrators_hypernode_alone(
    kube: KubeClient,
    as_controllers: KubeClient,
    cluster: Cluster,
    namespace: str,
    one_node: tuple[str, str],
    tmp_path: Path,
) -> None:
    """An administrator's HyperNode carrying the discovery's source label (as one copied from
    a discovered HyperNode would) survives the discovery's runs unchanged: not deleted though
    no node label describes it, its labels and spec as written."""
    assert cluster.plane is not None
    node, rack = one_node
    admin = {
        "apiVersion": HYPERNODE.api_version,
        "kind": "HyperNode",
        "metadata": {
            "name": f"a-admin-{namespace}",
            "labels": {NETWORK_TOPOLOGY_SOURCE_KEY: "label", RACK_LABEL: "by-hand"},
        },
        "spec": {
            "tier": 1,
            "tierName": RACK_LABEL,
            "members": [{"type": "Node", "selector": {"exactMatch": {"name": node}}}],
        },
    }
    mine = await kube.create(HYPERNODE, admin)
    conf = tmp_path / "volcano-controller.conf"
    conf.write_text(yaml.safe_dump(LABEL_DISCOVERY))
    settings = ControllersSettings(leader_elect=False, network_topology_discovery=str(conf))
    try:
        async with run_controllers(as_controllers, HyperNodeController, settings=settings):
            first = await eventually(
                lambda: _discovered_rack(kube, rack), timeout=30, what="the discovered rack"
            )
            # A second run: the rack moves, its old HyperNode is deleted (deletes run in name
            # order, so the administrator's `a-admin-...` would have gone first).
            moved = f"{rack}-moved"
            cluster.plane.kubectl("label", "node", node, f"{RACK_LABEL}={moved}", "--overwrite")
            await eventually(
                lambda: _discovered_rack(kube, moved), timeout=30, what="the moved rack"
            )

            async def old_gone() -> bool:
                try:
                    await kube.get(HYPERNODE, first.metadata.name)
                except NotFound:
                    return True
                return False

            await eventually(old_gone, timeout=30, what="the old rack's HyperNode deleted")
        kept = await kube.get(HYPERNODE, mine.metadata.name)
        assert kept.metadata.uid == mine.metadata.uid
        assert kept.metadata.generation == mine.metadata.generation
        assert kept.metadata.labels == mine.metadata.labels
        assert kept.spec == mine.spec
    finally:
        for hn in (await kube.list(HYPERNODE)).items:
            labels = hn.metadata.labels
            if hn.metadata.uid == mine.metadata.uid or f"{namespace}-" in (
                labels.get(RACK_LABEL, "") + labels.get(SPINE_LABEL, "")
            ):
                with contextlib.suppress(NotFound):
                    await kube.delete(HYPERNODE, hn.metadata.name)


async def test_a_podgroup_over_the_bound_is_told_once_and_not_patched(
    kube: KubeClient,
    tenant: KubeClient,  # noqa: F811
    as_controllers: KubeClient,
    namespace: str,
) -> None:
    """The tenant's Deployment gets its PodGroup; raising its group-min-member to 20000 (over
    the CRD's 10,000) leaves the PodGroup as it was with one FailedUpdate Warning naming the
    field, told once (no patch the API server refuses, retried forever)."""
    body = _deployment("wide", 1, {MIN_MEMBER_KEY: "1"})
    await tenant.create(DEPLOYMENT, body, namespace=namespace)
    settings = ControllersSettings(leader_elect=False, scheduler_name="volcano")
    async with run_controllers(as_controllers, PodGroupController, settings=settings):

        async def group() -> Any:
            sets = (await kube.list(REPLICASET, namespace=namespace)).items
            if not sets:
                return None
            try:
                return await kube.get(
                    PODGROUP, f"podgroup-{sets[0].metadata.uid}", namespace=namespace
                )
            except NotFound:
                return None

        made = await eventually(group, timeout=120, what="the Deployment's PodGroup")
        over = {"metadata": {"annotations": {MIN_MEMBER_KEY: "20000"}}}
        await tenant.patch(DEPLOYMENT, "wide", over, namespace=namespace)
        name = made.metadata.name
        text = "spec.minMember: must be at most 10000 (got 20000)"
        await _warning(kube, namespace, name, "FailedUpdate", text)
        await asyncio.sleep(3)  # retries, if any, would show in the count
        told = [
            e
            for e in (await kube.list(EVENT, namespace=namespace)).items
            if e.involved_object.name == name and e.type == "Warning"
        ]
        assert [(e.reason, e.count) for e in told] == [("FailedUpdate", 1)], told
        kept = await kube.get(PODGROUP, name, namespace=namespace)
        assert kept.spec.min_member == 1
