"""The chaos run's invariants, computed from what the run observed: the pod stream (a ledger of
each pod's life), the objects at the end, and the processes' restarts.

Pure: the run feeds `PodLedger` from a pod watch and hands final objects in as plain values.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from e2e.chaos.workload import GONE, JobPlan

__all__ = [
    "GANG_WINDOW",
    "PodGroupCounts",
    "PodLedger",
    "PodLife",
    "duplicates",
    "gang_violations",
    "podgroup_mismatches",
    "queue_mismatches",
    "spread",
    "window_end",
    "wrong_jobs",
]

# A gang's binds arrive one by one; a scheduler killed in the middle binds the rest after its
# restart. A gang is partly bound when its binds do not reach minAvailable within this window
# of scheduling time: time in which a scheduler was acting and the API server serving (an
# outage of either pauses the clock, as no scheduler, however right, binds then).
GANG_WINDOW = 45.0
TERMINAL = ("Succeeded", "Failed")


@dataclass
class PodLife:
    """One pod (one UID) as the watch saw it; times are the run's clock, in seconds."""

    uid: str
    name: str
    job: str
    task: str
    index: str
    queue_group: str
    requests: tuple[int, int]  # milli-CPU, bytes of memory
    created: float
    bound: float | None = None
    node: str = ""
    phase: str = ""
    ended: float | None = None  # Succeeded or Failed first seen
    deleting: float | None = None  # deletionTimestamp first seen
    deleted: float | None = None

    @property
    def end_of_life(self) -> float | None:
        """When it stopped counting as a live pod: it finished, began terminating, or is gone."""
        times = [t for t in (self.ended, self.deleting, self.deleted) if t is not None]
        return min(times) if times else None


@dataclass
class PodLedger:
    """Every pod's life, built from watch events in arrival order."""

    lives: dict[str, PodLife] = field(default_factory=dict)

    def seen(
        self,
        t: float,
        *,
        uid: str,
        name: str,
        job: str,
        task: str,
        index: str,
        group: str,
        requests: tuple[int, int],
        node: str,
        phase: str,
        deleting: bool,
    ) -> None:
        life = self.lives.get(uid)
        if life is None:
            life = PodLife(uid, name, job, task, index, group, requests, created=t)
            self.lives[uid] = life
        if node and life.bound is None:
            life.bound, life.node = t, node
        life.phase = phase
        if phase in TERMINAL and life.ended is None:
            life.ended = t
        if deleting and life.deleting is None:
            life.deleting = t

    def gone(self, t: float, uid: str) -> None:
        life = self.lives.get(uid)
        if life is not None and life.deleted is None:
            life.deleted = t

    def of_job(self) -> dict[str, list[PodLife]]:
        by_job: dict[str, list[PodLife]] = defaultdict(list)
        for life in self.lives.values():
            by_job[life.job].append(life)
        return by_job


def wrong_jobs(plans: Sequence[JobPlan], final: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(job, expected, got) for each job whose final phase is not what its plan dictates; a job
    that no longer exists has the phase `GONE`."""
    wrong = []
    for plan in plans:
        got = final.get(plan.name, GONE)
        if got != plan.expected:
            wrong.append((plan.name, plan.expected, got))
    return wrong


def duplicates(lives: Iterable[PodLife]) -> list[tuple[str, str, str]]:
    """Pairs of pods (two UIDs) alive at once for the same task index of a Job (the same pod
    name), by that name."""
    by_slot: dict[tuple[str, str, str], list[PodLife]] = defaultdict(list)
    for life in lives:
        by_slot[(life.job, life.task, life.index)].append(life)
    found = []
    for slot in by_slot.values():
        slot.sort(key=lambda life: life.created)
        for earlier, later in itertools.pairwise(slot):
            end = earlier.end_of_life
            if end is None or later.created < end:
                found.append((earlier.name, earlier.uid, later.uid))
    return found


def window_end(start: float, window: float, outages: Sequence[tuple[float, float]]) -> float:
    """When ``window`` seconds outside ``outages`` (sorted, disjoint (from, to) intervals) have
    passed since ``start``."""
    end = start + window
    for begin, until in outages:
        if until <= start:
            continue
        if begin >= end:
            break
        end += until - max(begin, start)
    return end


def gang_violations(
    by_job: Mapping[str, Sequence[PodLife]],
    min_available: Mapping[str, int],
    window: float = GANG_WINDOW,
    outages: Sequence[tuple[float, float]] = (),
) -> list[tuple[str, float, int]]:
    """(job, time, pods) for each bind after which the job's bound pods did not reach its
    minAvailable within ``window`` of scheduling time (``outages`` pause it): counting the
    pods bound by then that had not failed or gone before the bind (a succeeded pod still
    counts, as it does for the gang), and the pods the job already had that were deleted
    unbound in that time (a restart policy tearing the gang down while its binds were in
    flight: the pod's bind then fails, and the gang was whole)."""
    found = []
    for job, lives in by_job.items():
        need = min_available.get(job)
        if need is None:
            continue
        for bind in sorted(life.bound for life in lives if life.bound is not None):
            until = window_end(bind, window, outages)
            count = sum(1 for life in lives if _counts_at(life, bind, until))
            if count < need:
                found.append((job, bind, count))
                break  # one per job is enough to name it
    return found


def _counts_at(life: PodLife, t: float, until: float) -> bool:
    if life.bound is None:
        return life.created <= t and life.deleting is not None and t <= life.deleting <= until
    if life.bound > until:
        return False
    if life.deleted is not None and life.deleted < t:
        return False
    if life.deleting is not None and life.deleting < t:
        return False
    return not (life.phase == "Failed" and life.ended is not None and life.ended < t)


@dataclass(frozen=True)
class PodGroupCounts:
    name: str
    queue: str
    running: int
    succeeded: int
    failed: int


def podgroup_mismatches(
    groups: Iterable[PodGroupCounts], pods: Iterable[tuple[str, str]]
) -> list[tuple[str, dict[str, int], dict[str, int]]]:
    """(group, status counts, counts from pods) for each PodGroup whose running / succeeded /
    failed counts differ from its pods' phases; ``pods`` are (group, phase) of pods that exist
    and are not terminating."""
    actual: dict[str, dict[str, int]] = defaultdict(
        lambda: {"running": 0, "succeeded": 0, "failed": 0}
    )
    for group, phase in pods:
        key = {"Running": "running", "Succeeded": "succeeded", "Failed": "failed"}.get(phase)
        if key:
            actual[group][key] += 1
    found = []
    for g in groups:
        status = {"running": g.running, "succeeded": g.succeeded, "failed": g.failed}
        if status != actual[g.name]:
            found.append((g.name, status, dict(actual[g.name])))
    return found


def queue_mismatches(
    allocated: Mapping[str, tuple[int, int]],
    bound: Iterable[tuple[str, tuple[int, int]]],
) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """(queue, status.allocated, sum of bound pods' requests) for each queue where they differ;
    ``bound`` are (queue, (milli-CPU, bytes)) of pods on a node that are neither finished nor
    terminating."""
    sums: dict[str, tuple[int, int]] = dict.fromkeys(allocated, (0, 0))
    for queue, (cpu, mem) in bound:
        have = sums.get(queue, (0, 0))
        sums[queue] = (have[0] + cpu, have[1] + mem)
    return [
        (q, allocated.get(q, (0, 0)), s) for q, s in sums.items() if allocated.get(q, (0, 0)) != s
    ]


def spread(values: Sequence[float]) -> str:
    """ "p50 / max" of seconds, or "-" for none."""
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} / {max(values):.1f}"
