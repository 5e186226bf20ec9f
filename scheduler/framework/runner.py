"""One scheduling cycle, pure: snapshot and configuration in, decisions out.

    open session -> plugins register callbacks (tier order)
    -> actions run in the configured order
    -> plugins close (gang writes conditions)
    -> PodGroup status, why each waiting job waits (scheduler.why) and queue allocation are
       derived from the session's final state

The process around it builds the snapshot from its cache and performs the I/O; the simulator
drives the same function in virtual time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from caldera.api.resources import Resources
from caldera.api.volcano import PodGroupCondition, PodGroupPhase, PodGroupStatus
from scheduler.api.types import JobInfo, TaskStatus
from scheduler.conf import SchedulerConf
from scheduler.framework.plugin import Action, Arguments, Plugin
from scheduler.framework.session import Session, SessionResult
from scheduler.why import publish, wait_record

PluginFactory = Callable[[Arguments], Plugin]
ActionFactory = Callable[[Mapping[str, Any]], Action]


@dataclass(frozen=True)
class Registry:
    """The plugins and actions a scheduler build provides, by configuration name."""

    plugins: Mapping[str, PluginFactory]
    actions: Mapping[str, ActionFactory]


def run_session(session: Session, conf: SchedulerConf, registry: Registry) -> SessionResult:
    """Run one cycle over ``session`` (built on an up-to-date snapshot) and return its decisions."""
    plugins = [
        registry.plugins[option.name](Arguments(option.name, option.arguments))
        for tier in conf.tiers
        for option in tier
    ]
    session.configured_actions = tuple(conf.actions)
    timings = session.result
    for plugin in plugins:
        started = time.perf_counter()
        plugin.on_session_open(session)
        timings.plugin_seconds[(plugin.name, "OnSessionOpen")] = time.perf_counter() - started
    for name in conf.actions:
        started = time.perf_counter()
        registry.actions[name](conf.action_arguments.get(name, {})).execute(session)
        timings.action_seconds[name] = time.perf_counter() - started
    for plugin in plugins:
        started = time.perf_counter()
        plugin.on_session_close(session)
        timings.plugin_seconds[(plugin.name, "OnSessionClose")] = time.perf_counter() - started
    for job in session.jobs.values():
        status = podgroup_status(job, session.job_conditions.get(job.key))
        current = job.podgroup.status if job.podgroup is not None else PodGroupStatus()
        if status_changed(current, status):
            session.result.podgroup_status[job.key] = status
    for job in session.jobs.values():
        found = wait_record(job, session.wait_notes.get(job.key, ()), session.now)
        record, held = publish(job, found, session.now)
        if record is not None:
            session.result.podgroup_why[job.key] = record
        session.result.why_deferred += held
    session.result.queue_allocated = queue_allocation(session)
    return session.result


def podgroup_status(job: JobInfo, condition: PodGroupCondition | None) -> PodGroupStatus:
    """A job's PodGroup status after the session (Volcano's job updater rules)."""
    current = job.podgroup.status if job.podgroup is not None else PodGroupStatus()
    running = job.count(TaskStatus.RUNNING)
    scheduled = job.count(
        TaskStatus.RUNNING,
        TaskStatus.BOUND,
        TaskStatus.BINDING,
        TaskStatus.FAILED,
        TaskStatus.SUCCEEDED,
    )
    completed = job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    unschedulable = condition is not None and condition.type == "Unschedulable"
    if running and unschedulable:
        phase = PodGroupPhase.UNKNOWN.value
    elif scheduled >= job.min_available and scheduled > 0:
        phase = (
            PodGroupPhase.COMPLETED.value if completed == scheduled else PodGroupPhase.RUNNING.value
        )
    elif job.phase == PodGroupPhase.INQUEUE.value:
        phase = PodGroupPhase.INQUEUE.value
    else:
        phase = PodGroupPhase.PENDING.value
    conditions = list(current.conditions)
    if condition is not None:
        conditions = [c for c in conditions if c.type != condition.type] + [condition]
    return PodGroupStatus(
        phase=phase,
        conditions=tuple(conditions),
        running=running,
        succeeded=job.count(TaskStatus.SUCCEEDED),
        failed=job.count(TaskStatus.FAILED),
    )


def _comparable(status: PodGroupStatus) -> PodGroupStatus:
    conditions = tuple(
        msgspec.structs.replace(c, transition_id="", last_transition_time=None)
        for c in status.conditions
    )
    return msgspec.structs.replace(status, conditions=conditions)


def status_changed(before: PodGroupStatus, after: PodGroupStatus) -> bool:
    """Whether a write is needed: conditions are compared without their ids and times."""
    return _comparable(before) != _comparable(after)


def queue_allocation(session: Session) -> dict[str, Resources]:
    """Resources held by each queue's jobs, added up the parent chain to the root."""
    own: dict[str, Resources] = {name: Resources() for name in session.queues}
    for job in session.jobs.values():
        if job.queue in own:
            own[job.queue] = own[job.queue] + job.allocated
    total = dict(own)
    for name, amount in own.items():
        seen = {name}
        parent = session.queues[name].parent
        while parent and parent in total and parent not in seen:
            total[parent] = total[parent] + amount
            seen.add(parent)
            parent = session.queues[parent].parent
    return total
