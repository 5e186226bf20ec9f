"""Jobs whose session outcome is known until they change, kept across sessions.

Most jobs of a busy cluster are running gangs with nothing to place: every session finds them
ready, gives them the Scheduled condition, leaves their PodGroup status as it is, has no wait
to explain and nothing to enqueue, allocate or backfill. A job is *settled* when a session
found exactly that (gang's close: ready, no pod waiting, its PodGroup already says so; the
session's close: the same status, not an unready phase, no wait record to write, and none of
its tasks changed by the session: a pod it bound is Binding only while its bind is assumed). While
nothing about it changes, a later session under the same configuration finds the same, so
the passes over every job (gang's close, the status and why-record pass, the actions, the live
snapshot's after-session pass) skip it.

What could change the outcome is named by the snapshot's ``JobTrail``: the job's tasks and
their statuses, its phase, its PodGroup (a changed PodGroup, annotations included, is derived
into a new JobInfo). A job the trail names is no longer settled, in or between sessions; a
configuration change forgets every job. Only the live snapshot keeps a trail, so only its
sessions skip settled jobs (``ClusterInfo.settled``); a snapshot built from scratch settles
nothing and every pass looks at every job, as before.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from scheduler.api.job_sums import JobTrail


class SettledJobs:
    """The settled jobs of a snapshot, by key, with the PodGroup phase each one keeps."""

    __slots__ = ("candidates", "phases", "position", "tiers", "unsettled_version", "version")

    def __init__(self, tiers: Sequence[object], position: int) -> None:
        self.tiers = tiers
        self.phases: dict[str, str] = {}
        self.position = position  # how much of the trail has been read
        self.version = 0  # moved on whenever a job settles or is unsettled
        self.unsettled_version = 0  # the version when a job was last unsettled
        # Every key that may name an unsettled job of the snapshot (and perhaps a job gone or
        # settled since): the keys of the unsettled jobs when last listed, with those the
        # trail named since. None until listed from every job (``track``), and again when
        # the trail was trimmed past what was read.
        self.candidates: set[str] | None = None

    def track(self, unsettled: set[str]) -> None:
        """Start keeping the candidates from ``unsettled``, every unsettled job's key."""
        self.candidates = unsettled

    def unsettled_keys(self, jobs: Container[str]) -> list[str] | None:
        """The keys of the unsettled jobs among ``jobs``, in no order (candidates of jobs gone
        are forgotten); None while the candidates are not kept."""
        candidates = self.candidates
        if candidates is None:
            return None
        candidates.difference_update([key for key in candidates if key not in jobs])
        return [key for key in candidates if key not in self.phases]

    def settle(self, key: str, phase: str) -> None:
        """The job is settled, its PodGroup in ``phase``."""
        self.phases[key] = phase
        self.version += 1
        if self.candidates is not None:
            self.candidates.discard(key)

    def refresh(self, trail: JobTrail) -> dict[str, str]:
        """Unsettle the jobs the trail names since the last refresh; the settled jobs."""
        changed = trail.since(self.position)
        if changed is None:  # trimmed past what was read: start again
            self.phases.clear()
            self.candidates = None
            self.version += 1
            self.unsettled_version = self.version
        elif changed:
            if self.candidates is not None:
                self.candidates.update(changed)
            phases = self.phases
            before = len(phases)
            for key in changed:
                phases.pop(key, None)
            if len(phases) != before:
                self.version += 1
                self.unsettled_version = self.version
        self.position = trail.end
        return self.phases
