"""The nodes page's model: each node's allocatable and requested resources and its GPU cards
(``nvidia.com/gpu``: how many, how many bound pods use, and which pods).

What a node has requested of it is what its bound, unfinished pods request, with Kubernetes'
arithmetic (`caldera.api.resources.pod_spec_requests`: the containers' requests, a container's
limits where it sets no request, raised to the largest init container's, sidecars and the pod
overhead added), as the kubelet reserves it. Without the right to list pods in every namespace, a
user's page counts the pods it may see only, and says so (`NodesPage.partial`).

A purely computational module with no side-effects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from caldera.api.core import Node, Pod, PodPhase
from caldera.api.volcano import JOB_NAME_KEY
from dashboard.format import amount
from dashboard.overview import GPU, milli_amounts, node_ready, pod_request

__all__ = ["MAX_GPU_PODS", "MAX_NODES", "GpuPod", "NodeRow", "NodesPage", "Usage", "build_nodes"]

# cpu, memory and GPUs are the columns; other resources a node offers are not shown here.
COLUMNS: Final = ("cpu", "memory", GPU)
MAX_NODES: Final = 2000
MAX_GPU_PODS: Final = 16
_DONE: Final = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


@dataclass(frozen=True, slots=True)
class Usage:
    """One resource of a node: requested of allocatable, in thousandths and as text."""

    resource: str
    requested: int
    allocatable: int
    text: str

    @property
    def over(self) -> bool:
        return self.requested > self.allocatable


@dataclass(frozen=True, slots=True)
class GpuPod:
    """A bound pod using GPUs on a node, and the job it belongs to (if any)."""

    namespace: str
    name: str
    job: str
    gpus: int


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    ready: bool
    unschedulable: bool
    pods: int
    usage: tuple[Usage, ...]
    gpus: int
    gpus_used: int
    gpu_pods: tuple[GpuPod, ...]
    more_gpu_pods: int


@dataclass(frozen=True, slots=True)
class NodesPage:
    rows: tuple[NodeRow, ...]
    more: int
    gpus: int
    gpus_used: int
    partial: bool


def build_nodes(nodes: Sequence[Node], pods: Iterable[Pod], *, partial: bool = False) -> NodesPage:
    """The page of `nodes` with what `pods` (those bound to them, unfinished) request;
    `partial`: `pods` are only those the user may see."""
    requested: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    counts: dict[str, int] = defaultdict(int)
    gpu_pods: dict[str, list[GpuPod]] = defaultdict(list)
    for pod in pods:
        where = pod.spec.node_name
        if not where or pod.status.phase in _DONE:
            continue
        counts[where] += 1
        amounts = pod_request(pod)
        for resource, milli in amounts.items():
            requested[where][resource] += milli
        if amounts.get(GPU, 0) > 0:
            meta = pod.metadata
            job = meta.annotations.get(JOB_NAME_KEY) or meta.labels.get(JOB_NAME_KEY) or ""
            gpu_pods[where].append(
                GpuPod(meta.namespace or "", meta.name, job, amounts[GPU] // 1000)
            )
    rows = []
    for node in sorted(nodes, key=lambda n: n.metadata.name)[:MAX_NODES]:
        name = node.metadata.name
        allocatable = milli_amounts(node.status.allocatable)
        used = requested.get(name, {})
        usage = tuple(
            Usage(
                r,
                used.get(r, 0),
                allocatable.get(r, 0),
                f"{amount(used.get(r, 0), r)} of {amount(allocatable.get(r, 0), r)}",
            )
            for r in COLUMNS
            if r in allocatable or used.get(r)
        )
        cards = sorted(gpu_pods.get(name, []), key=lambda p: (-p.gpus, p.namespace, p.name))
        rows.append(
            NodeRow(
                name=name,
                ready=node_ready(node),
                unschedulable=node.spec.unschedulable,
                pods=counts.get(name, 0),
                usage=usage,
                gpus=allocatable.get(GPU, 0) // 1000,
                gpus_used=used.get(GPU, 0) // 1000,
                gpu_pods=tuple(cards[:MAX_GPU_PODS]),
                more_gpu_pods=max(0, len(cards) - MAX_GPU_PODS),
            )
        )
    return NodesPage(
        rows=tuple(rows),
        more=max(0, len(nodes) - MAX_NODES),
        gpus=sum(r.gpus for r in rows),
        gpus_used=sum(r.gpus_used for r in rows),
        partial=partial,
    )
