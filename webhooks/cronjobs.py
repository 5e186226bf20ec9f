"""Admission of Volcano CronJobs (``/cronjobs/validate``, CREATE and UPDATE), as Volcano's
pkg/webhooks/admission/cronjobs/validate/admit_cronjob.go, plus the checks Caldera adds.

Volcano's checks, with its wording, each message starting with the field it is about:
the schedule is required, must not carry ``TZ=``/``CRON_TZ=`` (the zone belongs in
``spec.timeZone``) and must parse as robfig/cron's ParseStandard; ``spec.timeZone`` must be a
non-empty IANA zone other than ``Local``; the CronJob's name must be a qualified name of at most
52 characters, so that its Jobs' names (``<name>-<Unix minutes>``) stay within 63.

Caldera's additions, none refusing a CronJob Volcano would run correctly: a schedule that can
never fire (``0 0 30 2 *``) is refused; ``startingDeadlineSeconds`` and the history limits must be
>= 0 (the CRD says so too; this covers API servers with an older CRD); ``concurrencyPolicy`` must
be Allow, Forbid or Replace; and the Job template must pass the same checks a Job does: it is
defaulted by `webhooks.jobs.defaulted_job` and validated by `webhooks.jobs.validate_job_create`,
under the name its Jobs will have. Its queue is not looked up here: the queue may be created or
opened before the first time comes, and each Job's own admission checks it then.

Messages are joined with "; ", as Volcano does since v1.14. Pure functions, no I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from caldera.api.cron import (
    MAX_CRONJOB_NAME,
    ScheduleError,
    ZoneError,
    job_name,
    load_zone,
    parse_schedule,
)
from caldera.api.limits import job_limit_errors
from caldera.api.meta import ObjectMeta
from caldera.api.names import go_list, qualified_name
from caldera.api.volcano import ConcurrencyPolicy, CronJob, Job
from webhooks.jobs import defaulted_job, validate_job_create

__all__ = ["validate_cronjob"]

# A time whose Unix minutes have as many digits as any Job name will carry this century, for
# checking the names of the template's Jobs and pods.
_SAMPLE_TIME: Final = dt.datetime(2099, 12, 31, 23, 59, tzinfo=dt.UTC)
_POLICIES: Final = tuple(p.value for p in ConcurrencyPolicy)


def _schedule_errors(schedule: str) -> list[str]:
    if not schedule:
        return ["spec.schedule: schedule is required, but got empty"]
    if "TZ" in schedule:
        return [
            "spec.schedule: schedule should not contain TZ or CRON_TZ, "
            "TZ should only be set in the timeZone field"
        ]
    try:
        parsed = parse_schedule(schedule)
    except ScheduleError as exc:
        return [f"spec.schedule: schedule is not a valid cron expression: {exc}"]
    if parsed.never:
        return [f"spec.schedule: {schedule!r} never fires: no month has the day of month it names"]
    return []


def _name_errors(name: str) -> list[str]:
    if len(name) > MAX_CRONJOB_NAME:
        return [
            f"metadata.name: cronJob name must be no more than {MAX_CRONJOB_NAME} characters "
            "to accommodate job name suffix (max 63 total)"
        ]
    errs = qualified_name(name)
    if errs:
        return [f'metadata.name: invalid cronJob name "{name}": {"; ".join(errs)}']
    return []


def _template_errors(cronjob: CronJob, base: str, scheduler_name: str) -> list[str]:
    """The template as one of its Jobs: defaulted as the Job webhook defaults it, then checked."""
    template = cronjob.spec.job_template
    bounds = job_limit_errors(template.spec, "spec.jobTemplate.spec")
    if bounds:
        return bounds
    job = Job(
        metadata=ObjectMeta(
            name=job_name(base, _SAMPLE_TIME),
            namespace=cronjob.metadata.namespace,
            labels=template.metadata.labels,
            annotations=template.metadata.annotations,
        ),
        spec=template.spec,
    )
    job = defaulted_job(job, scheduler_name=scheduler_name)
    message = validate_job_create(job, None)
    return [f"spec.jobTemplate: {message}"] if message else []


def validate_cronjob(cronjob: CronJob, *, scheduler_name: str) -> str:
    """Why a CronJob is refused (on CREATE and UPDATE alike), or "" when it is admitted."""
    spec = cronjob.spec
    errors = _schedule_errors(spec.schedule)
    if spec.time_zone is not None:
        try:
            load_zone(spec.time_zone)
        except ZoneError as exc:
            errors.append(f"spec.timeZone: {exc}")
    if spec.starting_deadline_seconds is not None and spec.starting_deadline_seconds < 0:
        errors.append("spec.startingDeadlineSeconds: must be greater than or equal to 0")
    for field, value in (
        ("successfulJobsHistoryLimit", spec.successful_jobs_history_limit),
        ("failedJobsHistoryLimit", spec.failed_jobs_history_limit),
    ):
        if value < 0:
            errors.append(f"spec.{field}: must be greater than or equal to 0")
    if spec.concurrency_policy not in _POLICIES:
        errors.append(
            f'spec.concurrencyPolicy: Unsupported value: "{spec.concurrency_policy}": '
            f"supported values: {go_list(list(_POLICIES))}"
        )
    name_errors = _name_errors(cronjob.metadata.name)
    errors += name_errors
    base = "cronjob" if name_errors else cronjob.metadata.name
    errors += _template_errors(cronjob, base, scheduler_name)
    return "; ".join(errors)
