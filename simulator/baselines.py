"""The scheduling modes a trace runs under, all in the same loop, so results are comparisons:

- ``scheduler``: the configuration given (Volcano's format; Volcano's default without one);
- ``pod-by-pod``: a kube-scheduler-like baseline without gangs or queues: every PodGroup is
  admitted at once, and pending pods are placed one at a time in FIFO order (higher priority
  first, then by creation; pods the job controller created at the same instant enter the queue
  round-robin across their Jobs, as concurrent controller workers create them), each on the
  best node by kube-scheduler's default scores (the ``nodeorder`` plugin: least-allocated and
  balanced resources) among those the ``predicates`` plugin allows. No preemption;
- ``fifo``: the given configuration without queues: every Job goes to one queue, and the plugins
  that order jobs or divide the cluster by queue (priority, drf, proportion) are left out, as
  are preempt and reclaim; gangs are still placed whole, first come first served.

``PodByPodAction`` is the baseline's only action, registered in the baseline's own registry;
everything else it uses (``scheduler.actions.placer``, the plugins) is the scheduler's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from caldera.api.resources import Resources
from scheduler.actions.enqueue import INQUEUE
from scheduler.actions.placer import Placer, fit_error_histogram, fits_idle
from scheduler.api.types import PENDING_PHASES, TaskInfo, TaskStatus
from scheduler.conf import SchedulerConf, parse_conf
from scheduler.framework.runner import Registry
from scheduler.framework.session import ReservationFigure
from scheduler.registry import REGISTRY
from simulator.easy import Release, Waiting, plan

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class Mode(enum.StrEnum):
    SCHEDULER = "scheduler"
    POD_BY_POD = "pod-by-pod"
    FIFO = "fifo"
    EASY = "easy"


LABELS: Final = {
    Mode.SCHEDULER: "configured scheduler",
    Mode.POD_BY_POD: "pod by pod (no gang, no queues)",
    Mode.FIFO: "FIFO (no queues)",
    Mode.EASY: "EASY backfill (known run times, no queues)",
}
POD_BY_POD_ACTION: Final = "pod-by-pod"
POD_BY_POD_CONF: Final = """\
actions: "pod-by-pod"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
"""
EASY_ACTION: Final = "easy-backfill"
EASY_CONF: Final = """\
actions: "easy-backfill"
tiers:
- plugins:
  - name: predicates
"""
# Plugins that order jobs or divide the cluster by queue, and actions that take from one job
# for another: what "first come, first served in one queue" has none of.
FIFO_DROPPED_PLUGINS: Final = frozenset({"priority", "drf", "proportion"})
FIFO_DROPPED_ACTIONS: Final = frozenset({"preempt", "reclaim", "gangpreempt", "gangreclaim"})

OrderKey = Callable[[TaskInfo], tuple[float, int, int]]


class PodByPodAction:
    """Places pending pods one at a time, FIFO; see the module docstring."""

    name = POD_BY_POD_ACTION

    def __init__(self, order: OrderKey) -> None:
        self.order = order

    def execute(self, ssn: Session) -> None:
        for job in ssn.jobs.values():
            if job.phase in PENDING_PHASES:  # nothing gates admission without a batch scheduler
                job.set_phase(INQUEUE)
                ssn.result.podgroup_phase_inqueue.append(job.key)
        pending = [t for job in ssn.jobs.values() for t in job.tasks_in(TaskStatus.PENDING)]
        pending.sort(key=lambda t: (-t.priority, self.order(t), t.key))
        placer = Placer(ssn)
        for task in pending:
            name, cand = placer.best(task)
            if name is None:
                message = fit_error_histogram(len(ssn.nodes), cand.reason_counts)
                ssn.result.unschedulable[task.key] = task.fit_error = message
                continue
            if not fits_idle(task.init_resreq, ssn.nodes[name]):
                continue  # room only once pods being deleted are gone: try again then
            stmt = ssn.statement()
            stmt.allocate(task, name)
            stmt.commit()


class Runtimes(Protocol):
    """What EASY knows that a scheduler is not told: the clock and every pod's run time."""

    def now(self) -> float:
        """The simulation's time (seconds)."""
        ...

    def run_time(self, task: TaskInfo) -> float:
        """How long the pod runs once started (math.inf when it runs until its Job ends it)."""
        ...

    def expected_end(self, task: TaskInfo) -> float:
        """When a pod on a node gives its resources back (now for one being deleted)."""
        ...


def _amounts(resources: Resources) -> dict[str, int]:
    return dict(resources.items())


class EasyBackfillAction:
    """One EASY pass per session (``simulator.easy``); see the module docstring."""

    name = EASY_ACTION

    def __init__(self, runtimes: Runtimes) -> None:
        self.runtimes = runtimes

    def execute(self, ssn: Session) -> None:
        pending: dict[str, list[TaskInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase in PENDING_PHASES:  # no gate: every Job is admitted at once
                job.set_phase(INQUEUE)
                ssn.result.podgroup_phase_inqueue.append(job.key)
            tasks = sorted(job.tasks_in(TaskStatus.PENDING), key=lambda t: t.key)
            if tasks:
                pending[job.key] = tasks
        order = sorted(pending, key=lambda key: (ssn.jobs[key].creation, key))
        queue = [
            Waiting(
                key,
                tuple(_amounts(t.resreq) for t in pending[key]),
                max(self.runtimes.run_time(t) for t in pending[key]),
            )
            for key in order
        ]
        free = {name: _amounts(node.idle) for name, node in ssn.nodes.items()}
        releases = [
            Release(name, self.runtimes.expected_end(task), _amounts(task.resreq))
            for name, node in ssn.nodes.items()
            for task in node.tasks.values()
        ]
        now = self.runtimes.now()
        found = plan(now, free, releases, queue)
        for key, nodes in found.starts.items():
            stmt = ssn.statement()
            for task, node in zip(pending[key], nodes, strict=True):
                stmt.allocate(task, node)
            stmt.commit()
        reservation = found.reservation
        if reservation is not None and reservation.job not in found.starts:
            head = ssn.jobs[reservation.job]
            need = Resources.sum(t.resreq for t in pending[reservation.job])
            idle = Resources.sum(ssn.nodes[name].idle for name in reservation.nodes)
            held = Resources({n: min(a, idle.get(n)) for n, a in need.items()})
            figure = ReservationFigure(
                job=head.key,
                queue=head.queue,
                nodes=len(reservation.nodes),
                need=need,
                held=held,
                age_seconds=0.0,
                start_seconds=max(0.0, reservation.start - now),
            )
            ssn.result.reservations.append(figure)


def registry_for(mode: Mode, order: OrderKey, runtimes: Runtimes | None = None) -> Registry:
    """The actions and plugins a mode may name (``runtimes`` for the EASY baseline)."""
    extra: dict[str, Callable[[Mapping[str, Any]], Any]] = {}
    if mode is Mode.POD_BY_POD:
        extra[POD_BY_POD_ACTION] = lambda _args: PodByPodAction(order)
    elif mode is Mode.EASY:
        if runtimes is None:
            raise ValueError("the EASY baseline needs the run times (runtimes)")
        known = runtimes
        extra[EASY_ACTION] = lambda _args: EasyBackfillAction(known)
    if not extra:
        return REGISTRY
    return Registry(plugins=REGISTRY.plugins, actions={**REGISTRY.actions, **extra})


def conf_for(
    mode: Mode, conf: SchedulerConf, order: OrderKey, runtimes: Runtimes | None = None
) -> SchedulerConf:
    """The configuration a mode runs: ``conf`` itself, the pod-by-pod or EASY baseline's, or
    ``conf`` without queues."""
    if mode is Mode.SCHEDULER:
        return conf
    if mode in (Mode.POD_BY_POD, Mode.EASY):
        registry = registry_for(mode, order, runtimes)
        text = POD_BY_POD_CONF if mode is Mode.POD_BY_POD else EASY_CONF
        return parse_conf(text, actions=registry.actions, plugins=registry.plugins)
    tiers = tuple(
        tier
        for tier in (
            tuple(option for option in tier if option.name not in FIFO_DROPPED_PLUGINS)
            for tier in conf.tiers
        )
        if tier
    )
    actions = tuple(a for a in conf.actions if a not in FIFO_DROPPED_ACTIONS)
    return SchedulerConf(actions, tiers, conf.action_arguments)
