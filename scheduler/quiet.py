"""Whether the next session can be skipped: nothing it reads changed since one that did nothing.

A session is a function of its snapshot, its configuration and, for the plugins in
``CLOCK_PLUGINS``, the time. When the last session changed nothing in the cluster (no bind,
eviction, enqueue, PodGroup status or wait record, queue status or pod condition to write,
queue admission gate to remove,
nor a wait record held back to be written later) and since then no
informer event was noted, no assumed bind came or went and the configuration is the same, the
next session would decide the same nothing again. Skipping it is exact; it is kube-scheduler's
unschedulable queue at its coarsest grain: a backlog of gangs that cannot fit is not tried
again, and their Warning events are not repeated, until something in the cluster changes.

A finer grain (retry a gang only on the events that could help it) is not exact here:
proportion's deserved shares couple every queue's requests, so a gang arriving in one queue
can let a gang in another reclaim.

A real session still runs at least every ``MAX_QUIET_SECONDS`` (kube-scheduler flushes its
unschedulable pods on a timer too): insurance against an event that was never noted. A plugin
whose answer changes at a known moment (sla: a job's waiting time runs out; cdp: a victim's
cooldown ends) asks for a session then (``SessionResult.revisit_after``), so skipping stays
exact without running every period.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.conf import SchedulerConf
from scheduler.framework.session import SessionResult

# Plugins whose decisions move with the clock (preemption-toleration: a victim is protected
# until its toleration runs out; usage: the nodes' measured load, which no informer event
# notes, and its age): with one configured, every session runs.
CLOCK_PLUGINS = frozenset({"preemption-toleration", "usage"})
MAX_QUIET_SECONDS = 60.0


def reads_clock(conf: SchedulerConf) -> bool:
    """Whether a configured plugin decides differently as time passes."""
    return any(option.name in CLOCK_PLUGINS for tier in conf.tiers for option in tier)


def changed_nothing(result: SessionResult, writes: int) -> bool:
    """Whether a session, and the ``writes`` its process made for it, left the cluster as it
    was (its Events aside), and reported every job's figures to the metrics: one that left
    them out (``Session.job_figures``, asked for every few seconds) is not one to repeat, or
    a share that changed in it would wait for the next forced session to be exported."""
    return result.job_figures and not (
        result.binds
        or result.evictions
        or result.podgroup_phase_inqueue
        or result.podgroup_status
        or result.podgroup_why
        or result.why_deferred
        or result.ungate
        or writes
    )


@dataclass
class QuietSessions:
    """Remembers the last session that changed nothing, and says when the next may be skipped."""

    max_quiet: float = MAX_QUIET_SECONDS
    _conf: SchedulerConf | None = None
    _since: float | None = None  # when the last session that changed nothing ran
    _result: SessionResult | None = None  # and what it decided
    _until: float | None = None  # when a plugin asked for a session again (see revisit_after)
    skipped: int = 0  # sessions skipped, for tests and logs

    def record(self, conf: SchedulerConf, result: SessionResult, writes: int, now: float) -> None:
        """Note a session that ran, with the writes made for it; ``now`` in seconds."""
        if changed_nothing(result, writes) and not reads_clock(conf):
            self._conf, self._since, self._result = conf, now, result
            self._until = None if result.revisit_after is None else now + result.revisit_after
        else:
            self._conf = self._since = self._result = self._until = None

    def repeat(self, conf: SchedulerConf, *, news: bool, now: float) -> SessionResult | None:
        """The last session's result when the next session may be skipped, else None."""
        return self._result if self.may_skip(conf, news=news, now=now) else None

    def may_skip(self, conf: SchedulerConf, *, news: bool, now: float) -> bool:
        """Whether the next session would repeat the last one, which changed nothing."""
        quiet = (
            not news
            and self._since is not None
            and conf is self._conf
            and now - self._since < self.max_quiet
            and (self._until is None or now < self._until)
        )
        if quiet:
            self.skipped += 1
        return quiet
