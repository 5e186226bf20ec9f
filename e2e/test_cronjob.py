"""The cronjob controller against the real API server: Jobs started on schedule, named, owned and
annotated as Volcano's; Forbid, Replace, suspend, history limits; a controller outage that ends
with one Job, not a burst.

Hourly schedules run on a test clock: the controller runs in-process (``run_controllers``) with
``clock=``, the test moves the clock and then touches the CronJob (an annotation) so that it is
reconciled at once rather than when the real delay to the next time runs out. One test runs the
``caldera controllers`` process on the real clock instead: its CronJob's ``lastScheduleTime`` is
set hours back, so a start is owed at once. Job phases are written into the Jobs' status directly
(no job controller runs here), as the job controller would write them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
from pathlib import Path
from typing import Any

import pytest

from caldera.api.core import Event
from caldera.api.cron import job_name, load_zone, rfc3339
from caldera.api.kinds import CRONJOB, EVENT, JOB
from caldera.api.meta import format_time, parse_time
from caldera.api.volcano import CRONJOB_SCHEDULED_TIMESTAMP_KEY, CronJob, Job
from caldera.kube.client import KubeClient
from controllers.cronjob.controller import CronJobController
from e2e.caldera_process import CalderaProcess
from e2e.conftest import Cluster
from e2e.controller_harness import run_controllers
from e2e.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

NAME = "nightly"


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def to_next_hour(self, hours: int = 1, *, plus: float = 5) -> dt.datetime:
        """Move to ``plus`` seconds after the ``hours``-th next full hour; that hour."""
        top = self.now.replace(minute=0, second=0, microsecond=0)
        hour = top + dt.timedelta(hours=hours)
        self.now = hour + dt.timedelta(seconds=plus)
        return hour


def cronjob(schedule: str = "0 * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": NAME},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "nightly"}},
                "spec": {
                    "minAvailable": 1,
                    "schedulerName": "volcano",
                    "tasks": [
                        {
                            "name": "train",
                            "replicas": 1,
                            "template": {
                                "spec": {
                                    "containers": [{"name": "c", "image": "busybox"}],
                                    "restartPolicy": "Never",
                                }
                            },
                        }
                    ],
                },
            },
            **spec,
        },
    }


async def tick(kube: KubeClient, namespace: str) -> None:
    """Touch the CronJob so the controller looks at it now."""
    patch = {"metadata": {"annotations": {"e2e.caldera.io/tick": secrets.token_hex(4)}}}
    await kube.patch(CRONJOB, NAME, patch, namespace=namespace)


async def jobs(kube: KubeClient, namespace: str) -> dict[str, Job]:
    listed = (await kube.list(JOB, namespace=namespace)).items
    return {j.metadata.name: j for j in listed if not j.metadata.deletion_timestamp}


async def job_for(kube: KubeClient, namespace: str, hour: dt.datetime) -> Job:
    name = job_name(NAME, hour)

    async def probe() -> Job | None:
        return (await jobs(kube, namespace)).get(name)

    return await eventually(probe, what=f"job {name}")


async def events(kube: KubeClient, namespace: str, reason: str) -> list[Event]:
    found = (await kube.list(EVENT, namespace=namespace)).items
    return [e for e in found if e.reason == reason and e.involved_object.kind == "CronJob"]


async def event(kube: KubeClient, namespace: str, reason: str, text: str = "") -> Event:
    async def probe() -> Event | None:
        return next((e for e in await events(kube, namespace, reason) if text in e.message), None)

    return await eventually(probe, what=f"a {reason} event on the CronJob")


async def finish(kube: KubeClient, namespace: str, job: Job, phase: str) -> None:
    """Write the phase the job controller would write when the Job ends."""
    state = {"phase": phase, "lastTransitionTime": format_time(dt.datetime.now(dt.UTC))}
    await kube.patch_status(
        JOB, job.metadata.name, {"status": {"state": state}}, namespace=namespace
    )


async def running_at_next_hour(
    kube: KubeClient, namespace: str, clock: Clock
) -> tuple[Job, dt.datetime]:
    """Start the Job of the next hour, then move to the hour after (and look): that Job and
    the new hour."""
    first = clock.to_next_hour()
    await tick(kube, namespace)
    running = await job_for(kube, namespace, first)
    second = clock.to_next_hour()
    await tick(kube, namespace)
    return running, second


async def status(kube: KubeClient, namespace: str) -> CronJob:
    return await kube.get(CRONJOB, NAME, namespace=namespace)


async def test_a_due_time_starts_one_job_named_owned_and_annotated(
    kube: KubeClient, namespace: str
) -> None:
    """At the hour a Job `<cronjob>-<Unix minutes>` appears, controlled by the CronJob, with the
    template's labels and annotations and the scheduled timestamp; the status lists it."""
    clock = Clock()
    created = await kube.create(CRONJOB, cronjob(timeZone="Europe/Paris"), namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        hour = clock.to_next_hour()
        await tick(kube, namespace)
        job = await job_for(kube, namespace, hour)
        (owner,) = job.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "CronJob",
            NAME,
            created.metadata.uid,
            True,
        )
        assert job.metadata.labels == {"team": "ml"}
        assert job.metadata.annotations["note"] == "nightly"
        assert job.metadata.annotations[CRONJOB_SCHEDULED_TIMESTAMP_KEY] == rfc3339(
            hour, load_zone("Europe/Paris")
        )
        assert job.spec.tasks[0].name == "train"

        async def recorded() -> CronJob | None:
            cj = await status(kube, namespace)
            return cj if cj.status.active else None

        cj = await eventually(recorded, what="status.active")
        assert [r.name for r in cj.status.active] == [job.metadata.name]
        assert cj.status.last_schedule_time == format_time(hour)
        await event(kube, namespace, "SuccessfulCreate", f"Created job {job.metadata.name}")
        # A second look at the same time starts nothing more.
        await tick(kube, namespace)
        await asyncio.sleep(1)
        assert list(await jobs(kube, namespace)) == [job.metadata.name]


async def test_forbid_skips_while_one_runs_and_starts_late_after(
    kube: KubeClient, namespace: str
) -> None:
    """Forbid: the next hour is skipped with a Warning while the first Job runs; when it
    completes, the owed time starts, and lastSuccessfulTime is set."""
    clock = Clock()
    await kube.create(CRONJOB, cronjob(concurrencyPolicy="Forbid"), namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        running, second = await running_at_next_hour(kube, namespace, clock)
        await event(kube, namespace, "ForbidConcurrent", "another job is already running")
        assert list(await jobs(kube, namespace)) == [running.metadata.name]
        await finish(kube, namespace, running, "Completed")
        await job_for(kube, namespace, second)
        await event(kube, namespace, "SawCompletedJob", running.metadata.name)

        async def succeeded() -> CronJob | None:
            cj = await status(kube, namespace)
            return cj if cj.status.last_successful_time else None

        await eventually(succeeded, what="lastSuccessfulTime")


async def test_replace_deletes_the_running_job(kube: KubeClient, namespace: str) -> None:
    """Replace: at the next hour the running Job is deleted and a new one starts."""
    clock = Clock()
    await kube.create(CRONJOB, cronjob(concurrencyPolicy="Replace"), namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        old, second = await running_at_next_hour(kube, namespace, clock)
        new = await job_for(kube, namespace, second)

        async def replaced() -> bool:
            return old.metadata.name not in await jobs(kube, namespace)

        await eventually(replaced, what="the old job deleted")
        await event(kube, namespace, "ReplaceConcurrent")
        await event(kube, namespace, "SuccessfulDelete", f'Deleted job "{old.metadata.name}"')

        async def only_new() -> CronJob | None:
            cj = await status(kube, namespace)
            return cj if [r.name for r in cj.status.active] == [new.metadata.name] else None

        await eventually(only_new, what="status.active to hold only the new job")


async def test_suspend_starts_nothing_and_resume_starts_only_the_latest(
    kube: KubeClient, namespace: str
) -> None:
    """Suspended through three hours: no Job. Resumed: one Job, for the latest hour, and a
    MissSchedule Warning about the two skipped."""
    clock = Clock()
    await kube.create(CRONJOB, cronjob(suspend=True), namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        clock.to_next_hour()
        clock.to_next_hour()
        latest = clock.to_next_hour()
        await tick(kube, namespace)
        await asyncio.sleep(2)
        assert await jobs(kube, namespace) == {}
        await kube.patch(CRONJOB, NAME, {"spec": {"suspend": False}}, namespace=namespace)
        await job_for(kube, namespace, latest)
        await event(kube, namespace, "MissSchedule", "Missed 2 earlier scheduled time(s)")
        await asyncio.sleep(1)
        assert list(await jobs(kube, namespace)) == [job_name(NAME, latest)]


async def test_history_limits_delete_the_oldest_finished_jobs(
    kube: KubeClient, namespace: str
) -> None:
    """With one successful and one failed Job kept, older finished ones are deleted."""
    clock = Clock()
    limits = cronjob(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=1)
    await kube.create(CRONJOB, limits, namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        started = []
        for _ in range(4):
            hour = clock.to_next_hour()
            await tick(kube, namespace)
            started.append(await job_for(kube, namespace, hour))
            await asyncio.sleep(1.1)  # distinct creation timestamps (whole seconds)
        ok1, ok2, bad1, bad2 = started
        for job, phase in (
            (ok1, "Completed"),
            (ok2, "Completed"),
            (bad1, "Failed"),
            (bad2, "Failed"),
        ):
            await finish(kube, namespace, job, phase)

        async def trimmed() -> set[str] | None:
            names = set(await jobs(kube, namespace))
            return names if names == {ok2.metadata.name, bad2.metadata.name} else None

        await eventually(trimmed, what="the oldest finished jobs deleted")
        for gone in (ok1, bad1):
            await event(kube, namespace, "SuccessfulDelete", gone.metadata.name)


async def test_outage_ends_with_one_job_not_a_burst(kube: KubeClient, namespace: str) -> None:
    """The controller stops after the first hour and comes back five hours later: one Job, for
    the latest hour. With startingDeadlineSeconds, a time older than the deadline starts
    nothing and a MissSchedule Warning says so."""
    clock = Clock()
    await kube.create(CRONJOB, cronjob(), namespace=namespace)
    async with run_controllers(kube, CronJobController, clock=clock):
        first = clock.to_next_hour()
        await tick(kube, namespace)
        await job_for(kube, namespace, first)

        async def recorded() -> bool:
            return (await status(kube, namespace)).status.last_schedule_time == format_time(first)

        await eventually(recorded, what="lastScheduleTime")
    clock.to_next_hour(4)
    latest = clock.to_next_hour()
    async with run_controllers(kube, CronJobController, clock=clock):
        await job_for(kube, namespace, latest)
        await event(kube, namespace, "MissSchedule", "Missed 4 earlier scheduled time(s)")
        await asyncio.sleep(1)
        assert set(await jobs(kube, namespace)) == {job_name(NAME, first), job_name(NAME, latest)}

    # Down again, now past the deadline of the next time: nothing starts.
    await kube.patch(CRONJOB, NAME, {"spec": {"startingDeadlineSeconds": 60}}, namespace=namespace)
    missed = clock.to_next_hour(plus=600)
    async with run_controllers(kube, CronJobController, clock=clock):
        await event(kube, namespace, "MissSchedule", "Missed scheduled time to start a job")
        assert job_name(NAME, missed) not in await jobs(kube, namespace)


async def test_controllers_process_starts_an_owed_job_on_the_real_clock(
    kube: KubeClient, namespace: str, cluster: Cluster, crds: Path, tmp_path: Path
) -> None:
    """`caldera controllers --controllers=cronjob`: a CronJob whose last time is three hours
    back (every minute, so 180 owed) gets one Job for the current minute and Kubernetes'
    TooManyMissedTimes Warning."""
    await kube.create(CRONJOB, cronjob("* * * * *"), namespace=namespace)
    back = dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)
    await kube.patch_status(
        CRONJOB, NAME, {"status": {"lastScheduleTime": format_time(back)}}, namespace=namespace
    )
    proc = CalderaProcess(
        "controllers",
        ["--controllers=cronjob", "--leader-elect=false"],
        kubeconfig=cluster.kubeconfig,
        log_dir=tmp_path,
    )
    try:

        async def some() -> dict[str, Job] | None:
            return await jobs(kube, namespace) or None

        started = await eventually(some, what="a job", timeout=60)
        (name,) = started
        scheduled = parse_time(started[name].metadata.annotations[CRONJOB_SCHEDULED_TIMESTAMP_KEY])
        assert dt.datetime.now(dt.UTC) - scheduled < dt.timedelta(minutes=2)
        await event(kube, namespace, "TooManyMissedTimes", "too many missed start times")
    finally:
        assert proc.stop() == 0, proc.log()[-3000:]
