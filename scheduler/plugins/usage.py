"""usage: load-aware placement from the nodes' measured cpu and memory use (Volcano's plugin,
pkg/scheduler/plugins/usage).

The load is a node's average use in percent, as the process's metrics source last measured it
(``ClusterInfo.node_usage``; Volcano's ``NodeUsage`` over its ``10m`` period). Load older than
five minutes, or none at all, is ignored: the predicate lets the node pass and the score is 0,
as in Volcano.

- **predicate** (``enablePredicate``, on by default): a node whose cpu load is above
  ``thresholds.cpu`` (80) or whose memory load is above ``thresholds.mem`` (80) is refused.
- **score**: each of cpu and memory has a composite utilisation, (measured load * capacity +
  shadow estimate) / capacity, clamped to [0, 1]; the node scores
  ((1 - cpu) * ``cpu.weight`` + (1 - mem) * ``memory.weight``) / (the weights' sum) * 100 *
  ``usage.weight`` (weights 1, 1, 5): the less loaded node wins.
- **shadow estimate** (``estimator``): what pods the metrics cannot see yet will use. A pod
  placed on the node in this session, binding, bound, or running for less than 30 seconds
  (Volcano's default ``metrics.interval``; Caldera does not follow a configured one) counts
  (request * ``request_ratio`` + (limit - request) * ``burst_ratio``) * risk, clamped to its
  limit (its request when it has no limit); a pod that requests nothing counts ``be_cpu``
  (250m) and ``be_mem`` (200Mi) * risk. Risk is ``risk_factor`` (1.2) once the node's weighted
  composite load, counting the pods before it, reaches ``risk_threshold`` (0.6), else 1.

Arguments out of range are ignored as Volcano ignores them (a threshold outside 0-100, a ratio
outside 0-1, a risk factor below 1, a negative weight keep the default); an argument of the
wrong type is an error naming it at start (Volcano would silently keep the default).

As in Volcano, a node's estimate is summed over its unseen pods once per session (here when
the node is first asked about, and only for nodes with fresh load, rather than for every node
at the session's start), then kept by the allocate and deallocate events, a deallocation taking
back exactly what its allocation added (``ShadowLoad``). The warm-up counts the pods in the
order the snapshot lists them (Volcano's in Go's map order), which only the risk factor can
tell. The limits read are the containers' (init containers' limits are not counted).

Speed: within a session the verdicts read only the pod and the node (the load and the clock
stay put), so pods share node verdicts as with the node-local plugins. Across sessions the load
and the clock move without the node's generation: a session with fresh load names a node class
of its own (``Speedups.node_class``), so no verdict of another session is reused; without any
fresh load the verdicts are the node-local ones and are reused.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from caldera.api.meta import parse_time
from caldera.api.quantity import QuantityError
from caldera.api.resources import Resources
from scheduler.api.types import NodeInfo, NodeUsage, TaskInfo, TaskStatus
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

NAME: Final = "usage"
MAX_NODE_SCORE: Final = 100.0
# Load measured longer ago than this is ignored (Volcano's MetricsActiveTime).
METRICS_ACTIVE: Final = dt.timedelta(minutes=5)
# How long a started pod stays invisible to the metrics (Volcano's default metrics interval).
DEFAULT_METRICS_INTERVAL: Final = dt.timedelta(seconds=30)
CPU_OVER: Final = "the CPU load of the node exceeds the upper limit."
MEMORY_OVER: Final = "the memory load of the node exceeds the upper limit."
MIB: Final = 1024 * 1024
# Pods the metrics have not seen yet, whatever their start time.
_NOT_MEASURED_YET: Final = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND})


def _section(raw: Mapping[str, Any], key: str) -> Arguments:
    value = raw.get(key)
    if value is None:
        return Arguments(NAME, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"plugin {NAME}: argument {key} must be a mapping, got {value!r}")
    return Arguments(f"{NAME}: {key}", value)


def _within(value: float, low: float, high: float, default: float) -> float:
    return value if low <= value <= high else default


def _at_least_one(value: float, default: float) -> float:
    return value if value >= 1 else default


def _best_effort(args: Arguments, key: str, default: float, *, memory: bool) -> float:
    """be_cpu in milli-cpu and be_mem in bytes: a quantity string, or a whole number (milli-cpu,
    or MiB for memory, as Volcano reads it); negative keeps the default."""
    value = args.raw.get(key)
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return default if value < 0 else float(value * MIB if memory else value)
    if not isinstance(value, str):
        raise ValueError(f"plugin {args.plugin}: argument {key} must be a quantity, got {value!r}")
    name = "memory" if memory else "cpu"
    try:
        milli = Resources.from_list({name: value}).get(name)
    except (QuantityError, ValueError):
        raise ValueError(
            f"plugin {args.plugin}: argument {key} must be a quantity, got {value!r}"
        ) from None
    return float(milli / 1000 if memory else milli)


@dataclass(frozen=True, slots=True)
class Estimator:
    """The shadow estimate's parameters (Volcano's ``estimator`` section)."""

    request_ratio: float = 0.7
    burst_ratio: float = 0.0
    risk_threshold: float = 0.6
    risk_factor: float = 1.2
    be_cpu: float = 250.0  # milli-cpu
    be_memory: float = 200.0 * MIB  # bytes

    @classmethod
    def parse(cls, args: Arguments) -> Estimator:
        d = cls()
        return cls(
            request_ratio=_within(args.number("request_ratio", d.request_ratio), 0, 1, 0.7),
            burst_ratio=_within(args.number("burst_ratio", d.burst_ratio), 0, 1, 0.0),
            risk_threshold=_within(args.number("risk_threshold", d.risk_threshold), 0, 1, 0.6),
            risk_factor=_at_least_one(args.number("risk_factor", d.risk_factor), d.risk_factor),
            be_cpu=_best_effort(args, "be_cpu", d.be_cpu, memory=False),
            be_memory=_best_effort(args, "be_mem", d.be_memory, memory=True),
        )


def estimate(request: float, limit: float, est: Estimator, risk: float) -> float:
    """One resource of a pod the metrics cannot see yet (Volcano's EstimatePodResource)."""
    request = max(request, 0.0)
    ceiling = limit if limit > 0 and limit >= request else request
    value = (request * est.request_ratio + (ceiling - request) * est.burst_ratio) * risk
    return min(max(value, 0.0), ceiling)


def composite(load_percent: float, shadow: float, capacity: float) -> float:
    """(measured use + shadow estimate) / capacity, clamped to [0, 1]; 0 without capacity."""
    if capacity <= 0:
        return 0.0
    return min(max((load_percent / 100 * capacity + shadow) / capacity, 0.0), 1.0)


def weighted(cpu: float, memory: float, cpu_weight: int, memory_weight: int) -> float:
    total = cpu_weight + memory_weight
    return 0.0 if total == 0 else (cpu * cpu_weight + memory * memory_weight) / total


def node_score(
    cpu: float, memory: float, cpu_weight: int, memory_weight: int, usage_weight: int
) -> float:
    """Volcano's CalcNodeScore over the composite utilisations."""
    free = weighted(1 - cpu, 1 - memory, cpu_weight, memory_weight)
    if cpu_weight + memory_weight == 0:
        return 0.0
    return free * MAX_NODE_SCORE * usage_weight


def _limits(task: TaskInfo) -> tuple[float, float]:
    """The pod's cpu (milli) and memory (bytes) limits summed over its containers; 0 when unset
    or unreadable (then the request stands for the limit)."""
    pod = task.pod
    if pod is None:
        return 0.0, 0.0
    total = Resources()
    for container in pod.spec.containers:
        try:
            total = total + Resources.from_list(container.resources.limits)
        except (QuantityError, ValueError):
            return 0.0, 0.0
    return float(total.get("cpu")), total.get("memory") / 1000


def _capacity(node: NodeInfo) -> tuple[float, float]:
    """The node's cpu (milli) and memory (bytes) capacity, as Volcano reads it; the allocatable
    when the node object gives none."""
    found = node.allocatable
    if node.node is not None and node.node.status.capacity:
        with contextlib.suppress(QuantityError, ValueError):
            found = Resources.from_list(node.node.status.capacity)
    return float(found.get("cpu")), found.get("memory") / 1000


def _unseen(task: TaskInfo, now: dt.datetime, interval: dt.timedelta) -> bool:
    """Whether the metrics cannot have seen the pod yet (Volcano's shouldAddToShadowCache)."""
    if not task.node_name:
        return False
    if task.status in _NOT_MEASURED_YET:
        return True
    if task.status is not TaskStatus.RUNNING:
        return False
    started = task.pod.status.start_time if task.pod is not None else None
    if not started:
        return True
    try:
        return now - parse_time(started) < interval
    except ValueError:
        return True


class _SessionToken:
    """Equal only to itself: one session's node class."""

    __slots__ = ()


class UsagePlugin:
    """Volcano's usage plugin; see the module docstring."""

    name = NAME

    def __init__(self, args: Arguments) -> None:
        raw = args.raw
        self.usage_weight = self._weight(args, "usage.weight", 5)
        self.cpu_weight = self._weight(args, "cpu.weight", 1)
        self.memory_weight = self._weight(args, "memory.weight", 1)
        thresholds = _section(raw, "thresholds")
        self.cpu_threshold = _within(thresholds.number("cpu", 80), 0, 100, 80)
        self.memory_threshold = _within(thresholds.number("mem", 80), 0, 100, 80)
        self.estimator = Estimator.parse(_section(raw, "estimator"))
        self.metrics_interval = DEFAULT_METRICS_INTERVAL

    @staticmethod
    def _weight(args: Arguments, key: str, default: int) -> int:
        value = args.integer(key, default)
        return default if value < 0 else value

    def on_session_open(self, ssn: Session) -> None:
        now = ssn.now
        fresh = {
            name: load
            for name, load in ssn.cluster.node_usage.items()
            if now - load.measured <= METRICS_ACTIVE
        }
        shadows = ShadowLoad(self, fresh, now)

        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            load = fresh.get(node.name)
            if load is None:
                return None
            if load.cpu > self.cpu_threshold:
                return CPU_OVER
            if load.memory > self.memory_threshold:
                return MEMORY_OVER
            return None

        def score(task: TaskInfo, node: NodeInfo) -> float:
            load = fresh.get(node.name)
            if load is None:
                return 0.0
            cpu, memory = shadows.utilisation(node, load)
            return node_score(cpu, memory, self.cpu_weight, self.memory_weight, self.usage_weight)

        ssn.add_predicate_fn(self.name, predicate)
        ssn.add_node_order_fn(self.name, score)
        if fresh:
            nodes = ssn.nodes
            ssn.add_allocate_handler(
                self.name,
                lambda task: shadows.allocated(task, nodes.get(task.node_name)),
                shadows.deallocated,
            )
        # Within a session the verdicts read only the node (its load and the clock are fixed);
        # across sessions the load and the clock move without the node's generation, so a
        # session with load keeps its classes to itself (a token no other session has).
        token = _SessionToken() if fresh else None
        ssn.add_speedups(self.name, Speedups(node_class=lambda _task: token))

    def on_session_close(self, ssn: Session) -> None:
        return None


class ShadowLoad:
    """One session's shadow estimates (Volcano's ShadowLoadCache): per node with fresh load,
    summed over its unseen pods when the node is first asked about, then kept up to date by
    the allocate and deallocate events, each pod's share remembered so that a deallocation
    takes back exactly what its allocation added."""

    def __init__(
        self, plugin: UsagePlugin, fresh: Mapping[str, NodeUsage], now: dt.datetime
    ) -> None:
        self.plugin, self.fresh, self.now = plugin, fresh, now
        # By node: cpu (milli) and memory (bytes) estimated, and the node's capacity.
        self.nodes: dict[str, list[float]] = {}
        # By task uid: the node and what the task added there.
        self.shares: dict[str, tuple[str, float, float]] = {}

    def utilisation(self, node: NodeInfo, load: NodeUsage) -> tuple[float, float]:
        """The node's composite cpu and memory utilisation (0-1)."""
        kept = self.nodes.get(node.name) or self._warm(node, load)
        return composite(load.cpu, kept[0], kept[2]), composite(load.memory, kept[1], kept[3])

    def _warm(self, node: NodeInfo, load: NodeUsage) -> list[float]:
        kept = self.nodes[node.name] = [0.0, 0.0, *_capacity(node)]
        interval = self.plugin.metrics_interval
        for task in node.tasks.values():
            if _unseen(task, self.now, interval):
                self._add(task, node.name, load, kept)
        return kept

    def _add(self, task: TaskInfo, node: str, load: NodeUsage, kept: list[float]) -> None:
        plugin, est = self.plugin, self.plugin.estimator
        cpu_cap, mem_cap = kept[2], kept[3]
        load_now = weighted(
            composite(load.cpu, kept[0], cpu_cap),
            composite(load.memory, kept[1], mem_cap),
            plugin.cpu_weight,
            plugin.memory_weight,
        )
        risk = est.risk_factor if load_now >= est.risk_threshold else 1.0
        if task.best_effort:
            cpu, memory = est.be_cpu * risk, est.be_memory * risk
        else:
            cpu_limit, mem_limit = _limits(task)
            request = task.resreq
            cpu = estimate(float(request.get("cpu")), cpu_limit, est, risk)
            memory = estimate(request.get("memory") / 1000, mem_limit, est, risk)
        kept[0] += cpu
        kept[1] += memory
        self.shares[task.uid] = (node, cpu, memory)

    def allocated(self, task: TaskInfo, node: NodeInfo | None) -> None:
        """A task allocated or pipelined on ``node`` in this session."""
        load = self.fresh.get(task.node_name)
        if node is None or load is None:
            return
        self.deallocated(task)
        kept = self.nodes.get(node.name)
        if kept is None:
            self._warm(node, load)  # counts the task, already on the node
        else:
            self._add(task, node.name, load, kept)

    def deallocated(self, task: TaskInfo) -> None:
        """A task taken off its node (a discarded allocation, an eviction): what it added goes."""
        share = self.shares.pop(task.uid, None)
        if share is not None:
            kept = self.nodes[share[0]]
            kept[0] -= share[1]
            kept[1] -= share[2]
