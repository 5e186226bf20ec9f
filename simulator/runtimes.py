"""The run times a trace declares, as the EASY baseline reads them (``baselines.Runtimes``):
what a scheduler that was told every Job's run time would know. A pod's expected end is its
start (or, while it is bound but not yet running, its bind plus the bind delay) plus its task's
run time; failures the trace draws and gang pace (``progress: gang``) are not foreseen."""

from __future__ import annotations

import math

from scheduler.api.types import TaskInfo, TaskStatus
from simulator.kubelet import Kubelet
from simulator.record import Recorder
from simulator.world import World


class TraceRuntimes:
    """See the module docstring."""

    def __init__(self, world: World, kubelet: Kubelet, recorder: Recorder) -> None:
        self.world, self.kubelet, self.recorder = world, kubelet, recorder

    def now(self) -> float:
        return self.world.now

    def run_time(self, task: TaskInfo) -> float:
        job_key = self.world.pod_job.get(f"{task.namespace}/{task.name}", "")
        workload = self.kubelet.workloads.get(job_key)
        if workload is None:
            return math.inf
        return workload.run_times.get(task.role, math.inf)

    def expected_end(self, task: TaskInfo) -> float:
        run = self.recorder.run_of(task.uid)
        if run is None or task.status is TaskStatus.RELEASING:
            return self.world.now
        started = run.started if run.started is not None else run.bound + self.kubelet.bind_delay
        return started + self.run_time(task)
