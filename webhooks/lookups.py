"""The `ClusterView` the webhook process gives the admission rules: lookups in its informer
stores (queues, namespaces, HyperNodes), never a request to the API server."""

from __future__ import annotations

from collections.abc import Iterable

from caldera.api.core import Namespace
from caldera.api.topology import HyperNode
from caldera.api.volcano import Queue
from informers.store import Store
from webhooks.view import QUEUE_PARENT_INDEX

__all__ = ["InformerView"]


class InformerView:
    """A `ClusterView` over informer stores; the queue store needs the `parent` indexer
    (`QUEUE_PARENT_INDEX` over `queue_parent`)."""

    def __init__(
        self,
        queues: Store[Queue],
        namespaces: Store[Namespace] | None,
        hypernodes: Store[HyperNode] | None = None,
    ) -> None:
        self._queues = queues
        self._namespaces = namespaces
        self._hypernodes = hypernodes

    def queue(self, name: str) -> Queue | None:
        return self._queues.get(name)

    def queues(self) -> Iterable[Queue]:
        return self._queues.list()

    def child_queues(self, name: str) -> list[Queue]:
        return self._queues.by_index(QUEUE_PARENT_INDEX, name)

    def namespace(self, name: str) -> Namespace | None:
        if self._namespaces is None:
            return None
        return self._namespaces.get(name)

    def hypernodes(self) -> Iterable[HyperNode]:
        return self._hypernodes.list() if self._hypernodes is not None else ()
