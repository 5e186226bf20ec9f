"""resource-strategy-fit: a scoring strategy per resource, keeping pods that need no scarce
resource off the nodes that have it (Volcano's plugin, pkg/scheduler/plugins/
resource-strategy-fit, and docs/design/resource-strategy-fit-scheduling.md there).

Three parts, each from the plugin's arguments:

- **resources** (score): for each resource the pod requests that ``resources`` configures
  (an exact name, else the longest matching ``prefix*`` pattern), MostAllocated scores
  (used + request) / allocatable and LeastAllocated (allocatable - used - request) /
  allocatable, times the resource's weight; the node's score is their sum over the weights'
  sum, times 100 times ``resourceStrategyFitWeight`` (10). A configured resource that does not
  fit (used + request > allocatable) scores the node 0. Default: cpu and memory,
  LeastAllocated, weight 1. A pod may choose its own strategy with the annotations
  ``volcano.sh/resource-strategy-scoring-type`` (MostAllocated or LeastAllocated) and
  ``volcano.sh/resource-strategy-weight`` (JSON: resource -> weight; only those resources
  count); a type without weights, or weights that are not such JSON, scores 0.
- **sra** (score, scarce resource avoidance): ``sra.resources`` lists scarce resources with
  ``sra.resourceWeight`` (1 each). A node that lacks a resource the pod requests scores 0;
  otherwise 100 * ``sra.weight`` * (1 - the weights of the scarce resources the node has /
  all their weights): a CPU-only pod prefers a node without GPUs.
- **proportional** (predicate): for each ``proportional.resources`` resource the pod does not
  request, a node must keep, after the pod, ``<resource>.cpu`` cpu and ``<resource>.memory``
  GB (10^9 bytes) of memory idle per idle unit of it (1 each): "proportional of resource
  <name> check failed".

Requests and nodes are read as Volcano reads them: ``pods``, ``ephemeral-storage`` and
``storage`` are not resources here.

Differences from Volcano, on purpose: an argument of the wrong shape, a scoring type other than
MostAllocated and LeastAllocated, or a wildcard other than one trailing ``*`` is an error naming
the argument at start (Volcano logs a warning and scores with LeastAllocated, or drops the
pattern, so a typo silently inverts the strategy).

Speed: the verdicts read the pod's two annotations beyond its requests and the node, which the
plugin offers as its node class (``Speedups.node_class``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.incremental import Speedups
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session

NAME: Final = "resource-strategy-fit"
MOST: Final = "MostAllocated"
LEAST: Final = "LeastAllocated"
SCORING_TYPE_KEY: Final = "volcano.sh/resource-strategy-scoring-type"
WEIGHT_KEY: Final = "volcano.sh/resource-strategy-weight"
MAX_NODE_SCORE: Final = 100.0
DEFAULT_WEIGHT: Final = 10
# What Volcano's Resource leaves out of requests and nodes.
UNTRACKED: Final = frozenset({"pods", "ephemeral-storage", "storage"})
DEFAULT_RESOURCES: Final = {"cpu": (LEAST, 1), "memory": (LEAST, 1)}


def _fail(key: str, what: str) -> ValueError:
    return ValueError(f"plugin {NAME}: argument {key} {what}")


def _mapping(raw: object, key: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _fail(key, f"must be a mapping, got {raw!r}")
    return raw


def _int(raw: object, key: str, default: int) -> int:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise _fail(key, f"must be a whole number, got {raw!r}")
    return raw


def _number(raw: object, key: str, default: float) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise _fail(key, f"must be a number, got {raw!r}")
    return float(raw)


def _names(raw: object, key: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, str):
        raise _fail(key, f"must be a comma-separated string, got {raw!r}")
    return [name.strip() for name in raw.split(",") if name.strip()]


def check_pattern(pattern: str, key: str) -> None:
    """A resource name, or a prefix with one trailing ``*`` (not ``*`` alone)."""
    if "*" in pattern and (pattern == "*" or not pattern.endswith("*") or pattern.count("*") > 1):
        raise _fail(key, f"pattern {pattern!r}: only one trailing * (as in cloudml.gpu/*)")


@dataclass(frozen=True)
class Strategies:
    """The ``resources`` argument: by name, and the wildcard prefixes longest first."""

    exact: Mapping[str, tuple[str, int]]
    prefixes: tuple[tuple[str, tuple[str, int]], ...]

    @classmethod
    def parse(cls, raw: object) -> Strategies:
        listed = _mapping(raw, "resources") or DEFAULT_RESOURCES
        exact: dict[str, tuple[str, int]] = {}
        prefixes: list[tuple[str, tuple[str, int]]] = []
        for name, entry in listed.items():
            key = f"resources.{name}"
            check_pattern(str(name), key)
            if isinstance(entry, tuple):  # the default
                strategy = entry
            else:
                fields = _mapping(entry, key)
                kind = fields.get("type", LEAST)
                if kind not in (MOST, LEAST):
                    raise _fail(f"{key}.type", f"must be {MOST} or {LEAST}, got {kind!r}")
                weight = _int(fields.get("weight"), f"{key}.weight", 1)
                strategy = (kind, weight if weight > 0 else 1)
            if str(name).endswith("*"):
                prefixes.append((str(name)[:-1], strategy))
            else:
                exact[str(name)] = strategy
        prefixes.sort(key=lambda item: -len(item[0]))
        return cls(exact, tuple(prefixes))

    def of(self, resource: str) -> tuple[str, int] | None:
        """The strategy for ``resource``: its own, else the longest matching prefix's."""
        found = self.exact.get(resource)
        if found is not None:
            return found
        for prefix, strategy in self.prefixes:
            if resource.startswith(prefix):
                return strategy
        return None


def resource_score(kind: str, request: int, used: int, capacity: int, weight: int) -> float | None:
    """One resource's weighted score; None when the request does not fit (Volcano's
    mostRequestedScore and leastRequestedScore)."""
    if weight == 0 or capacity == 0:
        return 0.0
    final = request + used
    if final > capacity:
        return None
    if kind == MOST:
        return final * weight / capacity
    if kind == LEAST:
        return (capacity - final) * weight / capacity
    return 0.0  # a pod's own type that is neither: counted in the weights, scoring nothing


def requested(task: TaskInfo) -> list[tuple[str, int]]:
    """The resources the pod requests, as Volcano lists them."""
    return [(n, a) for n, a in task.resreq.items() if a > 0 and n not in UNTRACKED]


def pod_strategy(task: TaskInfo) -> tuple[str, dict[str, int]] | bool | None:
    """The pod's own scoring type and weights; None without the annotation; False when it
    is set but its weights are missing or not JSON of resource -> whole number."""
    pod = task.pod
    if pod is None:
        return None
    kind = pod.metadata.annotations.get(SCORING_TYPE_KEY, "")
    if not kind:
        return None
    raw = pod.metadata.annotations.get(WEIGHT_KEY, "")
    try:
        weights = json.loads(raw) if raw else None
    except ValueError:
        return False
    if not isinstance(weights, dict) or not all(
        isinstance(w, int) and not isinstance(w, bool) for w in weights.values()
    ):
        return False
    return kind, weights


def strategy_score(
    task: TaskInfo, node: NodeInfo, strategies: Strategies, plugin_weight: int
) -> float:
    """Volcano's Score: the configured (or the pod's own) strategy per requested resource."""
    own = pod_strategy(task)
    if own is False:
        return 0.0
    alloc, used = node.allocatable, node.used
    score, weight_sum = 0.0, 0
    for name, amount in requested(task):
        if own is None:
            strategy = strategies.of(name)
            if strategy is None:
                continue
            kind, weight = strategy
        else:
            assert isinstance(own, tuple)
            if name not in own[1]:
                continue
            kind, weight = own[0], own[1][name]
        part = resource_score(kind, amount, used.get(name), alloc.get(name), weight)
        if part is None:
            return 0.0
        score += part
        weight_sum += weight
    if weight_sum > 0:
        score /= weight_sum
    return score * MAX_NODE_SCORE * plugin_weight


@dataclass(frozen=True)
class Sra:
    """The ``sra`` argument: scarce resources and their weights."""

    weight: int
    resources: Mapping[str, int]

    @classmethod
    def parse(cls, raw: object) -> Sra | None:
        fields = _mapping(raw, "sra")
        if not fields.get("enable", False):
            return None
        if not isinstance(fields["enable"], bool):
            raise _fail("sra.enable", f"must be true or false, got {fields['enable']!r}")
        given = _mapping(fields.get("resourceWeight"), "sra.resourceWeight")
        resources: dict[str, int] = {}
        for name in _names(fields.get("resources"), "sra.resources"):
            weight = _int(given.get(name), f"sra.resourceWeight.{name}", 1)
            resources[name] = weight if weight >= 0 else 1
        # No default weight: Volcano's is the argument's zero, which turns sra's score off.
        return cls(_int(fields.get("weight"), "sra.weight", 0), resources)

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
        """Volcano's sraScore."""
        alloc = node.allocatable
        if any(alloc.get(name) == 0 for name, _ in requested(task)):
            return 0.0
        score = float(sum(w for name, w in self.resources.items() if alloc.get(name) > 0))
        total = sum(self.resources.values())
        if total > 0:
            score = 1.0 - score / total
        return score * MAX_NODE_SCORE * self.weight


@dataclass(frozen=True)
class Proportional:
    """The ``proportional`` argument: cpu and GB of memory kept idle per idle unit of each
    primary resource."""

    rates: Mapping[str, tuple[float, float]]

    @classmethod
    def parse(cls, raw: object) -> Proportional | None:
        fields = _mapping(raw, "proportional")
        if not fields.get("enable", False):
            return None
        given = _mapping(fields.get("resourceProportion"), "proportional.resourceProportion")
        rates: dict[str, tuple[float, float]] = {}
        for name in _names(fields.get("resources"), "proportional.resources"):
            pair = []
            for part in ("cpu", "memory"):
                key = f"{name}.{part}"
                rate = _number(given.get(key), f"proportional.resourceProportion.{key}", 1.0)
                pair.append(rate if rate >= 0 else 1.0)
            rates[name] = (pair[0], pair[1])
        return cls(rates)

    def check(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """Volcano's checkNodeResourceIsProportional: None, or why the node is refused."""
        request = task.resreq
        if any(request.get(name) > 0 for name in self.rates):
            return None
        alloc, used = node.allocatable, node.used
        for name, (cpu_rate, memory_rate) in self.rates.items():
            if name not in alloc:
                continue
            idle = alloc.get(name) - used.get(name)
            idle_cpu = alloc.get("cpu") - used.get("cpu") - request.get("cpu")
            idle_memory = alloc.get("memory") - used.get("memory") - request.get("memory")
            # idle is in thousandths of a unit: idle * rate thousandths of a cpu, and
            # idle * rate GB (10^9 bytes, in thousandths of bytes: * 10^9) of memory
            if idle_cpu < idle * cpu_rate or idle_memory < idle * memory_rate * 10**9:
                return f"proportional of resource {name} check failed"
        return None


class ResourceStrategyFitPlugin:
    """Scores nodes per resource strategy and scarce resources; keeps primary resources'
    companions idle."""

    name = NAME

    def __init__(self, arguments: Arguments) -> None:
        raw = arguments.raw
        weight = _int(raw.get("resourceStrategyFitWeight"), "resourceStrategyFitWeight", 10)
        self.weight = DEFAULT_WEIGHT if weight < 0 else weight
        self.strategies = Strategies.parse(raw.get("resources"))
        self.sra = Sra.parse(raw.get("sra"))
        self.proportional = Proportional.parse(raw.get("proportional"))

    def on_session_open(self, ssn: Session) -> None:
        if self.proportional is not None:
            ssn.add_predicate_fn(self.name, self.proportional.check)
        if self.weight > 0 or (self.sra is not None and self.sra.weight > 0):
            ssn.add_node_order_fn(self.name, self.score)
        ssn.add_speedups(self.name, Speedups(node_class=pod_annotations))

    def on_session_close(self, ssn: Session) -> None:
        return None

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
        score = 0.0
        if self.weight > 0:
            score += strategy_score(task, node, self.strategies, self.weight)
        if self.sra is not None and self.sra.weight > 0:
            score += self.sra.score(task, node)
        return score


def pod_annotations(task: TaskInfo) -> Hashable:
    """What the verdicts read of a pod beyond its requests: its own strategy's annotations."""
    pod = task.pod
    if pod is None:
        return None
    notes = pod.metadata.annotations
    kind = notes.get(SCORING_TYPE_KEY)
    return None if kind is None else (kind, notes.get(WEIGHT_KEY))
