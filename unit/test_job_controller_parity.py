"""The simulator's job controller decides as the real one: the same steps (a Job arriving, its
PodGroup admitted, pods running, failing with exit codes, succeeding, evicted, Commands, time
passing, a controller restart) through ``controllers/job/controller.py`` and through
``simulator/controller.py``, each on its own world (unit/job_controller_worlds.py), give the
same status writes, pod creations, out-of-sync marks, deletions and PodGroup changes at the
same virtual times."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controllers.job.bounds import sync_blocker
from controllers.job.policy import policy_problems
from simulator.admission import AdmissionError, admit_job, scheduler_queues
from unit.job_controller_worlds import (
    Admit,
    Arrive,
    Evict,
    Fail,
    Issue,
    Restart,
    Run,
    Step,
    Succeed,
    Wait,
    both,
)


def job(
    name: str = "j",
    *,
    replicas: tuple[int, ...] = (2,),
    min_available: int | None = None,
    max_retry: int | None = None,
    min_success: int | None = None,
    policies: tuple[dict[str, Any], ...] = (),
    task_policies: tuple[dict[str, Any], ...] = (),
    task_min_available: int | None = None,
) -> dict[str, Any]:
    tasks = []
    for i, count in enumerate(replicas):
        task: dict[str, Any] = {
            "name": f"t{i}",
            "replicas": count,
            "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
        }
        if i == 0 and task_policies:
            task["policies"] = list(task_policies)
        if i == 0 and task_min_available is not None:
            task["minAvailable"] = task_min_available
        tasks.append(task)
    spec: dict[str, Any] = {"tasks": tasks, "policies": list(policies)}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    if min_success is not None:
        spec["minSuccess"] = min_success
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


def phases(log: list[tuple[Any, ...]]) -> list[str]:
    return [e[3]["state"]["phase"] for e in log if e[1] == "status"]


def same(steps: list[Step]) -> list[tuple[Any, ...]]:
    real, sim = both(steps)
    assert real == sim
    return real


START: list[Step] = [Admit(), Run("j-t0-0"), Run("j-t0-1")]


def test_pod_failures_restart_the_job_until_max_retry_then_it_fails() -> None:
    restart = {"event": "PodFailed", "action": "RestartJob"}
    steps: list[Step] = [Arrive(job(max_retry=2, policies=(restart,))), *START]
    steps += [Fail("j-t0-0", 1), Admit(), *START[1:], Fail("j-t0-1", 2), Admit()]
    log = same(steps)
    assert phases(log)[-1] == "Failed"
    assert "Restarting" in phases(log)


def test_an_exit_code_policy_aborts_and_a_resume_command_restarts() -> None:
    abort = {"exitCode": 3, "action": "AbortJob"}
    steps: list[Step] = [Arrive(job(policies=(abort,))), *START, Fail("j-t0-0", 3)]
    steps += [Issue("j", "ResumeJob"), Admit(), *START[1:]]
    log = same(steps)
    assert "Aborted" in phases(log)
    assert phases(log)[-1] == "Running"


def test_commands_restart_abort_terminate_and_complete() -> None:
    for action, end in (
        ("RestartJob", "Pending"),
        ("AbortJob", "Aborted"),
        ("TerminateJob", "Terminated"),
        ("CompleteJob", "Completed"),
    ):
        log = same([Arrive(job()), *START, Issue("j", action)])
        assert phases(log)[-1] == end, action


def test_a_command_of_an_unknown_action_only_goes() -> None:
    log = same([Arrive(job()), *START, Issue("j", "Dance")])
    assert phases(log)[-1] == "Running"


def test_a_job_finished_before_its_pods_were_seen_by_a_restarted_controller() -> None:
    steps: list[Step] = [Arrive(job(replicas=(1,))), Admit(), Run("j-t0-0"), Restart()]
    steps += [Succeed("j-t0-0"), Restart(), Wait(5)]
    log = same(steps)
    assert phases(log)[-1] == "Completed"


def test_min_success_and_a_task_min_available() -> None:
    spec = job(replicas=(2, 1), min_available=1, min_success=2, task_min_available=1)
    steps: list[Step] = [Arrive(spec), Admit(), Run("j-t0-0"), Run("j-t1-0")]
    steps += [Succeed("j-t1-0"), Succeed("j-t0-0")]
    log = same(steps)
    assert phases(log)[-1] == "Completed"


def test_delayed_actions_come_due_and_are_cancelled_alike() -> None:
    pending = {"event": "PodPending", "action": "RestartJob", "timeout": "30s"}
    failed = {"event": "PodFailed", "action": "AbortJob", "timeout": "1m"}
    steps: list[Step] = [Arrive(job(policies=(pending, failed))), Admit(), Wait(40)]
    steps += [Admit(), *START[1:], Fail("j-t0-0"), Run("j-t0-1"), Wait(90)]
    log = same(steps)
    assert "Restarting" in phases(log)
    assert "Aborted" in phases(log)


def test_a_task_policy_restarts_its_task_and_eviction_restarts_a_pod() -> None:
    task = ({"event": "PodEvicted", "action": "RestartTask"},)
    pod = {"event": "PodFailed", "action": "RestartPod"}
    steps: list[Step] = [Arrive(job(replicas=(2, 1), task_policies=task, policies=(pod,)))]
    steps += [Admit(), Run("j-t0-0"), Run("j-t0-1"), Run("j-t1-0"), Evict("j-t0-1")]
    steps += [Admit(), Run("j-t0-0"), Fail("j-t1-0"), Admit(), Run("j-t1-0")]
    log = same(steps)
    assert any(e[1] == "pod marked out of sync" for e in log)


def test_a_job_over_the_bounds_is_held_and_one_whose_pods_can_never_exist_is_terminated() -> None:
    """Jobs stored without the webhook: 129 tasks (over caldera.api.limits) hold the Job
    Pending, a pod template the API server refuses terminates it."""
    many = job("many", replicas=(1,) * 129)
    bad = job("bad")
    container = bad["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"memory": "-1"}}
    log = same([Arrive(many, webhook=False), Arrive(bad, webhook=False), Admit()])
    states = {e[2]: e[3]["state"] for e in log if e[1] == "status"}
    assert states["many"]["reason"] == "SpecOverLimits"
    assert states["bad"]["phase"] == "Terminated"
    assert states["bad"]["reason"] == "InvalidPodTemplate"
    assert not any(e[1] == "pod created" for e in log)


# ---- generated ---------------------------------------------------------------------------------

_ACTIONS = (
    "RestartJob",
    "AbortJob",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
    "RestartTask",
    "RestartPod",
)
_POLICY = st.fixed_dictionaries(
    {"action": st.sampled_from(_ACTIONS)},
    optional={"timeout": st.sampled_from(["10s", "45s"])},
).flatmap(
    lambda p: st.one_of(
        st.builds(
            lambda e: {**p, "event": e},
            st.sampled_from(["PodFailed", "PodEvicted", "TaskCompleted", "PodPending", "*"]),
        ),
        st.builds(lambda c: {**p, "exitCode": c}, st.integers(1, 3)),
    )
)


def _policy_key(policy: dict[str, Any]) -> object:
    return policy.get("event", policy.get("exitCode"))


_JOB = st.sampled_from([(1,), (2,), (3,), (2, 1)]).flatmap(
    lambda replicas: st.builds(
        job,
        replicas=st.just(replicas),
        max_retry=st.none() | st.integers(1, 3),
        min_success=st.none() | st.integers(1, sum(replicas)),
        policies=st.lists(_POLICY, max_size=2, unique_by=_policy_key).map(tuple),
        task_policies=st.lists(_POLICY, max_size=1).map(tuple),
    )
)
_POD = st.sampled_from(["j-t0-0", "j-t0-1", "j-t0-2", "j-t1-0"])
_STEP: st.SearchStrategy[Step] = st.one_of(
    st.just(Admit()),
    st.builds(Run, _POD),
    st.builds(Succeed, _POD),
    st.builds(Fail, _POD, st.integers(1, 3)),
    st.builds(Evict, _POD),
    st.builds(Issue, st.just("j"), st.sampled_from([*_ACTIONS, "Dance"])),
    st.builds(Wait, st.sampled_from([5.0, 30.0, 60.0])),
    st.just(Restart()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=_JOB, steps=st.lists(_STEP, min_size=1, max_size=25))
def test_generated_event_sequences_get_the_same_decisions(
    spec: dict[str, Any], steps: list[Step]
) -> None:
    try:
        admitted = admit_job(spec, scheduler_queues(), "generated")
    except AdmissionError:
        assume(False)  # the webhook refuses it: no controller sees it
    # What lets the simulator's engine skip these checks for a trace's Jobs (``admitted``).
    assert sync_blocker(admitted) is None
    assert policy_problems(admitted) == ""
    real, sim = both([Arrive(spec), *steps])
    assert real == sim
