"""The jobflow and jobtemplate controllers against the real API server, with the job controller
and pods that kwok runs and finishes: examples/jobflow-pipeline.yaml runs preprocess, train and
evaluate in order and keeps its Jobs; a flow with ``jobRetainPolicy: delete`` deletes them once
it succeeded; a failing step stops the flow; a flow waiting for a missing JobTemplate starts when
the template is created.

``caldera controllers --controllers=job,jobflow,jobtemplate`` runs as a process; the stand-in
scheduler moves PodGroups to Inqueue and binds pods to the fake nodes (no webhook: the Jobs are
the templates' specs as written).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from caldera.api.core import Event
from caldera.api.flow import JobFlow
from caldera.api.kinds import EVENT, JOB, JOBFLOW, JOBTEMPLATE
from caldera.api.meta import parse_time
from caldera.api.volcano import Job
from caldera.kube.client import KubeClient
from caldera.kube.errors import NotFound
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.job_fixtures import (  # noqa: F401 - scheduled is a fixture
    EXIT_CODE,
    RUN_FOR,
    controllers_process,
    scheduled,
)
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("flow_controllers", "scheduled")]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jobflow-pipeline.yaml"
STEPS = ("preprocess", "train", "evaluate")


@pytest.fixture
def flow_controllers(cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[CalderaProcess]:
    """``caldera controllers`` with the job, jobflow and jobtemplate controllers."""
    yield from controllers_process(cluster, tmp_path, "job", "jobflow", "jobtemplate")


def example() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The example's JobTemplates (each pod runs 1 s, then exits 0) and its JobFlow."""
    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    templates = [d for d in docs if d["kind"] == "JobTemplate"]
    (flow,) = [d for d in docs if d["kind"] == "JobFlow"]
    for template in templates:
        finishing(template, exit_code=0)
    return templates, flow


def finishing(template: dict[str, Any], *, exit_code: int, run_for: str = "1s") -> dict[str, Any]:
    """``template`` with pods that kwok ends after ``run_for`` with ``exit_code``."""
    for task in template["spec"]["tasks"]:
        meta = task["template"].setdefault("metadata", {})
        meta.setdefault("annotations", {}).update({RUN_FOR: run_for, EXIT_CODE: str(exit_code)})
    return template


def flow_of(name: str, steps: list[tuple[str, list[str]]], retain: str = "") -> dict[str, Any]:
    flows = [{"name": s, **({"dependsOn": {"targets": t}} if t else {})} for s, t in steps]
    spec: dict[str, Any] = {"flows": flows}
    if retain:
        spec["jobRetainPolicy"] = retain
    return {
        "apiVersion": JOBFLOW.api_version,
        "kind": "JobFlow",
        "metadata": {"name": name},
        "spec": spec,
    }


def renamed(template: dict[str, Any], name: str) -> dict[str, Any]:
    doc = copy.deepcopy(template)
    doc["metadata"] = {"name": name}
    return doc


async def jobs(kube: KubeClient, namespace: str) -> dict[str, Job]:
    return {j.metadata.name: j for j in (await kube.list(JOB, namespace=namespace)).items}


async def flow_in(kube: KubeClient, namespace: str, name: str, phase: str) -> JobFlow | None:
    current = await kube.get(JOBFLOW, name, namespace=namespace)
    return current if current.status.state.phase == phase else None


async def reached(
    kube: KubeClient,
    namespace: str,
    name: str,
    phase: str,
    timeout: float = 90,  # noqa: ASYNC109
) -> JobFlow:
    """The JobFlow once it is in ``phase``."""
    return await eventually(
        lambda: flow_in(kube, namespace, name, phase),
        timeout=timeout,
        interval=0.5,
        what=f"jobflow {name} {phase}",
    )


async def events(kube: KubeClient, namespace: str, name: str) -> list[Event]:
    listed = (await kube.list(EVENT, namespace=namespace)).items
    return [
        e for e in listed if e.involved_object.kind == "JobFlow" and e.involved_object.name == name
    ]


@pytest.fixture
async def templates(kube: KubeClient, namespace: str) -> list[dict[str, Any]]:
    """The example's three JobTemplates, created in the test's namespace."""
    made, _ = example()
    for template in made:
        await kube.create(JOBTEMPLATE, template, namespace=namespace)
    return made


async def test_the_example_pipeline_runs_its_steps_in_order_and_keeps_its_jobs(
    kube: KubeClient,
    namespace: str,
    flow_controllers: CalderaProcess,
    templates: list[dict[str, Any]],
) -> None:
    """preprocess, then train, then evaluate: each Job is created only after the one it waits
    for Completed, named, labelled and owned as Volcano's; the flow ends Succeed with the three
    Jobs Completed in its status and kept (retain); each JobTemplate lists its Job; the Events and
    the succeed count tell it."""
    _, body = example()
    await kube.create(JOBFLOW, body, namespace=namespace)

    done = await reached(kube, namespace, "pipeline", "Succeed", timeout=120)
    found = await jobs(kube, namespace)
    names = [f"pipeline-{s}" for s in STEPS]
    assert sorted(found) == sorted(names)
    for step, name in zip(STEPS, names, strict=True):
        job = found[name]
        assert job.status.state.phase == "Completed"
        created_by = {
            "volcano.sh/createdByJobFlow": f"{namespace}.pipeline",
            "volcano.sh/createdByJobTemplate": f"{namespace}.{step}",
        }
        assert created_by.items() <= job.metadata.labels.items()
        assert created_by.items() <= job.metadata.annotations.items()
        (owner,) = job.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "JobFlow",
            "pipeline",
            done.metadata.uid,
            True,
        )
    # Each step was created after the step it waits for had completed.
    for before, after in itertools.pairwise(names):
        finished = found[before].status.state.last_transition_time
        assert finished is not None
        created = found[after].metadata.creation_timestamp
        assert created is not None
        assert parse_time(created) >= parse_time(finished)

    status = done.status
    assert sorted(status.completed_jobs) == sorted(names)
    assert status.pending_jobs == status.running_jobs == status.failed_jobs == ()
    assert [e.name for e in status.job_status_list] == names
    for entry in status.job_status_list:
        assert entry.state == "Completed"
        assert entry.running_histories[-1].state == "Completed"
        assert entry.start_timestamp == found[entry.name].metadata.creation_timestamp
    assert status.conditions[names[1]].phase == "Completed"
    assert status.conditions[names[1]].task_status_count

    async def listed() -> bool:
        for step, name in zip(STEPS, names, strict=True):
            got = await kube.get(JOBTEMPLATE, step, namespace=namespace)
            if got.status.job_depends_on_list != (name,):
                return False
        return True

    await eventually(listed, what="each JobTemplate listing its Job")

    told = await events(kube, namespace, "pipeline")
    created_messages = {e.message for e in told if e.reason == "Created"}
    assert created_messages == {f"create a job named {n}!" for n in names}
    assert any(e.reason == "Succeeded" for e in told)
    count = flow_controllers.metric(
        "caldera_jobflow_succeed_phase_count", {"jobflow_namespace": namespace}
    )
    assert count == 1.0
    # retain: nothing is deleted afterwards.
    assert sorted(await jobs(kube, namespace)) == sorted(names)


async def test_the_delete_policy_removes_the_jobs_once_the_flow_succeeded(
    kube: KubeClient, namespace: str, templates: list[dict[str, Any]]
) -> None:
    """With jobRetainPolicy delete, the Jobs go after the flow reached Succeed; the status still
    records them."""
    body = flow_of("cleanup", [("preprocess", []), ("evaluate", ["preprocess"])], "delete")
    await kube.create(JOBFLOW, body, namespace=namespace)
    done = await reached(kube, namespace, "cleanup", "Succeed")
    assert sorted(done.status.completed_jobs) == ["cleanup-evaluate", "cleanup-preprocess"]

    async def gone() -> bool:
        left = await jobs(kube, namespace)
        return not any(name.startswith("cleanup-") for name in left)

    await eventually(gone, timeout=30, what="the flow's Jobs deleted")
    after = await kube.get(JOBFLOW, "cleanup", namespace=namespace)
    assert after.status.state.phase == "Succeed"
    assert sorted(after.status.completed_jobs) == ["cleanup-evaluate", "cleanup-preprocess"]
    deleted = {e.message for e in await events(kube, namespace, "cleanup") if e.reason == "Deleted"}
    assert len(deleted) == 2


async def test_a_failing_step_stops_the_flow(
    kube: KubeClient,
    namespace: str,
    flow_controllers: CalderaProcess,
    templates: list[dict[str, Any]],
) -> None:
    """The second step's pod exits 1: its Job fails, the flow goes Failed with a Warning naming
    it, and evaluate, which waits for it, is never created, even when the flow is looked at
    again."""
    broken = finishing(renamed(templates[0], "broken"), exit_code=1)
    await kube.create(JOBTEMPLATE, broken, namespace=namespace)
    body = flow_of(
        "stops",
        [("preprocess", []), ("broken", ["preprocess"]), ("evaluate", ["broken"])],
    )
    await kube.create(JOBFLOW, body, namespace=namespace)
    failed = await reached(kube, namespace, "stops", "Failed")
    assert failed.status.failed_jobs == ("stops-broken",)
    assert failed.status.completed_jobs == ("stops-preprocess",)
    warning = next(e for e in await events(kube, namespace, "stops") if e.reason == "Failed")
    assert warning.type == "Warning"
    assert "stops-broken" in warning.message
    count = flow_controllers.metric(
        "caldera_jobflow_failed_phase_count", {"jobflow_namespace": namespace}
    )
    assert count == 1.0
    # Looked at again (a touch), the failed flow still creates nothing.
    reconciles = {"controller": "jobflow", "result": "success"}
    before = flow_controllers.metric("caldera_controller_reconcile_total", reconciles) or 0.0
    patch = {"metadata": {"annotations": {"e2e.caldera.io/touch": "1"}}}
    await kube.patch(JOBFLOW, "stops", patch, namespace=namespace)

    async def looked_again() -> bool:
        now = flow_controllers.metric("caldera_controller_reconcile_total", reconciles) or 0.0
        return now > before

    await eventually(looked_again, what="a reconcile of the touched flow")
    with pytest.raises(NotFound):
        await kube.get(JOB, "stops-evaluate", namespace=namespace)


async def test_a_missing_template_is_waited_for(
    kube: KubeClient, namespace: str, templates: list[dict[str, Any]]
) -> None:
    """A flow naming a JobTemplate that does not exist says so in a Warning and starts that step
    as soon as the template is created."""
    await kube.create(JOBFLOW, flow_of("later", [("report", [])]), namespace=namespace)

    async def warned() -> Event | None:
        found = await events(kube, namespace, "later")
        return next((e for e in found if e.reason == "MissingJobTemplate"), None)

    warning = await eventually(warned, what="the MissingJobTemplate Warning")
    assert f"jobtemplate 'report' not found in namespace '{namespace}'" in warning.message
    assert "later-report" not in await jobs(kube, namespace)
    await kube.create(JOBTEMPLATE, renamed(templates[0], "report"), namespace=namespace)
    await reached(kube, namespace, "later", "Succeed", timeout=60)
