"""The overview page's model: the queue tree with deserved / allocated / capability per
resource, job counts per queue, and the nodes' allocatable and GPU totals.

A purely computational function with no side-effects: `build_overview` takes the cached objects
and returns frozen rows the template only renders.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Node, Pod, PodPhase
from caldera.api.quantity import QuantityError, QuantityLike
from caldera.api.resources import pod_spec_requests, to_milli
from caldera.api.volcano import DEFAULT_QUEUE, Job, JobPhase, Queue, QueueState
from dashboard.format import amount

__all__ = [
    "GPU",
    "Bar",
    "NodeSummary",
    "Overview",
    "QueueRow",
    "build_overview",
    "is_pending",
    "milli_amounts",
    "node_ready",
    "pod_request",
    "queue_bars",
    "queue_of",
]

GPU: Final = "nvidia.com/gpu"
# Shown first, in this order; any other resource a queue names follows, up to MAX_RESOURCES.
_FIRST: Final[tuple[str, ...]] = ("cpu", "memory", GPU)
MAX_RESOURCES: Final = 6
_HIDDEN: Final = frozenset({"pods"})


@dataclass(frozen=True, slots=True)
class Bar:
    """One resource of a queue: what it holds against what it deserves and may take.

    Amounts are in thousandths; None when the queue does not set that bound. `scale` is the
    meter's maximum (capability, else the larger of deserved and allocated)."""

    resource: str
    allocated: int
    deserved: int | None
    capability: int | None
    scale: int
    text: str

    @property
    def over_deserved(self) -> bool:
        return self.deserved is not None and self.allocated > self.deserved


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A queue in the tree, `depth` levels below a top-level queue."""

    name: str
    depth: int
    parent: str
    state: str
    weight: int
    bars: tuple[Bar, ...]
    running: int
    pending: int
    exists: bool = True  # False: jobs name it but no Queue object is cached


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """The nodes: how many, how many Ready and schedulable, and their allocatable sums."""

    count: int
    ready: int
    unschedulable: int
    allocatable: tuple[tuple[str, str], ...]
    gpus: int
    gpus_requested: int


@dataclass(frozen=True, slots=True)
class Overview:
    """The whole overview page."""

    queues: tuple[QueueRow, ...]
    nodes: NodeSummary
    jobs: int
    running: int
    pending: int


def queue_of(job: Job) -> str:
    """The queue a job is in (an empty spec.queue means ``default``, as the webhook sets it)."""
    return job.spec.queue or DEFAULT_QUEUE


def is_pending(job: Job) -> bool:
    """Whether the job waits to start (a new job has no phase yet)."""
    return job.status.state.phase in ("", JobPhase.PENDING)


def _milli(resource: str, value: QuantityLike) -> int | None:
    try:
        return to_milli(resource, value)
    except QuantityError:
        return None  # a malformed quantity shows as unset rather than breaking the page


def milli_amounts(resources: Mapping[str, QuantityLike]) -> dict[str, int]:
    """Each resource in thousandths; one whose quantity does not parse is left out."""
    out: dict[str, int] = {}
    for name, value in resources.items():
        milli = _milli(name, value)
        if milli is not None:
            out[name] = milli
    return out


def _resource_order(names: Iterable[str]) -> list[str]:
    present = set(names) - _HIDDEN
    ordered = [r for r in _FIRST if r in present]
    ordered += sorted(present - set(_FIRST))
    return ordered[:MAX_RESOURCES]


def queue_bars(queue: Queue) -> tuple[Bar, ...]:
    allocated = milli_amounts(queue.status.allocated)
    deserved = milli_amounts(queue.spec.deserved)
    capability = milli_amounts(queue.spec.capability)
    bars = []
    for resource in _resource_order([*allocated, *deserved, *capability]):
        alloc = allocated.get(resource, 0)
        des, cap = deserved.get(resource), capability.get(resource)
        scale = cap if cap else max(alloc, des or 0)
        parts = [f"{amount(alloc, resource)} allocated"]
        if des is not None:
            parts.append(f"{amount(des, resource)} deserved")
        if cap is not None:
            parts.append(f"{amount(cap, resource)} capability")
        bars.append(Bar(resource, alloc, des, cap, max(scale, 1), ", ".join(parts)))
    return tuple(bars)


def _tree(queues: Sequence[Queue]) -> list[tuple[Queue, int]]:
    """Queues depth-first under their parents, children by name; a queue whose parent is not
    cached, or that sits on a parent cycle (a bad spec), is shown at the top level."""
    by_name = {q.metadata.name: q for q in queues}
    children: dict[str, list[Queue]] = defaultdict(list)
    for q in queues:
        parent = q.spec.parent
        if parent and parent in by_name and parent != q.metadata.name:
            children[parent].append(q)
    out: list[tuple[Queue, int]] = []
    seen: set[str] = set()

    def walk(q: Queue, depth: int) -> None:
        seen.add(q.metadata.name)
        out.append((q, depth))
        for child in sorted(children[q.metadata.name], key=lambda c: c.metadata.name):
            if child.metadata.name not in seen:
                walk(child, depth + 1)

    roots = [q for q in queues if not q.spec.parent or q.spec.parent not in by_name]
    for q in sorted(roots, key=lambda q: q.metadata.name):
        walk(q, 0)
    for q in sorted(queues, key=lambda q: q.metadata.name):
        if q.metadata.name not in seen:  # on a parent cycle: no root reaches it
            walk(q, 0)
    return out


def node_ready(node: Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def pod_request(pod: Pod) -> Mapping[str, int]:
    """What a pod holds on its node, in thousandths, per resource, counted as the kubelet
    reserves it (``caldera.api.resources.pod_spec_requests``: containers, sidecars and init
    containers, the pod overhead); nothing for a quantity that does not parse (the page shows
    the rest)."""
    try:
        return dict(pod_spec_requests(pod.spec).items())
    except QuantityError:
        return {}


def names_gpu(pod: Pod) -> bool:
    """Whether any of the pod's containers (init containers and sidecars included) or its
    overhead names a GPU: only those pods' requests are worth adding up for the GPU count
    (most pods of a cluster name none, and the full sum halves the overview's speed)."""
    spec = pod.spec
    if GPU in spec.overhead:
        return True
    return any(
        GPU in c.resources.requests or GPU in c.resources.limits
        for c in (*spec.containers, *spec.init_containers)
    )


def _nodes(nodes: Sequence[Node], pods: Iterable[Pod]) -> NodeSummary:
    sums: Counter[str] = Counter()
    for node in nodes:
        sums.update(milli_amounts(node.status.allocatable))
    requested = sum(
        pod_request(p).get(GPU, 0)
        for p in pods
        if p.spec.node_name
        and p.status.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED)
        and names_gpu(p)
    )
    return NodeSummary(
        count=len(nodes),
        ready=sum(1 for n in nodes if node_ready(n)),
        unschedulable=sum(1 for n in nodes if n.spec.unschedulable),
        allocatable=tuple((r, amount(sums[r], r)) for r in _resource_order(sums)),
        gpus=sums[GPU] // 1000,
        gpus_requested=requested // 1000,
    )


def build_overview(
    queues: Sequence[Queue], jobs: Sequence[Job], nodes: Sequence[Node], pods: Iterable[Pod]
) -> Overview:
    """The overview of what the cache holds. Queues named by jobs but not cached (deleted, or
    not readable by this user) get a row of their own, so no job goes uncounted."""
    running: Counter[str] = Counter()
    pending: Counter[str] = Counter()
    for job in jobs:
        if is_pending(job):
            pending[queue_of(job)] += 1
        elif job.status.state.phase == JobPhase.RUNNING:
            running[queue_of(job)] += 1
    rows = [
        QueueRow(
            name=q.metadata.name,
            depth=depth,
            parent=q.spec.parent,
            state=q.status.state or QueueState.OPEN,
            weight=q.spec.weight,
            bars=queue_bars(q),
            running=running[q.metadata.name],
            pending=pending[q.metadata.name],
        )
        for q, depth in _tree(queues)
    ]
    known = {q.metadata.name for q in queues}
    for name in sorted({queue_of(j) for j in jobs} - known):
        rows.append(QueueRow(name, 0, "", "", 0, (), running[name], pending[name], exists=False))
    return Overview(
        queues=tuple(rows),
        nodes=_nodes(nodes, pods),
        jobs=len(jobs),
        running=sum(running.values()),
        pending=sum(pending.values()),
    )
