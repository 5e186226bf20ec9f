"""The lowNodeUtilization strategy of the rescheduling plugin, pure: which nodes are under- and
over-utilised, and which running pods to evict from the over-utilised ones so that the
under-utilised ones can take them (Volcano's pkg/scheduler/plugins/rescheduling,
low_node_utilization.go and node_utilization_util.go).

A node's utilisation is, per resource (cpu and memory), its measured load in percent when the
process reads a metrics source (as Volcano always reads it), or else what the pods placed on
it request over its allocatable, in percent (see the plugin's docstring). With
measured load, a node without a fresh one takes no part: neither low nor high, nor counted
among the nodes. Then, as Volcano does:

- a node is *low* when it is schedulable and every resource is below its ``thresholds``; else
  *high* when some resource is above its ``targetThresholds``;
- nothing moves when no node is low, every node is low, or no node is high;
- the room the low nodes offer is, per resource they have, the sum over them of target
  threshold minus utilisation (as amounts of each node's allocatable);
- high nodes are taken from the most utilised (cpu plus memory percent; then by name), their
  pods from the lowest priority, then lowest QoS class (BestEffort, Burstable, Guaranteed;
  then by name); before each pod, eviction goes on only while the node still has a resource at
  or above its target and the low nodes still have room of every resource. A pod among the
  candidates is taken: the node's utilisation and the room drop by what it requests. A pod
  that is not a candidate (not running, not preemptable, at or above the priority threshold)
  is passed over.

Volcano stops only when room reaches exactly zero (a Quantity compared with 0), so room gone
negative lets eviction go on; here it stops once any room is used up.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from caldera.api.resources import Resources
from scheduler.api.types import NodeInfo, TaskInfo

# The resources the strategy weighs (Volcano's: its utilisation map holds cpu and memory).
WEIGHED = ("cpu", "memory")


@dataclass(frozen=True)
class LowNodeUtilization:
    """The strategy's parameters: thresholds in percent of allocatable, by resource."""

    thresholds: Mapping[str, float] = field(default_factory=lambda: {"cpu": 100.0, "memory": 100.0})
    target_thresholds: Mapping[str, float] = field(
        default_factory=lambda: {"cpu": 100.0, "memory": 100.0}
    )
    # Pods of this priority or more are never victims (the descheduler's thresholdPriority).
    threshold_priority: int = 2_000_000_000


@dataclass
class NodeUtilization:
    """One node's utilisation in percent by resource, as eviction lowers it."""

    node: NodeInfo
    percent: dict[str, float]


def utilization(node: NodeInfo) -> NodeUtilization:
    """What the node's pods request over its allocatable, in percent, for cpu and memory (0
    for a resource the node has none of)."""
    percent = {}
    for name in WEIGHED:
        allocatable = node.allocatable.get(name)
        percent[name] = 100.0 * node.used.get(name) / allocatable if allocatable > 0 else 0.0
    return NodeUtilization(node, percent)


def measured_utilization(node: NodeInfo, cpu: float, memory: float) -> NodeUtilization:
    """The node's measured load in percent (eviction still lowers it by what pods request)."""
    return NodeUtilization(node, {"cpu": cpu, "memory": memory})


def is_low(usage: NodeUtilization, conf: LowNodeUtilization) -> bool:
    """Schedulable, and every resource below its threshold."""
    if usage.node.unschedulable:
        return False
    return all(
        usage.percent[name] < conf.thresholds[name] for name in WEIGHED if name in conf.thresholds
    )


def is_high(usage: NodeUtilization, conf: LowNodeUtilization) -> bool:
    """Some resource above its target threshold."""
    return any(
        usage.percent[name] > conf.target_thresholds[name]
        for name in WEIGHED
        if name in conf.target_thresholds
    )


def group_nodes(
    usages: Iterable[NodeUtilization], conf: LowNodeUtilization
) -> tuple[list[NodeUtilization], list[NodeUtilization]]:
    """The low nodes and the high nodes (a node is one, the other or neither)."""
    low: list[NodeUtilization] = []
    high: list[NodeUtilization] = []
    for usage in usages:
        if is_low(usage, conf):
            low.append(usage)
        elif is_high(usage, conf):
            high.append(usage)
    return low, high


def qos_rank(task: TaskInfo) -> int:
    """The pod's QoS class, lowest first: 0 BestEffort, 1 Burstable, 2 Guaranteed."""
    pod = task.pod
    if pod is None:
        return 0 if task.best_effort else 1
    containers = pod.spec.containers + pod.spec.init_containers
    if all(not c.resources.requests and not c.resources.limits for c in containers):
        return 0
    for container in containers:
        limits = Resources.from_list(container.resources.limits)
        # A request left out defaults to the limit.
        requests = Resources.from_list(
            {**container.resources.limits, **container.resources.requests}
        )
        if any(limits.get(name) == 0 for name in WEIGHED) or requests != limits:
            return 1
    return 2


def eviction_order(tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
    """Lowest priority first, then lowest QoS class, then by key."""
    return sorted(tasks, key=lambda t: (t.priority, qos_rank(t), t.key))


def _keeps_going(
    usage: NodeUtilization, room: Mapping[str, float], conf: LowNodeUtilization
) -> bool:
    over = any(
        usage.percent[name] >= conf.target_thresholds[name]
        for name in WEIGHED
        if name in conf.target_thresholds
    )
    return over and all(amount > 0 for amount in room.values())


def choose_victims(
    nodes: Iterable[NodeInfo],
    candidates: Collection[TaskInfo],
    conf: LowNodeUtilization,
    measured: Mapping[str, tuple[float, float]] | None = None,
) -> list[TaskInfo]:
    """The candidates to evict, in order (module docstring); ``measured``: the nodes' fresh
    load (cpu and memory percent) by name, when a metrics source is read."""
    if measured is None:
        usages = [utilization(node) for node in nodes]
    else:
        usages = [
            measured_utilization(node, *measured[node.name])
            for node in nodes
            if node.name in measured
        ]
    low, high = group_nodes(usages, conf)
    if not low or not high or len(low) == len(usages):
        return []
    # Room only in the resources the low nodes have: nodes without memory figures still let
    # cpu move.
    present = [n for n in WEIGHED if any(u.node.allocatable.get(n) > 0 for u in low)]
    room = dict.fromkeys(present, 0.0)
    for usage in low:
        for name in present:
            target = conf.target_thresholds.get(name, 100.0)
            capacity = usage.node.allocatable.get(name)
            room[name] += (target - usage.percent[name]) * capacity / 100.0
    allowed = {
        task.uid
        for task in candidates
        if task.preemptable and task.priority < conf.threshold_priority
    }
    victims: list[TaskInfo] = []
    ordered = sorted(high, key=lambda u: (-sum(u.percent.values()), u.node.name))
    for usage in ordered:
        allocatable = usage.node.allocatable
        for task in eviction_order(usage.node.tasks.values()):
            if not _keeps_going(usage, room, conf):
                break
            if task.uid not in allowed:
                continue
            victims.append(task)
            for name in WEIGHED:
                amount = task.resreq.get(name)
                if name in room:
                    room[name] -= amount
                if allocatable.get(name) > 0:
                    usage.percent[name] -= 100.0 * amount / allocatable.get(name)
    return victims
