"""A Statement records a job's tentative placements so that a gang is committed whole or not at
all: allocate, pipeline and evict change the session's state at once (later decisions see them),
and ``discard`` undoes them in reverse order; ``commit`` turns them into decisions (binds,
evictions), and pipelined tasks stay as they are, waiting for what is being released.

A discard also gives each job it touched the generation the job had before (``JobInfo.restore``),
unless something outside the statement changed the job since its last operation (another
statement kept on it): the job is then as it was, and what plugins and the live snapshot
derived from it holds again. A waiting gang whose turn fails every session is not derived
again every session. The nodes it placed pods on get theirs back the same way
(``NodeInfo.restore``; not a node one of its evictions touched, whose tasks would be listed in
another order): the placer's verdicts about them hold again (``scheduler.actions.placer``),
and the live snapshot need not derive them again after the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from caldera.api.resources import Resources
from scheduler.api.types import JobInfo, NodeInfo, NodeMark, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from scheduler.framework.session import Session

Op = Literal["allocate", "pipeline", "evict"]


@dataclass(frozen=True)
class _Operation:
    op: Op
    task: TaskInfo
    node: str
    previous: TaskStatus
    previous_node: str
    reason: str = ""


class Statement:
    """Tentative operations of one job (or one preemption) in a session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.operations: list[_Operation] = []
        # Each touched job by key: the job, its mark before the first operation, and its
        # generation after the last one.
        self._marks: dict[str, tuple[JobInfo, tuple[int, Resources], int]] = {}
        # The same for each node a pod was placed on, by name (None: an eviction touched it).
        self._node_marks: dict[str, tuple[NodeInfo, NodeMark, int] | None] = {}

    def _touch(self, job: JobInfo, before: tuple[int, Resources]) -> None:
        kept = self._marks.get(job.key)
        self._marks[job.key] = (job, before if kept is None else kept[1], job.generation)

    def allocate(self, task: TaskInfo, node: str) -> None:
        self._move(task, node, TaskStatus.ALLOCATED, "allocate")
        self.ssn.notify_allocate(task)

    def pipeline(self, task: TaskInfo, node: str) -> None:
        self._move(task, node, TaskStatus.PIPELINED, "pipeline")
        self.ssn.notify_allocate(task)

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Mark a running task for release; its resources count as releasing on its node."""
        op = _Operation("evict", task, task.node_name, task.status, task.node_name, reason)
        node = self.ssn.nodes.get(task.node_name)
        if node is not None:
            self._node_marks[node.name] = None
            node.remove_task(task)
        job = self.ssn.jobs[task.job]
        before = job.mark()
        job.set_status(task, TaskStatus.RELEASING)
        self._touch(job, before)
        if node is not None:
            node.add_task(task)
        self.operations.append(op)
        self.ssn.notify_deallocate(task)

    def _move(self, task: TaskInfo, node_name: str, status: TaskStatus, op: Op) -> None:
        record = _Operation(op, task, node_name, task.status, task.node_name)
        job = self.ssn.jobs[task.job]
        old_node = self.ssn.nodes.get(task.node_name) if task.node_name else None
        if old_node is not None:
            self._node_marks[old_node.name] = None  # its tasks would come back in another order
            old_node.remove_task(task)
        before = job.mark()
        job.set_status(task, status)
        self._touch(job, before)
        task.node_name = node_name
        node = self.ssn.nodes[node_name]
        node_before = node.mark()
        node.add_task(task)
        marks = self._node_marks
        if node_name not in marks:
            marks[node_name] = (node, node_before, node.generation)
        elif (kept := marks[node_name]) is not None:
            # Restorable while every change of the node since the first was this statement's.
            ours = kept[2] == node_before[0]
            marks[node_name] = (node, kept[1], node.generation) if ours else None
        self.operations.append(record)

    def discard(self) -> None:
        """Undo every operation, newest first; give the jobs their generations back (see the
        module docstring)."""
        untouched = [
            (job, before) for job, before, last in self._marks.values() if job.generation == last
        ]
        nodes = [
            (mark[0], mark[1])
            for mark in self._node_marks.values()
            if mark is not None and mark[0].generation == mark[2]
        ]
        for record in reversed(self.operations):
            task = record.task
            if record.op == "evict":
                self.ssn.notify_allocate(task)
            else:
                self.ssn.notify_deallocate(task)
            node = self.ssn.nodes.get(task.node_name) if task.node_name else None
            if node is not None:
                node.remove_task(task)
            self.ssn.jobs[task.job].set_status(task, record.previous)
            task.node_name = record.previous_node
            if record.previous_node and record.previous != TaskStatus.PENDING:
                self.ssn.nodes[record.previous_node].add_task(task)
        self.operations.clear()
        for job, before in untouched:
            job.restore(before)
        for node, node_before in nodes:
            node.restore(node_before)
        self._marks.clear()
        self._node_marks.clear()

    def commit(self) -> None:
        """Turn allocations into binds and evictions into evictions; pipelined tasks stay as
        they are (they wait for resources being released)."""
        for record in self.operations:
            task = record.task
            if record.op == "allocate":
                self.ssn.jobs[task.job].set_status(task, TaskStatus.BINDING)
                self.ssn.result.bind(task, record.node)
            elif record.op == "evict":
                self.ssn.result.evict(task, record.reason)
        self.operations.clear()
        self._marks.clear()
        self._node_marks.clear()
