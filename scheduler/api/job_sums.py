"""Per-group sums of what each job contributes, kept across sessions by difference.

Plugins that open a session by summing something of every job per queue or per namespace
(proportion's requests, drf's namespace allocations, overcommit's reservations, the queues'
allocation the session reports) would pass over every job in every session. A ``JobSums``
instead remembers each job's parts as of the job's state (the JobInfo itself, its
``generation`` and its phase, which together name everything the parts may read: see
``JobInfo.generation``) and, at each refresh, replaces only the parts of jobs whose state
changed, adds new jobs and takes out the jobs that went. On the live snapshot, whose
``JobTrail`` names every job that changed, that costs the handful of jobs a second changed;
elsewhere a refresh compares every job with what it kept (cheap), and on a snapshot built from
scratch it derives every job, once.

A sum is exactly what ``Resources.sum`` of the parts gives, listed resources included: each
resource's amount is kept with the number of parts that list it, and a resource no part lists
any more is dropped (so a resource listed as zero stays listed while a part lists it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

from caldera.api.resources import Resources

if TYPE_CHECKING:
    from scheduler.api.types import JobInfo

# What a job contributes: one vector per summed figure, always the same number of them.
Parts = tuple[Resources, ...]
V = TypeVar("V")


def by_queue(job: JobInfo) -> str:
    return job.queue


def by_namespace(job: JobInfo) -> str:
    return job.namespace


def held(job: JobInfo) -> Parts:
    """What the job's placed tasks hold (``JobInfo.allocated``), as the only figure."""
    return (job.allocated,)


class JobTrail:
    """The keys of the jobs that changed, in order: tasks added or removed, a task's status,
    the phase, the JobInfo derived again or gone. The live snapshot keeps one (and attaches
    every job to it, ``ChangeLog.trail``) so that sums look again only at the jobs it names
    since they last looked; it is trimmed to what the sums still need."""

    __slots__ = ("base", "keys")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.base = 0  # the absolute position of ``keys[0]``

    @property
    def end(self) -> int:
        return self.base + len(self.keys)

    def since(self, position: int) -> list[str] | None:
        """The keys appended since ``position``; None when some were trimmed."""
        if position < self.base:
            return None
        return self.keys[position - self.base :]

    def trim(self, position: int) -> None:
        """Forget the keys before ``position`` (no reader needs them)."""
        if position > self.base:
            del self.keys[: position - self.base]
            self.base = position


class _Tally:
    """One group's sum of one figure: each resource's amount and how many parts list it."""

    __slots__ = ("amounts", "cached", "listed")

    def __init__(self) -> None:
        self.amounts: dict[str, int] = {}
        self.listed: dict[str, int] = {}
        self.cached: Resources | None = Resources()

    def add(self, part: Resources, sign: int) -> None:
        items = part.items()
        if not items:  # nothing listed (``is_empty`` would also skip listed zeros)
            return
        amounts, listed = self.amounts, self.listed
        for name, amount in items:
            count = listed.get(name, 0) + sign
            if count:
                listed[name] = count
                amounts[name] = amounts.get(name, 0) + sign * amount
            else:
                del listed[name]
                del amounts[name]
        self.cached = None

    def total(self) -> Resources:
        if self.cached is None:
            self.cached = Resources(self.amounts)
        return self.cached


class JobMap(Generic[V]):
    """``derive(job)`` for every job, kept by the job's state (the JobInfo, its generation
    and its phase) and derived again only for jobs that changed: with a ``JobTrail`` that
    has every change since the last refresh, only the jobs it names are looked at; else
    every job is compared with what was kept. ``changed`` hears each replaced value (None
    for a job that came or went)."""

    __slots__ = ("_derive", "_state", "changed", "position", "values")

    def __init__(
        self,
        derive: Callable[[JobInfo], V],
        changed: Callable[[str, V | None, V | None], None] | None = None,
    ) -> None:
        self._derive = derive
        self.changed = changed
        self.values: dict[str, V] = {}  # by job key (read only)
        self._state: dict[str, tuple[JobInfo, int, str]] = {}
        # How much of the snapshot's trail has been read (None: no trail; the next refresh
        # compares every job).
        self.position: int | None = None

    def refresh(self, jobs: Mapping[str, JobInfo], trail: JobTrail | None = None) -> None:
        """Bring the values to ``jobs`` as they are now."""
        if trail is not None and self.position is not None:
            changed = trail.since(self.position)
            if changed is not None:
                for key in dict.fromkeys(changed):  # each once, in order
                    self._update(key, jobs.get(key))
                self.position = trail.end
                return
        state = self._state
        for key, job in jobs.items():
            kept = state.get(key)
            if (
                kept is None
                or kept[0] is not job
                or kept[1] != job.generation
                or kept[2] != job.phase
            ):
                self._update(key, job)
        if len(state) > len(jobs):
            for key in [k for k in state if k not in jobs]:
                self._update(key, None)
        self.position = trail.end if trail is not None else None

    def _update(self, key: str, job: JobInfo | None) -> None:
        """Derive the job's value again (None: it went)."""
        kept = self._state.get(key)
        if (
            job is not None
            and kept is not None
            and kept[0] is job
            and kept[1] == job.generation
            and kept[2] == job.phase
        ):
            return
        old = self.values.pop(key, None)
        new: V | None = None
        if job is None:
            self._state.pop(key, None)
        else:
            new = self.values[key] = self._derive(job)
            self._state[key] = (job, job.generation, job.phase)
        if self.changed is not None and (old is not None or new is not None):
            self.changed(key, old, new)


class JobSums:
    """Sums per group of ``parts_of(job)``, the group being ``group_of(job)``."""

    __slots__ = ("_members", "_tallies", "_width", "jobs")

    def __init__(
        self,
        group_of: Callable[[JobInfo], str],
        parts_of: Callable[[JobInfo], Parts],
        width: int,
    ) -> None:
        self._width = width
        self._tallies: dict[str, list[_Tally]] = {}
        self._members: dict[str, int] = {}  # jobs per group
        # Each job's group and parts, kept by its state.
        self.jobs: JobMap[tuple[str, Parts]] = JobMap(
            lambda job: (group_of(job), parts_of(job)), self._replaced
        )

    @property
    def position(self) -> int | None:
        return self.jobs.position

    def refresh(self, jobs: Mapping[str, JobInfo], trail: JobTrail | None = None) -> None:
        """Bring the sums to ``jobs`` as they are now (``JobMap.refresh``)."""
        self.jobs.refresh(jobs, trail)

    def _replaced(
        self, key: str, old: tuple[str, Parts] | None, new: tuple[str, Parts] | None
    ) -> None:
        if old is not None:
            self._apply(old, -1)
        if new is not None:
            self._apply(new, +1)

    def _apply(self, entry: tuple[str, Parts], sign: int) -> None:
        group, parts = entry
        tallies = self._tallies.get(group)
        if tallies is None:
            tallies = self._tallies[group] = [_Tally() for _ in range(self._width)]
        for tally, part in zip(tallies, parts, strict=True):
            tally.add(part, sign)
        members = self._members.get(group, 0) + sign
        if members:
            self._members[group] = members
        else:  # the group's last job went: nothing is listed in its sums any more
            del self._members[group], self._tallies[group]

    def total(self, group: str, figure: int = 0) -> Resources:
        """The sum of figure ``figure`` over the group's jobs (empty for a group without)."""
        tallies = self._tallies.get(group)
        return Resources() if tallies is None else tallies[figure].total()

    def groups(self) -> list[str]:
        """The groups with a job in them."""
        return list(self._members)
