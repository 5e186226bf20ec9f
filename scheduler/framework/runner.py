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

from caldera.api.volcano import PodGroupCondition, PodGroupStatus
from caldera.api.why import WaitRecord
from scheduler.api.types import JobInfo
from scheduler.framework.incremental import UNREADY_PHASES, Incremental
from scheduler.framework.plugin import Action, Arguments, Plugin, SchedulerConf
from scheduler.framework.session import PlacedJob, Session, SessionResult
from scheduler.framework.status import (
    condition_key,
    podgroup_status,
    queue_allocation,
    status_changed,
)
from scheduler.visibility.order import pending_order
from scheduler.why import publish, wait_record

PluginFactory = Callable[[Arguments], Plugin]
ActionFactory = Callable[[Mapping[str, Any]], Action]


@dataclass(frozen=True)
class Registry:
    """The plugins and actions a scheduler build provides, by configuration name."""

    plugins: Mapping[str, PluginFactory]
    actions: Mapping[str, ActionFactory]


# Kept with a job between sessions (``Incremental.keep_for_job``): the PodGroup and condition
# for which the job's status was found unchanged, and its phase.
_STATUS = "runner.status"


def _unchanged_phase(
    incremental: Incremental, job: JobInfo, condition: PodGroupCondition | None
) -> str | None:
    """The job's PodGroup phase when its status was found unchanged in an earlier session,
    for the same job state, PodGroup and condition (so it is unchanged again); else None."""
    kept = incremental.kept_for_job(job, _STATUS)
    if not isinstance(kept, tuple) or kept[0] is not job.podgroup:
        return None
    if kept[1] != condition_key(condition):
        return None
    phase: str = kept[2]
    return phase


def run_session(session: Session, conf: SchedulerConf, registry: Registry) -> SessionResult:
    """Run one cycle over ``session`` (built on an up-to-date snapshot) and return its decisions."""
    plugins = [
        registry.plugins[option.name](Arguments(option.name, option.arguments))
        for tier in conf.tiers
        for option in tier
    ]
    session.configured_actions = tuple(conf.actions)
    timings = session.result
    timings.job_figures = session.job_figures
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
    incremental = session.incremental
    settled, notes, settling = incremental.settled(), session.wait_notes, incremental.settling
    # A settled job keeps its status and a ready phase, and has no wait record to write
    # (scheduler.api.settled), unless a note about it came in this session.
    noted = any(key in settled for key in notes)
    findings: dict[str, WaitRecord] = {}  # this session's, for the order it publishes
    for job in incremental.unsettled_jobs() if not noted else list(session.jobs.values()):
        key = job.key
        if key in settled and key not in notes:
            continue
        condition = session.job_condition(key)
        phase = _unchanged_phase(incremental, job, condition)
        unchanged = phase is not None
        if phase is None:
            status = podgroup_status(job, condition)
            current = job.podgroup.status if job.podgroup is not None else PodGroupStatus()
            phase = status.phase
            if status_changed(current, status):
                session.result.podgroup_status[key] = status
            else:
                unchanged = True
                incremental.keep_for_job(
                    job, _STATUS, (job.podgroup, condition_key(condition), phase)
                )
        if phase in UNREADY_PHASES:
            session.result.unready_jobs.append(key)
        found, record, held = None, None, 0
        if session.explain:
            found = wait_record(job, notes.get(key, ()), session.now)
            if found is not None:
                findings[key] = found
            record, held = publish(job, found, session.now)
            if record is not None:
                session.result.podgroup_why[key] = record
            session.result.why_deferred += held
        if key in settling:  # only gang's proposals may settle (asked first: most jobs are not)
            incremental.settle_if_quiet(
                job,
                phase,
                status_unchanged=unchanged,
                wait_quiet=found is None and record is None and not held,
                touched=key in session.job_changes,
            )
    session.result.queue_allocated = queue_allocation(session)
    for bind in session.result.binds:
        placed = session.jobs.get(bind.task.job)
        if placed is not None and placed.key not in session.result.placed_jobs:
            session.result.placed_jobs[placed.key] = PlacedJob(
                placed.namespace, placed.name, placed.queue, placed.creation
            )
    if session.explain:  # before close: the order keys call the plugins' functions
        session.result.pending = pending_order(
            (session.jobs[key] for key in session.result.unready_jobs),
            session.queues,
            job_key=session.job_order_key(),
            queue_key=session.queue_order_key(),
            findings=findings,
        )
    session.close()
    return session.result
