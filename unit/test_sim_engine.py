"""The simulator's loop (simulator/engine.py and the parts it drives): binds start pods after
the bind delay, pods end at their run time, the job controller's policies restart, abort and
delay, TTLs delete, the scheduler's evictions and gangs act as on a cluster; and, over random
traces, no node ever holds more than it has and every job that fits completes."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caldera.api.resources import Resources
from caldera.api.volcano import JobStatus, PodGroupStatus
from controllers.job.pods import build_podgroup, priority_lookup
from simulator.baselines import Mode
from simulator.engine import Limits, Simulation, phase_kept
from simulator.results import JobResult, Report, RunResult, Series, to_json
from unit.sim_fixtures import conf, entry, job, run, scenario, task

ONE_NODE: dict[str, Any] = {"nodes": [{"name": "node", "resources": {"cpu": "4"}}]}
RESTART_ON_FAILURE = [{"event": "PodFailed", "action": "RestartJob"}]
RECLAIM = """\
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def test_a_bind_starts_the_pod_after_the_bind_delay_and_it_ends_at_its_run_time() -> None:
    """Arrival 0.5; the session at 1 admits the PodGroup and the controller creates the pods; the
    session at 2 binds them; they run 3 s later (bindDelay) and end 100 s after that; the Job
    is Running once minAvailable pods run and Completed when they are done."""
    cluster = {**ONE_NODE, "timing": {"bindDelay": 3}}
    result = run(scenario(entry(job("j", task("worker", 2)), 0.5, runTime=100), cluster=cluster))
    (record,) = result.jobs
    assert [(p.bound, p.started, p.ended, p.outcome) for p in record.pods] == [
        (2.0, 5.0, 105.0, "Succeeded")
    ] * 2
    assert (record.arrival, record.started, record.finished) == (0.5, 5.0, 105.0)
    assert record.phases == ["Pending", "Running", "Completed"]
    assert (record.wait, record.run, record.completion) == (4.5, 100.0, 104.5)


def test_restart_policy_runs_the_job_again_until_max_retry() -> None:
    """PodFailed -> RestartJob with maxRetry 2: the first run fails at 12 s, the Job restarts
    and its pod is created and placed again (attempt 2), which fails too: Failed, two
    retries."""
    failures = [
        {"task": "worker", "after": 10, "attempt": 1},
        {"task": "worker", "after": 10, "attempt": 2, "exitCode": 2},
    ]
    manifest = job("j", maxRetry=2, policies=RESTART_ON_FAILURE)
    (record,) = run(scenario(entry(manifest, runTime=100, failures=failures))).jobs
    assert record.phase == "Failed"
    assert record.restarts == 2
    assert record.phases.count("Restarting") == 2
    assert [(p.attempt, p.ended, p.exit_code) for p in record.pods] == [(1, 12.0, 1), (2, 24.0, 2)]


def test_exit_code_policy_aborts_and_kills_the_other_pods() -> None:
    """exitCode 3 -> AbortJob: the failing pod ends Failed, its sibling is deleted, the Job ends
    Aborted at once."""
    manifest = job("j", task("worker", 2), policies=[{"exitCode": 3, "action": "AbortJob"}])
    failures = [{"task": "worker", "index": 1, "after": 10, "exitCode": 3}]
    (record,) = run(scenario(entry(manifest, runTime=100, failures=failures))).jobs
    assert record.phase == "Aborted"
    assert record.finished == 12.0
    assert sorted((p.pod, p.outcome) for p in record.pods) == [
        ("j-worker-0", "Deleted"),
        ("j-worker-1", "Failed"),
    ]


def test_policy_timeout_delays_the_action_and_ttl_deletes_the_finished_job() -> None:
    """A policy's timeout delays its action (the restart comes 30 s after the failure); a
    finished Job is deleted ttlSecondsAfterFinished after it finished."""
    policies = [{"event": "PodFailed", "action": "RestartJob", "timeout": "30s"}]
    manifest = job("j", ttlSecondsAfterFinished=60, policies=policies)
    failures = [{"task": "worker", "after": 10}]
    (record,) = run(scenario(entry(manifest, runTime=100, failures=failures))).jobs
    first, second = record.pods
    assert first.ended == 12.0
    assert second.bound == 43.0  # restarted at 42, placed by the next session
    assert (record.phase, record.finished, record.deleted) == ("Completed", 144.0, 204.0)


def test_reclaim_evicts_and_the_controller_creates_the_pods_again() -> None:
    """Queue a's job holds the 4 cpu; queue b's job arrives: reclaim evicts two of a's pods (a
    and b deserve 2 each), the job controller creates them again, Pending; they run once b's
    job is done."""
    cluster = {
        **ONE_NODE,
        "queues": [{"name": "a"}, {"name": "b"}],
    }
    hog = entry(job("hog", task("worker", 4), minAvailable=1, queue="a"), runTime=1000)
    claim = entry(job("claim", task("worker", 2), queue="b"), 10, runTime=100)
    result = run(scenario(hog, claim, cluster=cluster), RECLAIM)
    hog_pods = result.job("hog").pods
    evicted = [p for p in hog_pods if p.outcome == "Evicted"]
    assert len(evicted) == 2
    assert result.evictions == 2
    again = [p for p in hog_pods if p.attempt == 2]
    assert {p.pod for p in again} == {p.pod for p in evicted}
    claim_done = result.job("claim").finished
    assert claim_done is not None
    assert all(p.bound >= claim_done for p in again)
    assert result.job("hog").phase == "Completed"


def test_termination_grace_keeps_an_evicted_pod_on_its_node() -> None:
    """With terminationGrace 20 s the evicted pods hold their node, and the claim waits for the
    grace to end before it runs."""
    cluster = {
        **ONE_NODE,
        "queues": [{"name": "a"}, {"name": "b"}],
        "timing": {"terminationGrace": 20},
    }
    hog = entry(job("hog", task("worker", 4), minAvailable=1, queue="a"), runTime=1000)
    claim = entry(job("claim", task("worker", 2), queue="b"), 10, runTime=100)
    result = run(scenario(hog, claim, cluster=cluster), RECLAIM)
    evicted = [p for p in result.job("hog").pods if p.outcome == "Evicted"]
    assert len(evicted) == 2
    claim_start = result.job("claim").started
    assert claim_start is not None
    assert all(p.ended is not None and claim_start >= p.ended for p in evicted)
    assert all(p.ended is not None and p.ended >= 30.0 for p in evicted)  # evicted at 10-11


def test_gang_progress_with_the_network_model_slows_split_pairs() -> None:
    """Two 1-cpu nodes: the ps and the worker must sit apart, every pair is split, so with
    penalty 0.5 the worker's 100 s of work take 150 s."""
    cluster = {"nodes": [{"name": "node", "count": 2, "resources": {"cpu": "1"}}]}
    manifest = job(
        "tf",
        task("ps"),
        task("worker", policies=[{"event": "TaskCompleted", "action": "CompleteJob"}]),
    )
    trace = entry(
        manifest,
        runTime={"worker": 100},
        progress="gang",
        network={"between": ["ps", "worker"], "penalty": 0.5},
    )
    record = run(scenario(trace, cluster=cluster)).job("tf")
    worker = next(p for p in record.pods if "worker" in p.pod)
    assert worker.started is not None
    assert worker.ended is not None
    assert worker.ended - worker.started == 150.0
    assert record.phase == "Completed"


def test_gang_progress_stands_still_while_the_gang_is_broken() -> None:
    """Pod by pod on room for one of the job's two pods: the placed pod runs but, with progress
    gang, never finishes (and the other never gets room); with progress pod it finishes on
    time and the other runs after it."""
    manifest = job("pair", task("worker", 2, cpu="3"))
    (stuck,) = run(
        scenario(entry(manifest, runTime=50, progress="gang")), mode=Mode.POD_BY_POD, until=1000
    ).jobs
    assert [(p.started, p.ended) for p in stuck.pods] == [(2.0, None)]
    (moving,) = run(scenario(entry(manifest, runTime=50)), mode=Mode.POD_BY_POD).jobs
    assert [(p.started, p.ended) for p in moving.pods] == [(2.0, 52.0), (53.0, 103.0)]


def _node_loads_ok(result: RunResult, capacity: dict[str, int]) -> bool:
    """Whether at every bind the node's bound, unfinished pods fit it."""
    runs = [(p, job) for job in result.jobs for p in job.pods]
    for pod, _ in runs:
        at = pod.bound
        held = sum(
            1000
            for other, _ in runs
            if other.node == pod.node
            and other.bound <= at
            and (other.ended is None or other.ended > at)
        )
        if held > capacity[pod.node]:
            return False
    return True


JOBS = st.lists(
    st.tuples(
        st.integers(0, 120),  # arrival
        st.integers(1, 4),  # replicas
        st.booleans(),  # a gang (minAvailable = replicas) or elastic (1)
        st.integers(5, 300),  # run time
    ),
    min_size=1,
    max_size=8,
)


def _entries(jobs: list[tuple[int, int, bool, int]]) -> list[dict[str, Any]]:
    """``JOBS``' draws as trace entries: one-cpu pods, gangs or elastic jobs."""
    return [
        entry(
            job(f"j{i}", task("worker", replicas), minAvailable=replicas if gang else 1),
            arrival,
            runTime=length,
        )
        for i, (arrival, replicas, gang, length) in enumerate(jobs)
    ]


@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(jobs=JOBS, nodes=st.integers(1, 3))
def test_random_traces_never_overfill_a_node_and_every_job_completes(
    jobs: list[tuple[int, int, bool, int]], nodes: int
) -> None:
    """Random one-cpu jobs on 4-cpu nodes: no node ever holds more pods than it has cpu under
    the scheduler and both baselines; with gangs placed whole (the scheduler, FIFO) every job
    completes, a gang in exactly its run time (pod by pod, gangs may deadlock); and a run is
    deterministic."""
    entries = _entries(jobs)
    scene = scenario(*entries, nodes=nodes)
    capacity = {f"node-{i}" if nodes > 1 else "node": 4000 for i in range(nodes)}
    for mode in (Mode.SCHEDULER, Mode.FIFO, Mode.POD_BY_POD):
        result = run(scene, mode=mode, until=100_000)
        assert _node_loads_ok(result, capacity)
        if mode is not Mode.POD_BY_POD:
            assert {j.phase for j in result.jobs} == {"Completed"}
            for j in result.jobs:
                _, _, gang, length = jobs[int(j.job.split("j")[-1])]
                assert j.run is not None
                # A gang's pods start together; an elastic job's may run in waves.
                assert j.run == length if gang else j.run >= length
    again = Report(cluster="c", trace="t", runs=[run(scene)])
    first = Report(cluster="c", trace="t", runs=[run(scene)])
    for report in (again, first):
        report.runs[0].wall_seconds = report.runs[0].scheduler_seconds = 0.0
    assert to_json(again) == to_json(first)


def test_utilisation_follows_what_pods_hold() -> None:
    """Two 1-cpu pods on a 4-cpu node for 100 s: half the cpu is held from the bind to the end;
    one sample per instant at which what pods hold changed (the two binds are one)."""
    result = run(scenario(entry(job("j", task("worker", 2)), runTime=100)))
    series = result.utilisation
    assert series.times == [1.0, 102.0]
    assert result.queues["default"].allocated.times == [1.0, 102.0]
    assert series.at(0.5, "cpu") == 0.0
    assert series.at(1.0, "cpu") == 0.5
    assert series.at(101.9, "cpu") == 0.5
    assert series.at(102.0, "cpu") == 0.0
    assert result.capacity["cpu"] == Resources.from_list({"cpu": "4"}).get("cpu") / 1000


def test_waiting_counts_jobs_arrived_and_not_yet_started() -> None:
    jobs = [
        JobResult(job="ns/a", queue="q", arrival=0.0, started=5.0, finished=9.0),
        JobResult(job="ns/b", queue="q", arrival=2.0, finished=3.0),  # ended without starting
        JobResult(job="ns/c", queue="q", arrival=4.0),  # never started
    ]
    result = RunResult(
        mode="m",
        label="m",
        jobs=jobs,
        utilisation=Series(),
        queues={},
        unschedulable={},
        capacity={},
    )
    assert result.waiting([0.0, 2.0, 3.0, 4.0, 5.0, 100.0]) == [1, 2, 1, 2, 1, 1]
    ran = run(scenario(entry(job("j", task("worker", 2)), runTime=100)))
    started = ran.job("j").started
    assert started is not None
    assert ran.waiting([0.0, started - 0.01, started]) == [1, 1, 0]


def test_desired_podgroup_is_built_again_only_when_what_it_reads_changes() -> None:
    """The simulated job controller keeps each Job's desired PodGroup while the Job's spec,
    labels and annotations are the same objects (a status write keeps them) and the
    PriorityClasses are the same; a changed spec gives the PodGroup ``build_podgroup``
    builds from it."""
    scene = scenario(entry(job("a", task(replicas=2), minAvailable=2)))
    sim = Simulation(scene, conf=conf(), limits=Limits(until=0.0))
    sim.run()
    controller, world = sim.controller, sim.world
    stored = world.jobs["default/a"]
    first = controller._desired_podgroup(stored)
    assert first == build_podgroup(stored, priority_lookup(world.priorities()))
    written = msgspec.structs.replace(stored, status=JobStatus(state=stored.status.state))
    written = msgspec.structs.replace(
        written, metadata=msgspec.structs.replace(stored.metadata, resource_version="99")
    )
    assert controller._desired_podgroup(written) is first
    scaled = msgspec.structs.replace(
        stored, spec=msgspec.structs.replace(stored.spec, min_available=1)
    )
    again = controller._desired_podgroup(scaled)
    assert again is not first
    assert again.spec.min_member == 1
    assert again == build_podgroup(scaled, priority_lookup(world.priorities()))


def _sessions_and_records(scene: Any, *, phase_writes_only: bool) -> tuple[int, bytes]:
    """A run's session count and job records; ``phase_writes_only``: every PodGroup status
    write calls for a session (the rule before ``phase_kept``)."""
    if phase_writes_only:
        with patch("simulator.engine.phase_kept", lambda before, after: False):
            result = run(scene, until=100_000)
    else:
        result = run(scene, until=100_000)
    return result.sessions, msgspec.json.encode(sorted(result.jobs, key=lambda j: j.job))


@settings(
    max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(jobs=JOBS, big=st.integers(0, 3))
def test_status_writes_that_keep_the_phase_call_for_no_session(
    jobs: list[tuple[int, int, bool, int]], big: int
) -> None:
    """A PodGroup write that keeps the phase (conditions, counts) wakes no session: the same job
    records as when every write does, in no more sessions. ``big`` gangs of 5 pods never fit
    a 4-cpu node and wait all along."""
    entries = _entries(jobs)
    entries += [entry(job(f"big{i}", task("worker", 5), minAvailable=5), i) for i in range(big)]
    scene = scenario(*entries)
    fewer, records = _sessions_and_records(scene, phase_writes_only=False)
    every, expected = _sessions_and_records(scene, phase_writes_only=True)
    assert records == expected
    assert fewer <= every


def test_a_waiting_gang_beside_a_running_job_skips_the_count_writes_echo() -> None:
    """A job runs while a gang that never fits waits: the session that writes the running
    job's pod counts (phase kept) is not followed by another one on the same cluster."""
    scene = scenario(
        entry(job("run", task("worker", 2)), 0.5, runTime=100),
        entry(job("big", task("worker", 5), minAvailable=5), 0.5),
    )
    fewer, records = _sessions_and_records(scene, phase_writes_only=False)
    every, expected = _sessions_and_records(scene, phase_writes_only=True)
    assert records == expected
    assert fewer < every


def test_phase_kept_compares_the_phase_alone() -> None:
    running = PodGroupStatus(phase="Running", running=1)
    assert phase_kept(running, PodGroupStatus(phase="Running", running=2, succeeded=1))
    assert not phase_kept(running, PodGroupStatus(phase="Completed", running=1))
