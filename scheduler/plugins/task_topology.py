"""task-topology: place the tasks of one job near or apart from each other (Volcano's plugin).

A job (its PodGroup, which carries the Job's annotations) may say:

    volcano.sh/task-topology-affinity:       "ps,worker;chief"  groups of tasks to keep together
    volcano.sh/task-topology-anti-affinity:  "ps"               groups of tasks to keep apart
    volcano.sh/task-topology-task-order:     "ps,worker"        which tasks to place first

Groups are separated by ``;``, task names (``volcano.sh/task-spec``) by ``,``, as Volcano reads
them: a group of one task relates the task's pods to each other (``ps`` alone in the
anti-affinity spreads the ps over nodes; alone in the affinity gathers them), a group of several
relates each task to the others (affinity ``ps,worker`` puts workers with ps, not ps with ps).

Node order: for a task of such a job, a node scores ``weight * 100 * (affine - anti) / n``
where ``affine`` and ``anti`` count the job's tasks already on that node (placed, placing or
pipelined) that are affine or anti-affine to it, and ``n`` is the job's task count, so the score
stays within ``[-100, 100] * weight`` like other node scores. Affine tasks gather on the nodes
holding their partners and anti-affine ones spread out; it is a preference, never a filter.
Volcano groups tasks into "buckets" and scores whole buckets; scoring partners per node gives
the same gathering task by task, which is what the session's one-task-at-a-time placement can
use.

Task order, within a job: tasks named in the task-order annotation first, in its order; then
tasks with a topology before those without, and among them Volcano's ranking of what a task
takes part in (self anti-affinity, then inter-task affinity, then self affinity, then inter-task
anti-affinity), so that tasks with the strongest constraints are placed while there is choice.

Argument ``task-topology.weight`` (default 1) scales the node score.
"""

from __future__ import annotations

from scheduler.api.task_topology import Topology
from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

MAX_NODE_SCORE = 100.0
_PLACED = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


class TaskTopologyPlugin:
    """Affinity and anti-affinity between the tasks of one job."""

    name = "task-topology"

    def __init__(self, arguments: Arguments) -> None:
        self.weight = arguments.number("task-topology.weight", 1.0)
        self.topologies: dict[str, Topology] = {}
        self._jobs: dict[str, JobInfo] = {}

    def on_session_open(self, ssn: Session) -> None:
        self._jobs = ssn.jobs
        self.topologies = {}
        for job in ssn.jobs.values():
            if job.podgroup is None:
                continue
            topology = Topology.from_annotations(job.podgroup.metadata.annotations)
            if topology is not None:
                self.topologies[job.key] = topology
        if not self.topologies:
            return
        ssn.add_task_order_fn(self.name, self.task_order)
        ssn.add_node_order_fn(self.name, self.node_order)

    def on_session_close(self, ssn: Session) -> None:
        """Nothing to write."""

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """Within a job: the task-order annotation, then constrained tasks first, strongest
        constraint first (module docstring)."""
        if left.job != right.job or left.role == right.role:
            return 0
        topology = self.topologies.get(left.job)
        if topology is None:
            return 0
        unlisted = len(topology.order)
        lo, ro = topology.order.get(left.role, unlisted), topology.order.get(right.role, unlisted)
        if lo != ro:
            return -1 if lo < ro else 1
        lr, rr = topology.rank.get(left.role, 0), topology.rank.get(right.role, 0)
        return -1 if lr > rr else (1 if lr < rr else 0)

    def node_order(self, task: TaskInfo, node: NodeInfo) -> float:
        """Prefer nodes holding affine partners, avoid those holding anti-affine ones."""
        topology = self.topologies.get(task.job)
        if topology is None:
            return 0.0
        balance = 0
        for other in node.tasks.values():
            if other.job == task.job and other.uid != task.uid and other.status in _PLACED:
                balance += topology.relation(task.role, other.role)
        if not balance:
            return 0.0
        job = self._jobs.get(task.job)
        size = max(len(job.tasks) if job is not None else 1, 1)
        return self.weight * MAX_NODE_SCORE * balance / size
