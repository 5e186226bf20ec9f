"""Bounds on the sizes a tenant writes (caldera.api.limits): the admission messages of the Job,
CronJob, PodGroup and JobFlow webhooks, the same bounds in the CRD schemas, a stored object over a
bound still decoding, and the svc plugin's Service name rule."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from caldera.api import crdgen, limits
from caldera.api.flow import JobFlow
from caldera.api.jobspec import service_name_error
from caldera.api.volcano import CronJob, Job, PodGroup
from unit.test_crdgen import validate
from unit.webhook_fixtures import job_dict, queue, task, to_job
from webhooks.cronjobs import validate_cronjob
from webhooks.jobflows import review_jobflow
from webhooks.jobs import validate_job_create, validate_job_update
from webhooks.podgroups import validate_podgroup
from webhooks.view import StaticView

CLUSTER = StaticView([queue("default")])


def _policy(code: int) -> dict[str, Any]:
    return {"exitCode": code, "action": "RestartJob"}


def _container(env: int = 0) -> dict[str, Any]:
    return {
        "name": "c",
        "image": "busybox",
        "env": [{"name": f"V{i}", "value": "x"} for i in range(env)],
    }


OVER = [
    (
        job_dict(tasks=[task(replicas=2_000_000)], minAvailable=1),
        "spec.tasks[0].replicas: must be at most 10000 (got 2000000)",
    ),
    (
        job_dict(tasks=[task("a", 6000), task("b", 6000)], minAvailable=1),
        "spec.tasks: the replicas of all tasks must sum to at most 10000 (got 12000)",
    ),
    (
        job_dict(tasks=[task(f"t{i}", 1) for i in range(129)]),
        "spec.tasks: must have at most 128 items (got 129)",
    ),
    (
        job_dict(policies=[_policy(c) for c in range(1, 66)]),
        "spec.policies: must have at most 64 items (got 65)",
    ),
    (
        job_dict(tasks=[task(policies=[_policy(c) for c in range(1, 66)])]),
        "spec.tasks[0].policies: must have at most 64 items (got 65)",
    ),
    (
        job_dict(tasks=[task(dependsOn={"name": ["x"] * 129})]),
        "spec.tasks[0].dependsOn.name: must have at most 128 items (got 129)",
    ),
    (
        job_dict(tasks=[task(template={"spec": {"containers": [_container(env=1025)]}})]),
        "spec.tasks[0].template.spec.containers[0].env: must have at most 1024 items (got 1025)",
    ),
    (
        job_dict(tasks=[task(template={"spec": {"containers": [_container()] * 65}})]),
        "spec.tasks[0].template.spec.containers: must have at most 64 items (got 65)",
    ),
    (
        job_dict(
            tasks=[task(template={"spec": {"containers": [_container()], "volumes": [{}] * 257}})]
        ),
        "spec.tasks[0].template.spec.volumes: must have at most 256 items (got 257)",
    ),
    (
        job_dict(plugins={"env": ["--x"] * 33}),
        "spec.plugins.env: must have at most 32 items (got 33)",
    ),
    (
        job_dict(plugins={"ssh": ["--ssh-public-key=" + "k" * 9000]}),
        "spec.plugins.ssh[0]: must have at most 8192 characters (got 9017)",
    ),
    (
        job_dict(volumes=[{"mountPath": f"/m{i}", "volumeClaimName": "c"} for i in range(65)]),
        "spec.volumes: must have at most 64 items (got 65)",
    ),
    (job_dict(minAvailable=20_000), "spec.minAvailable: must be at most 10000 (got 20000)"),
]


@pytest.mark.parametrize(("data", "message"), OVER, ids=[m.split(":")[0] for _, m in OVER])
def test_job_over_a_bound_is_refused_naming_the_field(data: dict[str, Any], message: str) -> None:
    job = to_job(data)
    assert message in validate_job_create(job, CLUSTER)
    assert message in limits.job_limit_errors(job.spec)
    # The schema refuses it too, except the per-job sum (no schema keyword sums) and the pod
    # template's sizes (the template is kept whole, unpruned, by the schema).
    schema = crdgen.crd_document(crdgen.CRDS[0])["spec"]["versions"][0]["schema"]
    if "sum" not in message and ".template." not in message:
        assert validate(schema["openAPIV3Schema"], data) != []


def test_the_2m_replica_job_gets_one_message_and_no_other_check() -> None:
    data = job_dict(tasks=[task(replicas=2_000_000)], minAvailable=1)
    assert (
        validate_job_create(to_job(data), CLUSTER)
        == "spec.tasks[0].replicas: must be at most 10000 (got 2000000)"
    )


def test_jobs_at_the_bounds_are_admitted() -> None:
    data = job_dict(
        tasks=[task("a", 5000), task("b", 5000, policies=[_policy(c) for c in range(1, 65)])],
        minAvailable=10_000,
    )
    assert validate_job_create(to_job(data), CLUSTER) == ""


def test_scaling_up_past_a_bound_is_refused() -> None:
    old = to_job(job_dict(tasks=[task(replicas=2)]))
    new = to_job(job_dict(tasks=[task(replicas=10_001)]))
    assert validate_job_update(old, new) == (
        "spec.tasks[0].replicas: must be at most 10000 (got 10001)"
    )


def test_cronjob_template_over_a_bound() -> None:
    cron = msgspec.convert(
        {
            "metadata": {"name": "nightly", "namespace": "ns"},
            "spec": {
                "schedule": "0 0 * * *",
                "jobTemplate": {"spec": {"tasks": [task(replicas=2_000_000)], "minAvailable": 1}},
            },
        },
        CronJob,
    )
    assert "spec.jobTemplate.spec.tasks[0].replicas: must be at most 10000 (got 2000000)" in (
        validate_cronjob(cron, scheduler_name="volcano")
    )


def test_podgroup_over_a_bound() -> None:
    pg = msgspec.convert(
        {"metadata": {"name": "pg"}, "spec": {"minMember": 2_000_000, "queue": "default"}},
        PodGroup,
    )
    assert validate_podgroup(pg, CLUSTER) == "spec.minMember: must be at most 10000 (got 2000000)"


def test_podgroup_sub_group_policies_are_bounded() -> None:
    """subGroupPolicy entries and one entry's matchLabelKeys are bounded (the scheduler matches
    every pod of the job against them), at admission and in the CRD schema."""
    spec = {
        "minMember": 1,
        "queue": "default",
        "subGroupPolicy": [{"name": f"p{i}", "matchLabelKeys": ["k"] * 17} for i in range(129)],
    }
    pg = msgspec.convert({"metadata": {"name": "pg"}, "spec": spec}, PodGroup)
    message = validate_podgroup(pg, CLUSTER)
    assert "spec.subGroupPolicy: must have at most 128 items (got 129)" in message
    assert "spec.subGroupPolicy[0].matchLabelKeys: must have at most 16 items (got 17)" in message
    at_bound = {**spec, "subGroupPolicy": [{"name": "p", "matchLabelKeys": ["k"] * 16}]}
    assert (
        limits.podgroup_limit_errors(
            msgspec.convert({"metadata": {"name": "pg"}, "spec": at_bound}, PodGroup).spec
        )
        == []
    )
    crd = next(c for c in crdgen.CRDS if c.info.kind == "PodGroup")
    schema = crdgen.crd_document(crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    sub = schema["properties"]["spec"]["properties"]["subGroupPolicy"]
    assert sub["maxItems"] == 128
    assert sub["items"]["properties"]["matchLabelKeys"]["maxItems"] == 16


def test_jobflow_over_a_bound() -> None:
    flow = msgspec.convert(
        {"metadata": {"name": "f"}, "spec": {"flows": [{"name": f"a{i}"} for i in range(129)]}},
        JobFlow,
    )
    assert review_jobflow(flow).message == "spec.flows: must have at most 128 items (got 129)"


def test_stored_objects_over_the_bounds_still_decode() -> None:
    """The bounds are in the schema only, never on the decode path: a Job stored before the CRD
    had them decodes, so the controller can hold it."""
    raw = msgspec.json.encode(
        job_dict(tasks=[task(replicas=2_000_000, policies=[_policy(c) for c in range(1, 200)])])
    )
    job = msgspec.json.decode(raw, type=Job)
    assert job.spec.tasks[0].replicas == 2_000_000


# --- the svc plugin's Service ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["1train", "a.b", "9"])
@pytest.mark.parametrize("plugins", [{"svc": []}, {"pytorch": []}, {"tensorflow": [], "svc": []}])
def test_svc_job_names_a_service_cannot_take_are_refused(
    name: str, plugins: dict[str, list[str]]
) -> None:
    data = job_dict(name, plugins=plugins, tasks=[task("master", 1), task("worker", 1)])
    message = validate_job_create(to_job(data), CLUSTER)
    assert f'metadata.name: Invalid value: "{name}": the svc plugin creates a Service' in message
    assert "DNS-1035 label" in message


@pytest.mark.parametrize("name", ["1train", "a.b"])
def test_such_names_pass_without_the_svc_plugin(name: str) -> None:
    assert validate_job_create(to_job(job_dict(name)), CLUSTER) == ""


def test_service_name_rule() -> None:
    assert service_name_error("train-1") == ""
    assert service_name_error("a" * 63) == ""
    assert service_name_error("a" * 64) != ""
    assert service_name_error("train-") != ""
