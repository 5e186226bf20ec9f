"""The resourcequota and pdb plugins on the real API server with kwok nodes (issue 21), with
the API server's own ResourceQuota admission and the disruption and quota controllers of
kube-controller-manager doing their parts.

- resourcequota: a Volcano Job whose minResources exceed its namespace's ResourceQuota waits
  Pending, with the reason in its PodGroup's condition and wait record and no pod created; once
  the quota is raised, it is admitted and runs;
- pdb: a high-priority gang preempts low-priority pods; the pods a PodDisruptionBudget protects
  (no disruption allowed) are skipped, and others are taken instead.
"""

from __future__ import annotations

import pytest

from caldera.api.core import PodDisruptionBudget, ResourceQuota
from caldera.api.kinds import JOB, POD, POD_DISRUPTION_BUDGET, PODGROUP, RESOURCE_QUOTA
from caldera.api.volcano import PodGroup
from caldera.api.why import WHY_ANNOTATION, decode_record
from caldera.kube.requests import PatchType
from e2e.job_fixtures import job
from e2e.kwok_tasks import task
from e2e.test_scheduler_experiments import (
    NODE_LABEL,
    PREEMPT_CONF,
    Experiment,
    _by_group,
    _ready,
    exp,  # noqa: F401  (fixture)
)
from e2e.waiting import READY_TIMEOUT, eventually
from scheduler.conf import DEFAULT_CONF

pytestmark = pytest.mark.e2e

# Volcano's default configuration with resourcequota before nodeorder.
QUOTA_CONF = DEFAULT_CONF.replace(
    "  - name: nodeorder\n", "  - name: resourcequota\n  - name: nodeorder\n"
)


async def _podgroup_of(experiment: Experiment, job_name: str) -> PodGroup | None:
    groups = (await experiment.kube.list(PODGROUP, namespace=experiment.namespace)).items
    return next((g for g in groups if g.metadata.name.startswith(f"{job_name}-")), None)


async def test_job_waits_for_its_namespace_quota(exp: Experiment) -> None:  # noqa: F811
    """A gang of 3 one-cpu pods in a namespace whose quota allows 2 cpu stays Pending with
    the quota's numbers on its PodGroup (condition and wait record) and no pod; raised to
    4 cpu, the quota lets it in and it runs."""
    exp.make_nodes(1, 8)
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team"},
        "spec": {"hard": {"requests.cpu": "2"}},
    }
    await exp.kube.create(RESOURCE_QUOTA, quota, namespace=exp.namespace)

    async def quota_synced() -> bool:
        found: ResourceQuota = await exp.kube.get(RESOURCE_QUOTA, "team", namespace=exp.namespace)
        return found.status.hard.get("requests.cpu") == "2"

    await eventually(quota_synced, timeout=30, what="the quota controller's status")
    scheduler = exp.scheduler(QUOTA_CONF)
    exp.controllers()
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")
    worker = task("worker", 3, cpu="1", memory="64Mi", minAvailable=3)
    worker["template"]["spec"].update(
        {"nodeSelector": {NODE_LABEL: exp.namespace}, "tolerations": [{"operator": "Exists"}]}
    )
    await exp.kube.create(
        JOB, job("big", [worker], schedulerName="volcano", minAvailable=3), namespace=exp.namespace
    )

    async def refused() -> PodGroup | None:
        group = await _podgroup_of(exp, "big")
        if group is None or WHY_ANNOTATION not in group.metadata.annotations:
            return None
        return group

    group = await eventually(refused, timeout=60, what="the PodGroup's wait record")
    assert group.status.phase == "Pending"
    [condition] = [c for c in group.status.conditions if c.type == "Unschedulable"]
    assert condition.reason == "ResourceQuotaExceeded"
    assert "requested: 3 cpu, used: 0 cpu, limited: 2 cpu" in condition.message
    record = decode_record(group.metadata.annotations[WHY_ANNOTATION])
    assert record is not None
    assert record.stage == "enqueue"
    assert "ResourceQuota" in record.summary
    assert not (await exp.kube.list(POD, namespace=exp.namespace)).items

    await exp.kube.patch(
        RESOURCE_QUOTA,
        "team",
        {"spec": {"hard": {"requests.cpu": "4"}}},
        namespace=exp.namespace,
        patch_type=PatchType.MERGE,
    )

    async def running() -> bool:
        return _by_group(await exp.placed(), ["big"]) == {"big": 3}

    await eventually(running, timeout=90, what="the job's 3 pods running once the quota grew")
    admitted = await _podgroup_of(exp, "big")
    assert admitted is not None
    assert admitted.status.phase in ("Running", "Inqueue")


PDB_CONF = PREEMPT_CONF.format(extra="  - name: pdb")


async def test_preemption_skips_pods_a_budget_protects(exp: Experiment) -> None:  # noqa: F811
    """A 6-cpu node full of low-priority pods: 'a-protected' (2 pods, a PodDisruptionBudget of
    minAvailable 2 over them) and 'z-free' (4 pods). A high-priority gang of 2 preempts: both
    victims come from z-free, though a-protected comes first in victim order, and the gang
    runs."""
    exp.make_nodes(1, 6)
    low = await exp.make_priority_class("low", 0)
    high = await exp.make_priority_class("high", 100)
    for group, pods, app in (("a-protected", 2, "db"), ("z-free", 4, "batch")):
        await exp.podgroup(group, 1, priority_class=low)
        bodies = [exp.pod_body(f"{group}-{i}", group, priority_class=low) for i in range(pods)]
        for body in bodies:
            body["metadata"]["labels"] = {"app": app}
            await exp.kube.create(POD, body, namespace=exp.namespace)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
    }
    await exp.kube.create(POD_DISRUPTION_BUDGET, budget, namespace=exp.namespace)
    scheduler = exp.scheduler(PDB_CONF)
    await eventually(lambda: _ready(scheduler), timeout=READY_TIMEOUT, what="scheduler readiness")

    async def full() -> bool:
        return _by_group(await exp.placed(), ["a-protected", "z-free"]) == {
            "a-protected": 2,
            "z-free": 4,
        }

    await eventually(full, timeout=60, what="the node full of low-priority pods")

    async def budget_computed() -> bool:
        found: PodDisruptionBudget = await exp.kube.get(
            POD_DISRUPTION_BUDGET, "db", namespace=exp.namespace
        )
        status = found.status
        return status.observed_generation >= found.metadata.generation > 0 and (
            status.disruptions_allowed == 0
        )

    await eventually(budget_computed, timeout=60, what="the disruption controller's status")
    protected = {n for n in await exp.placed() if n.startswith("a-protected-")}
    await exp.podgroup("urgent", 2, priority_class=high)
    await exp.pods([f"urgent-{i}" for i in range(2)], "urgent", priority_class=high)

    async def urgent_runs() -> bool:
        return _by_group(await exp.placed(), ["urgent"]) == {"urgent": 2}

    await eventually(urgent_runs, timeout=90, what="the high-priority gang running")
    placed = await exp.placed()
    assert {n for n in placed if n.startswith("a-protected-")} == protected
    assert _by_group(placed, ["z-free"]) == {"z-free": 2}
