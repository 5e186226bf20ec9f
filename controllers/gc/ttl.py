"""When a finished Job's ttlSecondsAfterFinished runs out (pure logic).

The TTL counts from ``status.state.lastTransitionTime`` and applies to Jobs in Completed, Failed
or Terminated, as in Volcano, and also to Aborted ones, which Volcano forgets (its issue #4736):
an aborted Job with a TTL would otherwise stay forever. A user can still resume it within the
TTL; resuming leaves Aborted and stops the clock.
"""

from __future__ import annotations

import datetime as dt

from caldera.api.meta import parse_time
from caldera.api.volcano import Job, JobPhase

TTL_PHASES = frozenset({JobPhase.COMPLETED, JobPhase.FAILED, JobPhase.TERMINATED, JobPhase.ABORTED})


def seconds_until_expiry(job: Job, now: dt.datetime) -> float | None:
    """Seconds left before the Job must be deleted (<= 0: now), or None if it never expires:
    no TTL, not finished, already being deleted, or no recorded finish time."""
    ttl = job.spec.ttl_seconds_after_finished
    state = job.status.state
    if ttl is None or job.metadata.deletion_timestamp or state.phase not in TTL_PHASES:
        return None
    if not state.last_transition_time:
        return None
    finished = parse_time(state.last_transition_time)
    return (finished + dt.timedelta(seconds=ttl) - now).total_seconds()
