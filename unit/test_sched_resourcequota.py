"""resourcequota: a job is not enqueued while its minResources (and minMember pods) would take
its namespace beyond a ResourceQuota; the PodGroup gets the condition, the event and the wait
record; jobs admitted in the session, and admitted jobs whose pods are not created yet, count."""

from __future__ import annotations

import msgspec
import pytest

from caldera.api.core import ResourceQuota, ResourceQuotaSpec, ResourceQuotaStatus
from caldera.api.meta import ObjectMeta, ResourceList
from caldera.api.resources import Resources
from caldera.api.why import WaitStage
from scheduler.api.types import ClusterInfo, TaskStatus
from scheduler.framework.session import Session
from scheduler.plugins.resourcequota import (
    REASON,
    in_request_terms,
    request_name,
)
from scheduler.snapshot import by_namespace
from unit.sched_fixtures import add_job, cpu_cluster, run_conf

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion},
            {name: resourcequota}, {name: nodeorder}]
"""


def quota(
    name: str,
    hard: ResourceList,
    used: ResourceList | None = None,
    *,
    namespace: str = "ns",
    synced: bool = True,
) -> ResourceQuota:
    return ResourceQuota(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=ResourceQuotaSpec(hard=hard),
        status=ResourceQuotaStatus(hard=hard if synced else {}, used=used or {}),
    )


def session(cluster: ClusterInfo, *quotas: ResourceQuota) -> Session:
    cluster.resource_quotas = by_namespace(quotas)
    return run_conf(cluster, CONF)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("cpu", "cpu"),
        ("requests.cpu", "cpu"),
        ("requests.memory", "memory"),
        ("requests.nvidia.com/gpu", "nvidia.com/gpu"),
        ("hugepages-2Mi", "hugepages-2Mi"),
        ("pods", "pods"),
        ("count/pods", "pods"),
        ("limits.cpu", None),
        ("services", None),
        ("count/jobs.batch", None),
    ],
)
def test_quota_names(name: str, expected: str | None) -> None:
    """Quota names map to the requests they limit, as Kubernetes reads them."""
    assert request_name(name) == expected


def test_two_names_of_one_resource_keep_the_smaller_limit() -> None:
    """``cpu`` and ``requests.cpu`` both limit requests: the smaller holds."""
    assert in_request_terms({"cpu": "4", "requests.cpu": "2", "limits.cpu": "1"}) == (
        Resources({"cpu": 2000})
    )


def test_job_beyond_the_quota_waits_with_the_reason() -> None:
    """3 cpu asked, 1 of 2 used: the job stays Pending; the PodGroup's condition, its event
    and its wait record say which quota and by how much."""
    cluster = cpu_cluster({"n0": "8"})
    job = add_job(cluster, "big", pending=3, phase="Pending", min_resources={"cpu": "3"})
    ssn = session(cluster, quota("team", {"requests.cpu": "2"}, {"requests.cpu": "1"}))
    assert job.key not in ssn.result.podgroup_phase_inqueue
    status = ssn.result.podgroup_status[job.key]
    assert status.phase == "Pending"
    [condition] = [c for c in status.conditions if c.type == "Unschedulable"]
    assert condition.reason == REASON
    assert condition.message == (
        "resource quota insufficient, requested: 3 cpu, used: 1 cpu, limited: 2 cpu "
        "(ResourceQuota ns/team)"
    )
    events = [e.message for e in ssn.result.events if e.name == "big"]
    assert "resource quota insufficient, requested: 3 cpu, used: 1 cpu, limited: 2 cpu" in events
    record = ssn.result.podgroup_why[job.key]
    assert record.stage == WaitStage.ENQUEUE
    assert record.summary.startswith("this job needs 3 cpu at least, more than ResourceQuota")


def test_job_within_the_quota_is_enqueued_and_raising_the_quota_admits_the_other() -> None:
    """Quota 4 cpu: the first 3-cpu job is admitted; the second waits, counting the first's
    3 cpu though its pods do not exist yet; with the quota raised to 8 it is admitted."""
    cluster = cpu_cluster({"n0": "16"})
    first = add_job(cluster, "first", phase="Pending", min_resources={"cpu": "3"}, pending=0)
    second = add_job(cluster, "second", phase="Pending", min_resources={"cpu": "3"}, pending=0)
    second.creation = first.creation.replace(second=1)
    ssn = session(cluster, quota("team", {"cpu": "4"}))
    assert ssn.result.podgroup_phase_inqueue == [first.key]
    first.phase = "Inqueue"
    second.phase = "Pending"
    ssn = session(cluster, quota("team", {"cpu": "4"}))
    assert ssn.result.podgroup_phase_inqueue == []  # first's 3 cpu are reserved
    ssn = session(cluster, quota("team", {"cpu": "8"}))
    assert ssn.result.podgroup_phase_inqueue == [second.key]


def test_pods_quota_counts_min_member() -> None:
    """A gang of 4 in a namespace that may run 3 pods is never admitted."""
    cluster = cpu_cluster({"n0": "16"})
    job = add_job(
        cluster, "gang", pending=4, min_available=4, phase="Pending", min_resources={"cpu": "1"}
    )
    ssn = session(cluster, quota("pods", {"count/pods": "3"}))
    assert job.key not in ssn.result.podgroup_phase_inqueue


def test_other_namespaces_and_unsynced_quotas() -> None:
    """A quota limits only its own namespace; before the quota controller fills the status
    in, the spec's hard limits hold."""
    cluster = cpu_cluster({"n0": "16"})
    mine = add_job(cluster, "mine", phase="Pending", min_resources={"cpu": "2"})
    theirs = add_job(
        cluster, "theirs", namespace="other", phase="Pending", min_resources={"cpu": "2"}
    )
    ssn = session(cluster, quota("tight", {"cpu": "1"}, synced=False))
    assert ssn.result.podgroup_phase_inqueue == [theirs.key]
    assert mine.phase == "Pending"


def test_live_pods_of_admitted_jobs_are_not_counted_twice() -> None:
    """An Inqueue job whose pods exist is in ``used`` already: only what it has not created
    is reserved."""
    cluster = cpu_cluster({"n0": "16"})
    admitted = add_job(cluster, "admitted", phase="Inqueue", min_resources={"cpu": "2"}, pending=2)
    assert admitted.count(TaskStatus.PENDING) == 2
    waiting = add_job(cluster, "waiting", phase="Pending", min_resources={"cpu": "2"})
    ssn = session(cluster, quota("team", {"cpu": "4", "pods": "10"}, {"cpu": "2", "pods": "2"}))
    assert waiting.key in ssn.result.podgroup_phase_inqueue


def test_scoped_quotas_are_left_to_the_api_server() -> None:
    """A quota that covers only some pods (scopes) is not applied to every job."""
    cluster = cpu_cluster({"n0": "16"})
    job = add_job(cluster, "low", phase="Pending", min_resources={"cpu": "4"})
    scoped = msgspec.structs.replace(
        quota("high-only", {"cpu": "1"}),
        spec=ResourceQuotaSpec(hard={"cpu": "1"}, scopes=("NotBestEffort",)),
    )
    ssn = session(cluster, scoped)
    assert job.key in ssn.result.podgroup_phase_inqueue
