"""The backfill action: place best-effort pods (pods that request nothing), Volcano's way.

Queues in queue order, their jobs in job order (jobs still Pending or invalid are skipped),
each job's pending best-effort pods in task order: the pod goes to the best-scored node that
passes the predicates (ties to the node name), the batch node scores added for a pod whose
verdicts read other nodes (``Session.cross_node``: topology spread); a pod no node takes
records its fit error.
A job's placements bind when the job is ready, else they are undone. Pods held by a
scheduling gate are skipped; the queue admission gate of one that opted in is removed
(``session.queue_admitted``): it needs no room in its queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scheduler.actions.allocate import discard, skip_invalid
from scheduler.actions.placer import evaluate, fit_error_message
from scheduler.api.types import PENDING_PHASES, JobInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class BackfillAction:
    """Places pods without resource requests."""

    name = "backfill"

    def __init__(self, args: Mapping[str, Any]) -> None:
        self.args = args

    def execute(self, ssn: Session) -> None:
        by_queue: dict[str, list[JobInfo]] = {}
        # Settled jobs are not Pending and have no pod waiting (scheduler.api.settled).
        for job in ssn.incremental.unsettled_jobs():
            if job.phase in PENDING_PHASES or job.queue not in ssn.queues:
                continue
            waiting = job.by_status.get(TaskStatus.PENDING)
            if not waiting or not any(t.best_effort for t in waiting.values()):
                continue
            if skip_invalid(ssn, job):
                continue
            by_queue.setdefault(job.queue, []).append(job)
        queue_key, job_key, task_key = (
            ssn.queue_order_key(),
            ssn.job_order_key(),
            ssn.task_order_key(),
        )
        for queue in sorted((ssn.queues[q] for q in by_queue), key=queue_key):
            for job in sorted(by_queue[queue.name], key=job_key):
                stmt = ssn.statement()
                tasks = [t for t in job.tasks_in(TaskStatus.PENDING) if t.best_effort]
                for task in sorted(tasks, key=task_key):
                    if task.gated:
                        # Kubernetes binds no gated pod; the queue admission gate goes at once,
                        # since a pod that requests nothing needs no room in its queue.
                        ssn.queue_admitted(task)
                        continue
                    scores: dict[str, float] = {}
                    reasons: list[list[str]] = []
                    for name, node in ssn.nodes.items():
                        verdict = evaluate(ssn, task, node)
                        if isinstance(verdict, list):
                            reasons.append(verdict)
                        else:
                            scores[name] = verdict
                    if scores and ssn.cross_node(task):
                        fitting = [ssn.nodes[name] for name in scores]
                        for name, extra in ssn.batch_node_scores(task, fitting).items():
                            if name in scores:
                                scores[name] += extra
                    best = min(((-score, name) for name, score in scores.items()), default=None)
                    if best is None:
                        message = fit_error_message(len(ssn.nodes), reasons)
                        job.fit_errors[task.uid] = task.fit_error = message
                        continue
                    stmt.allocate(task, best[1])
                if not stmt.operations:
                    continue
                if ssn.job_ready(job):
                    stmt.commit()
                else:
                    discard(stmt)
