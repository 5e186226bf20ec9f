"""A job's task topology as its PodGroup's annotations describe it (the task-topology plugin's
input; see scheduler.plugins.task_topology). Here, below the plugins, because the placer also
asks whether a job has one (its pods then score per job and task).
"""

from __future__ import annotations

from dataclasses import dataclass, field

AFFINITY_KEY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY_KEY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER_KEY = "volcano.sh/task-topology-task-order"


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
