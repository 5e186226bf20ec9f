"""How many feasible nodes the scheduler looks for before choosing among them, and where each
search starts: Volcano's feasible-node sampling (``pkg/scheduler/util``:
``CalculateNumOfFeasibleNodesToFind``, ``PredicateNodes`` and its ``lastProcessedNodeIndex``),
itself kube-scheduler's ``percentageOfNodesToScore``.

In a cluster of more than ``minimum_feasible_nodes`` nodes, a search stops once it has found
``to_find(nodes)`` nodes that fit, and the best of those is chosen; the next search starts
where the last one stopped, so that every node gets its turn across pods. With
``percentage_nodes_to_find`` 0 (the default) the share is adaptive: 50% less one point per 125
nodes, at least ``minimum_percentage_nodes_to_find`` (10% at 5,000 nodes, 5% from 5,625), and
never fewer than ``minimum_feasible_nodes`` nodes.

Caldera samples only the pods judged node by node (cross-node pods: inter-pod affinity, topology
spread): every other pod is placed from its class's verdicts, kept over every node
(``scheduler.actions.placer``), which is cheap and chooses among all the nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["BASELINE_PERCENTAGE", "NODES_PER_PERCENT", "FeasibleNodes", "Rotation", "search"]

# Volcano's baselinePercentageOfNodesToFind, and how many nodes take one point off it.
BASELINE_PERCENTAGE = 50
NODES_PER_PERCENT = 125


@dataclass(frozen=True, slots=True)
class FeasibleNodes:
    """The three flags of ``vc-scheduler`` (and ``caldera scheduler``), Volcano's defaults."""

    minimum_feasible_nodes: int = 100
    minimum_percentage_nodes_to_find: int = 5
    percentage_nodes_to_find: int = 0

    def __post_init__(self) -> None:
        if self.minimum_feasible_nodes < 1:
            raise ValueError("minimum_feasible_nodes must be at least 1")
        for name in ("minimum_percentage_nodes_to_find", "percentage_nodes_to_find"):
            if not 0 <= getattr(self, name) <= 100:
                raise ValueError(f"{name} must be a percentage (0 to 100)")

    def to_find(self, all_nodes: int) -> int:
        """How many feasible nodes a search over ``all_nodes`` nodes stops at (Volcano's
        ``CalculateNumOfFeasibleNodesToFind``, in integer arithmetic as Go's)."""
        if all_nodes <= self.minimum_feasible_nodes or self.percentage_nodes_to_find >= 100:
            return all_nodes
        percentage = self.percentage_nodes_to_find
        if percentage <= 0:
            percentage = max(
                BASELINE_PERCENTAGE - all_nodes // NODES_PER_PERCENT,
                self.minimum_percentage_nodes_to_find,
            )
        return max(all_nodes * percentage // 100, self.minimum_feasible_nodes)

    def samples(self, all_nodes: int) -> bool:
        """Whether a search over ``all_nodes`` nodes may stop before looking at them all."""
        return self.to_find(all_nodes) < all_nodes


class Rotation:
    """Where the next search starts (an index into the nodes in the session's order); one per
    session, so that a session's decisions are replayed alike."""

    __slots__ = ("start",)

    def __init__(self) -> None:
        self.start = 0


def search(
    names: Sequence[str], rotation: Rotation, wanted: int, fits: Callable[[str], bool]
) -> list[str]:
    """The first ``wanted`` of ``names`` that ``fits``, looking from the rotation's start
    onwards (wrapping round); the rotation then starts after the last name looked at (where
    it was when none or too few fit: every name was looked at)."""
    count = len(names)
    if count == 0:
        return []
    start = rotation.start % count
    found: list[str] = []
    looked = 0
    while looked < count and len(found) < wanted:
        name = names[(start + looked) % count]
        looked += 1
        if fits(name):
            found.append(name)
    rotation.start = (start + looked) % count
    return found
