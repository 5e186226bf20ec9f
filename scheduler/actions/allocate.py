"""The allocate action: place pending pods gang by gang (Volcano's allocate).

Queues take turns in queue order (an overused queue drops out); each turn takes the queue's
first job in job order and places its pending pods in task order, in one Statement:

- nodes are filtered: the pod's init request must fit the node's future idle resources
  ("Insufficient cpu"), then every predicate must pass; the fitting nodes are scored
  (node order) and the best one wins, ties going to the node name;
- the pod is allocated when it fits the node's idle resources now, else pipelined (it waits
  for resources being released);
- a pod no node fits records Kubernetes' fit error ("0/3 nodes are available: 2 Insufficient
  cpu, 1 node(s) were unschedulable.") and ends the job's turn;
- once the job is ready with pods left, the job goes back in line after this one pod, so that
  elastic pods beyond minAvailable are shared out between jobs;
- at the end of the turn the statement is committed when the job is ready (the pods bind),
  kept when the job is pipelined, else discarded.

Jobs still Pending are skipped, unless the configuration has no enqueue action: then allocate
moves them to Inqueue itself. Jobs the plugins find invalid (gang: too few pods) are skipped,
with their reason as the PodGroup's Unschedulable condition. Best-effort pods (no requests) are
left to backfill.

Speed: pods with the same requests and scheduling constraints form a class; each class keeps
its nodes' verdicts and scores in a heap, and after a placement only the nodes that changed
are looked at again. This is exact as long as the configured plugins filter and score a node
by the pod and that node alone, which holds for the plugins in ``NODE_LOCAL_PLUGINS``; with a
plugin of ``JOB_LOCAL_PLUGINS`` (task-topology) a class is further limited to one task of one
job for jobs that describe a topology; any other configured plugin switches the action to
scanning every node for every pod.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from caldera.api.resources import Resources
from caldera.api.volcano import PodGroupCondition
from scheduler.actions.enqueue import INQUEUE, PENDING_PHASES, queue_rounds
from scheduler.api.types import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from scheduler.framework.statement import Statement
from scheduler.plugins.predicates import scheduling_signature, shortfall
from scheduler.plugins.task_topology import Topology

if TYPE_CHECKING:
    from scheduler.framework.session import Session

# Plugins whose predicates and node scores depend only on the pod and the node (or register
# none): with only these configured, verdicts of unchanged nodes are reused.
NODE_LOCAL_PLUGINS = frozenset(
    {
        "priority",
        "gang",
        "conformance",
        "overcommit",
        "drf",
        "predicates",
        "proportion",
        "nodeorder",
        "binpack",
        "preemption-toleration",
    }
)
# Plugins whose node scores also depend on the pod's job and task (task-topology reads where
# the job's other pods are on the node): with these, pods are equivalent only within one task
# of one job.
JOB_LOCAL_PLUGINS = frozenset({"task-topology"})
NO_NODES = "no nodes available to schedule pods"


def fits_idle(request: Resources, node: NodeInfo) -> bool:
    """Whether ``request`` fits what the node has free right now."""
    alloc, used = node.allocatable, node.used
    return all(amount <= alloc.get(n) - used.get(n) for n, amount in request.items())


def fit_error_message(total_nodes: int, reasons: Iterable[list[str]]) -> str:
    """Kubernetes' "0/N nodes are available: <count> <reason>, ...." (sorted)."""
    if total_nodes == 0:
        return NO_NODES
    counts: dict[str, int] = {}
    for node_reasons in reasons:
        for reason in node_reasons:
            counts[reason] = counts.get(reason, 0) + 1
    histogram = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    return f"0/{total_nodes} nodes are available: {histogram}."


def evaluate(ssn: Session, task: TaskInfo, node: NodeInfo) -> float | list[str]:
    """The node's score for the task, or why the task does not fit there."""
    reasons = shortfall(task.init_resreq, node)
    if reasons:
        return reasons
    reason = ssn.predicate(task, node)
    if reason:
        return [reason]
    return ssn.node_score(task, node)


def discard(stmt: Statement) -> list[str]:
    """Discard a statement, remembering each pod's tentative placement (Volcano's
    LastTransaction); returns the nodes it touched."""
    nodes = []
    for op in stmt.operations:
        status = TaskStatus.ALLOCATED if op.op == "allocate" else TaskStatus.PIPELINED
        if op.op in ("allocate", "pipeline"):
            op.task.last_transaction = (status, op.node)
        nodes.append(op.node)
    stmt.discard()
    return nodes


def skip_invalid(ssn: Session, job: JobInfo) -> bool:
    """True (and the reason recorded as the job's condition) when plugins find it invalid."""
    invalid = ssn.job_valid(job)
    if invalid is None:
        return False
    ssn.job_conditions.setdefault(
        job.key,
        PodGroupCondition(
            type="Unschedulable", status="True", reason=invalid.reason, message=invalid.message
        ),
    )
    return True


class _Candidates:
    """One class of equivalent pods: the verdict of each node as of its version."""

    __slots__ = ("heap", "position", "reasons", "seen")

    def __init__(self) -> None:
        self.heap: list[tuple[float, str, int]] = []  # (-score, node, node version)
        self.reasons: dict[str, list[str]] = {}  # nodes that do not fit, and why
        self.seen: dict[str, int] = {}  # node -> version evaluated
        self.position = -1  # how much of the change log this class has seen; -1: nothing


class _Placer:
    """Finds the best node for a pod, reusing what is still valid from earlier pods."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        self.version = dict.fromkeys(ssn.nodes, 0)
        self.log: list[str] = []  # nodes changed, in order
        configured = {opt.name for tier in ssn.tiers for opt in tier}
        self.reuse = configured <= NODE_LOCAL_PLUGINS | JOB_LOCAL_PLUGINS
        self.per_task = bool(configured & JOB_LOCAL_PLUGINS)
        self._job_local: dict[str, bool] = {}  # job key -> its pods score per job and task
        self.classes: dict[tuple[Resources, Resources, bytes, str, str], _Candidates] = {}

    def _is_job_local(self, key: str) -> bool:
        """Whether task-topology scores this job's pods (its PodGroup describes a topology)."""
        local = self._job_local.get(key)
        if local is None:
            job = self.ssn.jobs.get(key)
            pg = job.podgroup if job is not None else None
            local = (
                pg is not None and Topology.from_annotations(pg.metadata.annotations) is not None
            )
            self._job_local[key] = local
        return local

    def touched(self, node: str) -> None:
        self.version[node] += 1
        self.log.append(node)

    def _evaluate(self, cand: _Candidates, task: TaskInfo, name: str) -> None:
        version = self.version[name]
        cand.seen[name] = version
        verdict = evaluate(self.ssn, task, self.nodes[name])
        if isinstance(verdict, list):
            cand.reasons[name] = verdict
        else:
            cand.reasons.pop(name, None)
            heapq.heappush(cand.heap, (-verdict, name, version))

    def candidates(self, task: TaskInfo) -> _Candidates:
        if not self.reuse:
            fresh = _Candidates()
            for name in self.nodes:
                self._evaluate(fresh, task, name)
            return fresh
        local = self.per_task and self._is_job_local(task.job)
        key = (
            task.init_resreq,
            task.resreq,
            scheduling_signature(task.pod),
            task.job if local else "",
            task.role if local else "",
        )
        cand = self.classes.get(key) or self.classes.setdefault(key, _Candidates())
        if cand.position < 0:
            for name in self.nodes:
                self._evaluate(cand, task, name)
        else:
            seen, version = cand.seen, self.version
            for name in self.log[cand.position :]:
                if seen.get(name) != version[name]:
                    self._evaluate(cand, task, name)
        cand.position = len(self.log)
        return cand

    def best(self, task: TaskInfo) -> tuple[str | None, _Candidates]:
        cand = self.candidates(task)
        heap, version = cand.heap, self.version
        while heap:
            _, name, seen = heap[0]
            if version[name] == seen:
                return name, cand
            heapq.heappop(heap)
        return None, cand


class AllocateAction:
    """Places pending pods, committing each gang whole."""

    name = "allocate"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        enqueue_here = "enqueue" not in ssn.configured_actions
        by_queue: dict[str, list[JobInfo]] = {}
        pending: dict[str, list[TaskInfo]] = {}
        for job in ssn.jobs.values():
            if job.phase in PENDING_PHASES:
                if not enqueue_here:
                    continue
                job.phase = INQUEUE
                ssn.result.podgroup_phase_inqueue.append(job.key)
            if job.queue not in ssn.queues or skip_invalid(ssn, job):
                continue
            tasks = [t for t in job.tasks_in(TaskStatus.PENDING) if not t.best_effort]
            if tasks:
                by_queue.setdefault(job.queue, []).append(job)
                pending[job.key] = tasks
        if not by_queue:
            return
        placer = _Placer(ssn)
        task_key = ssn.task_order_key()
        ordered: dict[str, deque[TaskInfo]] = {}
        queue_heap, job_heaps, counter = queue_rounds(ssn, by_queue)
        queue_key, job_key = ssn.queue_order_key(), ssn.job_order_key()
        while queue_heap:
            _, _, queue = heapq.heappop(queue_heap)
            if ssn.overused(queue):
                continue
            jobs = job_heaps[queue.name]
            if not jobs:
                continue
            _, _, job = heapq.heappop(jobs)
            if job.key not in ordered:
                ordered[job.key] = deque(sorted(pending[job.key], key=task_key))
            if self._turn(ssn, placer, queue, job, ordered[job.key]):
                heapq.heappush(jobs, (job_key(job), next(counter), job))
            heapq.heappush(queue_heap, (queue_key(queue), next(counter), queue))

    @staticmethod
    def _turn(
        ssn: Session, placer: _Placer, queue: QueueInfo, job: JobInfo, tasks: deque[TaskInfo]
    ) -> bool:
        """One job's turn; True when the job should get another turn."""
        stmt = ssn.statement()
        again = False
        while tasks:
            task = tasks.popleft()
            if task.status != TaskStatus.PENDING or not ssn.allocatable(queue, task):
                continue
            name, cand = placer.best(task)
            if name is None:
                message = fit_error_message(len(ssn.nodes), cand.reasons.values())
                job.fit_errors[task.uid] = task.fit_error = message
                break
            if fits_idle(task.init_resreq, ssn.nodes[name]):
                stmt.allocate(task, name)
            else:
                stmt.pipeline(task, name)
            placer.touched(name)
            if tasks and ssn.job_ready(job):
                again = True
                break
        if ssn.job_ready(job):
            stmt.commit()
        elif not ssn.job_pipelined(job):
            for name in discard(stmt):
                placer.touched(name)
        return again
