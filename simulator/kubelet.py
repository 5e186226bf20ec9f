"""The kubelets of the virtual cluster: a bound pod runs ``bind_delay`` later, and finishes when
its Job's workload (``simulator.spec.Workload``) says so.

- ``progress: pod``: each pod runs its task's run time from its own start, then exits with the
  task's exit code, or fails earlier if a failure draw names its run (kwok's behaviour);
- ``progress: gang``: the Job's pods share one pace. They progress only while at least
  minAvailable of the Job's pods have started (Running or Succeeded), as a synchronous training
  job or an MPI program does: a partly placed Job holds its nodes and goes nowhere. With a
  ``network`` model, the pace is ``1 / (1 + penalty * f)``, ``f`` the share of the pairs of its
  two communicating tasks' running pods that sit on different nodes. A pod's run time and
  failure times count progress, not wall time.

Containers are not restarted in place (restartPolicy is taken as Never): a pod that fails ends
Failed, and the Job's policies decide what happens next. The kubelet is a
``simulator.world.Watcher``: it learns of binds and deletions from the world.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import msgspec

from caldera.api.core import (
    ContainerState,
    ContainerStateRunning,
    ContainerStateTerminated,
    ContainerStatus,
    Pod,
    PodPhase,
)
from caldera.api.volcano import TASK_INDEX_KEY, Job, PodGroup
from controllers.job.status import pod_task
from simulator.spec import Progress, Workload
from simulator.timeline import Timeline
from simulator.world import World, key_of


@dataclass
class _Run:
    """A running pod's work left (progress seconds), how it ends, and the token of its end."""

    uid: str
    remaining: float
    exit_code: int
    node: str
    task: str
    token: int = 0


@dataclass
class _Pace:
    """A gang-progress Job's shared pace since ``since``."""

    runs: dict[str, _Run] = field(default_factory=dict)  # pod key -> run
    rate: float = 0.0
    since: float = 0.0


class Kubelet:
    """See the module docstring."""

    def __init__(self, world: World, timeline: Timeline, *, bind_delay: float) -> None:
        self.world = world
        self.timeline = timeline
        self.bind_delay = bind_delay
        self.workloads: dict[str, Workload] = {}  # by Job key
        self._paces: dict[str, _Pace] = {}  # gang-progress Jobs with running pods
        self._tokens = 0
        self._stale: dict[str, None] = {}  # gang Jobs whose pace must be worked out again

    # ---- the world's news -----------------------------------------------------------------------

    def job_added(self, job: Job) -> None:
        pass

    def job_updated(self, old: Job, new: Job) -> None:
        pass

    def job_deleted(self, job: Job) -> None:
        self._paces.pop(key_of(job), None)

    def pod_added(self, pod: Pod) -> None:
        pass

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        pass

    def podgroup_deleted(self, podgroup: PodGroup) -> None:
        pass

    def pod_updated(self, old: Pod, new: Pod) -> None:
        if not old.spec.node_name and new.spec.node_name:
            key, uid = key_of(new), new.metadata.uid
            self.timeline.at(self.world.now + self.bind_delay, lambda: self._start(key, uid))
        elif new.metadata.deletion_timestamp and not old.metadata.deletion_timestamp:
            self._stop(new)
            grace_end = self.world.now + self.world.termination_grace
            key, uid = key_of(new), new.metadata.uid
            self.timeline.at(grace_end, lambda: self._gone(key, uid))

    def pod_deleted(self, pod: Pod) -> None:
        self._stop(pod)

    # ---- a pod's life ---------------------------------------------------------------------------

    def _gone(self, key: str, uid: str) -> None:
        pod = self.world.pods.items.get(key)
        if pod is not None and pod.metadata.uid == uid:
            self.world.remove_pod(key)

    def _start(self, key: str, uid: str) -> None:
        pod = self.world.pods.items.get(key)
        if (
            pod is None
            or pod.metadata.uid != uid
            or pod.metadata.deletion_timestamp is not None
            or pod.status.phase != PodPhase.PENDING
        ):
            return
        running = self.world.replace_pod(_running(pod, self.world.timestamp()))
        job_key = self.world.pod_job.get(key, "")
        workload = self.workloads.get(job_key)
        if workload is None:
            return
        run = self._run_of(running, workload)
        if workload.progress is Progress.GANG:
            pace = self._paces.setdefault(job_key, _Pace(since=self.world.now))
            _settle(pace, self.world.now)  # the new pod's work starts now
            pace.runs[key] = run
            self._stale[job_key] = None
        elif math.isfinite(run.remaining):
            self._arm(key, run, self.world.now + run.remaining)

    def _run_of(self, pod: Pod, workload: Workload) -> _Run:
        task = pod_task(pod)
        index = int(pod.metadata.annotations.get(TASK_INDEX_KEY, "0") or 0)
        attempt = self.world.attempts.get(key_of(pod), 1)
        remaining = workload.run_times.get(task, math.inf)
        code = workload.exit_codes.get(task, 0)
        for failure in workload.failures:
            if failure.matches(task, index, attempt) and failure.after < remaining:
                remaining, code = failure.after, failure.exit_code
        return _Run(pod.metadata.uid, remaining, code, pod.spec.node_name, task)

    def _arm(self, key: str, run: _Run, when: float) -> None:
        self._tokens += 1
        run.token = token = self._tokens
        self.timeline.at(when, lambda: self._finish(key, run, token))

    def _finish(self, key: str, run: _Run, token: int) -> None:
        if run.token != token:
            return  # the pace changed since: a later end was armed
        pod = self.world.pods.items.get(key)
        if pod is None or pod.metadata.uid != run.uid or pod.status.phase != PodPhase.RUNNING:
            return
        job_key = self.world.pod_job.get(key, "")
        pace = self._paces.get(job_key)
        if pace is not None and pace.runs.pop(key, None) is not None:
            self._stale[job_key] = None
        self.world.replace_pod(_finished(pod, run.exit_code, self.world.timestamp()))

    def _stop(self, pod: Pod) -> None:
        """A pod stopped running (deleted, or being deleted): its Job's pace changes."""
        key = key_of(pod)
        job_key = self.world.pod_job.get(key, "")
        pace = self._paces.get(job_key)
        if pace is not None and pace.runs.pop(key, None) is not None:
            self._stale[job_key] = None

    # ---- gang pace ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Work the pace out again for every gang Job whose pods started or stopped."""
        while self._stale:
            job_key = next(iter(self._stale))
            del self._stale[job_key]
            self._repace(job_key)

    def _repace(self, job_key: str) -> None:
        pace = self._paces.get(job_key)
        job = self.world.jobs.get(job_key)
        workload = self.workloads.get(job_key)
        if pace is None or job is None or workload is None:
            return
        now = self.world.now
        _settle(pace, now)
        started = sum(
            1
            for p in self.world.pods_of(job_key)
            if p.metadata.deletion_timestamp is None
            and p.status.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED)
        )
        pace.rate = 0.0
        if started >= job.spec.min_available:
            pace.rate = 1.0 / (1.0 + _network_penalty(pace, workload))
        for key, run in pace.runs.items():
            if pace.rate > 0 and math.isfinite(run.remaining):
                self._arm(key, run, now + max(run.remaining, 0.0) / pace.rate)
            else:
                run.token = 0  # no end while the Job stands still
        if not pace.runs:
            del self._paces[job_key]


def _settle(pace: _Pace, now: float) -> None:
    """Charge the work done since the pace was last worked out."""
    spent = (now - pace.since) * pace.rate
    if spent:
        for run in pace.runs.values():
            run.remaining -= spent
    pace.since = now


def _network_penalty(pace: _Pace, workload: Workload) -> float:
    """``penalty * f``: ``f`` the share of split pairs of the two communicating tasks."""
    network = workload.network
    if network is None:
        return 0.0
    first, second = network.between
    left: dict[str, int] = {}
    right: dict[str, int] = {}
    for run in pace.runs.values():
        if run.task == first:
            left[run.node] = left.get(run.node, 0) + 1
        if run.task == second:
            right[run.node] = right.get(run.node, 0) + 1
    pairs = sum(left.values()) * sum(right.values())
    if first == second:
        count = sum(left.values())
        pairs = count * (count - 1)
        together = sum(n * (n - 1) for n in left.values())
    else:
        together = sum(n * right.get(node, 0) for node, n in left.items())
    if pairs == 0:
        return 0.0
    return network.penalty * (pairs - together) / pairs


def _running(pod: Pod, when: str) -> Pod:
    statuses = tuple(
        ContainerStatus(
            name=c.name, ready=True, state=ContainerState(running=ContainerStateRunning())
        )
        for c in pod.spec.containers
    )
    return msgspec.structs.replace(
        pod,
        status=msgspec.structs.replace(
            pod.status, phase=PodPhase.RUNNING, start_time=when, container_statuses=statuses
        ),
    )


def _finished(pod: Pod, exit_code: int, when: str) -> Pod:
    statuses = tuple(
        ContainerStatus(
            name=c.name,
            state=ContainerState(
                terminated=ContainerStateTerminated(exit_code=exit_code, finished_at=when)
            ),
        )
        for c in pod.spec.containers
    )
    phase = PodPhase.SUCCEEDED if exit_code == 0 else PodPhase.FAILED
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(pod.status, phase=phase, container_statuses=statuses)
    )
