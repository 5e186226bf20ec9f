"""Whether a request fits, with Kubernetes' "Insufficient <resource>" reasons (extended
resources included): ``insufficient_resources`` against any vector, ``shortfall`` against a
node's future idle resources. The actions check resources with these (the predicates plugin
does not, as in Volcano), so they sit below both.
"""

from __future__ import annotations

from caldera.api.resources import Resources
from scheduler.api.types import NodeInfo


def insufficient_resources(request: Resources, available: Resources) -> list[str]:
    """Kubernetes' "Insufficient <name>" for every resource ``request`` needs beyond
    ``available`` (a resource the node does not list counts as zero); empty when it fits."""
    return [
        f"Insufficient {name}"
        for name, amount in request.items()
        if amount > 0 and amount > available.get(name)
    ]


def shortfall(request: Resources, node: NodeInfo) -> list[str]:
    """Kubernetes' "Insufficient <name>" for each resource ``request`` needs beyond the node's
    future idle resources (idle + releasing - pipelined); empty when it fits."""
    alloc, used = dict(node.allocatable.items()), dict(node.used.items())
    releasing, pipelined = node.releasing, node.pipelined
    if releasing.is_empty() and pipelined.is_empty():
        return [
            f"Insufficient {name}"
            for name, amount in request.items()
            if amount > 0 and amount > alloc.get(name, 0) - used.get(name, 0)
        ]
    rel, pipe = dict(releasing.items()), dict(pipelined.items())
    return [
        f"Insufficient {name}"
        for name, amount in request.items()
        if amount > 0
        and amount > alloc.get(name, 0) - used.get(name, 0) + rel.get(name, 0) - pipe.get(name, 0)
    ]
