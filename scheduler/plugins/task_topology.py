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

from dataclasses import dataclass, field

from scheduler.api.types import ALLOCATED_STATUSES, JobInfo, NodeInfo, TaskInfo, TaskStatus
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

AFFINITY_KEY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER_KEY = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0
_PLACED = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}


def parse_groups(value: str) -> list[frozenset[str]]:
    """``"ps,worker;chief"`` -> [{ps, worker}, {chief}]; blanks and empty groups are skipped."""
    groups = []
    for part in value.split(";"):
        names = frozenset(n.strip() for n in part.split(",") if n.strip())
        if names:
            groups.append(names)
    return groups


# Volcano's affinityPriority: which constraint a task is placed for first.
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1


@dataclass(frozen=True)
class Topology:
    """One job's task topology."""

    self_affinity: frozenset[str] = frozenset()
    inter_affinity: frozenset[tuple[str, str]] = frozenset()
    self_anti: frozenset[str] = frozenset()
    inter_anti: frozenset[tuple[str, str]] = frozenset()
    order: dict[str, int] = field(default_factory=dict)  # task name -> rank
    rank: dict[str, int] = field(default_factory=dict)  # task name -> strongest constraint

    @classmethod
    def from_annotations(cls, annotations: dict[str, str]) -> Topology | None:
        """The topology the annotations describe, None when they describe none."""
        rank: dict[str, int] = {}

        def mark(name: str, value: int) -> None:
            rank[name] = max(rank.get(name, 0), value)

        def split(key: str, alone: int, together: int) -> tuple[set[str], set[tuple[str, str]]]:
            selves: set[str] = set()
            pairs: set[tuple[str, str]] = set()
            for group in parse_groups(annotations.get(key, "")):
                if len(group) == 1:
                    selves |= group
                    mark(next(iter(group)), alone)
                    continue
                pairs |= {(a, b) for a in group for b in group if a != b}
                for name in group:
                    mark(name, together)
            return selves, pairs

        self_aff, inter_aff = split(AFFINITY_KEY, SELF_AFFINITY, INTER_AFFINITY)
        self_anti, inter_anti = split(ANTI_AFFINITY_KEY, SELF_ANTI, INTER_ANTI)
        order: dict[str, int] = {}
        for raw in annotations.get(TASK_ORDER_KEY, "").split(","):
            name = raw.strip()
            if name and name not in order:
                order[name] = len(order)
        if not (rank or order):
            return None
        return cls(
            frozenset(self_aff),
            frozenset(inter_aff),
            frozenset(self_anti),
            frozenset(inter_anti),
            order,
            rank,
        )

    def relation(self, a: str, b: str) -> int:
        """+1 affine, -1 anti-affine, 0 neither (or both)."""
        if a == b:
            return int(a in self.self_affinity) - int(a in self.self_anti)
        return int((a, b) in self.inter_affinity) - int((a, b) in self.inter_anti)


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
