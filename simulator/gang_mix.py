"""A seeded trace of many small GPU jobs and a few large gangs, the shape under which large gangs
starve (issue 45's experiment, ``examples/experiments/large-gangs/``): the cluster file's and
the trace's documents, as ``simulator.spec`` reads them.

The shapes follow published traces of GPU clusters; the experiment's notes (docs/experiments.md,
"No large gang starves") cite the figures and say what is assumed beyond them:

- small jobs: one pod of 1 GPU (three in four) or 2 GPUs, run times log-normal (median
  ``SMALL_MEDIAN``, spread ``SMALL_SIGMA``), clipped to [``SMALL_MIN``, ``LONGEST``];
- large gangs: ``GANG_PODS`` pods of 8 GPUs each (a whole node per pod: 32 or 64 GPUs),
  minAvailable all, run times log-normal (median ``GANG_MEDIAN``, spread ``GANG_SIGMA``),
  clipped to [``GANG_MIN``, ``LONGEST``];
- arrivals: two Poisson processes over ``hours``, with rates set so that small jobs ask for
  ``small_load`` of the cluster's GPU-hours over the span and gangs for ``gang_load`` (the
  expected demand, so the seed's draw may differ a little).

Every run time is a whole number of seconds; no run time exceeds ``LONGEST``, so the goal's
bound (twice the longest running job) is known before the run. ``runtime_annotation``, when
given, writes each Job's run time as that annotation (a Go duration, ``"1234s"``), for a
scheduler that reads declared run times (the reservation plugin's
``scheduling.caldera.dev/expected-runtime``). The defaults of ``MixParams`` make the
experiment's trace.

Pure but for ``main``: ``python -m simulator.gang_mix TRACE.json [--hours H ...]`` writes the
trace (``dump``: JSON, which the simulator reads as such).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

GPU: Final = "nvidia.com/gpu"
NODE_GPUS: Final = 8
NODE: Final = {"cpu": "64", "memory": "512Gi", GPU: str(NODE_GPUS)}
SMALL_MEDIAN: Final = 30 * 60.0
SMALL_SIGMA: Final = 1.0
SMALL_MIN: Final = 60.0
GANG_MEDIAN: Final = 60 * 60.0
GANG_SIGMA: Final = 0.4
GANG_MIN: Final = 20 * 60.0
LONGEST: Final = 2 * 3600.0
GANG_PODS: Final = (4, 8)  # 32 or 64 GPUs
TWO_GPU_SHARE: Final = 0.25


@dataclass(frozen=True)
class MixParams:
    """What the trace is drawn from (see the module docstring)."""

    nodes: int = 16
    hours: float = 12.0
    small_load: float = 0.75
    gang_load: float = 0.25
    seed: int = 45
    runtime_annotation: str = ""

    def __post_init__(self) -> None:
        if self.nodes < max(GANG_PODS):
            raise ValueError(f"nodes: at least {max(GANG_PODS)} for the largest gang")
        if not 0 < self.hours <= 24 * 7:
            raise ValueError(f"hours: from 0 (excluded) to a week, got {self.hours}")
        for name in ("small_load", "gang_load"):
            value = getattr(self, name)
            if not 0 <= value <= 2:
                raise ValueError(f"{name}: from 0 to 2, got {value}")


def cluster_document(nodes: int) -> dict[str, Any]:
    """``nodes`` GPU nodes of 8 GPUs; one queue (the default)."""
    return {"nodes": [{"name": "gpu", "count": nodes, "resources": dict(NODE)}]}


def _clipped_lognormal(rng: random.Random, median: float, sigma: float, low: float) -> float:
    return float(min(LONGEST, max(low, round(median * rng.lognormvariate(0.0, sigma)))))


def _mean_clipped(median: float, sigma: float, low: float) -> float:
    """The mean of the clipped log-normal run time (numerically: the arrival rates need it)."""
    steps = 4000
    total = 0.0
    for i in range(steps):
        z = -6.0 + 12.0 * (i + 0.5) / steps
        weight = math.exp(-z * z / 2) / math.sqrt(2 * math.pi) * (12.0 / steps)
        total += weight * min(LONGEST, max(low, median * math.exp(sigma * z)))
    return total


def _job(name: str, pods: int, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    requests = {"cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi", GPU: str(gpus)}
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "minAvailable": pods,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": pods,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "trainer",
                                    "resources": {"requests": requests, "limits": {GPU: str(gpus)}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def _arrivals(rng: random.Random, rate: float, span: float) -> list[float]:
    """Poisson arrival times (per second ``rate``) in [0, span)."""
    times: list[float] = []
    if rate <= 0:
        return times
    at = rng.expovariate(rate)
    while at < span:
        times.append(round(at, 1))
        at += rng.expovariate(rate)
    return times


def trace_document(params: MixParams) -> dict[str, Any]:
    """The trace (see the module docstring): small jobs ``small-NNNN``, gangs ``gang-NN``."""
    small_rng = random.Random(params.seed)  # noqa: S311 - a reproducible trace, not a secret
    gang_rng = random.Random(params.seed + 1)  # noqa: S311 - the gangs' own stream
    span = params.hours * 3600.0
    gpu_seconds = params.nodes * NODE_GPUS * span
    small_gpus = 1 + TWO_GPU_SHARE
    small_mean = _mean_clipped(SMALL_MEDIAN, SMALL_SIGMA, SMALL_MIN)
    gang_gpus = NODE_GPUS * sum(GANG_PODS) / len(GANG_PODS)
    gang_mean = _mean_clipped(GANG_MEDIAN, GANG_SIGMA, GANG_MIN)
    small_rate = params.small_load * gpu_seconds / (small_gpus * small_mean) / span
    gang_rate = params.gang_load * gpu_seconds / (gang_gpus * gang_mean) / span
    entries: list[tuple[float, int, dict[str, Any]]] = []
    for i, at in enumerate(_arrivals(small_rng, small_rate, span)):
        gpus = 2 if small_rng.random() < TWO_GPU_SHARE else 1
        run = _clipped_lognormal(small_rng, SMALL_MEDIAN, SMALL_SIGMA, SMALL_MIN)
        entries.append((at, len(entries), _entry(f"small-{i:04d}", at, run, 1, gpus, params)))
    for i, at in enumerate(_arrivals(gang_rng, gang_rate, span)):
        pods = gang_rng.choice(GANG_PODS)
        run = _clipped_lognormal(gang_rng, GANG_MEDIAN, GANG_SIGMA, GANG_MIN)
        entries.append((at, len(entries), _entry(f"gang-{i:02d}", at, run, pods, 8, params)))
    entries.sort(key=lambda e: (e[0], e[1]))
    return {"jobs": [entry for _, _, entry in entries]}


def _entry(
    name: str, at: float, run: float, pods: int, gpus: int, params: MixParams
) -> dict[str, Any]:
    annotations = {params.runtime_annotation: f"{int(run)}s"} if params.runtime_annotation else {}
    return {"arrival": at, "runTime": int(run), "job": _job(name, pods, gpus, annotations)}


def dump(document: dict[str, Any]) -> str:
    """The trace as JSON, one entry per line (the simulator reads a ``.json`` file as JSON,
    much faster than YAML; a diff of two traces stays readable)."""
    lines = [json.dumps(entry, separators=(",", ":")) for entry in document["jobs"]]
    return '{"jobs": [\n' + ",\n".join(lines) + "\n]}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a seeded trace of small jobs and gangs.")
    parser.add_argument("out", type=Path, help="the trace file to write")
    parser.add_argument("--nodes", type=int, default=MixParams.nodes)
    parser.add_argument("--hours", type=float, default=MixParams.hours)
    parser.add_argument("--seed", type=int, default=MixParams.seed)
    parser.add_argument("--runtime-annotation", default="")
    args = parser.parse_args(argv)
    try:
        params = MixParams(
            nodes=args.nodes,
            hours=args.hours,
            seed=args.seed,
            runtime_annotation=args.runtime_annotation,
        )
    except ValueError as exc:
        print(f"gang_mix: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(dump(trace_document(params)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
