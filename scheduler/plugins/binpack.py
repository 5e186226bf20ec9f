"""The binpack plugin: prefer the node that is fullest after placing the pod (Volcano's).

For every resource the pod requests and that has a weight, the score is
(used + request) / allocatable * weight; the node's score is their sum divided by the sum of
the weights, times 100 times ``binpack.weight``. A node where some weighted request does not
fit (used + request > allocatable) scores 0.

Arguments: ``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1),
``binpack.resources`` ("nvidia.com/gpu, example.com/foo") and ``binpack.resources.<name>``
(1 each). A negative weight counts as 1, as in Volcano.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from caldera.api.resources import Resources
from scheduler.api.types import NodeInfo, TaskInfo
from scheduler.framework.plugin import Arguments

if TYPE_CHECKING:
    from scheduler.framework.session import Session

MAX_NODE_SCORE = 100


def _weight(args: Arguments, key: str) -> int:
    value = args.integer(key, 1)
    return 1 if value < 0 else value


def binpack_score(
    request: Resources, node: NodeInfo, weights: dict[str, int], binpack_weight: int
) -> float:
    """Volcano's BinPackingScore for ``request`` on ``node``."""
    score = 0.0
    weight_sum = 0
    used, alloc = dict(node.used.items()), dict(node.allocatable.items())
    for name, amount in request.items():
        if amount == 0:
            continue
        weight = weights.get(name)
        if weight is None:
            continue
        capacity = alloc.get(name, 0)
        if capacity == 0 or weight == 0:
            weight_sum += weight
            continue
        final = used.get(name, 0) + amount
        if final > capacity:
            return 0.0
        score += final * weight / capacity
        weight_sum += weight
    if weight_sum > 0:
        score /= weight_sum
    return score * MAX_NODE_SCORE * binpack_weight


class BinpackPlugin:
    """Scores nodes by how full they are after the placement."""

    name = "binpack"

    def __init__(self, args: Arguments) -> None:
        self.weight = _weight(args, "binpack.weight")
        self.weights: dict[str, int] = {
            "cpu": _weight(args, "binpack.cpu"),
            "memory": _weight(args, "binpack.memory"),
        }
        for raw in args.string("binpack.resources", "").split(","):
            name = raw.strip()
            if name:
                self.weights[name] = _weight(args, f"binpack.resources.{name}")

    def on_session_open(self, ssn: Session) -> None:
        if self.weight != 0:
            ssn.add_node_order_fn(self.name, self.score)

    def on_session_close(self, ssn: Session) -> None:
        return None

    def score(self, task: TaskInfo, node: NodeInfo) -> float:
        return binpack_score(task.resreq, node, self.weights, self.weight)
