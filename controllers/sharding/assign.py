"""Which nodes each scheduler's shard holds, pure: node facts, the configured shards and the
shards as they are in, the shards as they should be out.

Volcano's pipeline per shard, in configuration order (an earlier shard picks first): drop the
nodes an earlier shard took, keep those every filter accepts (``allocation-rate``: CPU requested
over capacity, rounded to 0.01, within its range), sort by the weighted sum of the scorers
(``allocation-rate``'s place in its range, ``warmup``'s label) and then by name, and cut at
``node-limit``'s ``maxNodes``. The shards are mutually exclusive by construction.

Volcano computes that from scratch each time, so a node whose utilization crosses a bound, or
a better-scored node that appears, moves nodes between shards. Caldera keeps shards stable:

1. keep: each shard keeps the nodes it holds while its filters still accept them, with a margin
   of ``STICKY_MARGIN`` on the utilization range (a node at the bound does not flap), up to
   ``maxNodes`` (the best scored first);
2. minimum: a shard below ``minNodes`` takes eligible unheld nodes, then eligible nodes of
   shards above their own minimum (Volcano's minNodes is informational only);
3. fill: each shard below ``maxNodes`` takes eligible unheld nodes, best scored first.

Steps 2 and 3 repeat until nothing moves (each round lowers the total shortfall below the
minimums or the number of unheld nodes, so it ends). The result is a fixed point: given back
as the current shards with the same nodes, it comes back unchanged (a property test checks it),
so a resync that finds nothing new writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from caldera.api.core import Node, Pod
from caldera.api.quantity import QuantityError
from caldera.api.resources import pod_spec_requests, to_milli
from controllers.sharding.config import AllocationRate, ShardSpec, Warmup

# How far past its utilization range a node a shard already holds may go before it leaves.
STICKY_MARGIN: Final = 0.05


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the policies read of one node: CPU requested over capacity (0 to 1) and labels."""

    name: str
    cpu_utilization: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)


def node_facts(node: Node, pods: Collection[Pod]) -> NodeFacts:
    """``node``'s facts from the pods on it: the CPU the running and pending ones request
    (finished and mirror pods left out, as Volcano's controller does) over the node's CPU
    capacity, at most 1; a node without CPU capacity counts as idle. Requests are read as the
    scheduler reads them (init containers, sidecars and overhead included; Volcano sums the
    containers only); a pod whose requests do not parse counts for nothing."""
    try:
        raw = node.status.capacity.get("cpu")
        capacity = to_milli("cpu", raw) if raw is not None else 0
    except QuantityError:
        capacity = 0
    requested = 0
    for pod in pods:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        if "kubernetes.io/config.mirror" in pod.metadata.annotations:
            continue
        try:
            requested += pod_spec_requests(pod.spec).get("cpu")
        except QuantityError:
            continue
    utilization = min(1.0, requested / capacity) if capacity > 0 else 0.0
    return NodeFacts(node.metadata.name, utilization, node.metadata.labels)


def _rounded(value: float) -> float:
    return round(value * 100) / 100


def eligible(shard: ShardSpec, node: NodeFacts, *, member: bool) -> bool:
    """Every filter of ``shard`` accepts ``node`` (with the sticky margin for a member)."""
    util = _rounded(node.cpu_utilization)
    margin = STICKY_MARGIN if member else 0.0
    for policy in shard.policies:
        if isinstance(policy, AllocationRate) and not (
            _rounded(policy.min_cpu) - margin <= util <= _rounded(policy.max_cpu) + margin
        ):
            return False
    return True


def score(shard: ShardSpec, node: NodeFacts) -> float:
    """The weighted sum of ``shard``'s scorers for ``node`` (Volcano's formulas)."""
    total = 0.0
    for policy in shard.policies:
        if isinstance(policy, AllocationRate):
            low, high = _rounded(policy.min_cpu), _rounded(policy.max_cpu)
            if high == low:
                part = 1.0
            else:
                part = min(1.0, max(0.0, (_rounded(node.cpu_utilization) - low) / (high - low)))
            total += policy.weight * part
        elif isinstance(policy, Warmup) and node.labels.get(policy.label) == policy.value:
            total += policy.weight
    return total


def assign(
    shards: Sequence[ShardSpec],
    nodes: Sequence[NodeFacts],
    current: Mapping[str, Collection[str]],
) -> dict[str, tuple[str, ...]]:
    """Each shard's nodes, sorted by name; ``current``: the nodes each shard holds now (names
    of shards or nodes that no longer exist are ignored)."""
    facts = {n.name: n for n in nodes}
    held: dict[str, set[str]] = {s.name: set() for s in shards}
    owner: dict[str, str] = {}

    def ranked(shard: ShardSpec, names: Collection[str]) -> list[str]:
        return sorted(names, key=lambda n: (-score(shard, facts[n]), n))

    # 1. keep
    for shard in shards:
        keep = [
            n
            for n in current.get(shard.name, ())
            if n in facts and n not in owner and eligible(shard, facts[n], member=True)
        ]
        cap = shard.max_nodes
        for name in ranked(shard, set(keep))[:cap]:
            held[shard.name].add(name)
            owner[name] = shard.name

    by_name = {s.name: s for s in shards}

    def room(shard: ShardSpec) -> int | None:
        cap = shard.max_nodes
        return None if cap is None else cap - len(held[shard.name])

    def take(shard: ShardSpec, name: str) -> None:
        previous = owner.get(name)
        if previous is not None:
            held[previous].discard(name)
        held[shard.name].add(name)
        owner[name] = shard.name

    def unheld_for(shard: ShardSpec) -> list[str]:
        free = [n for n in facts if n not in owner and eligible(shard, facts[n], member=False)]
        return ranked(shard, free)

    moved = True
    while moved:
        moved = False
        # 2. minimum
        for shard in shards:
            short = shard.min_nodes - len(held[shard.name])
            if short <= 0:
                continue
            for name in unheld_for(shard)[:short]:
                take(shard, name)
                moved = True
            short = shard.min_nodes - len(held[shard.name])
            if short <= 0:
                continue
            donated = [
                n
                for n, o in owner.items()
                if o != shard.name and eligible(shard, facts[n], member=False)
            ]
            for name in ranked(shard, donated):
                if short <= 0:
                    break
                donor = by_name[owner[name]]
                if len(held[donor.name]) > donor.min_nodes:
                    take(shard, name)
                    short -= 1
                    moved = True
        # 3. fill
        for shard in shards:
            left = room(shard)
            if left is not None and left <= 0:
                continue
            for name in unheld_for(shard)[:left]:
                take(shard, name)
                moved = True
    return {s.name: tuple(sorted(held[s.name])) for s in shards}
