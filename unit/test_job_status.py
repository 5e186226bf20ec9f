"""Tests of controllers.job.status: pod counting, conditions, runningDuration, change detection
and sync planning with the PodGroup gate and dependsOn (killJob and syncJob in Volcano's
pkg/controllers/job/job_controller_actions.go)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.core import ContainerStatus, Pod, PodStatus
from caldera.api.meta import ObjectMeta
from caldera.api.volcano import (
    CONTROLLER_OUT_OF_SYNC_KEY,
    TASK_SPEC_KEY,
    DependsOn,
    Job,
    JobCondition,
    JobSpec,
    JobStatus,
    TaskSpec,
    TaskState,
)
from controllers.job.status import (
    PodCounts,
    PodSlot,
    append_condition,
    count_pods,
    running_duration,
    status_changed,
    with_counts,
)
from controllers.job.sync import dependencies_met, plan_sync, pods_may_be_created


def pod(
    name: str,
    phase: str = "Running",
    *,
    task: str | None = None,
    deleting: bool = False,
    out_of_sync: bool = False,
    ready: bool = True,
) -> Pod:
    task = task if task is not None else name.split("-")[1]
    ann = {TASK_SPEC_KEY: task}
    if out_of_sync:
        ann[CONTROLLER_OUT_OF_SYNC_KEY] = "true"
    return Pod(
        metadata=ObjectMeta(
            name=name,
            annotations=ann,
            deletion_timestamp="2024-05-01T11:00:00Z" if deleting else None,
        ),
        status=PodStatus(phase=phase, container_statuses=(ContainerStatus(ready=ready),)),
    )


# --- counting -----------------------------------------------------------------------------------


def test_count_pods_by_phase_and_task() -> None:
    """Pods count by phase overall and per task; terminating and deleted pods count only as
    terminating; created pods count as Pending; an empty or unknown phase counts as unknown."""
    pods = [
        pod("j-w-0", "Running"),
        pod("j-w-1", "Succeeded"),
        pod("j-w-2", "Failed"),
        pod("j-w-3", "Pending", deleting=True),
        pod("j-w-4", "Running"),
        pod("j-p-0", "Pending"),
        pod("j-p-1", ""),
        pod("j-p-2", "Weird"),
    ]
    got = count_pods(pods, deleted={"j-w-4"}, created=[PodSlot("p", 3, "j-p-3")])
    assert got == PodCounts(
        pending=2,
        running=1,
        succeeded=1,
        failed=1,
        terminating=2,
        unknown=2,
        task_status_count={
            "w": {"Running": 1, "Succeeded": 1, "Failed": 1},
            "p": {"Pending": 2, "Unknown": 2},
        },
    )
    assert got.task_phase("w", "Failed") == 1
    assert got.task_phase("nope", "Failed") == 0


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""]),
            st.booleans(),
            st.booleans(),
        ),
        max_size=20,
    ),
    st.integers(0, 5),
)
def test_count_pods_accounts_for_every_pod(
    spec: list[tuple[str, bool, bool]], created: int
) -> None:
    """Every pod (and every created one) is counted exactly once, and the per-task counts add up
    to the non-terminating pods."""
    pods = [pod(f"j-w-{i}", ph, deleting=d) for i, (ph, d, _) in enumerate(spec)]
    deleted = {f"j-w-{i}" for i, (_, _, x) in enumerate(spec) if x}
    c = count_pods(
        pods, deleted=deleted, created=[PodSlot("w", 100 + i, "x") for i in range(created)]
    )
    total = c.pending + c.running + c.succeeded + c.failed + c.terminating + c.unknown
    assert total == len(pods) + created
    per_task = sum(n for phases in c.task_status_count.values() for n in phases.values())
    assert per_task == total - c.terminating


def test_with_counts_keeps_the_rest() -> None:
    """with_counts replaces counters and taskStatusCount and keeps state, version, conditions."""
    old = JobStatus(version=4, retry_count=1, running=9, controlled_resources={"plugin-ssh": "ssh"})
    new = with_counts(old, PodCounts(running=1, task_status_count={"w": {"Running": 1}}))
    assert new.running == 1
    assert new.task_status_count == {"w": TaskState(phase={"Running": 1})}
    assert (new.version, new.retry_count, new.controlled_resources) == (4, 1, {"plugin-ssh": "ssh"})


# --- conditions, durations, changes -------------------------------------------------------------

C = JobCondition


@pytest.mark.parametrize(
    ("before", "phase", "after"),
    [
        pytest.param((), "Pending", (C(status="Pending", last_transition_time="t9"),),
                     id="first"),
        pytest.param((C(status="Pending", last_transition_time="t1"),), "Running",
                     (C(status="Pending", last_transition_time="t1"),
                      C(status="Running", last_transition_time="t9")), id="append"),
        pytest.param((C(status="Pending", last_transition_time="t1"),
                      C(status="Running", last_transition_time="t2")), "Pending",
                     (C(status="Running", last_transition_time="t2"),
                      C(status="Pending", last_transition_time="t9")), id="re-enter-moves-last"),
    ],
)  # fmt: skip
def test_append_condition(
    before: tuple[JobCondition, ...], phase: str, after: tuple[JobCondition, ...]
) -> None:
    """At most one condition per phase; re-entering a phase moves its condition to the end."""
    assert append_condition(before, phase, "t9") == after


@pytest.mark.parametrize(
    ("created", "last", "duration"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T11:30:05Z", "1h30m5s"),
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z", "0s"),
        ("2024-05-01T10:00:00Z", "2024-05-01T09:00:00Z", "0s"),
        (None, "2024-05-01T10:00:00Z", None),
        ("2024-05-01T10:00:00Z", None, None),
        ("garbage", "2024-05-01T10:00:00Z", None),
    ],
)
def test_running_duration(created: str | None, last: str | None, duration: str | None) -> None:
    """runningDuration = lastTransitionTime - creationTimestamp as a Go duration; None without
    both times; never negative."""
    assert running_duration(created, last) == duration


def test_status_changed() -> None:
    """Only a status that differs in some field needs a write."""
    a = JobStatus(running=1, task_status_count={"w": TaskState(phase={"Running": 1})})
    same = JobStatus(running=1, task_status_count={"w": TaskState(phase={"Running": 1})})
    assert not status_changed(a, same)
    assert status_changed(a, JobStatus(running=2))


# --- sync planning ------------------------------------------------------------------------------


def job(*tasks: TaskSpec) -> Job:
    return Job(metadata=ObjectMeta(name="j", namespace="ns"), spec=JobSpec(tasks=tasks))


W2 = TaskSpec(name="w", replicas=2)


def slots(*names: str) -> tuple[PodSlot, ...]:
    return tuple(PodSlot(n.split("-")[1], int(n.split("-")[2]), n) for n in names)


@pytest.mark.parametrize(
    ("phase", "allowed"),
    [(None, False), ("", False), ("Pending", False), ("Inqueue", True), ("Running", True),
     ("Unknown", True), ("Completed", True)],
)  # fmt: skip
def test_podgroup_gate(phase: str | None, allowed: bool) -> None:
    """Pods are created only when the PodGroup phase is non-empty and not Pending."""
    assert pods_may_be_created(phase) is allowed


SYNC_CASES: list[Any] = [
    pytest.param(job(W2), [], "Inqueue", {"create": slots("j-w-0", "j-w-1")}, id="create-all"),
    pytest.param(job(W2), [pod("j-w-0")], "Running", {"create": slots("j-w-1")},
                 id="create-missing-only"),
    pytest.param(job(W2), [pod("j-w-0", "Failed"), pod("j-w-1", "Succeeded")], "Running", {},
                 id="finished-pods-not-recreated"),
    pytest.param(job(W2), [], "Pending", {"create": (), "gated": True}, id="gate-pending"),
    pytest.param(job(W2), [], None, {"create": (), "gated": True}, id="gate-no-podgroup"),
    pytest.param(job(W2), [pod("j-w-0"), pod("j-w-1")], None, {}, id="gate-nothing-missing"),
    pytest.param(job(TaskSpec(name="w", replicas=1)), [pod("j-w-0"), pod("j-w-1"),
                 pod("j-w-2", deleting=True)], "Running",
                 {"delete": ("j-w-1",), "terminating": ("j-w-2",)}, id="scale-down"),
    pytest.param(job(W2), [pod("j-w-0", out_of_sync=True), pod("j-w-1")], "Running",
                 {"delete": ("j-w-0",)}, id="out-of-sync-deleted"),
    pytest.param(job(W2), [pod("j-w-0", deleting=True, out_of_sync=True), pod("j-w-1")],
                 "Running", {"terminating": ("j-w-0",)}, id="terminating-not-deleted-twice"),
    pytest.param(job(W2), [pod("j-w-0"), pod("j-w-1"), pod("j-gone-0")], "Running", {},
                 id="pods-of-unknown-task-left-alone"),
    pytest.param(job(W2), [pod("j-w-0"), pod("j-w-1"), pod("stray", task="w")], "Running",
                 {"delete": ("stray",)}, id="pod-outside-slots-deleted"),
    pytest.param(job(TaskSpec(name="w", replicas=0)), [pod("j-w-0")], "Running",
                 {"delete": ("j-w-0",)}, id="scale-to-zero"),
]  # fmt: skip


@pytest.mark.parametrize(("the_job", "pods", "pg_phase", "want"), SYNC_CASES)
def test_plan_sync(
    the_job: Job, pods: list[Pod], pg_phase: str | None, want: dict[str, Any]
) -> None:
    """syncJob step 4: create missing `<job>-<task>-<i>` pods behind the PodGroup gate; delete
    pods with index >= replicas, names outside the task's slots and out-of-sync pods; report
    terminating pods instead of deleting them again; never recreate finished pods."""
    got = plan_sync(the_job, pods, pg_phase)
    assert got.create == want.get("create", ())
    assert tuple(p.metadata.name for p in got.delete) == want.get("delete", ())
    assert got.terminating == want.get("terminating", ())
    assert got.gated is want.get("gated", False)


def dep_job(
    iteration: str, *, names: tuple[str, ...] = ("a", "b"), a_min: int | None = None
) -> Job:
    return job(
        TaskSpec(name="a", replicas=2, min_available=a_min),
        TaskSpec(name="b", replicas=1),
        TaskSpec(name="c", replicas=1, depends_on=DependsOn(name=names, iteration=iteration)),
    )


A_READY = [pod("j-a-0"), pod("j-a-1", "Succeeded")]
B_READY = [pod("j-b-0")]

DEPENDS: list[Any] = [
    pytest.param(dep_job("all"), [*A_READY, *B_READY], True, id="all-ready"),
    pytest.param(dep_job("all"), A_READY, False, id="all-one-missing"),
    pytest.param(dep_job(""), A_READY, False, id="empty-iteration-means-all"),
    pytest.param(dep_job("any"), A_READY, True, id="any-one-ready"),
    pytest.param(dep_job("any"), [pod("j-a-0")], False, id="any-none-ready"),
    pytest.param(dep_job("all"), [pod("j-a-0", ready=False), pod("j-a-1"), *B_READY], False,
                 id="running-but-not-ready"),
    pytest.param(dep_job("all", a_min=1), [pod("j-a-0"), *B_READY], True,
                 id="dependency-min-available"),
    pytest.param(dep_job("all"), [pod("j-a-0", "Pending"), pod("j-a-1"), *B_READY], False,
                 id="pending-not-ready"),
    pytest.param(dep_job("all"), [pod("j-a-0", "Failed"), pod("j-a-1"), *B_READY], False,
                 id="failed-not-ready"),
    pytest.param(dep_job("any", names=("ghost",)), [*A_READY, *B_READY], False,
                 id="unknown-dependency-never-ready"),
    pytest.param(dep_job("all", names=()), [], True, id="empty-depends-on"),
]  # fmt: skip


@pytest.mark.parametrize(("the_job", "pods", "met"), DEPENDS)
def test_depends_on(the_job: Job, pods: list[Pod], met: bool) -> None:
    """A dependency is ready when its Succeeded pods plus its Running pods with every container
    Ready reach its minAvailable; iteration any needs one ready dependency, otherwise all."""
    by_name = {p.metadata.name: p for p in pods}
    assert dependencies_met(the_job, the_job.spec.tasks[2], by_name) is met
    plan = plan_sync(the_job, pods, "Inqueue")
    assert (PodSlot("c", 0, "j-c-0") in plan.create) is met
    assert ("c" in plan.waiting) is not met
    assert plan.missing == 4 - len(by_name)  # j-c-0 among them: the pods are all in slots
