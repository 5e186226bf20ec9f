"""Small scenarios for the simulator's tests, built from the same documents a cluster file and a
trace hold (``simulator.spec`` parses them, no file is read)."""

from __future__ import annotations

from typing import Any

from scheduler.conf import DEFAULT_CONF, SchedulerConf, parse_conf
from scheduler.registry import REGISTRY
from simulator.baselines import Mode
from simulator.engine import Limits, Simulation
from simulator.results import RunResult
from simulator.spec import Scenario, parse_cluster, parse_trace


def conf(text: str = DEFAULT_CONF) -> SchedulerConf:
    return parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)


def task(
    name: str = "worker",
    replicas: int = 1,
    *,
    cpu: str = "1",
    annotations: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations or {}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        },
        **extra,
    }


def job(name: str, *tasks: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"tasks": list(tasks) or [task()], **spec}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": body,
    }


def entry(manifest: dict[str, Any], arrival: float = 0.0, **fields: Any) -> dict[str, Any]:
    return {"arrival": arrival, "job": manifest, **fields}


def scenario(
    *entries: dict[str, Any],
    nodes: int = 1,
    cpu: str = "4",
    cluster: dict[str, Any] | None = None,
) -> Scenario:
    document = cluster or {
        "nodes": [{"name": "node", "count": nodes, "resources": {"cpu": cpu, "memory": "16Gi"}}]
    }
    parsed = parse_cluster(document, source="cluster")
    jobs = parse_trace(
        {"jobs": list(entries)},
        source="trace",
        queues=parsed.queues,
        priority_classes=[pc.metadata.name for pc in parsed.priority_classes],
        read=lambda name: {},
    )
    return Scenario(cluster=parsed, jobs=jobs)


def run(
    scene: Scenario,
    text: str = DEFAULT_CONF,
    mode: Mode = Mode.SCHEDULER,
    until: float | None = None,
) -> RunResult:
    return Simulation(scene, conf=conf(text), mode=mode, limits=Limits(until=until)).run()
