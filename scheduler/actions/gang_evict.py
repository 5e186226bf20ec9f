"""Evicting whole victim bundles for a whole gang: the engine gangpreempt and gangreclaim share
(Volcano v1.15's gang-aware eviction, pkg/scheduler/actions/gangpreempt and utils/simulate.go).

For one starving job, in each domain in turn (every node; for a job whose networkTopology is
hard, one HyperNode's nodes at a time, ``scheduler.actions.topology.eviction_domains``, at most
``maxDomains`` of them):

    target  = the job's pending pods that need room, in task order (all of them when the job
              is already pipelined, as Volcano's running-job case; else as many as make it
              pipelined: minAvailable and each task's minAvailable)
    need    = what the first pods the gang still lacks request
    bundles = the victim bundles the domain offers (``scheduler.actions.gang_victims``), in
              victim order, with the pods the plugins' victim functions allow (gang's vote is
              the bundle model itself), asked bundle by bundle about the pods accepted so far
              plus the bundle's, until they cover twice the need
    evict bundle after bundle (a safe bundle pod by pod) in one Statement; once the domain's
    future idle plus what was evicted covers ``need``, try to pipeline the target on the
    domain's nodes (queue permitting, ``scheduler.actions.room.queue_takes``) in a nested trial;
    a failed trial is undone and the next bundle is added, then tried again
    commit evictions and pipelining only when the job is then pipelined; otherwise discard
    everything: no pod is evicted for a gang that would not fit.

A job whose gang would not fit after evicting N pods records "gang would not fit after
evicting N pods: nothing evicted" in its wait record. A failure is remembered for the job's
shape while no node changes, so a backlog of like gangs is not tried again pod by pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from caldera.api.resources import Resources
from scheduler.actions import gang_victims
from scheduler.actions.placer import Placer
from scheduler.actions.room import eligible, pending_in_order, queue_takes, shape
from scheduler.actions.topology import eviction_domains, still_needed
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement
from scheduler.why import DETAIL

MAX_DOMAINS_KEY = "maxDomains"
ALLOW_WHOLE_BUNDLE_KEY = "allowWholeBundle"
DEFAULT_MAX_DOMAINS = 8  # Volcano's
# The plugins whose victim vote the bundle model replaces (gang permits every candidate in
# Volcano's UnifiedEvictableFn: the bundles keep minAvailable themselves).
BUNDLE_PLUGINS = frozenset({"gang"})


def gang_arguments(action: str, raw: Mapping[str, Any]) -> tuple[int, bool]:
    """(maxDomains, allowWholeBundle) from the action's configuration arguments. A maxDomains
    at or below 0 falls back to 8, as Volcano's does; a value of the wrong type is an error
    naming the action and the argument."""
    max_domains: Any = raw.get(MAX_DOMAINS_KEY, DEFAULT_MAX_DOMAINS)
    if isinstance(max_domains, str) and max_domains.strip().lstrip("-").isdigit():
        max_domains = int(max_domains)
    if isinstance(max_domains, bool) or not isinstance(max_domains, int):
        raise ValueError(
            f"action {action}: argument {MAX_DOMAINS_KEY} must be a whole number, "
            f"got {max_domains!r}"
        )
    allow: Any = raw.get(ALLOW_WHOLE_BUNDLE_KEY, True)
    if isinstance(allow, str) and allow.lower() in ("true", "false"):
        allow = allow.lower() == "true"
    if not isinstance(allow, bool):
        raise ValueError(
            f"action {action}: argument {ALLOW_WHOLE_BUNDLE_KEY} must be true or false, "
            f"got {allow!r}"
        )
    return (max_domains if max_domains > 0 else DEFAULT_MAX_DOMAINS), allow


def nothing_evicted(action: str, evicted: int) -> str:
    """The wait-record line of a gang whose preemption was abandoned."""
    return f"{action}: gang would not fit after evicting {evicted} pods: nothing evicted"


def no_room(action: str) -> str:
    """The wait-record line of a gang for which even every pod that may go would not free
    enough."""
    return f"{action}: evicting every pod that may go would not free enough for the gang"


class GangEvictor:
    """One action's gang-aware eviction (see the module docstring)."""

    def __init__(
        self,
        ssn: Session,
        *,
        kind: CallbackKind,
        reason: str,
        statuses: Iterable[TaskStatus],
        max_domains: int,
        allow_whole: bool,
    ) -> None:
        self.ssn = ssn
        self.kind = kind
        self.reason = reason  # the eviction reason: the action's name
        self.statuses = frozenset(statuses)
        self.max_domains = max_domains
        self.allow_whole = allow_whole
        self.placer = Placer(ssn)
        self.victim_key = ssn.victim_order_key()
        screens = ssn.victim_screens(kind)
        self.screens = [s for plugin, s in screens if plugin not in BUNDLE_PLUGINS]
        # Failed job shapes, each with the node log's length after the failure and its note.
        self.failed: dict[tuple[object, ...], tuple[int, str]] = {}

    # ---- per job ----------------------------------------------------------------------------

    def try_job(
        self,
        queue: QueueInfo,
        job: JobInfo,
        owners: Sequence[JobInfo],
        candidate: Callable[[TaskInfo], bool],
        *,
        queue_rank: Mapping[str, int] | None = None,
        domains: Sequence[frozenset[str]] | None = None,
    ) -> bool:
        """Make room for ``job`` and pipeline it, or change nothing; True when committed.
        ``owners``: the jobs victims may come from; ``candidate``: whether one of their pods
        may be a victim at all (the action's status, queue and priority rules); ``domains``:
        the node sets to try, instead of the job's (a reservation's nodes)."""
        ssn = self.ssn
        pending = pending_in_order(ssn, job)
        if not pending:
            return False
        memo = self._memo_key(queue, job, pending) if domains is None else None
        known = self.failed.get(memo) if memo is not None else None
        if known is not None and known[0] == len(ssn.node_changes):
            if known[1]:
                ssn.note_wait(job.key, DETAIL, known[1])
            return False
        tried_domains: list[frozenset[str] | None]
        hard = eviction_domains(ssn, job) if domains is None else domains
        tried_domains = [None] if hard is None else list(hard[: self.max_domains])
        evicted = -1
        for nodes in tried_domains:
            done, tried = self._in_domain(queue, job, pending, nodes, owners, candidate, queue_rank)
            if done:
                return True
            evicted = max(evicted, tried)
        note = ""
        if evicted > 0:
            note = nothing_evicted(self.reason, evicted)
        elif tried_domains:
            note = no_room(self.reason)
        if note:
            ssn.note_wait(job.key, DETAIL, note)
        if memo is not None:
            self.failed[memo] = (len(ssn.node_changes), note)
        return False

    def _memo_key(
        self, queue: QueueInfo, job: JobInfo, pending: Sequence[TaskInfo]
    ) -> tuple[object, ...] | None:
        """What the attempt reads of a job that holds nothing (its shape); None for a job that
        holds pods, whose own pods change what the others may give."""
        if job.count(TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND) or job.count(
            TaskStatus.RUNNING, TaskStatus.PIPELINED, TaskStatus.RELEASING
        ):
            return None
        return (
            queue.name,
            job.namespace,
            job.priority,
            job.min_available,
            tuple(sorted(job.min_task_member.items())),
            tuple(shape(t) for t in pending),
        )

    def _targets(self, job: JobInfo, pending: Sequence[TaskInfo]) -> tuple[bool, Resources]:
        """(whether every pending pod must be placed, what the gang needs at least)."""
        if self._pipelined(job):
            return True, Resources.sum(t.init_resreq for t in pending)
        count, _ = still_needed(job, pending)
        return False, Resources.sum(t.init_resreq for t in pending[:count])

    def _pipelined(self, job: JobInfo) -> bool:
        return job.is_pipelined() and self.ssn.job_pipelined(job)

    # ---- per domain -------------------------------------------------------------------------

    def _in_domain(
        self,
        queue: QueueInfo,
        job: JobInfo,
        pending: Sequence[TaskInfo],
        nodes: frozenset[str] | None,
        owners: Sequence[JobInfo],
        candidate: Callable[[TaskInfo], bool],
        queue_rank: Mapping[str, int] | None,
    ) -> tuple[bool, int]:
        """One domain's attempt: (committed, most pods evicted in a failed trial)."""
        ssn = self.ssn
        place_all, need = self._targets(job, pending)
        idle = self._future_idle(nodes)
        stmt = ssn.statement()
        if need.less_equal(idle) and self._trial(queue, job, pending, nodes, place_all, stmt):
            return True, 0
        bundles = self._bundles(job, pending[0], nodes, owners, candidate, need, queue_rank)
        freed = Resources()
        evicted = 0
        tried = -1  # pods evicted at the last failed trial; -1: no trial yet
        for bundle in bundles:
            for task in bundle.tasks:
                stmt.evict(task, self.reason)
                evicted += 1
                freed = freed + task.resreq
                # Pod by pod up to the first trial, so that no more pods go than the need
                # asks; after a failed trial only at bundle ends (a trial places a gang).
                if tried < 0 and not bundle.whole and need.less_equal(idle + freed):
                    if self._trial(queue, job, pending, nodes, place_all, stmt):
                        return True, 0
                    tried = evicted
            if evicted > tried and need.less_equal(idle + freed):
                if self._trial(queue, job, pending, nodes, place_all, stmt):
                    return True, 0
                tried = evicted
        stmt.discard()
        return False, tried

    def _future_idle(self, nodes: frozenset[str] | None) -> Resources:
        ssn = self.ssn
        names: Iterable[str] = ssn.nodes if nodes is None else nodes
        return Resources.sum(
            ssn.nodes[n].future_idle() for n in names if n in ssn.nodes and ssn.nodes[n].ready
        )

    def _bundles(
        self,
        job: JobInfo,
        preemptor: TaskInfo,
        nodes: frozenset[str] | None,
        owners: Sequence[JobInfo],
        candidate: Callable[[TaskInfo], bool],
        need: Resources,
        queue_rank: Mapping[str, int] | None,
    ) -> list[gang_victims.Bundle]:
        """The domain's victim bundles the plugins allow, in victim order."""
        ssn = self.ssn
        statuses = self.statuses

        def evictable(task: TaskInfo) -> bool:
            return task.status in statuses and task.preemptable and candidate(task)

        found: list[gang_victims.Bundle] = []
        victims: list[JobInfo] = []
        for owner in owners:
            if owner.key == job.key or not all(s(preemptor, owner) for s in self.screens):
                continue
            local = [
                t
                for t in owner.tasks_in(*statuses)
                if t.node_name
                and (nodes is None or t.node_name in nodes)
                and not t.resreq.is_empty()
                and evictable(t)
                and self._node_ready(t.node_name)
            ]
            if not local:
                continue
            offered = gang_victims.bundles_of(
                owner,
                local,
                nodes=nodes,
                evictable=evictable,
                order=self.victim_key,
                allow_whole=self.allow_whole,
            )
            if offered:
                victims.append(owner)
                found.extend(offered)
        if not found:
            return []
        job_rank = {j.key: i for i, j in enumerate(ssn.sorted_jobs(victims))}
        found = gang_victims.ordered(found, need, job_rank=job_rank, queue_rank=queue_rank)
        # The plugins are asked bundle by bundle, each time about the pods accepted so far
        # plus the bundle's: plugins that judge victims together (proportion keeps a queue
        # at its deserved share) then spend their allowance on whole bundles in victim order,
        # not on the first pods of a flat list, which would cut a whole bundle in two and lose
        # it. Asking stops once what was accepted covers twice the need (slack for trials
        # that fail on fragmentation).
        accepted: list[gang_victims.Bundle] = []
        taken: list[TaskInfo] = []
        covered = Resources()
        enough = need.multiply(2)
        for bundle in found:
            allowed = ssn.victims_without(
                self.kind, preemptor, [*taken, *bundle.tasks], BUNDLE_PLUGINS
            )
            uids = {t.uid for t in allowed}
            if any(t.uid not in uids for t in taken):
                continue  # the bundle would cost an accepted pod its place
            for kept in gang_victims.allowed_only([bundle], uids):
                accepted.append(kept)
                taken.extend(kept.tasks)
                covered = covered + kept.local
            if enough.less_equal(covered):
                break
        return accepted

    def _node_ready(self, name: str) -> bool:
        node = self.ssn.nodes.get(name)
        return node is not None and node.ready

    def _trial(
        self,
        queue: QueueInfo,
        job: JobInfo,
        pending: Sequence[TaskInfo],
        nodes: frozenset[str] | None,
        place_all: bool,
        evictions: Statement,
    ) -> bool:
        """Pipeline the target on the domain's nodes; on success commit ``evictions`` and the
        placements (True), else undo the placements only (False)."""
        ssn = self.ssn
        trial = ssn.statement()
        placed = False
        for task in pending:
            if task.status != TaskStatus.PENDING:
                continue
            name = self._best(task, nodes) if queue_takes(ssn, queue, task) else None
            if name is None:
                if place_all:
                    break
                continue
            trial.pipeline(task, name)
            placed = True
            if not place_all and self._pipelined(job):
                break
        whole = all(t.status != TaskStatus.PENDING for t in pending) if place_all else True
        if placed and whole and self._pipelined(job):
            evictions.commit()
            trial.commit()
            return True
        trial.discard()
        return False

    def _best(self, task: TaskInfo, nodes: frozenset[str] | None) -> str | None:
        """The best node of the domain for ``task`` among those where it fits once what is
        being released is gone (the placer's verdicts count future idle resources)."""
        if nodes is None:
            name, _ = self.placer.best(task)
        else:
            name = self.placer.best_among(task, nodes)
        if name is None:
            return None
        node = self.ssn.nodes[name]
        if node.ready and task.init_resreq.less_equal(node.future_idle()):
            return name
        # The placer's best fails a test placing adds (a node not ready, or overdrawn in a
        # resource the task does not request): ask every node of the domain.
        ssn = self.ssn
        best: tuple[float, str] | None = None
        for candidate in ssn.nodes.values() if nodes is None else (ssn.nodes.get(n) for n in nodes):
            if candidate is None or not candidate.ready:
                continue
            if not task.init_resreq.less_equal(candidate.future_idle()):
                continue
            if ssn.predicate(task, candidate) is not None:
                continue
            key = (-ssn.node_score(task, candidate), candidate.name)
            if best is None or key < best:
                best = key
        return None if best is None else best[1]


def starving_by_queue(ssn: Session) -> dict[str, list[JobInfo]]:
    """The starving jobs (``session.job_starving``; admitted, valid, in a known queue) by
    queue: the gangs that may evict."""
    starving: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if eligible(ssn, job) and ssn.job_starving(job):
            starving.setdefault(job.queue, []).append(job)
    return starving


def jobs_by_queue(ssn: Session, *statuses: TaskStatus) -> dict[str, list[JobInfo]]:
    """The jobs holding a pod in ``statuses``, by queue: where victims may come from. Indexed
    once per action: the action only evicts and pipelines, so no pod enters those statuses."""
    found: dict[str, list[JobInfo]] = {}
    for job in ssn.jobs.values():
        if job.count(*statuses):
            found.setdefault(job.queue, []).append(job)
    return found


class GangAction:
    """What gangpreempt and gangreclaim share: Volcano's arguments (``gang_arguments``) and an
    evictor asking the plugins' victim functions of ``kind`` about pods in ``statuses``."""

    name: str
    kind: CallbackKind
    statuses: frozenset[TaskStatus]

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.max_domains, self.allow_whole = gang_arguments(self.name, self.arguments)

    def evictor(self, ssn: Session) -> GangEvictor:
        return GangEvictor(
            ssn,
            kind=self.kind,
            reason=self.name,
            statuses=self.statuses,
            max_domains=self.max_domains,
            allow_whole=self.allow_whole,
        )
