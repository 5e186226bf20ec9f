"""The baselines (simulator/baselines.py): pod by pod without gangs or queues, FIFO in one
queue; both in the same loop as the configured scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.main import main
from scheduler.conf import DEFAULT_CONF
from simulator.baselines import Mode, conf_for
from unit.sim_fixtures import conf, entry, job, run, scenario, task

FULL = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: binpack}]
"""


def _order_key(_task: object) -> tuple[float, int, int]:
    return (0.0, 0, 0)


def test_fifo_keeps_gangs_and_node_plugins_but_drops_queues_and_preemption() -> None:
    """FIFO is the configuration without priority, drf, proportion, preempt and reclaim."""
    fifo = conf_for(Mode.FIFO, conf(FULL), _order_key)
    assert fifo.actions == ("enqueue", "allocate", "backfill")
    names = [[option.name for option in tier] for tier in fifo.tiers]
    assert names == [["gang", "conformance"], ["predicates", "nodeorder", "binpack"]]
    assert conf_for(Mode.SCHEDULER, conf(FULL), _order_key) == conf(FULL)


def test_pod_by_pod_interleaves_jobs_that_arrive_together() -> None:
    """Three 2-pod gangs arrive together on room for three pods: pod by pod serves the first pod
    of each job (round-robin), so each job holds one pod and none can start; jobs one second
    apart are served job by job instead."""
    together = scenario(
        *(
            entry(job(f"g{i}", task("worker", 2, cpu="1")), runTime=60, progress="gang")
            for i in range(3)
        ),
        cpu="3",
    )
    result = run(together, mode=Mode.POD_BY_POD, until=600)
    assert sorted(len(j.pods) for j in result.jobs) == [1, 1, 1]
    assert all(j.started is None for j in result.jobs)
    apart = scenario(
        *(
            entry(job(f"g{i}", task("worker", 2, cpu="1")), float(i), runTime=60, progress="gang")
            for i in range(3)
        ),
        cpu="3",
    )
    result = run(apart, mode=Mode.POD_BY_POD, until=600)
    assert [j.phase for j in result.jobs] == ["Completed"] * 3


def test_pod_by_pod_serves_higher_priority_pods_first_and_spreads_them() -> None:
    """kube-scheduler's queue: higher priority first; least-allocated scoring spreads pods."""
    cluster = {
        "nodes": [{"name": "node", "count": 2, "resources": {"cpu": "2"}}],
        "priorityClasses": [{"name": "high", "value": 100}],
    }
    low = entry(job("low", task("worker", 4)), runTime=60)
    high = entry(job("high", task("worker", 2), priorityClassName="high"), runTime=60)
    result = run(scenario(low, high, cluster=cluster), mode=Mode.POD_BY_POD)
    high_pods = result.job("high").pods
    assert sorted(p.node for p in high_pods) == ["node-0", "node-1"]
    assert all(p.bound == 1.0 for p in high_pods)
    assert sorted(p.bound for p in result.job("low").pods)[:2] == [1.0, 1.0]


def test_the_configured_scheduler_and_fifo_differ_only_where_queues_matter() -> None:
    """Two queues of weight 3 and 1 on 8 cpu: the configured scheduler splits 6:2 by weight, FIFO
    (one queue) lets the first job take what it asks for; both place gangs whole."""
    cluster = {
        "nodes": [{"name": "node", "count": 2, "resources": {"cpu": "4"}}],
        "queues": [{"name": "heavy", "weight": 3}, {"name": "light", "weight": 1}],
    }
    heavy = entry(job("heavy", task("worker", 16), minAvailable=1, queue="heavy"), runTime=600)
    light = entry(job("light", task("worker", 16), minAvailable=1, queue="light"), runTime=600)
    scene = scenario(heavy, light, cluster=cluster)

    def running(mode: Mode) -> dict[str, int]:
        result = run(scene, DEFAULT_CONF, mode=mode, until=60)
        return {j.job: sum(1 for p in j.pods if p.ended is None) for j in result.jobs}

    assert running(Mode.SCHEDULER) == {"default/heavy": 6, "default/light": 2}
    assert running(Mode.FIFO) == {"default/heavy": 7, "default/light": 1}


def test_easy_reserves_for_the_head_and_backfills_what_ends_before() -> None:
    """EASY on one node of 4 cpu: a job holds 3 cpu until 102 s (bound at 1 s, running from
    2 s for 100 s); a 4-cpu gang waits for it and is reserved the node from 102 s; a 1-cpu job
    of 50 s backfills beside it, one of 500 s would delay it and waits for the gang to end
    (each bind is a session after the pods are made, each start a second after the bind)."""
    first = entry(job("first", task("worker", 1, cpu="3")), 0.0, runTime=100)
    gang = entry(job("gang", task("worker", 4), minAvailable=4), 5.0, runTime=60)
    short = entry(job("short", task("worker", 1)), 6.0, runTime=50)
    long = entry(job("long", task("worker", 1)), 7.0, runTime=500)
    result = run(scenario(first, gang, short, long), mode=Mode.EASY)
    started = {j.job.split("/")[1]: j.started for j in result.jobs}
    assert started == {"first": 2.0, "short": 8.0, "gang": 103.0, "long": 164.0}


def test_easy_needs_the_run_times() -> None:
    with pytest.raises(ValueError, match="run times"):
        conf_for(Mode.EASY, conf(FULL), _order_key)


def test_simulate_runs_easy_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``caldera simulate --baselines easy`` runs EASY beside the configured scheduler (it is
    not among the default baselines)."""
    cluster = {"nodes": [{"name": "node", "resources": {"cpu": "4", "memory": "16Gi"}}]}
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    trace = {"jobs": [entry(job("one", task("worker", 2)), runTime=60)]}
    (tmp_path / "trace.yaml").write_text(yaml.safe_dump(trace))
    args = ["simulate", str(tmp_path / "cluster.yaml"), str(tmp_path / "trace.yaml")]
    assert main([*args, "--baselines", "easy"]) == 0
    table = capsys.readouterr().out
    assert "EASY backfill" in table
    assert "FIFO" not in table
    assert main(args) == 0
    assert "EASY backfill" not in capsys.readouterr().out
