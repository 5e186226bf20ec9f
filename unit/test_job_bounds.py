"""The job controller under hostile specs: a Job over the bounds is held (controllers.job.bounds),
a sync creates at most MAX_CREATES_PER_SYNC pods and computes the missing ones lazily
(controllers.job.sync), and every sync's memory and time stay bounded whatever the spec says."""

from __future__ import annotations

import datetime as dt
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caldera.api.core import ContainerStatus, Pod, PodStatus
from caldera.api.meta import ObjectMeta
from caldera.api.names import pod_index, pod_name, pod_name_prefix
from caldera.api.volcano import (
    TASK_SPEC_KEY,
    Action,
    DependsOn,
    Job,
    JobPhase,
    JobSpec,
    JobState,
    JobStatus,
    LifecyclePolicy,
    TaskSpec,
)
from controllers.job.bounds import hold_status, limits_problem, svc_problem
from controllers.job.plugins import build_plugins
from controllers.job.plugins.ssh import generate_key_pair
from controllers.job.pods import build_pod, build_podgroup, priority_lookup
from controllers.job.state import OVER_LIMITS, Step, apply_plan, plan
from controllers.job.status import PodSlot, count_pods
from controllers.job.sync import MAX_CREATES_PER_SYNC, plan_sync

NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)
TEMPLATE: dict[str, Any] = {
    "spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}
}


def job(
    *tasks: TaskSpec, name: str = "j", plugins: dict[str, tuple[str, ...]] | None = None
) -> Job:
    return Job(
        metadata=ObjectMeta(name=name, namespace="ns", uid="u1"),
        spec=JobSpec(tasks=tasks, min_available=1, plugins=plugins or {}),
    )


def pod(name: str, task: str, phase: str = "Running") -> Pod:
    return Pod(
        metadata=ObjectMeta(name=name, namespace="ns", annotations={TASK_SPEC_KEY: task}),
        status=PodStatus(phase=phase, container_statuses=(ContainerStatus(ready=True),)),
    )


# --- lazy creation, at most N per sync -----------------------------------------------------------


def test_a_sync_creates_at_most_the_limit_lowest_first_and_the_next_sync_goes_on() -> None:
    the_job = job(TaskSpec(name="w", replicas=1200, template=TEMPLATE))
    first = plan_sync(the_job, [], "Inqueue")
    assert len(first.create) == MAX_CREATES_PER_SYNC
    assert first.create[0] == PodSlot("w", 0, "j-w-0")
    assert first.more
    assert first.missing == 1200
    made = [pod(s.name, "w", "Pending") for s in first.create]
    second = plan_sync(the_job, made, "Inqueue")
    assert second.create[0].index == MAX_CREATES_PER_SYNC
    made += [pod(s.name, "w", "Pending") for s in second.create]
    third = plan_sync(the_job, made, "Inqueue")
    assert len(third.create) == 1200 - 2 * MAX_CREATES_PER_SYNC
    assert not third.more


def test_the_limit_is_per_sync_across_tasks() -> None:
    the_job = job(TaskSpec(name="a", replicas=400), TaskSpec(name="b", replicas=400))
    got = plan_sync(the_job, [], "Inqueue", create_limit=500)
    assert [s.task for s in got.create].count("b") == 100
    assert got.more


def _eager_reference(the_job: Job, pods: list[Pod]) -> tuple[set[str], set[str], int]:
    """What the eager planner did (every slot listed): names to create, to delete, missing."""
    create, delete, missing = set(), set(), 0
    for task in the_job.spec.tasks:
        slots = {pod_name(the_job.metadata.name, task.name, i) for i in range(task.replicas)}
        existing = {
            p.metadata.name: p for p in pods if p.metadata.annotations[TASK_SPEC_KEY] == task.name
        }
        delete |= {name for name in existing if name not in slots}
        gone = slots - set(existing)
        missing += len(gone)
        create |= gone
    return create, delete, missing


@given(
    replicas=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    names=st.lists(
        st.sampled_from(["0", "1", "01", "7", "29", "31", "x", "-1", "\uff11"]), max_size=12
    ),
)
def test_lazy_plan_equals_the_eager_one(replicas: list[int], names: list[str]) -> None:
    """The slots are computed from names (index < replicas, written without a leading zero),
    not listed: the same pods are created and deleted as when every slot was listed."""
    tasks = [TaskSpec(name=f"t{k}", replicas=r) for k, r in enumerate(replicas)]
    the_job = job(*tasks)
    pods = [pod(f"j-t{k % len(tasks)}-{n}", f"t{k % len(tasks)}") for k, n in enumerate(names)]
    got = plan_sync(the_job, pods, "Inqueue", create_limit=10_000)
    create, delete, missing = _eager_reference(the_job, pods)
    assert {s.name for s in got.create} == create
    assert {p.metadata.name for p in got.delete} == delete
    assert got.missing == missing


@given(
    replicas=st.integers(0, 40),
    name=st.one_of(
        st.from_regex(r"j-w-[0-9]{1,3}", fullmatch=True),
        st.text(alphabet="jw-0123456789+_ \uff11", max_size=8),
    ),
)
def test_parsed_slots_equal_the_listed_ones(replicas: int, name: str) -> None:
    """Tasks over the slot cache's size parse pod names: the same answer as the listed slots."""
    listed = {pod_name("j", "w", i): i for i in range(replicas)}
    assert pod_index(name, pod_name_prefix("j", "w"), replicas) == listed.get(name)


# --- held Jobs --------------------------------------------------------------------------------


def test_a_job_over_the_bounds_is_held_in_pending_with_the_fields_named() -> None:
    the_job = job(TaskSpec(name="w", replicas=2_000_000))
    problem = limits_problem(the_job)
    assert problem.startswith("spec.tasks[0].replicas: must be at most 10000 (got 2000000)")
    assert "the job is held" in problem
    status = hold_status(the_job.status, problem, NOW)
    assert status.state.phase == JobPhase.PENDING
    assert status.state.reason == OVER_LIMITS == "SpecOverLimits"
    assert [c.status for c in status.conditions] == [JobPhase.PENDING]
    # once held, a later sync changes nothing (no write, no Event)
    assert hold_status(status, problem, NOW + dt.timedelta(minutes=5)) is status


def test_a_running_job_scaled_over_the_bounds_keeps_its_phase_and_is_released_when_back() -> None:
    running = JobStatus(state=JobState(phase=JobPhase.RUNNING))
    held = hold_status(running, "spec.tasks[0].replicas: too many", NOW)
    assert held.state.phase == JobPhase.RUNNING
    assert held.state.reason == OVER_LIMITS
    back = Job(
        metadata=ObjectMeta(name="j", namespace="ns"),
        spec=JobSpec(tasks=(TaskSpec(name="w", replicas=2),), min_available=1),
        status=held,
    )
    assert limits_problem(back) == ""
    status = apply_plan(back, plan(back, Action.SYNC_JOB), count_pods([]), NOW)
    assert status.state.reason == ""
    assert status.state.message == ""


def test_job_messages_stay_short() -> None:
    tasks = [TaskSpec(name=f"t{i}", replicas=20_000) for i in range(500)]
    assert len(limits_problem(job(*tasks))) < 1200


def test_svc_problem() -> None:
    assert "DNS-1035" in svc_problem(job(TaskSpec(name="w"), name="1train", plugins={"svc": ()}))
    assert "DNS-1035" in svc_problem(job(TaskSpec(name="w"), name="a.b", plugins={"pytorch": ()}))
    assert svc_problem(job(TaskSpec(name="w"), name="1train")) == ""
    assert svc_problem(job(TaskSpec(name="w"), name="train", plugins={"svc": ()})) == ""


# --- hostile specs: every sync bounded in memory and time --------------------------------------

_KEY_PAIR = generate_key_pair()
MEMORY_BOUND = 8 * 1024 * 1024  # bytes of peak allocation in one sync's planning
TIME_BOUND = 2.0  # CPU seconds of this thread, under tracemalloc: 4 times the usual or more
# (the CPU time, not the wall time: a loaded CI machine must not fail a bound on the work)

_long = st.text(alphabet="abc-", min_size=1, max_size=3000)


@st.composite
def hostile_jobs(draw: st.DrawFn) -> tuple[Job, list[Pod]]:
    n_tasks = draw(st.sampled_from([1, 3, 129, 2000]))
    replicas = draw(st.sampled_from([0, 1, 9_999, 10_001, 2_000_000, 2**31 - 1]))
    n_policies = draw(st.sampled_from([0, 65, 5000]))
    policies = tuple(
        LifecyclePolicy(exit_code=c + 1, action="RestartJob") for c in range(n_policies)
    )
    long_name = draw(st.booleans())
    tasks = []
    for k in range(n_tasks):
        name = draw(_long) if long_name and k == 0 else f"t{k}"
        deps = DependsOn(name=tuple(f"t{d}" for d in range(min(k, 300)))) if k % 2 else None
        tasks.append(
            TaskSpec(
                name=name, replicas=replicas, template=TEMPLATE, policies=policies, depends_on=deps
            )
        )
    the_job = Job(
        metadata=ObjectMeta(name=draw(_long) if long_name else "j", namespace="ns", uid="u"),
        spec=JobSpec(
            tasks=tuple(tasks),
            min_available=draw(st.sampled_from([1, 2**31 - 1])),
            policies=policies,
        ),
    )
    n_pods = draw(st.sampled_from([0, 10, 3000]))
    t0 = tasks[0].name
    pods = [pod(f"{the_job.metadata.name}-{t0}-{i}", t0) for i in range(n_pods)]
    return the_job, pods


def _one_sync(the_job: Job, pods: list[Pod]) -> None:
    """The pure planning of one reconcile, as the controller runs it (controller._execute)."""
    problem = limits_problem(the_job)
    if problem:
        hold_status(the_job.status, problem, NOW)
        return
    p = plan(the_job, Action.SYNC_JOB)
    assert p.step is Step.SYNC
    build_podgroup(the_job, priority_lookup({}))
    sync = plan_sync(the_job, pods, "Inqueue")
    tasks = {t.name: t for t in the_job.spec.tasks}
    for slot in sync.create:
        build_pod(the_job, tasks[slot.task], slot.index)
    apply_plan(the_job, p, count_pods(pods, created=sync.create), NOW)


def _measure(call: Any) -> tuple[int, float]:
    tracemalloc.start()
    try:
        started = time.thread_time()
        call()
        elapsed = time.thread_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, elapsed


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(hostile_jobs())
def test_every_sync_of_a_hostile_job_is_bounded(case: tuple[Job, list[Pod]]) -> None:
    the_job, pods = case
    peak, elapsed = _measure(lambda: _one_sync(the_job, pods))
    assert peak < MEMORY_BOUND, f"one sync allocated {peak} bytes at its peak"
    assert elapsed < TIME_BOUND, f"one sync took {elapsed:.2f} s"
    # plan_sync alone, as if the hold were bypassed: bounded by the pods and the create limit
    peak, elapsed = _measure(lambda: plan_sync(the_job, pods, "Inqueue"))
    assert peak < MEMORY_BOUND, f"plan_sync allocated {peak} bytes at its peak"
    assert elapsed < TIME_BOUND, f"plan_sync took {elapsed:.2f} s"


@pytest.mark.parametrize(
    ("plugins", "roles"),
    [
        ({"tensorflow": (), "svc": ()}, ("ps", "worker")),
        ({"pytorch": (), "svc": ()}, ("master", "worker")),
        ({"mpi": (), "svc": (), "ssh": ()}, ("master", "worker")),
    ],
    ids=["tensorflow", "pytorch", "mpi"],
)
def test_a_sync_of_a_framework_job_at_the_bound_is_bounded(
    plugins: dict[str, tuple[str, ...]], roles: tuple[str, str]
) -> None:
    """The plugins' part of a sync at the bound (10,000 pods, 500 created): the objects once, the
    pods' edits per pod. TF_CONFIG lists every replica; it was built per pod (3.4 s a sync)."""
    the_job = Job(
        metadata=ObjectMeta(name="j", namespace="ns", uid="u"),
        spec=JobSpec(
            tasks=(
                TaskSpec(name=roles[0], replicas=1, template=TEMPLATE),
                TaskSpec(name=roles[1], replicas=9_999, template=TEMPLATE),
            ),
            min_available=1,
            plugins=plugins,
        ),
    )
    assert limits_problem(the_job) == ""
    found = build_plugins(the_job)
    if found.needs_ssh_key_pair:
        found = found.with_ssh_key_pair(_KEY_PAIR)

    def one_sync() -> None:
        found.resources(the_job)
        tasks = {t.name: t for t in the_job.spec.tasks}
        for slot in plan_sync(the_job, [], "Inqueue").create:
            pod = build_pod(the_job, tasks[slot.task], slot.index).pod
            found.on_pod_create(the_job, pod, slot.task, slot.index)

    peak, elapsed = _measure(one_sync)
    assert peak < MEMORY_BOUND, f"one sync allocated {peak} bytes at its peak"
    assert elapsed < TIME_BOUND, f"one sync took {elapsed:.2f} s"


def test_the_2m_replica_job_costs_little_even_unheld() -> None:
    """The issue's Job: before, one sync listed 2,000,000 slots (gigabytes, kept in a cache)."""
    the_job = job(TaskSpec(name="w", replicas=2_000_000, template=TEMPLATE))
    peak, elapsed = _measure(lambda: plan_sync(the_job, [], "Inqueue"))
    assert peak < 1024 * 1024
    assert elapsed < TIME_BOUND
