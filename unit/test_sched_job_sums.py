"""Sums kept across sessions by difference (``scheduler.api.job_sums``) equal sums made afresh,
resources listed as zero included, after any sequence of job changes.

The differential test in ``unit/test_sched_live_snapshot.py`` holds whole sessions on the live
snapshot to sessions that sum everything again; this one drives the sums directly, with the
changes a snapshot can make to its jobs: tasks coming, going and changing status, the phase
changing, a job derived into a new JobInfo under the same key, jobs going; with the live
snapshot's trail of changed jobs and without.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from scheduler.api.job_sums import JobSums, JobTrail, Parts, by_namespace, held
from scheduler.api.types import ChangeLog, ClusterInfo, JobInfo, TaskStatus
from unit.sched_fixtures import make_job, make_task

NAMESPACES = ("a", "b", "c")
# Requests with a resource listed as zero, so that listing matters.
REQUESTS: tuple[dict[str, str], ...] = (
    {"cpu": "1"},
    {"cpu": "2", "memory": "1Gi"},
    {"nvidia.com/gpu": "0"},
    {},
)
STATUSES = (TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)


def _figures(job: JobInfo) -> Parts:
    """Two figures, the second depending on the phase (as proportion's inqueue does)."""
    pending = Resources.sum(t.resreq for t in job.tasks_in(TaskStatus.PENDING))
    return (job.allocated, pending if job.phase == "Inqueue" else Resources())


def _fresh(jobs: dict[str, JobInfo], namespace: str) -> tuple[dict[str, int], ...]:
    members = [_figures(j) for j in jobs.values() if j.namespace == namespace]
    return tuple(dict(Resources.sum(parts[i] for parts in members).items()) for i in range(2))


change = st.tuples(
    st.sampled_from(("add", "task", "status", "remove_task", "phase", "replace", "drop")),
    st.integers(0, 7),  # which job
    st.integers(0, 3),  # which request, status or task
    st.booleans(),  # refresh after this change
)


@settings(max_examples=300, deadline=None)
@given(st.lists(change, max_size=40), st.booleans())
def test_kept_sums_equal_fresh_sums(
    changes: list[tuple[str, int, int, bool]], with_trail: bool
) -> None:
    """With a trail (as the live snapshot keeps: every job attached, every job added,
    derived again or gone appended) or without (every job compared)."""
    jobs: dict[str, JobInfo] = {}
    sums = JobSums(by_namespace, _figures, 2)
    trail = JobTrail() if with_trail else None
    log = ChangeLog()
    log.trail = trail.keys if trail is not None else None

    def put(key: str, job: JobInfo | None) -> None:
        if job is None:
            del jobs[key]
        else:
            job.changes = log
            jobs[key] = job
        if trail is not None:
            trail.keys.append(key)

    made = 0
    for kind, which, pick, refresh in changes:
        key = f"{NAMESPACES[which % 3]}/j{which}"
        job = jobs.get(key)
        made += 1
        if kind == "add" or (job is None and kind != "drop"):
            namespace = NAMESPACES[which % 3]
            tasks = [make_task(f"j{which}", made, REQUESTS[pick], namespace=namespace)]
            put(key, make_job(f"j{which}", tasks, namespace=namespace))
        elif job is None:
            continue
        elif kind == "task":
            job.add_task(make_task(f"j{which}", made, REQUESTS[pick], namespace=job.namespace))
        elif kind == "status" and job.tasks:
            job.set_status(list(job.tasks.values())[pick % len(job.tasks)], STATUSES[pick])
        elif kind == "remove_task" and job.tasks:
            job.remove_task(list(job.tasks.values())[pick % len(job.tasks)])
        elif kind == "phase":
            job.set_phase("Running" if job.phase == "Inqueue" else "Inqueue")
        elif kind == "replace":  # derived into a new JobInfo: its generation starts again
            tasks = list(job.tasks.values())
            put(key, make_job(job.name, tasks, namespace=job.namespace, phase=job.phase))
        elif kind == "drop":
            put(key, None)
        if refresh:
            sums.refresh(jobs, trail)
        if trail is not None and made % 7 == 0:  # what the sums have read goes
            trail.trim(sums.position if sums.position is not None else 0)
    sums.refresh(jobs, trail)
    for namespace in NAMESPACES:
        kept = tuple(dict(sums.total(namespace, i).items()) for i in range(2))
        assert kept == _fresh(jobs, namespace), namespace
    assert sorted(sums.groups()) == sorted({j.namespace for j in jobs.values()})


def test_only_changed_jobs_are_derived_again() -> None:
    derived: list[str] = []

    def counted(job: JobInfo) -> Parts:
        derived.append(job.key)
        return held(job)

    cluster = ClusterInfo()
    for i in range(3):
        job = make_job(f"j{i}", 1)
        cluster.jobs[job.key] = job
    cluster.sums("held", by_namespace, counted, 1)
    assert sorted(derived) == ["ns/j0", "ns/j1", "ns/j2"]
    derived.clear()
    job = cluster.jobs["ns/j1"]
    job.set_status(next(iter(job.tasks.values())), TaskStatus.RUNNING)
    kept = cluster.sums("held", by_namespace, counted, 1)
    assert derived == ["ns/j1"]
    assert kept.total("ns") == Resources.from_list({"cpu": "1", "memory": "1Gi"})
    derived.clear()
    del cluster.jobs["ns/j1"]
    assert cluster.sums("held", by_namespace, counted, 1).total("ns") == Resources()
    assert derived == []
