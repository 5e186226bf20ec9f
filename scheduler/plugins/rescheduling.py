"""rescheduling: every ``interval``, propose running pods to evict from over-utilised nodes so
that they run again on under-utilised ones (Volcano's plugin, pkg/scheduler/plugins/
rescheduling); the shuffle action evicts what it proposes. Opt-in: it acts only with the
shuffle action configured.

Arguments, Volcano's:

- ``interval`` (a Go duration, "5m"): how often the strategies run, on the session clock. The
  first run is one interval after the scheduler first opened a session with the plugin, as
  Volcano's is one interval after it started; between runs the plugin registers nothing and
  asks for a session when the next run is due.
- ``metricsPeriod`` ("5m"): accepted; the measured load is the metrics source's 10-minute
  average whatever it says (below).
- ``strategies``: a list of ``{name, params}``; the one strategy Volcano has,
  ``lowNodeUtilization`` (scheduler.plugins.low_node_utilization), is the default. Its params:
  ``thresholds`` and ``targetThresholds`` (percent by resource: ``cpu``, ``memory``; ``pods``
  is accepted and, as in Volcano, not weighed; 100 each by default), ``thresholdPriority`` or
  ``thresholdPriorityClassName`` (system-cluster-critical by default; pods of that priority
  or more are never proposed), ``nodeFit`` and ``numberOfNodes`` (accepted, unused, as in
  Volcano).

Differences from Volcano, on purpose:

- utilisation is the nodes' measured load only when the configuration names a metrics source
  (``metrics:``, read as for the usage plugin: scheduler.node_load); without one it is what
  the pods on a node request over its allocatable, and the strategy evens out reservations
  (Volcano, without a source, reads 0 everywhere and evicts nothing);
- with a source, the load is the source's one 10-minute average, as the usage plugin reads
  it: Volcano files the load under its ``10m`` period only and looks it up under
  ``metricsPeriod``, so its default ``5m`` finds 0 on every node and evicts nothing. A node
  whose load is missing or over five minutes old (the usage plugin's rule) takes no part,
  neither source nor target, where Volcano would count 0, a perfect target; with the source
  down, nothing is evicted;
- an unknown strategy, parameter or resource, an interval that is not a positive duration, or
  a threshold outside 0..100 is an error naming it at start (Volcano ignores unknown names and
  falls back to 5m on a bad interval); Volcano declares ``thresholdPriority`` but never reads
  it, so critical pods can be evicted there;
- pods marked not preemptable (``volcano.sh/preemptable: "false"``) are never proposed.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from scheduler.api.types import NodeUsage, TaskInfo
from scheduler.framework.plugin import Arguments
from scheduler.framework.session import Session
from scheduler.plugins.low_node_utilization import LowNodeUtilization, choose_victims
from scheduler.plugins.usage import METRICS_ACTIVE

NAME: Final = "rescheduling"
LOW_NODE_UTILIZATION: Final = "lowNodeUtilization"
DEFAULT_INTERVAL: Final = dt.timedelta(minutes=5)
# Kept with the snapshot across sessions (ClusterInfo.derived): when the strategies last ran.
LAST_RUN_KEY: Final = "rescheduling.lastRun"
# Kubernetes' built-in PriorityClasses, for thresholdPriorityClassName.
BUILTIN_PRIORITIES: Final = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
_PARAMS: Final = frozenset(
    {
        "thresholds",
        "targetThresholds",
        "thresholdPriority",
        "thresholdPriorityClassName",
        "nodeFit",
        "numberOfNodes",
    }
)
_THRESHOLD_RESOURCES: Final = frozenset({"cpu", "memory", "pods", "pod"})
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> dt.timedelta | None:
    """A Go duration ("5m", "1h30m", "90s") as a timedelta; None when it is not one."""
    position, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position == 0 or position != len(text):
        return None
    return dt.timedelta(seconds=seconds)


def fresh_load(usage: Mapping[str, NodeUsage], now: dt.datetime) -> dict[str, tuple[float, float]]:
    """Each node's cpu and memory load in percent, measured at most five minutes ago."""
    return {
        name: (load.cpu, load.memory)
        for name, load in usage.items()
        if now - load.measured <= METRICS_ACTIVE
    }


def due(last: dt.datetime | None, now: dt.datetime, interval: dt.timedelta) -> bool:
    """Whether the strategies run now: one interval after they last ran (never before the
    first, which only starts the clock)."""
    return last is not None and now - last > interval


def _thresholds(where: str, raw: object) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"plugin {NAME}: {where} must map resources to percents, got {raw!r}")
    found = {}
    for name, value in raw.items():
        if name not in _THRESHOLD_RESOURCES:
            raise ValueError(
                f"plugin {NAME}: {where}.{name}: unknown resource; use cpu, memory or pods"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
            raise ValueError(
                f"plugin {NAME}: {where}.{name} must be a percent from 0 to 100, got {value!r}"
            )
        if name in ("cpu", "memory"):
            found[str(name)] = float(value)
    return found


def parse_low_node_utilization(
    params: Mapping[str, Any], priorities: Mapping[str, int]
) -> LowNodeUtilization:
    """The strategy's parameters; ``priorities`` are the cluster's PriorityClass values by
    name (for thresholdPriorityClassName)."""
    where = f"strategies.{LOW_NODE_UTILIZATION}.params"
    unknown = sorted(set(params) - _PARAMS)
    if unknown:
        raise ValueError(f"plugin {NAME}: {where}: unknown parameter {unknown[0]}")
    thresholds = {"cpu": 100.0, "memory": 100.0}
    targets = {"cpu": 100.0, "memory": 100.0}
    thresholds.update(_thresholds(f"{where}.thresholds", params.get("thresholds", {})))
    targets.update(_thresholds(f"{where}.targetThresholds", params.get("targetThresholds", {})))
    args = Arguments(f"{NAME} {where}", params)
    args.boolean("nodeFit", True)
    if args.integer("numberOfNodes", 0) < 0:
        raise ValueError(f"plugin {NAME}: {where}.numberOfNodes must not be negative")
    if "thresholdPriority" in params:
        priority = args.integer("thresholdPriority", 0)
    else:
        class_name = args.string("thresholdPriorityClassName", "system-cluster-critical")
        # A class not (yet) in the cluster protects nothing below the built-in critical ones.
        priority = priorities.get(class_name, BUILTIN_PRIORITIES.get(class_name, 2_000_000_000))
    return LowNodeUtilization(thresholds, targets, priority)


class ReschedulingConf:
    """The plugin's arguments, checked."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        interval = raw.get("interval", "5m")
        parsed = parse_duration(interval) if isinstance(interval, str) else None
        if parsed is None or parsed <= dt.timedelta(0):
            raise ValueError(
                f"plugin {NAME}: interval must be a positive duration such as 5m, got {interval!r}"
            )
        self.interval = parsed
        Arguments(NAME, raw).string("metricsPeriod", "5m")
        strategies = raw.get("strategies", [])
        if not isinstance(strategies, Sequence) or isinstance(strategies, str):
            raise ValueError(f"plugin {NAME}: strategies must be a list, got {strategies!r}")
        self.params: list[Mapping[str, Any]] = []
        for entry in strategies:
            if not isinstance(entry, Mapping) or entry.get("name") != LOW_NODE_UTILIZATION:
                name = entry.get("name") if isinstance(entry, Mapping) else entry
                raise ValueError(
                    f"plugin {NAME}: unknown strategy {name!r}; the one strategy is "
                    f"{LOW_NODE_UTILIZATION}"
                )
            params = entry.get("params") or {}
            if not isinstance(params, Mapping):
                raise ValueError(f"plugin {NAME}: strategy params must be a mapping")
            self.params.append(params)
        if not self.params:
            self.params.append({})
        for params in self.params:  # checked now, against the built-in classes
            parse_low_node_utilization(params, {})


class ReschedulingPlugin:
    """Proposes pods to evict from over-utilised nodes, every ``interval``."""

    name = NAME

    def __init__(self, arguments: Arguments) -> None:
        self.conf = ReschedulingConf(arguments.raw)

    def on_session_open(self, ssn: Session) -> None:
        derived, now, interval = ssn.cluster.derived, ssn.now, self.conf.interval
        kept = derived.get(LAST_RUN_KEY)
        last = kept[1] if kept is not None else None
        run = due(last, now, interval)
        if last is None or run:
            derived[LAST_RUN_KEY] = (None, now)
        if "shuffle" in ssn.configured_actions:
            start = now if last is None or run else last
            # A second past the interval: due() wants it over, not reached.
            ssn.result.revisit((start + interval - now).total_seconds() + 1.0)
        if not run:
            return
        priorities = {name: pc.value for name, pc in ssn.cluster.priority_classes.items()}
        strategies = [parse_low_node_utilization(p, priorities) for p in self.conf.params]
        nodes = ssn.nodes
        measured = fresh_load(ssn.cluster.node_usage, now) if ssn.cluster.load_measured else None

        def victims(tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
            chosen: list[TaskInfo] = []
            for strategy in strategies:
                chosen.extend(choose_victims(nodes.values(), tasks, strategy, measured))
            return chosen

        ssn.add_victim_tasks_fn(self.name, victims)

    def on_session_close(self, ssn: Session) -> None:
        return None
