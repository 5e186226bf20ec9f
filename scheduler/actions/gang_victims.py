"""Victim bundles for gangpreempt and gangreclaim: which pods of a running gang may go, and in
what order (Volcano v1.15's bundle model, pkg/scheduler/actions/utils/bundle.go).

A victim job offers at most two bundles:

- safe: pods above its minAvailable (and above each task's minAvailable where the gang plugin
  checks those, minMember >= their sum); evicting any of them leaves the gang running whole.
  They are taken pod by pod, lowest-priority pods first;
- whole: every other pod the job holds (Allocated, Binding, Bound or Running). Evicting any of
  them breaks the gang, so they go together or not at all. Volcano's whole bundle holds only
  the pods on the domain's nodes and leaves the job's pods elsewhere running below
  minAvailable; here the bundle exists only when every pod the job holds may be evicted and
  sits on the domain's nodes, so no victim gang is ever left half running.

A job already below its minAvailable has no safe pods: it goes whole (Volcano lets any of its
pods go one by one, leaving the rest running broken).

Order (fewest and lowest-ranked victims first): safe bundles before whole ones; then, for
preemption, the victim job last in job order first (for reclaim, the victim queue last in queue
order first, then the job); then the bundle that frees most of what the preemptor needs per pod
of its job it destroys (Volcano's ROI: the bundle's local resources, capped at the need, over
the job's total for a whole bundle; a safe bundle destroys nothing); then the job's key.

A purely computational module with no side effects: callers pass what they read of the session.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from caldera.api.resources import Resources
from scheduler.api.types import ALLOCATED_STATUSES, READY_STATUSES, JobInfo, TaskInfo, TaskStatus

SAFE = 0
WHOLE = 1


@dataclass(frozen=True, slots=True)
class Bundle:
    """Pods of one victim job that go together (whole) or each on its own (safe)."""

    kind: int  # SAFE or WHOLE
    job: JobInfo
    tasks: tuple[TaskInfo, ...]
    local: Resources  # what the bundle frees on the domain's nodes

    @property
    def whole(self) -> bool:
        return self.kind == WHOLE


def _per_task_checks_apply(job: JobInfo) -> bool:
    """The gang plugin checks tasks' minimums only when minMember covers their sum."""
    return bool(job.min_task_member) and job.min_available >= sum(job.min_task_member.values())


def split(
    job: JobInfo,
    local: Sequence[TaskInfo],
    holding: Sequence[TaskInfo],
    *,
    order: Callable[[TaskInfo], Any],
) -> tuple[list[TaskInfo], list[TaskInfo]]:
    """(safe, whole) pods of ``job``. ``local``: its candidate pods on the domain's nodes;
    ``holding``: every pod it holds (in ``ALLOCATED_STATUSES``). Safe pods are the first
    local ones in ``order`` whose eviction keeps the gang ready; whole pods are all the other
    held pods, wherever they are (the caller offers them only when all may go)."""
    surplus = job.ready_task_num() - job.min_available
    roles: dict[str, int] = {}
    if surplus > 0 and _per_task_checks_apply(job):
        ready_by_role: dict[str, int] = {}
        for task in job.tasks.values():
            counted = task.status in READY_STATUSES or (
                task.status == TaskStatus.PENDING and task.best_effort
            )
            if counted:
                ready_by_role[task.role] = ready_by_role.get(task.role, 0) + 1
        roles = {r: ready_by_role.get(r, 0) - n for r, n in job.min_task_member.items()}
    safe: list[TaskInfo] = []
    for task in sorted(local, key=order):
        if surplus <= 0:
            break
        if task.role in roles:
            if roles[task.role] <= 0:
                continue
            roles[task.role] -= 1
        safe.append(task)
        surplus -= 1
    gone = {t.uid for t in safe}
    whole = sorted((t for t in holding if t.uid not in gone), key=order)
    return safe, whole


def bundles_of(
    job: JobInfo,
    local: Sequence[TaskInfo],
    *,
    nodes: frozenset[str] | None,
    evictable: Callable[[TaskInfo], bool],
    order: Callable[[TaskInfo], Any],
    allow_whole: bool,
) -> list[Bundle]:
    """The bundles ``job`` offers on the domain ``nodes`` (None: every node). ``local``: its
    candidate pods on those nodes; ``evictable``: whether one of its held pods may be evicted
    at all (status, preemptable, the action's filter). The whole bundle is offered only when
    every held pod it holds is evictable and on the domain's nodes."""
    holding = [t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES]
    safe, whole = split(job, local, holding, order=order)
    found: list[Bundle] = []
    if safe:
        found.append(Bundle(SAFE, job, tuple(safe), Resources.sum(t.resreq for t in safe)))
    if whole and allow_whole:
        inside = nodes is None or all(t.node_name in nodes for t in whole)
        if inside and all(evictable(t) for t in whole):
            found.append(Bundle(WHOLE, job, tuple(whole), Resources.sum(t.resreq for t in whole)))
    return found


def _score(res: Resources, need: Resources, *, cap: bool) -> float:
    score = 0.0
    for name, wanted in need.items():
        if wanted <= 0:
            continue
        value = res.get(name)
        if cap and value > wanted:
            value = wanted
        score += value / wanted
    return score


def roi(bundle: Bundle, need: Resources) -> float:
    """What a bundle frees of ``need`` per unit of its job it destroys (Volcano's bundleROI):
    infinite for a safe bundle, which destroys nothing."""
    if not bundle.whole:
        return math.inf
    destroyed = _score(Resources.sum(t.resreq for t in bundle.job.tasks.values()), need, cap=False)
    if destroyed == 0:
        return math.inf
    return _score(bundle.local, need, cap=True) / destroyed


def ordered(
    bundles: Iterable[Bundle],
    need: Resources,
    *,
    job_rank: Mapping[str, int],
    queue_rank: Mapping[str, int] | None = None,
) -> list[Bundle]:
    """Bundles in the order victims are taken (module docstring). ``job_rank``: each victim
    job's position in job order (0 first); ``queue_rank``: each queue's in queue order, for
    reclaim (None for preemption)."""

    def key(b: Bundle) -> tuple[int, int, int, float, str]:
        queue = -queue_rank.get(b.job.queue, 0) if queue_rank is not None else 0
        return (b.kind, queue, -job_rank.get(b.job.key, 0), -roi(b, need), b.job.key)

    return sorted(bundles, key=key)


def allowed_only(bundles: Iterable[Bundle], allowed: set[str]) -> list[Bundle]:
    """The bundles with only the pods the plugins allow (by uid): a safe bundle keeps those, a
    whole bundle stays only when every pod of it is allowed (Volcano's ApplyAllowedTasks)."""
    kept: list[Bundle] = []
    for b in bundles:
        tasks = tuple(t for t in b.tasks if t.uid in allowed)
        if b.whole:
            if len(tasks) == len(b.tasks):
                kept.append(b)
        elif tasks:
            kept.append(Bundle(SAFE, b.job, tasks, Resources.sum(t.resreq for t in tasks)))
    return kept
