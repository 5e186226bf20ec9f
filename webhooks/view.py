"""What the admission rules read about the rest of the cluster: queues, namespaces and
HyperNodes.

Validation is pure over a `ClusterView`: the server passes one backed by the informer cache
(`webhooks.lookups.InformerView`), never the API server, so an admission costs no request and
cannot deadlock with a `failurePolicy: Fail` webhook; tests pass a `StaticView`. This module
imports no informer, so the rules that read it stay pure (an import-linter contract checks it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol

from caldera.api.core import Namespace
from caldera.api.topology import HyperNode
from caldera.api.volcano import ROOT_QUEUE, Queue

__all__ = ["QUEUE_PARENT_INDEX", "ClusterView", "StaticView", "queue_parent"]

QUEUE_PARENT_INDEX: Final = "parent"


def queue_parent(queue: Queue) -> str:
    """A queue's parent; a queue without one is a child of root (the queue controller sets
    `spec.parent=root` on it), and root has none."""
    if queue.metadata.name == ROOT_QUEUE:
        return ""
    return queue.spec.parent or ROOT_QUEUE


class ClusterView(Protocol):
    """Read-only lookups the admission rules need."""

    def queue(self, name: str) -> Queue | None:
        """The queue called `name`, or None."""
        ...

    def queues(self) -> Iterable[Queue]:
        """Every queue."""
        ...

    def child_queues(self, name: str) -> list[Queue]:
        """The queues whose parent is `name`."""
        ...

    def namespace(self, name: str) -> Namespace | None:
        """The namespace called `name`, or None."""
        ...

    def hypernodes(self) -> Iterable[HyperNode]:
        """Every HyperNode."""
        ...


class StaticView:
    """A `ClusterView` over fixed lists (tests, benchmarks)."""

    def __init__(
        self,
        queues: Iterable[Queue] = (),
        namespaces: Iterable[Namespace] = (),
        hypernodes: Iterable[HyperNode] = (),
    ) -> None:
        self._queues = {q.metadata.name: q for q in queues}
        self._namespaces = {n.metadata.name: n for n in namespaces}
        self._hypernodes = list(hypernodes)

    def queue(self, name: str) -> Queue | None:
        return self._queues.get(name)

    def queues(self) -> Iterable[Queue]:
        return self._queues.values()

    def child_queues(self, name: str) -> list[Queue]:
        return [q for q in self._queues.values() if queue_parent(q) == name]

    def namespace(self, name: str) -> Namespace | None:
        return self._namespaces.get(name)

    def hypernodes(self) -> Iterable[HyperNode]:
        return self._hypernodes
