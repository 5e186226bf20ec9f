"""Volcano's sharding configuration (the ``sharding.yaml`` key of its ConfigMap), parsed and
bounded, pure.

The format is Volcano's (docs/user-guide/how_to_configure_sharding_configmap.md)::

    schedulerConfigs:
      - name: volcano                  # the NodeShard's name (--scheduler-sharding-name)
        type: volcano
        policies:                      # filter -> score -> select, in this order
          - name: allocation-rate      # filter + score: CPU requested / capacity in [min, max]
            weight: 1
            arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.6}
          - name: warmup               # score: 1 for nodes with the warmup label, else 0
            weight: 2
            arguments: {warmupLabel: node.volcano.sh/warmup, warmupLabelValue: "true"}
          - name: node-limit           # select: at most maxNodes (Caldera: at least minNodes)
            arguments: {minNodes: 2, maxNodes: 100}
    shardSyncPeriod: 60s
    enableNodeEventTrigger: true

An entry without ``policies`` is Volcano's older form: ``cpuUtilizationMin``/``cpuUtilizationMax``
(or ``arguments``) make an ``allocation-rate`` policy, ``preferWarmupNodes: true`` adds ``warmup``,
and ``minNodes``/``maxNodes`` (also beside ``policies``) add ``node-limit`` when the entry has
none. Volcano's validation rules apply with its messages' meaning; Caldera adds bounds (entries,
policies, node counts, weights, the sync period), unique names that are valid NodeShard names,
and refuses argument keys a policy does not read (a typo would otherwise be ignored).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from caldera.api.duration import DurationError, parse_duration
from caldera.api.limits import MAX_SHARD_NODES
from caldera.api.meta import DNS1123_SUBDOMAIN

CONFIGMAP_KEY: Final = "sharding.yaml"
ALLOCATION_RATE: Final = "allocation-rate"
WARMUP: Final = "warmup"
NODE_LIMIT: Final = "node-limit"
POLICIES: Final = (ALLOCATION_RATE, WARMUP, NODE_LIMIT)
WARMUP_LABEL: Final = "node.volcano.sh/warmup"
DEFAULT_SYNC_PERIOD: Final = 60.0
MIN_SYNC_PERIOD: Final = 1.0  # a full resync costs O(nodes x shards): not more than once a second
MAX_SHARDS: Final = 64
MAX_POLICIES: Final = 16
MAX_WEIGHT: Final = 1000
_ARGUMENTS: Final = {
    ALLOCATION_RATE: frozenset({"minCPUUtil", "maxCPUUtil"}),
    WARMUP: frozenset({"warmupLabel", "warmupLabelValue"}),
    NODE_LIMIT: frozenset({"minNodes", "maxNodes"}),
}
_NAME: Final = re.compile(DNS1123_SUBDOMAIN)


class ShardingConfigError(ValueError):
    """The sharding configuration is malformed; the message names the field."""


@dataclass(frozen=True, slots=True)
class AllocationRate:
    """Keeps nodes whose CPU requested / capacity, rounded to 0.01, is in [min_cpu, max_cpu];
    scores them by where they sit in that range (busier first, as Volcano)."""

    min_cpu: float = 0.0
    max_cpu: float = 1.0
    weight: int = 1


@dataclass(frozen=True, slots=True)
class Warmup:
    """Scores 1 a node whose label ``label`` is ``value``, else 0."""

    label: str = WARMUP_LABEL
    value: str = "true"
    weight: int = 1


@dataclass(frozen=True, slots=True)
class NodeLimit:
    """At most ``max_nodes`` (0: no limit) and, where nodes can be had, at least ``min_nodes``."""

    min_nodes: int = 0
    max_nodes: int = 0


Policy = AllocationRate | Warmup | NodeLimit


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """One scheduler's shard: its name (the NodeShard's) and its policies in order."""

    name: str
    type: str = ""
    policies: tuple[Policy, ...] = ()

    @property
    def min_nodes(self) -> int:
        """The largest minNodes of its node-limit policies, never above ``max_nodes``."""
        low = max((p.min_nodes for p in self.policies if isinstance(p, NodeLimit)), default=0)
        cap = self.max_nodes
        return low if cap is None else min(low, cap)

    @property
    def max_nodes(self) -> int | None:
        """The tightest maxNodes of its node-limit policies; None: unbounded."""
        limits = [p.max_nodes for p in self.policies if isinstance(p, NodeLimit) and p.max_nodes]
        return min(limits) if limits else None


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    shards: tuple[ShardSpec, ...]
    sync_period: float = DEFAULT_SYNC_PERIOD
    node_event_trigger: bool = True


def parse_config_text(text: str) -> ShardingConfig:
    """The configuration in ``text`` (the ConfigMap's ``sharding.yaml``)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ShardingConfigError(f"{CONFIGMAP_KEY}: not YAML: {exc}") from None
    return parse_config(doc)


def parse_config(doc: object) -> ShardingConfig:
    """The configuration of a decoded document; ShardingConfigError names the bad field."""
    if not isinstance(doc, Mapping):
        raise ShardingConfigError("sharding configuration must be a mapping")
    entries = doc.get("schedulerConfigs")
    if not isinstance(entries, list) or not entries:
        raise ShardingConfigError(
            "schedulerConfigs: sharding config must contain at least one schedulerConfig entry"
        )
    if len(entries) > MAX_SHARDS:
        raise ShardingConfigError(
            f"schedulerConfigs: must have at most {MAX_SHARDS} items (got {len(entries)})"
        )
    shards = tuple(_shard(f"schedulerConfigs[{i}]", e) for i, e in enumerate(entries))
    seen: set[str] = set()
    for i, shard in enumerate(shards):
        if shard.name in seen:
            raise ShardingConfigError(f"schedulerConfigs[{i}].name: {shard.name!r} is repeated")
        seen.add(shard.name)
    period = DEFAULT_SYNC_PERIOD
    raw_period = doc.get("shardSyncPeriod")
    if raw_period not in (None, ""):
        try:
            period = parse_duration(str(raw_period))
        except DurationError:
            raise ShardingConfigError(
                f"shardSyncPeriod: {raw_period!r} is not a Go duration (30s, 2m, 1h)"
            ) from None
        if period < MIN_SYNC_PERIOD:
            raise ShardingConfigError(f"shardSyncPeriod: must be at least 1s (got {raw_period})")
    trigger = doc.get("enableNodeEventTrigger", True)
    if not isinstance(trigger, bool):
        raise ShardingConfigError("enableNodeEventTrigger: must be true or false")
    return ShardingConfig(shards=shards, sync_period=period, node_event_trigger=trigger)


def _shard(path: str, entry: object) -> ShardSpec:
    if not isinstance(entry, Mapping):
        raise ShardingConfigError(f"{path}: must be a mapping")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ShardingConfigError(f"{path}.name: must not be empty")
    if len(name) > 253 or not _NAME.match(name):
        raise ShardingConfigError(
            f"{path}.name: {name!r} is not a valid NodeShard name (a DNS subdomain: lower-case "
            "letters, digits, '-' and '.', at most 253 characters)"
        )
    path = f"{path} ({name})"
    kind = entry.get("type", "")
    if not isinstance(kind, str):
        raise ShardingConfigError(f"{path}.type: must be a string")
    min_nodes = _count(f"{path}.minNodes", entry.get("minNodes", 0))
    max_nodes = _count(f"{path}.maxNodes", entry.get("maxNodes", 0))
    if max_nodes and max_nodes < min_nodes:
        raise ShardingConfigError(
            f"{path}: maxNodes ({max_nodes}) must be >= minNodes ({min_nodes})"
        )
    raw = entry.get("policies")
    if raw in (None, []):
        policies = _legacy_policies(path, entry)
    elif isinstance(raw, list):
        if len(raw) > MAX_POLICIES:
            raise ShardingConfigError(
                f"{path}.policies: must have at most {MAX_POLICIES} items (got {len(raw)})"
            )
        policies = [_policy(f"{path}.policies[{j}]", p) for j, p in enumerate(raw)]
    else:
        raise ShardingConfigError(f"{path}.policies: must be a list")
    if (min_nodes or max_nodes) and not any(isinstance(p, NodeLimit) for p in policies):
        policies.append(NodeLimit(min_nodes=min_nodes, max_nodes=max_nodes))
    return ShardSpec(name=name, type=kind, policies=tuple(policies))


def _legacy_policies(path: str, entry: Mapping[str, Any]) -> list[Policy]:
    """Volcano's older entry: allocation-rate from cpuUtilizationMin/Max (or ``arguments``),
    and warmup when preferWarmupNodes."""
    arguments = entry.get("arguments")
    if isinstance(arguments, Mapping) and arguments:
        policies: list[Policy] = [_allocation_rate(f"{path}.arguments", arguments, 1)]
    else:
        low = _fraction(f"{path}.cpuUtilizationMin", entry.get("cpuUtilizationMin", 0.0))
        # Volcano reads an absent maximum as 0, which admits idle nodes only; Caldera reads it
        # as 1 (no upper bound), what an entry that names no bound means.
        high = _fraction(f"{path}.cpuUtilizationMax", entry.get("cpuUtilizationMax", 1.0))
        if low > high:
            raise ShardingConfigError(
                f"{path}: cpuUtilizationMin ({low:.2f}) must be <= cpuUtilizationMax ({high:.2f})"
            )
        policies = [AllocationRate(min_cpu=low, max_cpu=high)]
    prefer = entry.get("preferWarmupNodes", False)
    if not isinstance(prefer, bool):
        raise ShardingConfigError(f"{path}.preferWarmupNodes: must be true or false")
    if prefer:
        policies.append(Warmup())
    return policies


def _policy(path: str, raw: object) -> Policy:
    if not isinstance(raw, Mapping):
        raise ShardingConfigError(f"{path}: must be a mapping")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ShardingConfigError(f"{path}.name: must not be empty")
    if name not in POLICIES:
        raise ShardingConfigError(
            f"{path}.name: unknown policy {name!r}; choose from {', '.join(POLICIES)}"
        )
    path = f"{path} ({name})"
    weight = raw.get("weight", 1)
    if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
        raise ShardingConfigError(f"{path}.weight: must be >= 0 (omit for default of 1)")
    if weight > MAX_WEIGHT:
        raise ShardingConfigError(f"{path}.weight: must be at most {MAX_WEIGHT} (got {weight})")
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise ShardingConfigError(f"{path}.arguments: must be a mapping")
    for key in arguments:
        if key in ("minNodes", "maxNodes") and name != NODE_LIMIT:
            raise ShardingConfigError(
                f"{path}.arguments: {key} is only supported by the node-limit policy"
            )
        if key not in _ARGUMENTS[name]:
            raise ShardingConfigError(
                f"{path}.arguments: unknown argument {key!r}; "
                f"{name} reads {', '.join(sorted(_ARGUMENTS[name]))}"
            )
    if name == ALLOCATION_RATE:
        return _allocation_rate(f"{path}.arguments", arguments, weight)
    if name == WARMUP:
        label = arguments.get("warmupLabel", WARMUP_LABEL)
        value = arguments.get("warmupLabelValue", "true")
        if not isinstance(label, str) or not label:
            raise ShardingConfigError(f"{path}.arguments.warmupLabel: cannot be empty")
        if not isinstance(value, str):
            raise ShardingConfigError(f"{path}.arguments.warmupLabelValue: must be a string")
        return Warmup(label=label, value=value, weight=weight)
    low = _count(f"{path}.arguments.minNodes", arguments.get("minNodes", 0))
    high = _count(f"{path}.arguments.maxNodes", arguments.get("maxNodes", 0))
    if high and high < low:
        raise ShardingConfigError(
            f"{path}.arguments: invalid bounds [{low}, {high}]: maxNodes must be >= minNodes"
        )
    return NodeLimit(min_nodes=low, max_nodes=high)


def _allocation_rate(path: str, arguments: Mapping[str, Any], weight: int) -> AllocationRate:
    low = _fraction(f"{path}.minCPUUtil", arguments.get("minCPUUtil", 0.0))
    high = _fraction(f"{path}.maxCPUUtil", arguments.get("maxCPUUtil", 1.0))
    if low > high:
        raise ShardingConfigError(
            f"{path}: invalid CPU utilization range [{low:.2f}, {high:.2f}]: min must be <= max"
        )
    return AllocationRate(min_cpu=low, max_cpu=high, weight=weight)


def _fraction(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ShardingConfigError(f"{path}: must be a number in [0, 1] (got {value!r})")
    return float(value)


def _count(path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ShardingConfigError(f"{path}: must be an integer >= 0 (got {value!r})")
    if value > MAX_SHARD_NODES:
        raise ShardingConfigError(f"{path}: must be at most {MAX_SHARD_NODES} (got {value})")
    return value


def shard_names(config: ShardingConfig) -> Sequence[str]:
    return [s.name for s in config.shards]
