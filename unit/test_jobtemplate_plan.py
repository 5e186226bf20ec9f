"""The status of a JobTemplate (controllers.jobtemplate.plan): the Jobs created from it."""

from __future__ import annotations

import pytest

from caldera.api.flow import JobTemplate, JobTemplateStatus, parse_object_string
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import Job
from controllers.jobtemplate.plan import created_from, template_status

TEMPLATE = JobTemplate(metadata=ObjectMeta(name="train", namespace="ml"))


def job(name: str, label: str | None, namespace: str = "ml") -> Job:
    labels = {"volcano.sh/createdByJobTemplate": label} if label is not None else {}
    return Job(metadata=ObjectMeta(name=name, namespace=namespace, labels=labels))


@pytest.mark.parametrize(
    ("label", "namespace", "key"),
    [
        ("ml.train", "ml", "ml/train"),
        ("ml.train.v2", "ml", "ml/train.v2"),  # a dotted name: Volcano's split skips it
        ("other.train", "ml", None),  # a template of another namespace: not looked at
        ("train", "ml", None),
        (".train", "ml", None),
        ("ml.", "ml", None),
        (None, "ml", None),
    ],
)
def test_created_from_reads_the_label(label: str | None, namespace: str, key: str | None) -> None:
    """``<namespace>.<name>``, split at the first dot, in the Job's own namespace."""
    assert created_from(job("j", label, namespace)) == key


def test_parse_object_string() -> None:
    """A namespace never has a dot, so the first one separates it from the name."""
    assert parse_object_string("ns.a.b") == ("ns", "a.b")
    assert parse_object_string("nodot") is None


def test_status_lists_the_jobs_sorted_and_is_written_only_when_it_changes() -> None:
    """The names sorted and unique; None when the stored status says the same; an empty list
    once the Jobs are gone (Volcano never empties it)."""
    jobs = [job("pipe-b-train", "ml.train"), job("pipe-a-train", "ml.train")]
    status = template_status(TEMPLATE, jobs)
    assert status == JobTemplateStatus(job_depends_on_list=("pipe-a-train", "pipe-b-train"))
    stored = JobTemplate(metadata=TEMPLATE.metadata, status=status)
    assert template_status(stored, list(reversed(jobs))) is None
    assert template_status(stored, []) == JobTemplateStatus()
    assert template_status(TEMPLATE, []) is None
