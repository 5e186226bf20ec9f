"""The discrete-event loop: a trace run in virtual time over the scheduler's pure core and the
job controller's pure decisions.

Each step takes whichever comes first, the next scheduling session or the next due event:

- events (``simulator.timeline``): a Job arrives (the API server stores it), a Command on a Job
  is created (the trace's ``commands``), a bound pod starts
  (``bind_delay`` after its bind), a pod ends (``simulator.kubelet``), a policy's delayed action
  or a TTL comes due (``simulator.controller``), a terminating pod is gone. After the events of
  an instant the job controller reconciles every Job they concern, at that instant;
- sessions: at multiples of ``schedule_period``, as Volcano's scheduler runs them, the process's
  ``LiveSnapshot`` is brought up to date with what changed and ``run_session`` runs the
  configured actions and plugins; its binds, evictions and PodGroup statuses are written back to
  the world, as the scheduler process writes them (the controller then reacts at once).

A session runs only when something changed since the last one (the process skips the others:
``scheduler.quiet``) and a pod or a PodGroup waits for the scheduler: with nothing waiting,
no action can bind, evict or admit anything, and the PodGroup statuses such a session would
write are written by the next one that runs. With a plugin that reads the clock
(preemption-toleration), sessions run every period while something waits, since time alone
can change their answer. A session's own PodGroup status writes that keep the phase
(conditions, pod counts) are not such a change (``phase_kept``): a session on the same cluster
but for them decides the same and writes the same. Queue status, PodScheduled=False
conditions, wait records and Events are not written: nothing the simulation decides reads
them (the sessions do not compose the wait records, their notes or Events: ``Session.explain``
is off).

The run ends when nothing is due: every event done and no session to run; or at ``until``; or,
with a clock-reading plugin, after ``idle_limit`` seconds with no event and no change.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import msgspec

from caldera.api.meta import ObjectMeta, OwnerReference
from caldera.api.volcano import (
    BATCH_API_VERSION,
    DEFAULT_QUEUE,
    Action,
    Command,
    Job,
    PodGroupStatus,
)
from scheduler.api.types import TaskInfo
from scheduler.conf import SchedulerConf
from scheduler.framework.runner import run_session
from scheduler.framework.session import Session, SessionResult
from scheduler.quiet import reads_clock
from simulator.admission import scheduler_queues
from simulator.baselines import LABELS, Mode, conf_for, registry_for
from simulator.controller import JobController
from simulator.kubelet import Kubelet
from simulator.record import Recorder
from simulator.results import RunResult
from simulator.runtimes import TraceRuntimes
from simulator.spec import Scenario, Submission
from simulator.timeline import Timeline
from simulator.world import World

DEFAULT_IDLE_LIMIT = 24 * 3600.0
# The young generation's size while a run goes on (``young_generation``).
YOUNG_OBJECTS = 100_000
_EPSILON = 1e-9


@dataclass(frozen=True)
class Limits:
    """When a run stops early: at ``until`` (virtual seconds), or after ``idle_limit`` seconds
    in which only clock-driven sessions ran and changed nothing."""

    until: float | None = None
    idle_limit: float = DEFAULT_IDLE_LIMIT


def _in_one_queue(submission: Submission) -> Submission:
    job: Job = submission.job
    spec = msgspec.structs.replace(job.spec, queue=DEFAULT_QUEUE)
    return replace(submission, job=msgspec.structs.replace(job, spec=spec))


class Simulation:
    """One run of a scenario under one mode; see the module docstring."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        conf: SchedulerConf,
        mode: Mode = Mode.SCHEDULER,
        limits: Limits = Limits(),
    ) -> None:
        cluster = scenario.cluster
        self.mode = mode
        self.limits = limits
        self.period = cluster.timing.schedule_period
        self.namespace_weights = dict(cluster.namespace_weights)
        submissions = scenario.jobs
        queues = cluster.queues
        if mode is not Mode.SCHEDULER:
            submissions = tuple(_in_one_queue(s) for s in submissions)
            queues = scheduler_queues()
        self.timeline = Timeline()
        self.world = World(
            nodes=cluster.nodes,
            queues=queues,
            priority_classes=cluster.priority_classes,
            termination_grace=cluster.timing.termination_grace,
        )
        # The trace's Jobs were admitted (simulator.spec): none is held or refused.
        self.controller = JobController(self.world, self.timeline, admitted=True)
        self.kubelet = Kubelet(self.world, self.timeline, bind_delay=cluster.timing.bind_delay)
        self.recorder = Recorder(
            self.world, queue_of={s.key: s.job.spec.queue for s in scenario.jobs}
        )
        runtimes = TraceRuntimes(self.world, self.kubelet, self.recorder)
        self.registry = registry_for(mode, self._fifo_position, runtimes)
        self.conf = conf_for(mode, conf, self._fifo_position, runtimes)
        self.clocked = reads_clock(self.conf)
        self.world.watchers = [self.controller, self.kubelet, self.recorder]
        for submission in submissions:
            self.timeline.at(submission.at, functools.partial(self._arrive, submission))
            for serial, order in enumerate(submission.commands):
                issue = functools.partial(self._command, submission.key, order.action, serial)
                self.timeline.at(submission.at + order.after, issue)
        self._last_session: int | None = None  # its index: it ran at index * period
        self._scheduler_seconds = 0.0

    def _fifo_position(self, task: TaskInfo) -> tuple[float, int, int]:
        return self.world.created.get(task.uid, (math.inf, 0, 0))

    def _arrive(self, submission: Submission) -> None:
        """A Job arrives: the API server stores it (its Job controller hears of it)."""
        self.kubelet.workloads[submission.key] = submission.workload
        self.world.create_job(submission.job)

    def _command(self, job_key: str, action: Action, serial: int) -> None:
        """A Command on the Job (a trace's ``commands``) is created; its job controller hears
        of it. None is made for a Job gone meanwhile (deleted after its TTL)."""
        job = self.world.jobs.get(job_key)
        if job is None:
            return
        meta = job.metadata
        target = OwnerReference(
            api_version=BATCH_API_VERSION, kind="Job", name=meta.name, uid=meta.uid
        )
        name = f"{meta.name}-{action.lower()}-{serial}"
        command = Command(
            metadata=ObjectMeta(namespace=meta.namespace, name=name, uid=f"command-{name}"),
            action=action,
            target=target,
        )
        self.controller.command_added(command)

    # ---- the loop -------------------------------------------------------------------------------

    def _next_session(self) -> float | None:
        """When the next session runs, None when none is needed (see the module docstring)."""
        world = self.world
        if not world.has_waiting_work():
            return None
        if not (self.clocked or world.live.has_news({})):
            return None
        index = math.ceil(world.now / self.period - _EPSILON)
        if self._last_session is not None:
            index = max(index, self._last_session + 1)
        return index * self.period

    def run(self) -> RunResult:
        with young_generation(YOUNG_OBJECTS):
            return self._run()

    def _run(self) -> RunResult:
        started = time.perf_counter()
        world = self.world
        last_change = 0.0
        while True:
            event = self.timeline.next_time()
            session = self._next_session()
            if event is None and session is None:
                break
            if session is not None and (event is None or session < event):
                now, is_session = session, True
            else:
                assert event is not None
                now, is_session = event, False
            if self.limits.until is not None and now > self.limits.until:
                world.now = self.limits.until
                break
            if is_session and event is None and now - last_change > self.limits.idle_limit:
                break
            world.now = now
            if is_session:
                if self._session(round(now / self.period)):
                    last_change = now
            else:
                self.timeline.run_due(now)
                last_change = now
            self.controller.settle()
            self.kubelet.flush()
            self.recorder.flush()
        result = self.recorder.result(mode=self.mode, label=LABELS[self.mode], end=world.now)
        result.wall_seconds = time.perf_counter() - started
        result.scheduler_seconds = self._scheduler_seconds
        return result

    def _session(self, index: int) -> bool:
        """One session at ``index * period``; whether it changed anything."""
        self._last_session = index
        world = self.world
        clock = time.perf_counter()
        cluster, _ = world.live.update(world.cached, assumed={}, now=world.datetime())
        cluster.namespace_weights = self.namespace_weights
        session = Session(cluster, self.conf.tiers)
        session.explain = False  # no wait records, notes or Events: nothing here reads them
        session.job_figures = False  # nor per-job metrics
        result = run_session(session, self.conf, self.registry)
        world.live.after_session(session)
        self._scheduler_seconds += time.perf_counter() - clock
        self.recorder.session(result)
        return self._apply(result)

    def _apply(self, result: SessionResult) -> bool:
        """Write a session's decisions back, as the scheduler process does."""
        world = self.world
        for bind in result.binds:
            annotations = result.bind_annotations.get(bind.task.uid)
            world.bind(bind.task.key, bind.task.uid, bind.node, annotations)
        for evict in result.evictions:
            pod = world.pods.items.get(evict.task.key)
            if pod is not None and pod.metadata.uid == evict.task.uid:
                self.recorder.evicted(evict.task.uid)
                world.delete_pod(evict.task.key)
        for key, status in result.podgroup_status.items():
            pg = world.podgroups.items.get(key)
            if pg is not None:
                news = not phase_kept(pg.status, status)
                world.replace_podgroup(msgspec.structs.replace(pg, status=status), news=news)
        return bool(result.binds or result.evictions or result.podgroup_status)


@contextlib.contextmanager
def young_generation(objects: int) -> Iterator[None]:
    """Collect the youngest generation of cyclic garbage every ``objects`` allocations instead
    of Python's 700, while the block runs. A run allocates objects by the million (pods, their
    statuses, a session's working sets) and almost none in cycles (a session drops its
    callbacks, ``Session.close``): with the default, the collector walks the young objects
    about every thousand allocations and takes a sixth of a run's time."""
    thresholds = gc.get_threshold()
    gc.set_threshold(objects, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def phase_kept(before: PodGroupStatus, after: PodGroupStatus) -> bool:
    """Whether a session's PodGroup status write keeps the phase (changing conditions or pod
    counts). Such a write calls for no session: of a PodGroup's status a session reads the
    phase, and the conditions only to write them again (``scheduler.framework.status``), so a
    session on the same cluster but for them decides the same and writes the same status."""
    return before.phase == after.phase


def simulate(
    scenario: Scenario,
    conf: SchedulerConf,
    modes: tuple[Mode, ...] = (Mode.SCHEDULER,),
    limits: Limits = Limits(),
) -> list[RunResult]:
    """Run the scenario once per mode, in the order given. Runs are compared over the same
    span: one whose events ended earlier (every job done, or stuck for good) keeps its last
    state until the latest end."""
    runs = [Simulation(scenario, conf=conf, mode=mode, limits=limits).run() for mode in modes]
    horizon = max((run.end for run in runs), default=0.0)
    for run in runs:
        run.end = horizon
    return runs
