"""Tests of caldera.api.podtemplate: the pod-template rules of Kubernetes' ValidatePodTemplate
that Caldera checks without the API server, with the API server's paths and wording."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.meta import ObjectMeta, TemplateMeta
from caldera.api.podtemplate import job_template_errors, template_errors
from caldera.api.volcano import Job, JobSpec, TaskSpec, VolumeClaimTemplate
from unit.podtemplate_cases import CASES, Case, c, res


@pytest.mark.parametrize("case", [pytest.param(k, id=k.id) for k in CASES])
def test_template_rules(case: Case) -> None:
    """Each template gives exactly the API server's field errors (a decode error: its start)."""
    got = template_errors("template", {"spec": case.spec}, numa=False, task_index=0)
    if case.server:
        assert got == case.errors
    else:
        assert len(got) == len(case.errors)
        assert all(g.startswith(e) for g, e in zip(got, case.errors, strict=True)), got


def test_claim_template_volumes_may_be_mounted() -> None:
    """A mount may name a volume the job controller adds (a volumeClaimTemplate)."""
    spec = {"containers": [c(volumeMounts=[{"name": "data", "mountPath": "/d"}])]}
    assert template_errors("t", {"spec": spec}, numa=False, task_index=0) == [
        't.spec.containers[0].volumeMounts[0].name: Not found: "data"'
    ]
    assert (
        template_errors("t", {"spec": spec}, numa=False, task_index=0, extra_volumes=["data"]) == []
    )


SUFFIX = st.sampled_from([None, "", "m", "Mi", "k"])  # None: a bare JSON number


@given(
    cpu=st.tuples(st.integers(-(10**6), 10**6), SUFFIX),
    memory=st.tuples(st.integers(-(10**6), 10**6), SUFFIX),
)
def test_negative_quantities_are_refused_and_others_pass(
    cpu: tuple[int, str | None], memory: tuple[int, str | None]
) -> None:
    """Any request is refused exactly when it is below zero, naming the resource."""

    def quantity(n: int, suffix: str | None) -> Any:
        return n if suffix is None else f"{n}{suffix}"

    spec = {"containers": [c(**res({"cpu": quantity(*cpu), "memory": quantity(*memory)}))]}
    got = template_errors("t", {"spec": spec}, numa=False, task_index=0)
    prefix = "t.spec.containers[0].resources.requests"
    want = [
        f"{prefix}[{name}]: Invalid value: {v!r}: must be greater than or equal to 0".replace(
            "'", '"'
        )
        for name, (n, suffix) in (("cpu", cpu), ("memory", memory))
        if n < 0
        for v in [quantity(n, suffix)]
    ]
    assert got == want


JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    ["containers", "initContainers", "volumes", "restartPolicy", "dnsPolicy", "hostNetwork"]
)


@given(
    spec=st.dictionaries(FIELDS, JUNK, max_size=4),
    containers=st.lists(
        st.dictionaries(
            st.sampled_from(["name", "image", "ports", "env", "volumeMounts", "resources"]),
            JUNK,
            max_size=5,
        ),
        max_size=3,
    ),
)
def test_any_template_gives_field_errors_never_an_exception(
    spec: dict[str, Any], containers: list[dict[str, Any]]
) -> None:
    """Whatever JSON a template holds, the checks answer with errors that each name a field."""
    for body in (spec, {**spec, "containers": containers}):
        for e in template_errors("t", {"spec": body}, numa=False, task_index=0):
            assert e.startswith("t.spec"), e


def test_job_template_errors_name_each_task_and_skip_the_numa_rule() -> None:
    """The controller's check: every task, Volcano's spec.task[i] paths, claim templates count as
    volumes, and no NUMA rule (the API server does not refuse a fractional CPU)."""
    mount = {"name": "data", "mountPath": "/d"}
    good = TaskSpec(
        name="a",
        topology_policy="single-numa-node",
        template={"spec": {"containers": [c(volumeMounts=[mount], **res({"cpu": "500m"}))]}},
        volume_claim_templates=(VolumeClaimTemplate(metadata=TemplateMeta(name="data")),),
    )
    bad = TaskSpec(name="b", template={"spec": {"containers": [c(**res({"memory": "-1"}))]}})
    job = Job(metadata=ObjectMeta(name="j"), spec=JobSpec(tasks=(good, bad)))
    assert job_template_errors(job) == [
        'spec.task[1].template.spec.containers[0].resources.requests[memory]: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ]
