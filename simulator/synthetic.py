"""A synthetic trace of a busy GPU cluster, seeded, for the benchmark and the report's smoke test:
the cluster file's and the trace's documents, as ``simulator.spec`` reads them.

The cluster: ``nodes`` nodes, four in five with 8 GPUs (64 cpu, 512Gi) and the rest cpu-only
(64 cpu, 256Gi); four queues of weight 4, 3, 2 and 1. The jobs arrive as a Poisson process, 20
per node per week (100,000 a week on 5,000 nodes), into the queues in proportion to their
weights, and are of three kinds:

- half are one-pod jobs: one GPU and 8 cpu, or (one in five) 8 cpu alone;
- two in five are gangs of 2 to 8 pods of 8 GPUs (a whole GPU node each; at most a quarter of
  the GPU nodes), minAvailable all;
- one in ten are elastic jobs of 16 to 32 one-GPU pods with minAvailable 4.

Run times are log-normal (median 20 minutes for one-pod jobs, an hour for the others), scaled
so that the GPUs the jobs ask for come to ``load`` of the cluster's over time. One gang in
twenty has a pod that fails in its first run (exit code 1), and gangs restart on PodFailed
(maxRetry 3). Every Job has ttlSecondsAfterFinished 300, as a busy cluster needs.
"""

from __future__ import annotations

import math
import random
from typing import Any

WEEK = 7 * 24 * 3600.0
JOBS_PER_NODE_WEEK = 20.0
LOAD = 0.7  # the share of the cluster's GPUs the jobs ask for, by default
QUEUES = (("research", 4), ("training", 3), ("inference", 2), ("adhoc", 1))
GPU_NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}
CPU_NODE = {"cpu": "64", "memory": "256Gi"}


def cluster_document(nodes: int) -> dict[str, Any]:
    gpu = max(1, round(nodes * 0.8))
    groups = [{"name": "gpu", "count": gpu, "resources": GPU_NODE}]
    if nodes > gpu:
        groups.append({"name": "cpu", "count": nodes - gpu, "resources": CPU_NODE})
    return {
        "nodes": groups,
        "queues": [{"name": name, "weight": weight} for name, weight in QUEUES],
    }


def _task(name: str, replicas: int, requests: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": name,
                        "image": "trainer",
                        "resources": {"requests": requests, "limits": requests},
                    }
                ],
            }
        },
        **extra,
    }


def _job(name: str, queue: str, min_available: int, task: dict[str, Any], **spec: Any) -> Any:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": min_available,
            "queue": queue,
            "ttlSecondsAfterFinished": 300,
            "tasks": [task],
            **spec,
        },
    }


def _kind(
    rng: random.Random, index: int, queue: str, gpu_nodes: int
) -> tuple[dict[str, Any], float, float]:
    """(manifest, GPUs it asks for, median run time); gangs span at most a quarter of the GPU
    nodes (at least 2), so that a small cluster's queues can each hold one."""
    roll = rng.random()
    name = f"job-{index:06d}"
    if roll < 0.5:
        gpu = rng.random() < 0.8
        requests = {"cpu": "8", "memory": "32Gi", **({"nvidia.com/gpu": "1"} if gpu else {})}
        return _job(name, queue, 1, _task("main", 1, requests)), float(gpu), 1200.0
    if roll < 0.9:
        pods = rng.randint(2, max(2, min(8, gpu_nodes // 4)))
        requests = {"cpu": "56", "memory": "400Gi", "nvidia.com/gpu": "8"}
        policies = [{"event": "PodFailed", "action": "RestartJob"}]
        manifest = _job(name, queue, pods, _task("worker", pods, requests), policies=policies)
        return manifest, 8.0 * pods, 3600.0
    pods = rng.randint(16, 32)
    requests = {"cpu": "6", "memory": "48Gi", "nvidia.com/gpu": "1"}
    return _job(name, queue, 4, _task("worker", pods, requests)), float(pods), 3600.0


def trace_document(jobs: int, nodes: int, *, seed: int = 1, load: float = LOAD) -> dict[str, Any]:
    """``jobs`` Jobs for a cluster of ``nodes`` (see the module docstring)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible trace, not a secret
    rate = JOBS_PER_NODE_WEEK * nodes / WEEK  # arrivals per second
    gpus = 8 * max(1, round(nodes * 0.8))
    sigma = 1.0
    drawn: list[tuple[float, dict[str, Any], float, float]] = []
    at = 0.0
    weights = [w for _, w in QUEUES]
    for index in range(jobs):
        at += rng.expovariate(rate)
        queue = rng.choices([q for q, _ in QUEUES], weights)[0]
        manifest, asked, median = _kind(rng, index, queue, gpus // 8)
        drawn.append((at, manifest, asked, median * rng.lognormvariate(0.0, sigma)))
    # Scale run times so that the GPUs asked for over time come to `load` of the cluster's.
    demand = sum(asked * length for _, _, asked, length in drawn)
    span = drawn[-1][0] if drawn else 1.0
    scale = load * gpus * span / demand if demand else 1.0
    entries = []
    for at, manifest, _, length in drawn:
        run_time = max(10.0, round(length * scale))
        entry: dict[str, Any] = {"arrival": round(at, 3), "runTime": run_time, "job": manifest}
        spec = manifest["spec"]
        if spec["minAvailable"] > 1 and "policies" in spec and rng.random() < 0.05:
            entry["failures"] = [{"task": "worker", "index": 0, "after": math.floor(run_time / 3)}]
        entries.append(entry)
    return {"jobs": entries}
