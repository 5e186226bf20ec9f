"""A `Simulation` run one scheduling session at a time, for tests that reason about the
sequence of decisions (the scheduler's settle property: ``unit/test_sched_settle.py``).

`SteppedSimulation.step` runs the events due up to the next session's time, then that session,
and returns what it decided (`Step`). It runs the session even when nothing changed since the
last one, where ``Simulation.run`` would skip it (``scheduler.quiet``): a test asking whether a
later session undoes a split must run those sessions. `submit` makes a Job arrive now, so a
second wave can follow a settled first one; `settle` steps until sessions stay quiet.

Everything else is the engine's: the world, the job controller (an evicted pod terminates for
the termination grace, then its Job's controller creates it again, Pending, under the same
name), the kubelet and the session itself. Nothing here decides anything. Pure, in-memory.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from caldera.api.core import Pod
from caldera.api.resources import Resources
from caldera.api.volcano import KUBE_GROUP_NAME_KEY, PodGroup
from scheduler.conf import SchedulerConf
from scheduler.framework.session import SessionResult
from simulator.engine import Simulation
from simulator.spec import Scenario, Submission
from simulator.world import holds_node

RECLAIM = "reclaim"
RECLAIMING = frozenset({RECLAIM, "gangreclaim"})  # the eviction reasons of reclaim actions


@dataclass
class Step:
    """What one session decided, by pod name, and per queue."""

    at: float  # the session's virtual time
    binds: list[tuple[str, str]] = field(default_factory=list)  # (pod, node)
    evictions: list[tuple[str, str]] = field(default_factory=list)  # (pod, reason)
    # Per queue: resources held when the session opened, and what it deserved in it.
    held_before: dict[str, Resources] = field(default_factory=dict)
    deserved: dict[str, Resources] = field(default_factory=dict)
    reclaimed_from: dict[str, Resources] = field(default_factory=dict)  # evicted by reclaim
    bound_to: dict[str, Resources] = field(default_factory=dict)

    @property
    def quiet(self) -> bool:
        return not self.binds and not self.evictions


class SteppedSimulation(Simulation):
    """See the module docstring."""

    def __init__(self, scenario: Scenario, *, conf: SchedulerConf) -> None:
        super().__init__(scenario, conf=conf)
        self.history: list[Step] = []
        self._decided: SessionResult | None = None  # the session's result, as _apply saw it

    # ---- driving ------------------------------------------------------------------------------

    def submit(self, submission: Submission) -> None:
        """The Job arrives now (its controller creates its PodGroup, and its pods once the
        scheduler admits it)."""
        self.timeline.at(self.world.now, functools.partial(self._arrive, submission))

    def step(self) -> Step:
        """The events due before the next session's time (and at it), then that session."""
        last = self._last_session
        index = math.ceil(self.world.now / self.period) if last is None else last + 1
        at = index * self.period
        while (due := self.timeline.next_time()) is not None and due <= at:
            self.world.now = due
            self.timeline.run_due(due)
            self._react()
        self.world.now = at
        held = self.held_by_queue()
        self._session(index)
        self._react()
        assert self._decided is not None
        step = self._step(at, held, self._decided)
        self._decided = None
        self.history.append(step)
        return step

    def settle(self, max_sessions: int, quiet_sessions: int = 3) -> int | None:
        """Step until ``quiet_sessions`` sessions in a row bind and evict nothing while no pod
        terminates; the sessions that took (up to the first quiet one), or None if it did
        not settle within ``max_sessions``."""
        quiet_run = 0
        for _ in range(max_sessions):
            if self.step().quiet and not self.terminating():
                quiet_run += 1
                if quiet_run >= quiet_sessions:
                    return len(self.history) - quiet_sessions
            else:
                quiet_run = 0
        return None

    def _react(self) -> None:
        """What ``Simulation.run`` does after each event or session: the job controller
        reconciles, the kubelet and the recorder catch up."""
        self.controller.settle()
        self.kubelet.flush()
        self.recorder.flush()

    def _apply(self, result: SessionResult) -> bool:
        self._decided = result
        return super()._apply(result)

    def _step(self, at: float, held: dict[str, Resources], result: SessionResult) -> Step:
        step = Step(at=at, held_before=held, deserved=dict(result.queue_deserved))
        for bind in result.binds:
            step.binds.append((bind.task.name, bind.node))
            queue = self.group_queue(bind.task.job)
            step.bound_to[queue] = step.bound_to.get(queue, Resources()) + bind.task.resreq
        for evict in result.evictions:
            step.evictions.append((evict.task.name, evict.reason))
            if evict.reason in RECLAIMING:
                queue = self.group_queue(evict.task.job)
                lost = step.reclaimed_from.get(queue, Resources())
                step.reclaimed_from[queue] = lost + evict.task.resreq
        return step

    # ---- reading ------------------------------------------------------------------------------

    def group_queue(self, group_key: str) -> str:
        """The queue of the PodGroup ``namespace/name``, "" when it is gone."""
        pg = self.world.podgroups.items.get(group_key)
        return pg.spec.queue if pg is not None else ""

    def podgroups(self) -> Iterator[PodGroup]:
        return iter(self.world.podgroups.items.values())

    def group_of(self, pod: Pod) -> str:
        """The key of the pod's PodGroup."""
        group = pod.metadata.annotations.get(KUBE_GROUP_NAME_KEY, "")
        return f"{pod.metadata.namespace}/{group}"

    def running(self) -> Iterator[Pod]:
        """Pods on a node and not terminating (what the scheduler counts as allocated)."""
        for pod in self.world.pods.items.values():
            if holds_node(pod) and pod.metadata.deletion_timestamp is None:
                yield pod

    def terminating(self) -> list[Pod]:
        return [p for p in self.world.pods.items.values() if p.metadata.deletion_timestamp]

    def held_by_queue(self) -> dict[str, Resources]:
        """Resources held by running pods, per queue."""
        held = {name: Resources() for name in self.world.queues.items}
        for pod in self.running():
            queue = self.group_queue(self.group_of(pod))
            if queue in held:
                held[queue] = held[queue] + self.world.requests(pod)[0]
        return held

    def running_by_queue(self) -> dict[str, int]:
        counts = dict.fromkeys(self.world.queues.items, 0)
        for pod in self.running():
            queue = self.group_queue(self.group_of(pod))
            counts[queue] = counts.get(queue, 0) + 1
        return counts

    def running_in_group(self, group_key: str) -> int:
        return sum(1 for pod in self.running() if self.group_of(pod) == group_key)

    def pods_by_queue(self) -> dict[str, int]:
        """Every pod that exists, per queue (what the queues' Jobs ask for now)."""
        counts = dict.fromkeys(self.world.queues.items, 0)
        for pod in self.world.pods.items.values():
            queue = self.group_queue(self.group_of(pod))
            counts[queue] = counts.get(queue, 0) + 1
        return counts
