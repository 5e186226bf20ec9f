"""The simulator's input formats (simulator/spec.py, simulator/admission.py): what a cluster
file and a trace turn into, and the errors that name the file, the entry and the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from caldera.api.resources import Resources
from simulator.spec import EXIT_CODE_KEY, RUN_FOR_KEY, Progress, SpecError, parse_cluster, seconds
from unit.sim_fixtures import entry, job, scenario, task

CLUSTER: dict[str, Any] = {
    "nodes": [
        {
            "name": "gpu",
            "count": 2,
            "resources": {"cpu": "32", "nvidia.com/gpu": 8},
            "labels": {"zone": "a"},
            "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
        },
        {"name": "login", "resources": {"cpu": "4", "memory": "8Gi"}},
    ],
    "queues": [
        {"name": "research", "weight": 3, "capability": {"cpu": "40"}, "guarantee": {"cpu": "4"}},
        {"metadata": {"name": "prod"}, "spec": {"weight": 2, "reclaimable": False}},
    ],
    "priorityClasses": [{"name": "high", "value": 1000, "annotations": {"a": "b"}}],
    "namespaceWeights": {"team": 3},
    "timing": {"bindDelay": "2s", "terminationGrace": 30, "schedulePeriod": "500ms"},
}


def test_cluster_file_becomes_nodes_queues_classes_and_timing() -> None:
    """Node groups expand to named nodes (with hostname labels, taints and a pod count), queues
    in either form are admitted (defaults, parent root) beside root and default, durations
    take numbers or Go durations."""
    cluster = parse_cluster(CLUSTER, source="c.yaml")
    names = [n.metadata.name for n in cluster.nodes]
    assert names == ["gpu-0", "gpu-1", "login"]
    gpu = cluster.nodes[0]
    assert gpu.metadata.labels == {"zone": "a", "kubernetes.io/hostname": "gpu-0"}
    assert gpu.spec.taints[0].key == "gpu"
    assert Resources.from_list(gpu.status.allocatable).get("pods") == 110_000
    queues = {q.metadata.name: q for q in cluster.queues}
    assert set(queues) == {"root", "default", "research", "prod"}
    assert queues["research"].spec.weight == 3
    assert queues["research"].spec.reclaimable is True  # the webhook's default
    assert queues["research"].spec.parent == "root"  # the queue controller's
    assert queues["research"].spec.guarantee.resource == {"cpu": "4"}
    assert queues["prod"].spec.reclaimable is False
    assert cluster.priority_classes[0].metadata.annotations == {"a": "b"}
    assert cluster.namespace_weights == {"team": 3}
    assert (cluster.timing.bind_delay, cluster.timing.termination_grace) == (2.0, 30.0)
    assert cluster.timing.schedule_period == 0.5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nodes": []}, "c.yaml.nodes: a cluster needs at least one node group"),
        ({"node": []}, "unknown field `node`"),
        ({"nodes": [{"name": "n", "resources": {"cpu": "lots"}}]}, "c.yaml.nodes[0].resources"),
        ({"nodes": [{"name": "n", "count": 0, "resources": {}}]}, "c.yaml.nodes[0].count"),
        ({"timing": {"bindDelay": "soon"}}, "c.yaml.timing.bindDelay"),
        ({"timing": {"bindDelay": -1}}, "c.yaml.timing.bindDelay: must be a duration of 0"),
        ({"queues": [{"name": "q", "weight": "heavy"}]}, "c.yaml.queues[0]"),
        ({"queues": [{"name": "q"}, {"name": "q"}]}, "queue 'q' is defined twice"),
        ({"queues": [{"name": "q", "parent": "missing"}]}, "queue 'q' is refused"),
        ({"priorityClasses": [{"value": 3}]}, "c.yaml.priorityClasses[0].name"),
        ({"namespaceWeights": {"a": 0}}, "c.yaml.namespaceWeights.a: must be at least 1"),
    ],
)
def test_bad_cluster_files_are_refused_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    """Every refusal says which file, entry and field to fix."""
    base: dict[str, Any] = {"nodes": [{"name": "n", "resources": {"cpu": "1"}}]}
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_cluster({**base, **change}, source="c.yaml")


def test_trace_jobs_are_defaulted_as_the_webhook_defaults_them() -> None:
    """A manifest as a user writes it: queue, minAvailable, maxRetry, schedulerName and the task
    minAvailable come from the mutating webhook's defaults; the namespace from the trace."""
    scene = scenario(entry(job("plain", task("worker", 3)), arrival=5, runTime=60))
    sub = scene.jobs[0]
    assert sub.at == 5.0
    assert sub.key == "default/plain"
    spec = sub.job.spec
    assert (spec.queue, spec.min_available, spec.max_retry, spec.scheduler_name) == (
        "default",
        3,
        3,
        "volcano",
    )
    assert spec.tasks[0].min_available == 3
    assert sub.workload.run_times == {"worker": 60.0}
    assert sub.workload.progress is Progress.POD


def test_run_times_per_task_from_the_trace_or_kwok_annotations() -> None:
    """runTime per task; a task without one takes kwok's run-for and exit-code annotations; a
    task with neither runs until its Job ends it."""
    kwok = {RUN_FOR_KEY: "90s", EXIT_CODE_KEY: "3"}
    manifest = job("mixed", task("ps"), task("worker", 2), task("eval", annotations=kwok))
    scene = scenario(entry(manifest, runTime={"worker": "10m"}))
    workload = scene.jobs[0].workload
    assert workload.run_times == {"ps": math.inf, "worker": 600.0, "eval": 90.0}
    assert workload.exit_codes == {"eval": 3}


def test_copies_arrive_every_interval_with_numbered_names() -> None:
    """``copies`` makes numbered Jobs, ``every`` apart; the trace comes out in arrival order."""
    scene = scenario(
        entry(job("late"), arrival=100),
        entry(job("tf"), arrival=10, copies=3, every="30s"),
    )
    assert [(s.job.metadata.name, s.at) for s in scene.jobs] == [
        ("tf-0", 10.0),
        ("tf-1", 40.0),
        ("tf-2", 70.0),
        ("late", 100.0),
    ]


@pytest.mark.parametrize(
    ("trace_entry", "message"),
    [
        (entry(job("j", task("w", 2), minAvailable=3)), "job 'j' is refused: spec.minAvailable"),
        (entry(job("j", queue="nowhere")), "job 'j' is refused: .*nowhere"),
        (entry(job("j", priorityClassName="gold")), "no PriorityClass 'gold'"),
        (entry(job("j"), runTime={"driver": 5}), r"trace.jobs\[0\].runTime.driver: the job"),
        (entry(job("j"), runTime="often"), r"trace.jobs\[0\].runTime"),
        (entry(job("j"), network={"between": ["ps", "worker"], "penalty": 1}), "no task 'ps'"),
        (
            entry(
                job("j", task("ps"), task("worker")),
                network={"between": ["ps", "worker"], "penalty": 1},
            ),
            "needs progress: gang",
        ),
        (entry(job("j"), failures=[{"task": "worker", "after": 1, "attempt": 0}]), "attempt"),
        (
            entry(job("j"), progress="sometimes"),
            r"Invalid enum value .sometimes. - at .\$.jobs\[0\].progress",
        ),
        ({"arrival": 0}, "give either job"),
        (entry(job("j"), colour="red"), "unknown field `colour`"),
        (entry({"kind": "Deployment", "metadata": {"name": "d"}}), "a trace holds Jobs"),
    ],
)
def test_bad_trace_entries_are_refused_naming_the_field(
    trace_entry: dict[str, Any], message: str
) -> None:
    """A trace the cluster would refuse, or the simulator cannot run, is refused with the place
    and the webhook's or the simulator's reason."""
    with pytest.raises(SpecError, match=message):
        scenario(trace_entry)


def test_duplicate_job_names_are_refused() -> None:
    with pytest.raises(SpecError, match=r"job default/j is also trace\.jobs"):
        scenario(entry(job("j")), entry(job("j"), arrival=3))


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 0.0), (1.5, 1.5), ("90s", 90.0), ("1h30m", 5400.0)]
)
def test_seconds_take_numbers_and_go_durations(value: float | str, expected: float) -> None:
    assert seconds(value, "x") == expected
