"""The chaos run's jobs: a seeded mix of Volcano Job shapes, each with the final state its
policies and its pods' exit codes dictate.

The expected outcome of a job is derived here from what the test chose (the exit codes kwok gives
its pods, its policies, the Commands it is sent), never read back from the controller: a job whose
pods all exit 0 completes; one whose pods exit 1 under ``PodFailed: RestartJob`` fails once its
retries are spent; and so on (Volcano's rules, docs/controllers.md).
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import Any, Final

from e2e.kwok_tasks import EXIT_CODE, RUN_FOR, task

__all__ = [
    "EXIT_CODE",
    "GONE",
    "RUN_FOR",
    "JobPlan",
    "Shape",
    "make_workload",
]

GONE: Final = "(deleted)"  # the expected "phase" of a job its TTL removes


class Shape(enum.StrEnum):
    """A kind of job in the mix; the value names it in reports."""

    TENSORFLOW = "tensorflow"  # ps + workers, svc and env plugins; all exit 0
    MPI = "mpi"  # launcher + sshd workers (mpi plugin: ssh, svc); the launcher's exit completes it
    PYTORCH = "pytorch"  # master + workers, pytorch plugin; all exit 0
    VOLUMES = "volumes"  # a job-level PVC and per-pod PVC templates; all exit 0
    RETRY_FAIL = "retry-fail"  # pods exit 1 under PodFailed: RestartJob until maxRetry
    ABORT = "abort"  # a pod exits 3 under exitCode 3: AbortJob
    SUSPEND = "suspend"  # suspended (AbortJob Command) while running, then resumed
    TTL = "ttl"  # completes, then its TTL deletes it
    SERVICE = "service"  # pods never exit: still Running at the end


# Relative frequency of each shape in the mix (the long-running SERVICE kept rare so it does not
# fill the cluster).
WEIGHTS: Final = {
    Shape.TENSORFLOW: 16,
    Shape.MPI: 14,
    Shape.PYTORCH: 14,
    Shape.VOLUMES: 10,
    Shape.RETRY_FAIL: 10,
    Shape.ABORT: 8,
    Shape.SUSPEND: 10,
    Shape.TTL: 14,
    Shape.SERVICE: 4,
}

EXPECTED: Final = {
    Shape.TENSORFLOW: "Completed",
    Shape.MPI: "Completed",
    Shape.PYTORCH: "Completed",
    Shape.VOLUMES: "Completed",
    Shape.RETRY_FAIL: "Failed",
    Shape.ABORT: "Aborted",
    Shape.SUSPEND: "Completed",
    Shape.TTL: GONE,
    Shape.SERVICE: "Running",
}


@dataclass(frozen=True)
class JobPlan:
    """One job of the run: its manifest, what it must end as, and (SUSPEND) when to suspend it
    after it runs and how long to leave it suspended."""

    name: str
    shape: Shape
    manifest: dict[str, Any]
    expected: str
    min_available: int
    replicas: dict[str, int]
    suspend_after: float = 0.0
    suspended_for: float = 0.0


def _task(
    name: str,
    replicas: int,
    *,
    cpu: str,
    run_for: str | None,
    exit_code: int | None,
    **extra: Any,
) -> dict[str, Any]:
    return task(
        name, replicas, run_for=run_for, exit_code=exit_code, cpu=cpu, memory="128Mi", **extra
    )


def _claim(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def _spec(shape: Shape, rng: random.Random) -> dict[str, Any]:
    """The job spec of ``shape``: tasks, plugins, policies; run times drawn from ``rng``."""
    run = f"{rng.randint(4, 15)}s"
    cpu = rng.choice(("250m", "500m", "1"))
    workers = rng.randint(1, 3)
    if shape is Shape.TENSORFLOW:
        return {
            "plugins": {"svc": [], "env": []},
            "tasks": [
                _task("ps", 1, cpu=cpu, run_for=run, exit_code=0),
                _task("worker", workers, cpu=cpu, run_for=run, exit_code=0),
            ],
        }
    if shape is Shape.MPI:
        completes = [{"event": "TaskCompleted", "action": "CompleteJob"}]
        return {
            "plugins": {"mpi": ["--master=launcher", "--worker=worker", "--port=22"]},
            "tasks": [
                _task("launcher", 1, cpu=cpu, run_for=run, exit_code=0, policies=completes),
                _task("worker", workers, cpu=cpu, run_for=None, exit_code=None),
            ],
        }
    if shape is Shape.PYTORCH:
        return {
            "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"]},
            "tasks": [
                _task("master", 1, cpu=cpu, run_for=run, exit_code=0),
                _task("worker", workers, cpu=cpu, run_for=run, exit_code=0),
            ],
        }
    if shape is Shape.VOLUMES:
        return {
            "volumes": [{"mountPath": "/data", "volumeClaim": _claim("shared")["spec"]}],
            "tasks": [
                _task(
                    "worker",
                    workers + 1,
                    cpu=cpu,
                    run_for=run,
                    exit_code=0,
                    volumeClaimTemplates=[_claim("scratch")],
                )
            ],
        }
    if shape is Shape.RETRY_FAIL:
        return {
            "maxRetry": 2,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [_task("worker", workers, cpu=cpu, run_for="2s", exit_code=1)],
        }
    if shape is Shape.ABORT:
        return {
            "tasks": [
                _task(
                    "worker",
                    workers,
                    cpu=cpu,
                    run_for="3s",
                    exit_code=3,
                    policies=[{"exitCode": 3, "action": "AbortJob"}],
                )
            ],
        }
    if shape is Shape.SUSPEND:
        return {"tasks": [_task("worker", workers, cpu=cpu, run_for="20s", exit_code=0)]}
    if shape is Shape.TTL:
        return {
            "ttlSecondsAfterFinished": 3,
            "tasks": [_task("worker", workers, cpu=cpu, run_for=run, exit_code=0)],
        }
    return {"tasks": [_task("server", 1, cpu="100m", run_for=None, exit_code=None)]}


def make_workload(seed: int, count: int, queues: tuple[str, ...]) -> list[JobPlan]:
    """``count`` jobs drawn from the shape mix with ``seed``, spread over ``queues``; the same
    seed gives the same jobs."""
    rng = random.Random(seed)  # noqa: S311 - seeded test data
    shapes = list(WEIGHTS)
    weights = [WEIGHTS[s] for s in shapes]
    plans: list[JobPlan] = []
    for i in range(count):
        shape = rng.choices(shapes, weights)[0]
        spec = _spec(shape, rng)
        replicas = {t["name"]: int(t["replicas"]) for t in spec["tasks"]}
        min_available = sum(replicas.values())
        # Room for restarts the faults may cause; only RETRY_FAIL is meant to spend its retries.
        spec.setdefault("maxRetry", 10)
        spec |= {
            "schedulerName": "volcano",
            "queue": queues[i % len(queues)],
            "minAvailable": min_available,
        }
        name = f"{shape.value}-{i:04d}"
        plans.append(
            JobPlan(
                name=name,
                shape=shape,
                manifest={
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "metadata": {"name": name},
                    "spec": spec,
                },
                expected=EXPECTED[shape],
                min_available=min_available,
                replicas=replicas,
                suspend_after=rng.uniform(2, 8) if shape is Shape.SUSPEND else 0.0,
                suspended_for=rng.uniform(2, 10) if shape is Shape.SUSPEND else 0.0,
            )
        )
    return plans
