"""The status of a JobTemplate: the Jobs created from it (pure logic, no I/O).

Volcano's jobtemplate controller (pkg/controllers/jobtemplate) lists, in
``status.jobDependsOnList``, the Jobs of the template's namespace labelled
``volcano.sh/createdByJobTemplate: <namespace>.<template>``, and writes it when a Job is added,
never emptying it. Caldera writes the list of the Jobs that exist, sorted by name, whenever it
changes: a deleted Job leaves it.
"""

from __future__ import annotations

from collections.abc import Iterable

from caldera.api.flow import (
    CREATED_BY_JOB_TEMPLATE_KEY,
    JobTemplate,
    JobTemplateStatus,
    parse_object_string,
)
from caldera.api.volcano import Job

__all__ = ["created_from", "template_status"]


def created_from(job: Job) -> str | None:
    """The key (``namespace/name``) of the JobTemplate ``job`` was created from, or None. A label
    naming a template of another namespace is not the template's: Volcano looks only in the
    template's own namespace."""
    parsed = parse_object_string(job.metadata.labels.get(CREATED_BY_JOB_TEMPLATE_KEY, ""))
    if parsed is None or parsed[0] != job.metadata.namespace:
        return None
    return f"{parsed[0]}/{parsed[1]}"


def template_status(template: JobTemplate, jobs: Iterable[Job]) -> JobTemplateStatus | None:
    """The status listing ``jobs`` (those created from ``template``), or None when the stored
    status already says so."""
    names = tuple(sorted({j.metadata.name for j in jobs}))
    status = JobTemplateStatus(job_depends_on_list=names)
    return None if status == template.status else status
