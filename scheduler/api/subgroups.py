"""A job's sub-groups (PodGroup ``subGroupPolicy``, Volcano v1.14): gangs within the gang (pure).

Volcano's ``SubJobInfo`` (pkg/scheduler/api/sub_job_info.go, job_info.go): each policy selects
pods by ``labelSelector`` and groups them by the values of ``matchLabelKeys``
(``caldera.api.subgroups.group_key``; the job controller's partitions:
``volcano.sh/task-spec: <task>``, grouped by ``volcano.sh/partition-id``). A pod matched by no
policy, or missing a key, belongs to no sub-group; so does every pod of a policy without
``matchLabelKeys`` (Volcano puts them in the job's default sub-job, which has no size of its
own). The first policy that groups a pod wins.

A sub-group is ready when ``subGroupSize`` of its pods are placed (pending best-effort pods
count, as for the job), pipelined when they are placed or pipelined. A job with sub-groups is
ready only when, for each policy, ``minSubGroups`` of its sub-groups are ready (0: no
requirement), and valid only when each policy has at least ``minSubGroups`` sub-groups with
pods at all (Volcano's ``CheckSubJobReady``, ``CheckSubJobPipelined``, ``CheckSubJobValid``).
A job whose PodGroup has no subGroupPolicy has no sub-groups, and every check here is True
for it without looking at its pods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from caldera.api.subgroups import group_key
from caldera.api.volcano import NetworkTopologySpec
from scheduler.api.types import READY_STATUSES, JobInfo, TaskInfo, TaskStatus

__all__ = [
    "SubGroup",
    "has_sub_groups",
    "sub_groups",
    "sub_groups_pipelined",
    "sub_groups_ready",
    "sub_groups_valid",
]

_PIPELINED = frozenset({*READY_STATUSES, TaskStatus.PIPELINED})
_READY = frozenset(READY_STATUSES)


@dataclass(slots=True)
class SubGroup:
    """One sub-group of a job: its policy's name, its key (the match values joined by "-", as
    Volcano's SubJobID), its index (the first match value as a number: a partition's id), and
    its pods."""

    policy: str
    key: str
    index: int
    size: int
    network_topology: NetworkTopologySpec | None
    tasks: list[TaskInfo] = field(default_factory=list)

    def count(self, statuses: frozenset[TaskStatus]) -> int:
        """Its pods in ``statuses``, pending best-effort pods counted too."""
        n = 0
        for task in self.tasks:
            if task.status in statuses or (task.status == TaskStatus.PENDING and task.best_effort):
                n += 1
        return n

    def ready(self) -> bool:
        """``subGroupSize`` of its pods placed (Volcano's SubJobInfo.IsReady)."""
        return self.count(_READY) >= self.size

    def pipelined(self) -> bool:
        """``subGroupSize`` of its pods placed or pipelined (SubJobInfo.IsPipelined)."""
        return self.count(_PIPELINED) >= self.size


def has_sub_groups(job: JobInfo) -> bool:
    """Whether the job's PodGroup sets subGroupPolicy (a cheap check, asked per pod placed)."""
    return job.podgroup is not None and bool(job.podgroup.spec.sub_group_policy)


def _index(values: tuple[str, ...]) -> int:
    try:
        return int(values[0])
    except ValueError:
        return 0


def sub_groups(job: JobInfo) -> list[SubGroup]:
    """The job's sub-groups with pods, in policy order, then index, then key."""
    if job.podgroup is None:
        return []
    policies = job.podgroup.spec.sub_group_policy
    if not policies:
        return []
    found: dict[tuple[int, tuple[str, ...]], SubGroup] = {}
    for task in job.tasks.values():
        labels = task.pod.metadata.labels if task.pod is not None else {}
        for i, policy in enumerate(policies):
            values = group_key(policy, labels)
            if values is None:
                continue
            group = found.get((i, values))
            if group is None:
                group = found[(i, values)] = SubGroup(
                    policy.name,
                    "-".join(values),
                    _index(values),
                    max(policy.sub_group_size, 1),
                    policy.network_topology,
                )
            group.tasks.append(task)
            break
    order = sorted(found, key=lambda k: (k[0], _index(k[1]), k[1]))
    return [found[k] for k in order]


def minimums(job: JobInfo) -> dict[str, int]:
    """minSubGroups by policy name."""
    if job.podgroup is None:
        return {}
    return {p.name: p.min_sub_groups for p in job.podgroup.spec.sub_group_policy}


def _enough(job: JobInfo, groups: Iterable[SubGroup], counted: str) -> bool:
    have: dict[str, int] = {}
    for group in groups:
        if counted == "exists" or getattr(group, counted)():
            have[group.policy] = have.get(group.policy, 0) + 1
    return all(have.get(name, 0) >= n for name, n in minimums(job).items() if n > 0)


def sub_groups_ready(job: JobInfo) -> bool:
    """minSubGroups of each policy's sub-groups ready (True for a job without sub-groups)."""
    return not has_sub_groups(job) or _enough(job, sub_groups(job), "ready")


def sub_groups_pipelined(job: JobInfo) -> bool:
    """minSubGroups of each policy's sub-groups pipelined (True without sub-groups)."""
    return not has_sub_groups(job) or _enough(job, sub_groups(job), "pipelined")


def sub_groups_valid(job: JobInfo) -> bool:
    """Each policy has at least minSubGroups sub-groups with pods (True without sub-groups)."""
    return not has_sub_groups(job) or _enough(job, sub_groups(job), "exists")
