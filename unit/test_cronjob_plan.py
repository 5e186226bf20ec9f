"""What the cronjob controller plans for one CronJob at one instant (controllers.cronjob.plan)."""

from __future__ import annotations

import datetime as dt

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.meta import (
    ObjectMeta,
    ObjectReference,
    OwnerReference,
    TemplateMeta,
    format_time,
    parse_time,
)
from caldera.api.volcano import (
    CRONJOB_SCHEDULED_TIMESTAMP_KEY,
    CronJob,
    CronJobSpec,
    CronJobStatus,
    Job,
    JobSpec,
    JobState,
    JobStatus,
    JobTemplateSpec,
    TaskSpec,
    job_reference,
)
from controllers.cronjob.plan import MANY_MISSED, Plan, plan, started

CREATED = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)
TEMPLATE = JobTemplateSpec(
    metadata=TemplateMeta(labels={"team": "ml"}, annotations={"note": "nightly"}),
    spec=JobSpec(queue="default", tasks=(TaskSpec(name="t", replicas=1),)),
)


def cron(
    schedule: str = "0 * * * *",
    *,
    last: dt.datetime | None = None,
    active: tuple[ObjectReference, ...] = (),
    **spec: object,
) -> CronJob:
    return CronJob(
        metadata=ObjectMeta(
            name="nightly",
            namespace="ns",
            uid="cj-uid",
            creation_timestamp=format_time(CREATED),
        ),
        spec=CronJobSpec(schedule=schedule, job_template=TEMPLATE, **spec),  # type: ignore[arg-type]
        status=CronJobStatus(active=active, last_schedule_time=format_time(last) if last else None),
    )


def job(
    name: str,
    phase: str = "Running",
    *,
    created: dt.datetime = CREATED,
    finished: dt.datetime | None = None,
    deleting: bool = False,
    owner: str = "cj-uid",
) -> Job:
    ref = OwnerReference(
        api_version="batch.volcano.sh/v1alpha1",
        kind="CronJob",
        name="nightly",
        uid=owner,
        controller=True,
    )
    return Job(
        metadata=ObjectMeta(
            name=name,
            namespace="ns",
            uid=f"{name}-uid",
            creation_timestamp=format_time(created),
            deletion_timestamp=format_time(created) if deleting else None,
            owner_references=(ref,),
        ),
        status=JobStatus(
            state=JobState(
                phase=phase, last_transition_time=format_time(finished) if finished else None
            )
        ),
    )


def at(hour: int, minute: int = 0, second: int = 0, day: int = 1) -> dt.datetime:
    return dt.datetime(2026, 1, day, hour, minute, second, tzinfo=dt.UTC)


def reasons(p: Plan) -> list[str]:
    return [n.reason for n in p.notes]


def test_nothing_due_waits_for_the_next_time() -> None:
    """Before the first time, nothing starts and the key comes back just after it."""
    p = plan(cron(), [], at(0, 30))
    assert p.create is None
    assert p.requeue_after is not None
    assert abs(p.requeue_after - (30 * 60 + 0.1)) < 1e-6


def test_due_time_starts_a_job_named_owned_and_annotated_as_volcano() -> None:
    """The Job is <cronjob>-<Unix minutes>, controlled by the CronJob, with the template's labels
    and annotations plus the scheduled timestamp in RFC 3339."""
    p = plan(cron(), [], at(1, 0, 5))
    assert p.create is not None
    assert p.scheduled == at(1)
    meta = p.create.metadata
    assert meta.name == f"nightly-{int(at(1).timestamp()) // 60}"
    assert meta.namespace == "ns"
    assert meta.labels == {"team": "ml"}
    assert meta.annotations == {
        "note": "nightly",
        CRONJOB_SCHEDULED_TIMESTAMP_KEY: "2026-01-01T01:00:00Z",
    }
    (owner,) = meta.owner_references
    assert (owner.api_version, owner.kind, owner.name, owner.uid) == (
        "batch.volcano.sh/v1alpha1",
        "CronJob",
        "nightly",
        "cj-uid",
    )
    assert owner.controller
    assert owner.block_owner_deletion
    assert p.create.spec == TEMPLATE.spec
    assert reasons(p) == []


def test_time_zone_sets_the_wall_clock_and_the_annotation() -> None:
    """09:00 Europe/Paris is 08:00 UTC in winter; the annotation carries the zone's offset."""
    p = plan(cron("0 9 * * *", time_zone="Europe/Paris"), [], at(8, 0, 1))
    assert p.scheduled == at(8)
    assert p.create is not None
    assert p.create.metadata.annotations[CRONJOB_SCHEDULED_TIMESTAMP_KEY] == (
        "2026-01-01T09:00:00+01:00"
    )


def test_started_records_the_job_and_the_time() -> None:
    """Once created, the Job is active and lastScheduleTime is its time."""
    p = plan(cron(), [], at(1, 0, 5))
    assert p.create is not None
    assert p.scheduled is not None
    created = msgspec.structs.replace(
        p.create, metadata=msgspec.structs.replace(p.create.metadata, uid="new-uid")
    )
    status = started(p.status, created, p.scheduled)
    assert [r.uid for r in status.active] == ["new-uid"]
    assert status.last_schedule_time == "2026-01-01T01:00:00Z"
    assert started(status, created, p.scheduled) == status


def test_outage_starts_one_job_for_the_most_recent_time() -> None:
    """Five hours of missed hourly times give one Job (the latest) and a MissSchedule Warning."""
    p = plan(cron(last=at(0)), [], at(5, 30))
    assert p.scheduled == at(5)
    assert reasons(p) == ["MissSchedule"]
    assert "Missed 4 earlier" in p.notes[0].message


def test_too_many_missed_times_warns_and_still_starts_the_latest() -> None:
    """More than 100 owed times: Kubernetes' TooManyMissedTimes, and one Job."""
    p = plan(cron("* * * * *", last=at(0)), [], at(5, 0, 30))
    assert p.scheduled == at(5)
    assert reasons(p) == ["TooManyMissedTimes"]
    assert "startingDeadlineSeconds" in p.notes[0].message


def test_starting_deadline_skips_a_time_that_is_too_old() -> None:
    """A time older than startingDeadlineSeconds does not start; a younger one does."""
    late = plan(cron(last=at(0), starting_deadline_seconds=60), [], at(1, 2))
    assert late.create is None
    assert reasons(late) == ["MissSchedule"]
    assert "Thu, 01 Jan 2026 01:00:00 +0000" in late.notes[0].message
    assert late.requeue_after is not None
    timely = plan(cron(last=at(0), starting_deadline_seconds=300), [], at(1, 2))
    assert timely.scheduled == at(1)


def test_deadline_window_bounds_the_missed_count() -> None:
    """With a deadline, only times inside its window count towards TooManyMissedTimes."""
    p = plan(cron("* * * * *", last=at(0), starting_deadline_seconds=600), [], at(5, 0, 30))
    assert p.scheduled == at(5)
    assert "TooManyMissedTimes" not in reasons(p)


def test_existing_job_for_the_time_is_not_started_twice() -> None:
    """A Job already named for the due time means it was started: only the status catches up."""
    name = f"nightly-{int(at(1).timestamp()) // 60}"
    p = plan(cron(), [job(name)], at(1, 0, 5))
    assert p.create is None
    assert p.status.last_schedule_time == "2026-01-01T01:00:00Z"
    assert [r.name for r in p.status.active] == [name]  # adopted


def test_a_tenants_namesake_is_neither_adopted_counted_replaced_nor_expired() -> None:
    """Jobs another made (no controller, or another UID: a tenant's Job named for the due time,
    or like old ones) are not the CronJob's: the due time is still started (its create meets
    the tenant's Job and gives the time up with a Warning), nothing of theirs is listed active,
    replaced under Replace, or deleted by the history limits."""
    due = f"nightly-{int(at(1).timestamp()) // 60}"
    theirs = [
        job(due, owner="tenant-uid"),
        job("ok0", "Completed", finished=at(0, 5), owner=""),
        job("bad0", "Failed", owner="tenant-uid"),
    ]
    cj = cron(
        last=at(0),
        concurrency_policy="Replace",
        successful_jobs_history_limit=0,
        failed_jobs_history_limit=0,
    )
    p = plan(cj, theirs, at(1, 0, 5))
    assert p.create is not None
    assert p.create.metadata.name == due
    assert p.status.active == ()
    assert (p.replace, p.expire) == ((), ())
    assert p.status.last_successful_time is None


def test_forbid_skips_while_a_job_runs_and_starts_late_after() -> None:
    """Forbid: a Warning while one is active; once it finished, the owed time starts."""
    running = job("old")
    cj = cron(last=at(0), concurrency_policy="Forbid", active=(job_reference(running),))
    blocked = plan(cj, [running], at(1, 0, 5))
    assert blocked.create is None
    assert reasons(blocked) == ["ForbidConcurrent"]
    assert blocked.requeue_after is not None
    done = job("old", "Completed", finished=at(1, 10))
    free = plan(cj, [done], at(1, 10, 1))
    assert free.scheduled == at(1)
    assert reasons(free) == ["SawCompletedJob"]
    assert free.status.active == ()
    assert free.status.last_successful_time == "2026-01-01T01:10:00Z"


def test_replace_deletes_the_active_jobs_first() -> None:
    """Replace: the running Job goes, a Warning says so, and the new one starts."""
    running = job("old")
    cj = cron(last=at(0), concurrency_policy="Replace", active=(job_reference(running),))
    p = plan(cj, [running], at(1, 0, 5))
    assert [j.metadata.name for j in p.replace] == ["old"]
    assert p.create is not None
    assert p.status.active == ()
    assert reasons(p) == ["ReplaceConcurrent"]


def test_allow_runs_jobs_side_by_side() -> None:
    """Allow: a running Job does not stop the next one."""
    running = job("old")
    p = plan(cron(last=at(0), active=(job_reference(running),)), [running], at(1, 0, 5))
    assert p.create is not None
    assert [r.name for r in p.status.active] == ["old"]


def test_suspend_starts_nothing_but_tidies() -> None:
    """Suspended: no Job, no requeue; finished Jobs still leave status.active."""
    done = job("old", "Failed")
    p = plan(cron(last=at(0), suspend=True, active=(job_reference(done),)), [done], at(3))
    assert p.create is None
    assert p.requeue_after is None
    assert p.status.active == ()


def test_history_limits_delete_the_oldest_finished() -> None:
    """Beyond the limits the oldest finished Jobs go; Terminated counts as failed; jobs being
    deleted are not counted twice."""
    jobs = [job(f"ok{i}", "Completed", created=at(i), finished=at(i, 5)) for i in range(5)] + [
        job("bad0", "Failed", created=at(0)),
        job("bad1", "Terminated", created=at(1)),
        job("bad2", "Failed", created=at(2)),
        job("gone", "Failed", created=at(0), deleting=True),
    ]
    p = plan(cron(suspend=True), jobs, at(6))
    assert [j.metadata.name for j in p.expire] == ["ok0", "ok1", "bad0", "bad1"]
    assert p.status.last_successful_time == "2026-01-01T04:05:00Z"
    zero = plan(cron(suspend=True, successful_jobs_history_limit=0), jobs, at(6))
    assert len([j for j in zero.expire if j.metadata.name.startswith("ok")]) == 5


def test_stale_reference_is_dropped_with_a_warning() -> None:
    """An active reference to a Job that no longer exists leaves the status."""
    ghost = ObjectReference(name="ghost", namespace="ns", uid="ghost-uid")
    p = plan(cron(suspend=True, active=(ghost,)), [], at(1))
    assert p.status.active == ()
    assert reasons(p) == ["StaleReference"]
    # Volcano's message, with Go's %q quoting
    assert p.notes[0].message == 'Active job "ghost" no longer exists (UID: ghost-uid)'


def test_bad_spec_gives_a_warning_and_no_requeue() -> None:
    """A schedule or zone the webhook would refuse: a Warning, nothing started, no polling."""
    p = plan(cron("every day"), [], at(1))
    assert (p.create, p.requeue_after, reasons(p)) == (None, None, ["InvalidSchedule"])
    q = plan(cron(time_zone="Mars/Olympus"), [], at(1))
    assert (q.create, q.requeue_after, reasons(q)) == (None, None, ["InvalidTimeZone"])
    assert "spec.timeZone" in q.notes[0].message


def test_tz_prefix_is_honoured_with_a_warning() -> None:
    """A TZ= prefix stored without the webhook: honoured, with Volcano's UnsupportedSchedule."""
    p = plan(cron("TZ=Asia/Tokyo 0 9 * * *"), [], at(0, 0, 1, day=2))
    assert p.scheduled == at(0, day=2)
    assert reasons(p) == ["UnsupportedSchedule"]


# --- properties ---------------------------------------------------------------------------------

phases = st.sampled_from(["Pending", "Running", "Completed", "Failed", "Terminated", "Aborted"])
policies = st.sampled_from(["Allow", "Forbid", "Replace"])
schedules = st.sampled_from(["* * * * *", "*/7 * * * *", "0 * * * *", "@daily", "@every 45m"])


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[CronJob, list[Job], dt.datetime]:
    n = draw(st.integers(0, 8))
    jobs = [
        job(
            f"j{i}", draw(phases), created=CREATED + dt.timedelta(minutes=draw(st.integers(0, 999)))
        )
        for i in range(n)
    ]
    listed = tuple(job_reference(j) for j in jobs if draw(st.booleans()))
    last = draw(st.none() | st.integers(0, 5000).map(lambda m: CREATED + dt.timedelta(minutes=m)))
    cj = cron(
        draw(schedules),
        last=last,
        active=listed,
        concurrency_policy=draw(policies),
        suspend=draw(st.booleans()),
        starting_deadline_seconds=draw(st.none() | st.integers(0, 7200)),
        successful_jobs_history_limit=draw(st.integers(0, 4)),
        failed_jobs_history_limit=draw(st.integers(0, 4)),
    )
    now = CREATED + dt.timedelta(seconds=draw(st.integers(0, 10 * 86400)))
    return cj, jobs, now


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_plan_invariants(scenario: tuple[CronJob, list[Job], dt.datetime]) -> None:
    """At most one Job starts, for a time at or before now and after the last one; history
    limits hold once the expired Jobs are gone; the next look is in the future; active lists
    only unfinished Jobs that exist."""
    cj, jobs, now = scenario
    p = plan(cj, jobs, now)
    if p.create is not None:
        assert p.scheduled is not None
        assert p.scheduled <= now
        assert not cj.spec.suspend
        last = cj.status.last_schedule_time
        assert last is None or p.scheduled > parse_time(last)
        names = {j.metadata.name for j in jobs}
        assert p.create.metadata.name not in names
        if cj.spec.concurrency_policy == "Forbid":
            assert p.status.active == ()
    gone = {j.metadata.uid for j in p.expire}
    kept = [j for j in jobs if j.metadata.uid not in gone]
    assert sum(j.status.state.phase == "Completed" for j in kept) <= (
        cj.spec.successful_jobs_history_limit
    )
    assert sum(j.status.state.phase in ("Failed", "Terminated") for j in kept) <= (
        cj.spec.failed_jobs_history_limit
    )
    if p.requeue_after is not None:
        assert p.requeue_after > 0
    by_uid = {j.metadata.uid: j for j in jobs}
    for ref in p.status.active:
        assert by_uid[ref.uid].status.state.phase not in ("Completed", "Failed", "Terminated")
    assert len({r.uid for r in p.status.active}) == len(p.status.active)
    assert sum(n.reason == "TooManyMissedTimes" for n in p.notes) <= 1
    assert MANY_MISSED == 100
