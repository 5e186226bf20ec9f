"""Placing a job that sets networkTopology: one HyperNode at a time, lowest tier first.

Volcano's allocate for hard-mode jobs, with the HyperNode gradients of its
network-topology-aware plugin:

- the search: every HyperNode of tier at most the allowed one (``highestTierAllowed``, or the
  tier of ``highestTierName``); for a job with pods already placed (or a remembered HyperNode,
  the PodGroup's ``volcano.sh/job-allocated-hypernode``), only the HyperNodes under the highest
  allowed ancestor of where it sits, so later pods (a restarted task) join the others;
- the gradient: tier by tier, lowest first; within a tier the HyperNode already holding the
  job first, then by the plugin's binpack score (the fullest island that fits), then by name;
  a HyperNode whose idle and future-idle resources both lack what the gang still needs is
  skipped without a trial;
- a trial places the pending pods on that HyperNode's nodes only, in one Statement: committed
  when the gang is ready, kept when it is pipelined, else discarded and the next is tried.
  Volcano tries every HyperNode of a tier and keeps the best-scored success; the score does not
  depend on the trial, so trying in score order and stopping at the first success chooses the
  same HyperNode with fewer trials (``unit/test_sched_topology.py`` holds the two equal);
- hard mode: nothing fits, nothing is placed; every waiting pod's fit error (and so the
  PodGroup's Unschedulable condition and Event) says "no hypernode of tier <= N fits M pods";
- soft mode: nothing fits, the job is placed as a topology-blind one;
- a job with sub-groups (partitions) places them, each whole and each under one HyperNode of
  its own tier when it sets networkTopology, within the job's HyperNode
  (``scheduler.actions.partitions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from caldera.api.topology import JOB_ALLOCATED_HYPERNODE_KEY
from caldera.api.topology_tree import HyperNodeTree
from scheduler.actions.placer import Placer, fits_idle
from scheduler.api.subgroups import has_sub_groups
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.hypernodes import Constraint, constraint, fits
from scheduler.why import DETAIL

if TYPE_CHECKING:
    from scheduler.actions.room import RoomFinder
    from scheduler.framework.session import Session

# One try of preempt or reclaim at making room for a job; its argument says whether to note
# why it failed; True when it committed.
Attempting = Callable[[bool], bool]

HOLDING = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


def job_constraint(ssn: Session, job: JobInfo) -> Constraint | None:
    """The job's networkTopology when the plugin is configured, else None (topology-blind)."""
    if ssn.topology is None or job.podgroup is None:
        return None
    return constraint(job.podgroup.spec.network_topology, ssn.cluster.hypernodes)


def placed_nodes(job: JobInfo) -> set[str]:
    """The nodes holding the job's pods (placed, or promised to pipelined ones)."""
    by_status = job.by_status
    return {
        task.node_name
        for status in HOLDING
        if (bucket := by_status.get(status))
        for task in bucket.values()
        if task.node_name
    }


def pinned(tree: HyperNodeTree, job: JobInfo) -> str | None:
    """Where the job sits: the lowest HyperNode holding its placed pods, else the one its
    PodGroup remembers (if it still exists)."""
    nodes = placed_nodes(job)
    if nodes:
        return tree.lowest_common(nodes)
    remembered = (
        job.podgroup.metadata.annotations.get(JOB_ALLOCATED_HYPERNODE_KEY, "")
        if (job.podgroup is not None)
        else ""
    )
    return remembered if remembered in tree.islands else None


def search_space(tree: HyperNodeTree, rule: Constraint, pin: str | None) -> list[str]:
    """The HyperNodes a job may be placed under, before ordering."""
    highest = rule.highest_tier
    if highest is None:
        return []
    if pin is None:
        return [name for name, island in tree.islands.items() if island.tier <= highest]
    allowed = [a for a in tree.ancestors(pin) if tree.islands[a].tier <= highest]
    if not allowed:
        return []
    root = allowed[-1]
    out, stack = [], [root]
    while stack:
        name = stack.pop()
        if name in out:
            continue
        out.append(name)
        stack.extend(tree.islands[name].children)
    return [name for name in out if tree.islands[name].tier <= highest]


def still_needed(job: JobInfo, pending: Sequence[TaskInfo]) -> tuple[int, Resources]:
    """How many pods the gang still needs placed and what they request (the first ones in
    task order)."""
    count = min(max(job.min_available - job.ready_task_num(), 1), len(pending))
    first = pending[0].resreq
    for task in pending[1:count]:
        if task.resreq is not first:
            return count, Resources.sum(t.resreq for t in pending[:count])
    # A gang of like pods: their request times the count, one object per pair, so that the
    # HyperNodes' scores kept per request are found by identity (``HyperNodeState.in_tier``).
    key = (first, count)
    request = _GANG_REQUESTS.get(key)
    if request is None:
        if len(_GANG_REQUESTS) >= _MAX_GANG_REQUESTS:
            _GANG_REQUESTS.clear()
        request = _GANG_REQUESTS[key] = first.multiply(count)
    return count, request


# What ``still_needed`` asked before, by (pod request, count); forgotten whole past a bound.
_GANG_REQUESTS: dict[tuple[Resources, int], Resources] = {}
_MAX_GANG_REQUESTS = 1024


def gradient(
    ssn: Session, names: Iterable[str], request: Resources, pin: str | None
) -> list[tuple[str, bool]]:
    """(HyperNode, has room) in trial order: tier, holding the job first, score, name."""
    tree, state = ssn.cluster.hypernodes, ssn.topology
    assert state is not None
    holding = set(tree.ancestors(pin)) if pin else set()
    ranked = []
    for name in names:
        res = state.resources(name)
        room = fits(request, res.idle) or fits(request, res.future_idle)
        # Only HyperNodes with room are tried, so only they need a score.
        score = state.scorer.score(request, res) if room else 0.0
        ranked.append(((tree.islands[name].tier, name not in holding, -score, name), name, room))
    ranked.sort()
    return [(name, room) for _, name, room in ranked]


def candidates(
    ssn: Session, rule: Constraint, pin: str | None, request: Resources
) -> Iterator[str]:
    """The HyperNodes with room to try, in trial order (see ``gradient``), produced lazily:
    tier by tier, so that a job placed in a rack never ranks the spines. Without a pin the
    whole tier is searched through ``HyperNodeState.in_tier``'s groups."""
    tree, state = ssn.cluster.hypernodes, ssn.topology
    assert state is not None
    if pin is not None:
        for name, room in gradient(ssn, search_space(tree, rule, pin), request, pin):
            if room:
                yield name
        return
    highest = rule.highest_tier
    for tier in tree.tiers:
        if highest is None or tier > highest:
            return
        yield from state.in_tier(tier, request)


def trial(
    ssn: Session,
    placer: Placer,
    queue: QueueInfo,
    job: JobInfo,
    pending: Sequence[TaskInfo],
    nodes: frozenset[str],
) -> bool:
    """Place ``pending`` on ``nodes`` only; True (statement committed or kept) when the gang is
    ready or pipelined there, else everything undone. A job with sub-groups places them, each
    whole, within ``nodes`` (``scheduler.actions.partitions``)."""
    if has_sub_groups(job):
        # Imported here: partitions searches HyperNodes with this module's ``candidates``.
        from scheduler.actions.partitions import place_with_sub_groups

        return place_with_sub_groups(ssn, placer, queue, job, pending, within=nodes)
    stmt = ssn.statement()
    for task in pending:
        if task.status != TaskStatus.PENDING or not ssn.allocatable(queue, task):
            continue
        name = placer.best_among(task, nodes)
        if name is None:
            break
        if fits_idle(task.init_resreq, ssn.nodes[name]):
            stmt.allocate(task, name)
        else:
            stmt.pipeline(task, name)
    if ssn.job_ready(job):
        stmt.commit()
        return True
    if job.is_pipelined() and ssn.job_pipelined(job):
        return True
    stmt.discard()
    return False


def place_in_hypernode(
    ssn: Session,
    placer: Placer,
    queue: QueueInfo,
    job: JobInfo,
    tasks: Iterable[TaskInfo],
    rule: Constraint,
) -> bool:
    """One turn of a job with networkTopology. True when it was handled (placed, or waiting
    in hard mode); False when a soft-mode job found no HyperNode and should be placed as a
    topology-blind job. ``placer``: the action's, whose verdicts serve every HyperNode."""
    tree = ssn.cluster.hypernodes
    pending = [t for t in tasks if t.status == TaskStatus.PENDING]
    if not pending:
        return True
    pin = pinned(tree, job)
    count, request = still_needed(job, pending)
    for name in candidates(ssn, rule, pin, request):
        if trial(ssn, placer, queue, job, pending, tree.islands[name].nodes):
            remember(ssn, tree, job)
            return True
    if not rule.hard:
        return False
    message = f"no hypernode of {rule.describe()} fits {count} pods"
    for task in pending:
        if task.status == TaskStatus.PENDING:
            job.fit_errors[task.uid] = task.fit_error = message
    ssn.note_wait(job.key, DETAIL, message)
    return True


def remember(ssn: Session, tree: HyperNodeTree, job: JobInfo) -> None:
    """Record the lowest HyperNode holding the job's pods when it changed."""
    where = tree.lowest_common(placed_nodes(job))
    current = (
        job.podgroup.metadata.annotations.get(JOB_ALLOCATED_HYPERNODE_KEY)
        if job.podgroup is not None
        else None
    )
    if where is not None and where != current:
        ssn.result.podgroup_hypernode[job.key] = where


def eviction_domains(ssn: Session, job: JobInfo) -> list[frozenset[str]] | None:
    """For a hard-mode job, the node sets of the HyperNodes preempt and reclaim may evict in
    for it, one at a time (victims within one HyperNode): those whose capacity could hold
    what the gang still needs, widest first, at most ``hypernode.gradient.evict.max-hypernodes``
    of them (Volcano's eviction gradient: reversed, capped); None for any other job."""
    rule = job_constraint(ssn, job)
    if rule is None or not rule.hard or ssn.topology is None:
        return None
    tree, state = ssn.cluster.hypernodes, ssn.topology
    pending = sorted(job.tasks_in(TaskStatus.PENDING), key=ssn.task_order_key())
    _, request = still_needed(job, pending) if pending else (0, Resources())
    names = [
        n
        for n in search_space(tree, rule, pinned(tree, job))
        if fits(request, state.resources(n).allocatable)
    ]
    names.sort(key=lambda n: (-tree.islands[n].tier, n))
    return [tree.islands[n].nodes for n in names[: state.scorer.evict_max_hypernodes]]


def in_one_hypernode(ssn: Session, finder: RoomFinder, job: JobInfo, attempt: Attempting) -> None:
    """Run preempt's or reclaim's ``attempt(note)`` for ``job``: once, anywhere, for a job
    without hard networkTopology; else within one HyperNode at a time (``eviction_domains``)
    until one attempt commits. ``note`` is True for the last try only, so the job's wait
    record tells why the last HyperNode gave no room."""
    domains = eviction_domains(ssn, job)
    if domains is None:
        attempt(True)
        return
    for i, nodes in enumerate(domains):
        finder.restrict(nodes)
        try:
            if attempt(i == len(domains) - 1):
                return
        finally:
            finder.restrict(None)
