"""Volcano Job tasks whose pods kwok runs as a test says, through the annotations of
``e2e/cluster/stages.yaml``: run ``run-for``, then exit with ``exit-code`` (without one, run until
deleted); and bare pods of a PodGroup (``gang_pod``) for the scheduler tests. Pure: shared by the
job-controller tests, the scheduler tests and the chaos run."""

from __future__ import annotations

from typing import Any, Final

RUN_FOR: Final = "kwok.caldera.io/run-for"
EXIT_CODE: Final = "kwok.caldera.io/exit-code"


def task(
    name: str,
    replicas: int = 1,
    *,
    run_for: str | None = None,
    exit_code: int | None = None,
    cpu: str = "100m",
    memory: str = "64Mi",
    **extra: Any,
) -> dict[str, Any]:
    """A task whose pods run ``run_for`` and then exit with ``exit_code`` through kwok (without an
    exit code they run until deleted), each requesting ``cpu`` and ``memory``. ``extra`` goes
    into the task as is (camelCase keys)."""
    annotations: dict[str, str] = {}
    if run_for is not None:
        annotations[RUN_FOR] = run_for
    if exit_code is not None:
        annotations[EXIT_CODE] = str(exit_code)
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {
                "containers": [
                    {
                        "name": name,
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
                "restartPolicy": "Never",
            },
        },
        **extra,
    }


def gang_pod(name: str, group: str, cpu: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """A bare pod of PodGroup ``group`` for Caldera's scheduler (kwok runs it), requesting
    ``cpu`` and selecting nodes by ``node_selector``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {
            "schedulerName": "volcano",
            "nodeSelector": node_selector,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }
