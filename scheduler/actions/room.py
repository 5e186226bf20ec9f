"""Making room for a pending task by evicting others: the node walk preempt and reclaim share.

For one preemptor (Volcano's preempt and reclaim):

    nodes: those whose predicates pass once every candidate victim on them is gone
           (predicates never check resources), ordered: nodes where the task already fits
           first, then by node score (with the batch node scores of a cross-node task,
           inter-pod affinity's and spread's, taken over these nodes), then name
    on the first node where it works:
        if the task fits there and its queue may take it, and free room may be used:
            pipeline it there, evicting nobody
        else victims = the plugins' choice among the node's candidates; evict them in victim
            order until the task fits and its queue may take it, then pipeline it there
    a node where even every victim would not make room is skipped, and evictions tried on a
    node where the task still does not fit are undone at once

A pod with DRA claims may need victims for their devices rather than their resources, and
its predicate reads the devices free in the session, not the node's tasks: for it every node
with candidates is tried, and victims are evicted until it fits *and* its predicates pass
(each eviction frees the victim's devices once no other pod uses its claims;
``scheduler.plugins.dynamic_resources``). A pod the session judges cross-node (inter-pod
affinity: its predicates read the pods of the node's whole topology domain, which a copy of
the node without its victims does not show) is walked the same way. The reference walk has no
such pods.

``RoomFinder`` gives exactly the answer of that walk (``unit/sched_reference.py`` keeps the
walk as it is written above, and a differential test holds the two to the same decisions)
while looking only where something can happen:

- free room comes from a ``Placer``, which re-evaluates only the nodes that changed since a pod
  of the same class last looked (the first node of the walk that takes the task without
  eviction is the placer's best node);
- victims are looked for only on the nodes of jobs that can give one: the plugin of each
  deciding victim function may screen a whole job out (its ``Speedups.victim_screen``, read
  by ``Session.victim_jobs``: priority rules out jobs of equal or higher priority, gang jobs
  at minAvailable, proportion and capacity queues at or below their share; without screens
  every job's nodes are looked at), and a node none of whose candidates belongs to a
  screened-in job cannot yield a victim, so it is not scored or asked about;
- ``Shapes`` remembers the task shapes that found no room in a state nothing has changed
  since, so a gang's other tasks of the same shape are not tried again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from caldera.api.resources import Resources
from scheduler.actions.placer import Placer
from scheduler.api.dra.view import has_claims
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import CallbackKind
from scheduler.framework.session import Session
from scheduler.framework.statement import Statement

# The victim functions a finder asks: CallbackKind.PREEMPTABLE or CallbackKind.RECLAIMABLE.
VictimKind = CallbackKind
# Why a plugin's victim screen rules a job out, for the wait record (scheduler.why).
SCREEN_PHRASES = {
    "priority": "equal or higher priority",
    "gang": "at minAvailable",
    "proportion": "queue at or below its deserved share",
    "capacity": "queue at or below its deserved share",
    "preemption-toleration": "tolerating this preemptor",
}


def wants_room(task: TaskInfo) -> bool:
    """A pending task that needs resources and is not held by a scheduling gate."""
    if task.best_effort:
        return False
    return task.pod is None or not task.pod.spec.scheduling_gates


def node_without(node: NodeInfo, leaving: Sequence[TaskInfo]) -> NodeInfo:
    """A copy of ``node`` as it would be without ``leaving`` (for predicates only)."""
    gone = {t.uid for t in leaving}
    copy = NodeInfo(
        name=node.name,
        allocatable=node.allocatable,
        node=node.node,
        ready=node.ready,
        unschedulable=node.unschedulable,
        max_pods=node.max_pods,
    )
    for task in node.tasks.values():
        if task.uid not in gone:
            copy.add_task(task)
    return copy


def batch_scores(ssn: Session, task: TaskInfo, nodes: Sequence[NodeInfo]) -> dict[str, float]:
    """The batch node order scores (inter-pod affinity's, spread's ScheduleAnyway) of a
    cross-node task over ``nodes``, which the walk adds to the node score as Volcano's preempt
    does (``util.PrioritizeNodes``); none for any other task, whose walk they do not change."""
    if not nodes or not ssn.cross_node(task):
        return {}
    return ssn.batch_node_scores(task, nodes)


def queue_takes(ssn: Session, queue: QueueInfo, task: TaskInfo) -> bool:
    """The queue may take the task: not overused and allocatable (Volcano's
    preemptorFitsOnNode). Without it the room made would go unused: allocate would refuse the
    task next session, the victim would come back, and the eviction would happen again."""
    return not ssn.overused(queue) and ssn.allocatable(queue, task)


def fits(ssn: Session, queue: QueueInfo, task: TaskInfo, node: NodeInfo) -> bool:
    """The task fits the node's future idle resources and its queue may take it."""
    return queue_takes(ssn, queue, task) and task.init_resreq.less_equal(node.future_idle())


class Attempt:
    """The statements of one job's attempt, one per placed task, committed or discarded
    together (each statement holds only work that succeeded on its node)."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []

    def commit(self) -> None:
        for stmt in self.statements:
            stmt.commit()
        self.statements.clear()

    def discard(self) -> None:
        for stmt in reversed(self.statements):
            stmt.discard()
        self.statements.clear()

    def finish(self, ssn: Session, job: JobInfo) -> bool:
        """Commit if the job is now pipelined, else discard: a gang is never left half
        evicted for. True when committed."""
        if ssn.job_pipelined(job):
            self.commit()
            return True
        self.discard()
        return False


def pending_in_order(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that need room, in task order."""
    tasks = [t for t in job.tasks_in(TaskStatus.PENDING) if wants_room(t)]
    return sorted(tasks, key=ssn.task_order_key())


def eligible(ssn: Session, job: JobInfo) -> bool:
    """A job that may take others' resources: admitted, in a known queue, valid."""
    return job.phase != "Pending" and job.queue in ssn.queues and ssn.job_valid(job) is None


class JobLine:
    """Jobs waiting for a turn, handed out first in the session's current job order.

    The order moves only when the session's state does (shares, readiness), and every such
    change goes through a statement that touches a node; so the line is sorted again only when
    the session's node log has grown since, and otherwise the next job is the next in line.
    The job order is total (ties fall back to creation time and key), so this hands out the
    jobs that taking the first in order afresh each time would, in the same order."""

    def __init__(self, ssn: Session, jobs: Iterable[JobInfo]) -> None:
        self.ssn = ssn
        self.waiting = list(jobs)
        self.sorted_at = -1  # the log length when ``waiting`` was sorted; -1: never

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def pop(self) -> JobInfo:
        changes = len(self.ssn.node_changes)
        if changes != self.sorted_at:
            self.waiting.sort(key=self.ssn.job_order_key(), reverse=True)
            self.sorted_at = changes
        return self.waiting.pop()


def shape(task: TaskInfo) -> tuple[object, ...]:
    """What the node walk reads of a preemptor besides its job: two tasks of one job with the
    same shape find room, or fail to, alike."""
    pod = task.pod
    return (
        task.role,
        task.priority,
        task.init_resreq,
        task.resreq,
        task.signature,
        (pod.spec.priority_class_name, pod.spec.preemption_policy) if pod is not None else None,
        # Topology spread reads the pod's labels too (its selectors may match per-pod labels).
        tuple(sorted(pod.metadata.labels.items()))
        if pod is not None and pod.spec.topology_spread_constraints
        else None,
    )


class Shapes:
    """The shapes that found no room, each with the session's change count at that moment:
    while no node has changed since, the same shape finds none again."""

    def __init__(self, ssn: Session) -> None:
        self.log = ssn.node_changes
        self.failed: dict[tuple[object, ...], int] = {}

    def known_to_fail(self, task: TaskInfo) -> bool:
        return self.failed.get(shape(task)) == len(self.log)

    def failed_now(self, task: TaskInfo) -> None:
        """Remember that ``task`` found no room (or its queue refused it) in the current
        state, which it did not change."""
        self.failed[shape(task)] = len(self.log)

    def try_room(
        self, task: TaskInfo, find: Callable[[TaskInfo], Statement | None]
    ) -> Statement | None:
        """``find(task)`` unless the shape is known to fail; a failure is remembered only when
        the walk changed nothing on its way (an undone eviction reorders a node's tasks)."""
        if self.known_to_fail(task):
            return None
        before = len(self.log)
        stmt = find(task)
        if stmt is None and len(self.log) == before:
            self.failed[shape(task)] = before
        return stmt


class RoomFinder:
    """The node walk of one action (preempt or reclaim); see the module docstring."""

    def __init__(
        self, ssn: Session, kind: VictimKind, reason: str, statuses: Iterable[TaskStatus]
    ) -> None:
        self.ssn = ssn
        self.kind = kind
        self.reason = reason
        self.statuses = tuple(statuses)  # of candidate victims
        self.placer = self._everywhere = Placer(ssn)
        # Set by ``restrict``: the only nodes room may be made on (one HyperNode's, for a job
        # whose networkTopology is hard), with a placer over them; None: every node.
        self.allowed: frozenset[str] | None = None
        self._placers: dict[frozenset[str], Placer] = {}
        self.preempting = kind is CallbackKind.PREEMPTABLE  # else reclaiming
        self.choose = ssn.preemptable if self.preempting else ssn.reclaimable
        self._by_queue: dict[str, list[JobInfo]] | None = None
        self._why: dict[tuple[object, ...], str] = {}

    def restrict(self, nodes: frozenset[str] | None) -> None:
        """Make room only on ``nodes`` from now on (None: anywhere again)."""
        self.allowed = nodes
        if nodes is None:
            self.placer = self._everywhere
            return
        placer = self._placers.get(nodes)
        if placer is None:
            subset = {n: self.ssn.nodes[n] for n in nodes if n in self.ssn.nodes}
            placer = self._placers[nodes] = Placer(self.ssn, nodes=subset)
        self.placer = placer

    def jobs_of(self, queues: Iterable[str]) -> list[JobInfo]:
        """The jobs of the given queues that have a task in the victim statuses, indexed once
        per action: preempt and reclaim only evict and pipeline, so no task enters those
        statuses while they run (an undone eviction only returns a task to them)."""
        if self._by_queue is None:
            self._by_queue = {}
            for job in self.ssn.jobs.values():
                if job.count(*self.statuses):
                    self._by_queue.setdefault(job.queue, []).append(job)
        return [job for name in queues for job in self._by_queue.get(name, ())]

    def why_no_room(
        self, preemptor: TaskInfo, *, queue: QueueInfo, where: str, owners: Sequence[JobInfo]
    ) -> str:
        """Why no victim made room for ``preemptor`` (a line of the job's wait record): the
        jobs that could give one, and which plugin ruled the others out. Worked out once per
        task shape while no node changes, since every gang of a backlog may ask."""
        key = (shape(preemptor), queue.name, where, len(self.ssn.node_changes))
        known = self._why.get(key)
        if known is not None:
            return known
        action = "preemption" if self.preempting else "reclaim"
        if not self.preempting and not self.ssn.preemptive(queue, [preemptor]):
            text = (
                f"{action} considered: queue {queue.name} may not reclaim this pod: with it, "
                "the queue would exceed its deserved share"
            )
        elif self.preempting and not queue_takes(self.ssn, queue, preemptor):
            text = (
                f"{action} considered: queue {queue.name} may not take more now (overused, or "
                "beyond its deserved share)"
            )
        elif not owners:
            text = f"{action} considered: no job {where} has running pods to evict"
        else:
            screens = self.ssn.victim_screens(self.kind)
            ruled: dict[str, int] = {}
            giving = 0
            for job in owners:
                rejecting = next((p for p, screen in screens if not screen(preemptor, job)), None)
                if rejecting is None:
                    giving += 1
                else:
                    ruled[rejecting] = ruled.get(rejecting, 0) + 1
            reasons = ", ".join(
                f"{n} {SCREEN_PHRASES.get(plugin, f'ruled out by {plugin}')}"
                for plugin, n in sorted(ruled.items())
            )
            if giving == 0:
                text = (
                    f"{action} considered: none of the {len(owners)} jobs with running pods "
                    f"{where} may give one ({reasons})"
                )
            else:
                text = (
                    f"{action} considered: {giving} of {len(owners)} jobs with running pods "
                    f"{where} may give pods, but evicting them frees no node for a "
                    f"{preemptor.role or 'pending'} pod"
                    + (f" (the others: {reasons})" if reasons else "")
                )
        self._why[key] = text
        return text

    def make_room(
        self,
        preemptor: TaskInfo,
        *,
        queue: QueueInfo,
        owners: Iterable[JobInfo],
        candidate: Callable[[TaskInfo], bool],
        use_free: bool = True,
    ) -> Statement | None:
        """Evict victims on one node so that ``preemptor`` fits, and pipeline it there; with
        ``use_free`` a node where it fits already is taken without evicting anything.
        Candidates are the tasks of ``owners`` in the finder's statuses that ``candidate``
        accepts.

        Returns the statement holding those evictions and the pipelining (not committed), or
        None when no node works, in which case nothing changed.
        """
        ssn = self.ssn
        takes = queue_takes(ssn, queue, preemptor)
        if takes and use_free:
            stmt = self._free_room(preemptor)
            if stmt is not None:
                return stmt
        # Where the task fits and the queue takes it, the walk evicts nobody: such nodes
        # either gave the free room above or are passed over.
        options = []
        # A pod with DRA claims may need victims for their devices, not their resources, and
        # what its predicate reads (devices free in the session) is not the node's tasks:
        # every node with candidates is tried, each eviction told to the predicate in turn.
        claims = has_claims(preemptor.pod) or ssn.cross_node(preemptor)
        for node, candidates in self._victim_nodes(preemptor, owners, candidate):
            fits_now = preemptor.init_resreq.less_equal(node.future_idle())
            if takes and fits_now and not claims:
                continue
            if (
                not claims
                and ssn.predicate(preemptor, node) is not None
                and ssn.predicate(preemptor, node_without(node, candidates)) is not None
            ):
                continue
            options.append((not fits_now, node, candidates))
        extra = batch_scores(ssn, preemptor, [node for _, node, _ in options])

        def rank(option: tuple[bool, NodeInfo, list[TaskInfo]]) -> tuple[bool, float, str]:
            later, node, _ = option
            score = ssn.node_score(preemptor, node) + extra.get(node.name, 0.0)
            return later, -score, node.name

        options.sort(key=rank)
        for _, node, candidates in options:
            stmt = self._evict_for(preemptor, queue, node, candidates)
            if stmt is not None:
                return stmt
        return None

    def _victim_nodes(
        self,
        preemptor: TaskInfo,
        owners: Iterable[JobInfo],
        candidate: Callable[[TaskInfo], bool],
    ) -> list[tuple[NodeInfo, list[TaskInfo]]]:
        """Ready nodes holding a candidate of a job the deciding plugins do not screen out,
        each with all its candidates in the node's order (the plugins' answers depend on it)."""
        may_give = self.ssn.victim_jobs(self.kind, preemptor)
        wanted = self.statuses
        names: dict[str, None] = {}  # ordered, without repeats
        for job in owners:
            if not may_give(job):
                continue
            for task in job.tasks_in(*wanted):
                if task.node_name and candidate(task):
                    names[task.node_name] = None
        found = []
        allowed = self.allowed
        for name in names:
            node = self.ssn.nodes.get(name)
            if node is None or not node.ready or (allowed is not None and name not in allowed):
                continue
            found.append((node, [t for t in node.tasks.values() if candidate(t)]))
        return found

    def _free_room(self, preemptor: TaskInfo) -> Statement | None:
        """Pipeline the task on the best ready node where it fits now and every predicate
        passes, if there is one."""
        name, _ = self.placer.best(preemptor)
        if name is None:
            return None  # the placer's nodes include every such node
        node = self.ssn.nodes[name]
        if not (node.ready and preemptor.init_resreq.less_equal(node.future_idle())):
            # The placer's best fails a test the walk adds (a node not ready, or overdrawn in
            # a resource the task does not request): ask every node, as the walk does.
            name = self._free_room_scan(preemptor)
            if name is None:
                return None
        stmt = self.ssn.statement()
        stmt.pipeline(preemptor, name)
        return stmt

    def _free_room_scan(self, preemptor: TaskInfo) -> str | None:
        ssn = self.ssn
        passing = [
            node
            for node in self.placer.nodes.values()
            if node.ready
            and preemptor.init_resreq.less_equal(node.future_idle())
            and ssn.predicate(preemptor, node) is None
        ]
        extra = batch_scores(ssn, preemptor, passing)
        best: tuple[float, str] | None = None
        for node in passing:
            key = (-(ssn.node_score(preemptor, node) + extra.get(node.name, 0.0)), node.name)
            if best is None or key < best:
                best = key
        return None if best is None else best[1]

    def _evict_for(
        self, preemptor: TaskInfo, queue: QueueInfo, node: NodeInfo, candidates: list[TaskInfo]
    ) -> Statement | None:
        """Evict the plugins' victims on ``node`` in victim order until the task fits, then
        pipeline it there; None (and nothing changed) when that does not work."""
        ssn = self.ssn
        victims = self.choose(preemptor, candidates)
        if not victims:
            return None
        freed = Resources.sum(v.resreq for v in victims)
        if not preemptor.init_resreq.less_equal(node.future_idle() + freed):
            return None  # even every victim would not make room here
        stmt = ssn.statement()
        claims = has_claims(preemptor.pod) or ssn.cross_node(preemptor)

        def room() -> bool:
            if not fits(ssn, queue, preemptor, node):
                return False
            return not claims or ssn.predicate(preemptor, node) is None

        for victim in sorted(victims, key=ssn.victim_order_key(preemptor)):
            if room():
                break
            stmt.evict(victim, self.reason)
        if room():
            stmt.pipeline(preemptor, node.name)
            return stmt
        stmt.discard()
        return None
