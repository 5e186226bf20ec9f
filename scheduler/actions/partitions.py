"""Placing a job with sub-groups (partitions): each sub-group whole, or not at all.

Volcano v1.14's allocate for a job whose PodGroup has ``subGroupPolicy`` (the job controller
makes one per task with ``partitionPolicy``; ``scheduler.api.subgroups``): the sub-groups are
gangs within the gang. One turn of such a job:

- its sub-groups with pending pods are placed one at a time, in policy order then partition
  index; each in a Statement of its own, kept when the sub-group is ready or pipelined (its
  ``subGroupSize`` pods placed), else undone. A sub-group that does not fit leaves room for
  the next: the job needs ``minSubGroups`` of them, not a given one;
- a sub-group with ``networkTopology`` is placed under one HyperNode of its tier: HyperNodes
  of tier at most the allowed one, lowest tier first and, within a tier, the one already
  holding the sub-group's placed pods first, then the plugin's binpack score (the trial order
  of ``scheduler.actions.topology``); in hard mode a sub-group that fits under none is not
  placed, in soft mode it is then placed anywhere. Without the network-topology-aware plugin
  networkTopology is ignored, as for jobs;
- then the job's pods in no sub-group, as a topology-blind job's;
- at the end the kept statements are committed together when the job is ready (gang: its
  minAvailable, its tasks' minimums and minSubGroups of each policy), kept when it is
  pipelined, else all undone in reverse order: a job never starts with fewer than
  minSubGroups whole sub-groups.

Caldera places every sub-group that fits in one turn (the elastic ones beyond minSubGroups
too); Volcano gives elastic sub-groups later turns. A job that also sets a job-level
networkTopology places its sub-groups within the HyperNode its trial is on (``within``).

Why a sub-group did not fit is its pods' fit error, so their message, the PodGroup's condition
and a line of the job's wait record (``scheduler.why.partition_text``): "partition 3 of 4
(task worker, partition-id 2, 4 pods) has no rack with room".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from caldera.api.topology_tree import HyperNodeTree
from scheduler.actions.placer import Placer, fit_error_histogram, fits_idle
from scheduler.actions.topology import candidates
from scheduler.api.subgroups import SubGroup, sub_groups
from scheduler.api.types import JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.hypernodes import Constraint, constraint
from scheduler.framework.statement import Statement
from scheduler.why import partition_text

if TYPE_CHECKING:
    from scheduler.framework.session import Session

__all__ = ["place_with_sub_groups", "tier_label"]

_HOLDING = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
    }
)


def tier_label(tree: HyperNodeTree, rule: Constraint) -> str:
    """What a HyperNode of the rule's highest tier is called: its tier name ("rack") when the
    HyperNodes of that tier carry one, else "hypernode of tier <= N"; for a tier name no
    HyperNode carries, says so."""
    if rule.highest_tier is None:
        return f"hypernode of {rule.describe()} (no HyperNode has that tier)"
    if rule.spec.highest_tier_name:
        return rule.spec.highest_tier_name
    for island in tree.islands.values():
        if island.tier == rule.highest_tier and island.tier_name:
            return island.tier_name
    return f"hypernode of {rule.describe()}"


def _undo(stmt: Statement) -> None:
    """Discard, remembering each pod's tentative placement (as allocate's ``discard``)."""
    for op in stmt.operations:
        if op.op in ("allocate", "pipeline"):
            status = TaskStatus.ALLOCATED if op.op == "allocate" else TaskStatus.PIPELINED
            op.task.last_transaction = (status, op.node)
    stmt.discard()


def _place(
    ssn: Session,
    placer: Placer,
    queue: QueueInfo,
    tasks: Sequence[TaskInfo],
    nodes: frozenset[str] | None,
    stmt: Statement,
) -> str:
    """Place ``tasks`` in order (on ``nodes`` only, when given) until one fits nowhere; that
    one's fit error, "" when every pod was placed."""
    for task in tasks:
        if task.status != TaskStatus.PENDING or not ssn.allocatable(queue, task):
            continue
        if nodes is None:
            name, cand = placer.best(task)
            if name is None:
                return fit_error_histogram(len(ssn.nodes), cand.reason_counts)
        else:
            name = placer.best_among(task, nodes)
            if name is None:
                return "no node of the hypernode fits"
        if fits_idle(task.init_resreq, ssn.nodes[name]):
            stmt.allocate(task, name)
        else:
            stmt.pipeline(task, name)
    return ""


def _holding_pin(tree: HyperNodeTree, group: SubGroup) -> str | None:
    placed = {t.node_name for t in group.tasks if t.status in _HOLDING and t.node_name}
    return tree.lowest_common(placed) if placed else None


def _place_group(
    ssn: Session,
    placer: Placer,
    queue: QueueInfo,
    group: SubGroup,
    pending: Sequence[TaskInfo],
    within: frozenset[str] | None,
) -> tuple[Statement | None, str]:
    """(the kept statement placing ``group``, or None; why it did not fit)."""
    rule = (
        constraint(group.network_topology, ssn.cluster.hypernodes)
        if ssn.topology is not None
        else None
    )
    if rule is not None:
        tree = ssn.cluster.hypernodes
        need = max(group.size - group.count(frozenset(_HOLDING)), 1)
        request = Resources.sum(t.resreq for t in pending[:need])
        for name in candidates(ssn, rule, _holding_pin(tree, group), request):
            nodes = tree.islands[name].nodes
            stmt = ssn.statement()
            _place(ssn, placer, queue, pending, nodes if within is None else nodes & within, stmt)
            if group.ready() or group.pipelined():
                return stmt, ""
            _undo(stmt)
        if rule.hard:
            return None, f"has no {tier_label(tree, rule)} with room"
    stmt = ssn.statement()
    error = _place(ssn, placer, queue, pending, within, stmt)
    if group.ready() or group.pipelined():
        return stmt, ""
    _undo(stmt)
    return None, f"does not fit: {error}" if error else "does not fit"


def place_with_sub_groups(
    ssn: Session,
    placer: Placer,
    queue: QueueInfo,
    job: JobInfo,
    tasks: Sequence[TaskInfo],
    within: frozenset[str] | None = None,
) -> bool:
    """One turn of a job with sub-groups (see the module docstring); ``tasks``: its pending
    pods in task order. True when the job was committed or kept pipelined."""
    groups = sub_groups(job)
    grouped = {t.uid for g in groups for t in g.tasks}
    totals: dict[str, int] = {}
    for group in groups:
        totals[group.policy] = totals.get(group.policy, 0) + 1
    kept: list[Statement] = []
    for group in groups:
        members = {t.uid for t in group.tasks}
        pending = [t for t in tasks if t.uid in members and t.status == TaskStatus.PENDING]
        if not pending:
            continue
        stmt, why = _place_group(ssn, placer, queue, group, pending, within)
        if stmt is not None:
            kept.append(stmt)
            continue
        # The pods' fit error: their message, and a line of the job's wait record each.
        text = partition_text(group.index, totals[group.policy], group.policy, group.size, why)
        for task in pending:
            job.fit_errors[task.uid] = task.fit_error = text
    rest = [t for t in tasks if t.uid not in grouped and t.status == TaskStatus.PENDING]
    if rest:
        stmt = ssn.statement()
        error = _place(ssn, placer, queue, rest, within, stmt)
        if error:
            for task in rest:
                if task.status == TaskStatus.PENDING:
                    job.fit_errors[task.uid] = task.fit_error = error
        kept.append(stmt)
    if ssn.job_ready(job):
        for stmt in kept:
            stmt.commit()
        return True
    if job.is_pipelined() and ssn.job_pipelined(job):
        return True
    for stmt in reversed(kept):
        _undo(stmt)
    return False
