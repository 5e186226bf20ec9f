"""The recorder: a ``simulator.world.Watcher`` that writes down what a run shows, as
``simulator.results`` holds it, from the changes the world announces and each session's result.

- a Job's phases as its status moves (``started``: first Running; ``finished``: Completed,
  Failed, Terminated or Aborted), its retries, and each pod run from bind to end;
- what pods hold on nodes, per resource and per queue of the trace (a pod holds its request
  from its bind until it finishes or is gone), as the cluster's utilisation over time;
- per session: each queue's deserved resources and share (proportion's), and the reasons pods
  waited (``scheduler.why.unschedulable_reasons`` of the session's fit errors).
"""

from __future__ import annotations

from collections.abc import Mapping

from caldera.api.core import Pod, PodPhase
from caldera.api.resources import Resources
from caldera.api.vgpu import IDS
from caldera.api.volcano import Job, JobPhase, PodGroup
from controllers.job.state import FINISHED_PHASES
from scheduler.framework.session import SessionResult
from scheduler.why import unschedulable_reasons
from simulator.results import JobResult, PodRun, QueueSeries, RunResult, Series
from simulator.world import World, holds_node, key_of

ENDED_PHASES = frozenset({*FINISHED_PHASES, JobPhase.ABORTED})
IGNORED_RESOURCES = ("pods",)


def _units(name: str, milli: int) -> float:
    """A milli amount in the resource's own unit (cores, bytes, devices)."""
    return milli / 1000


class Recorder:
    """See the module docstring."""

    def __init__(self, world: World, *, queue_of: Mapping[str, str]) -> None:
        self.world = world
        self.queue_of = queue_of  # Job key -> the trace's queue
        self.jobs: dict[str, JobResult] = {}
        self._runs: dict[str, PodRun] = {}  # pod uid -> its open run
        self._requests: dict[str, Resources] = {}  # pod uid -> its request
        self._evicted: set[str] = set()  # uids the scheduler evicted
        total = Resources.sum(
            Resources.from_list(n.status.allocatable) for n in world.nodes.items.values()
        )
        self.capacity = {
            name: amount for name, amount in total.items() if name not in IGNORED_RESOURCES
        }
        self.used: dict[str, int] = dict.fromkeys(self.capacity, 0)
        self.queue_used: dict[str, dict[str, int]] = {}
        self._moved: dict[str, None] = {}  # queues whose holdings moved since the last flush
        self.utilisation = Series()
        self.held = Series()  # what reservations keep idle, per resource
        self.queues: dict[str, QueueSeries] = {}
        self.unschedulable: dict[str, int] = {}
        self.sessions = self.binds = self.evictions = 0

    # ---- jobs -----------------------------------------------------------------------------------

    def job_added(self, job: Job) -> None:
        key = key_of(job)
        queue = self.queue_of.get(key, job.spec.queue)
        self.jobs[key] = JobResult(job=key, queue=queue, arrival=self.world.now)
        self.queues.setdefault(queue, QueueSeries())

    def job_updated(self, old: Job, new: Job) -> None:
        record = self.jobs.get(key_of(new))
        if record is None:
            return
        record.restarts = new.status.retry_count
        phase = str(new.status.state.phase)
        if phase == old.status.state.phase and record.phases:
            return
        record.phase = phase
        if not record.phases or record.phases[-1] != phase:
            record.phases.append(phase)
        now = self.world.now
        if phase == JobPhase.RUNNING and record.started is None:
            record.started = now
        if phase in ENDED_PHASES:
            record.finished = now
        elif record.finished is not None:
            record.finished = None  # resumed

    def job_deleted(self, job: Job) -> None:
        record = self.jobs.get(key_of(job))
        if record is not None:
            record.deleted = self.world.now

    def podgroup_updated(self, old: PodGroup, new: PodGroup) -> None:
        pass

    def podgroup_deleted(self, podgroup: PodGroup) -> None:
        pass

    # ---- pods -----------------------------------------------------------------------------------

    def pod_added(self, pod: Pod) -> None:
        pass

    def pod_updated(self, old: Pod, new: Pod) -> None:
        now = self.world.now
        uid = new.metadata.uid
        if not old.spec.node_name and new.spec.node_name:
            run = PodRun(
                pod=new.metadata.name,
                attempt=self.world.attempts.get(key_of(new), 1),
                node=new.spec.node_name,
                bound=now,
                devices=new.metadata.annotations.get(IDS, ""),
            )
            self._runs[uid] = run
            job = self.jobs.get(self.world.pod_job.get(key_of(new), ""))
            if job is not None:
                job.pods.append(run)
        current = self._runs.get(uid)
        if current is not None:
            run = current
            phase = new.status.phase
            if phase == PodPhase.RUNNING and run.started is None:
                run.started = now
            if phase in (PodPhase.SUCCEEDED, PodPhase.FAILED) and run.ended is None:
                run.ended, run.outcome = now, str(phase)
                statuses = new.status.container_statuses
                if statuses and statuses[0].state.terminated is not None:
                    run.exit_code = statuses[0].state.terminated.exit_code
        self._hold(new, holds_node(new) - holds_node(old))

    def run_of(self, uid: str) -> PodRun | None:
        """The pod's open run (bound, not yet gone), None for another."""
        return self._runs.get(uid)

    def pod_deleted(self, pod: Pod) -> None:
        uid = pod.metadata.uid
        run = self._runs.pop(uid, None)
        if run is not None and run.ended is None:
            run.ended = self.world.now
            run.outcome = "Evicted" if uid in self._evicted else "Deleted"
        self._evicted.discard(uid)
        self._hold(pod, -holds_node(pod))
        self._requests.pop(uid, None)

    def evicted(self, uid: str) -> None:
        """The scheduler evicted this pod (its deletion follows)."""
        self._evicted.add(uid)

    def _hold(self, pod: Pod, sign: int) -> None:
        if not sign:
            return
        uid = pod.metadata.uid
        request = self._requests.get(uid)
        if request is None:
            request = self._requests[uid] = self.world.requests(pod)[0]
        queue = self.queue_of.get(self.world.pod_job.get(key_of(pod), ""), "")
        by_queue = self.queue_used.setdefault(queue, {})
        for name, amount in request.items():
            if name in self.used:
                self.used[name] += sign * amount
                by_queue[name] = by_queue.get(name, 0) + sign * amount
        self.queues.setdefault(queue, QueueSeries())
        self._moved[queue] = None

    def flush(self) -> None:
        """Sample the utilisation and the holdings of the queues whose pods started or ended
        holding since the last flush. The loop flushes once per instant: a sample replaces
        one taken at the same instant, so the series are those a sample per pod would give."""
        if not self._moved:
            return
        now = self.world.now
        self.utilisation.add(
            now, {n: self.used[n] / cap for n, cap in self.capacity.items() if cap > 0}
        )
        for queue in self._moved:
            by_queue = self.queue_used[queue]
            self.queues[queue].allocated.add(now, {n: _units(n, a) for n, a in by_queue.items()})
        self._moved.clear()

    # ---- sessions -------------------------------------------------------------------------------

    def session(self, result: SessionResult) -> None:
        now = self.world.now
        self.sessions += 1
        self.binds += len(result.binds)
        self.evictions += len(result.evictions)
        for reason, count in unschedulable_reasons(result.unschedulable.values()).items():
            self.unschedulable[reason] = self.unschedulable.get(reason, 0) + count
        for queue, deserved in result.queue_deserved.items():
            series = self.queues.setdefault(queue, QueueSeries())
            series.deserved.add(
                now, {n: _units(n, a) for n, a in deserved.items() if n in self.capacity}
            )
        for queue, share in result.queue_share.items():
            self.queues.setdefault(queue, QueueSeries()).share.add(now, {"share": share})
        if result.reservations or self.held.times:
            held = Resources.sum(figure.held for figure in result.reservations)
            self.held.add(now, {n: _units(n, a) for n, a in held.items() if n in self.capacity})

    def result(self, *, mode: str, label: str, end: float) -> RunResult:
        self.flush()
        return RunResult(
            mode=mode,
            label=label,
            jobs=list(self.jobs.values()),
            utilisation=self.utilisation,
            queues=self.queues,
            unschedulable=dict(sorted(self.unschedulable.items())),
            capacity={n: _units(n, a) for n, a in self.capacity.items()},
            held=self.held,
            sessions=self.sessions,
            binds=self.binds,
            evictions=self.evictions,
            end=end,
        )
