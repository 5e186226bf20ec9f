"""The dependency graph of a JobFlow: which flow waits for which, and whether it can ever finish.

A flow waits for the flows its ``dependsOn.targets`` name. Volcano's webhook refuses a JobFlow
whose graph is not a DAG (pkg/webhooks/admission/jobflows/validate): a target that names no flow,
or a cycle. Both the webhook (``webhooks.jobflows``) and the jobflow controller (which reports a
stored JobFlow the webhook would have refused) read the graph from here.

Flow names may repeat (Volcano allows it): a name's targets are then those of all its entries, in
the order they appear, since any of them may create the Job.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from caldera.api.flow import Flow

__all__ = ["Graph", "UndefinedTarget", "find_cycle", "graph_of", "topological_order", "undefined"]

Graph = Mapping[str, tuple[str, ...]]
"""Flow name -> the names it waits for, in the order of ``spec.flows``."""


@dataclass(frozen=True, slots=True)
class UndefinedTarget:
    """A target naming no flow, and where it is written."""

    target: str
    path: str  # "spec.flows[1].dependsOn.targets[0]"


def graph_of(flows: Sequence[Flow]) -> dict[str, tuple[str, ...]]:
    """The graph of ``flows``: each name once, in first-appearance order, with its targets."""
    graph: dict[str, list[str]] = {}
    for flow in flows:
        targets = graph.setdefault(flow.name, [])
        for target in flow.depends_on.targets if flow.depends_on else ():
            if target not in targets:
                targets.append(target)
    return {name: tuple(targets) for name, targets in graph.items()}


def undefined(flows: Sequence[Flow]) -> list[UndefinedTarget]:
    """Every target that names no flow, in the order written."""
    names = {flow.name for flow in flows}
    found = []
    for i, flow in enumerate(flows):
        for j, target in enumerate(flow.depends_on.targets if flow.depends_on else ()):
            if target not in names:
                found.append(UndefinedTarget(target, f"spec.flows[{i}].dependsOn.targets[{j}]"))
    return found


def find_cycle(graph: Graph) -> tuple[str, ...] | None:
    """A cycle of waits, as the names along it with the first repeated at the end
    (``("a", "b", "a")``: a waits for b, which waits for a), or None for a DAG. Targets that name
    no flow are ignored. Deterministic: the first cycle a depth-first walk in graph order meets."""
    done: set[str] = set()
    for start in graph:
        if start in done:
            continue
        # Iterative DFS: the path from `start`, and for each node on it the index of its next
        # target to visit (no recursion limit for long chains).
        path = [start]
        on_path = {start: 0}
        cursor = [0]
        while path:
            node = path[-1]
            targets = graph.get(node, ())
            if cursor[-1] >= len(targets):
                done.add(node)
                del on_path[node]
                path.pop()
                cursor.pop()
                continue
            nxt = targets[cursor[-1]]
            cursor[-1] += 1
            if nxt in on_path:
                return (*path[on_path[nxt] :], nxt)
            if nxt in done or nxt not in graph:
                continue
            on_path[nxt] = len(path)
            path.append(nxt)
            cursor.append(0)
    return None


def topological_order(graph: Graph) -> list[str] | None:
    """The names in an order where each comes after everything it waits for (ties in graph
    order), or None when there is a cycle. Targets that name no flow are ignored."""
    waiting = {name: {t for t in targets if t in graph} for name, targets in graph.items()}
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(waiting):
        ready = [n for n, deps in waiting.items() if n not in placed and deps <= placed]
        if not ready:
            return None
        order.extend(ready)
        placed.update(ready)
    return order
