"""The hub of live pages: server-sent-event clients subscribed to topics, bounded.

Informer handlers call `Hub.publish` with the topics a change touches (`dashboard.topics`);
it runs inline in the reflector's loop, so it only puts a topic on each subscriber's queue,
never waits. Each SSE response reads its own queue (`Subscription.next`) and writes one
``changed`` message per burst of changes; the page then fetches its fresh content.

Bounds, so that no client can grow the process's memory: at most `max_clients` subscriptions
(the next one is refused, and the page keeps working without live updates), and at most
`queue_size` undelivered messages per subscription. A client that falls that far behind (it
does not read its socket) is dropped: its queue is closed and its response ends; the browser's
EventSource reconnects on its own when it can keep up again.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import Final

__all__ = ["Hub", "Subscription"]

# What a closed subscription's queue yields last.
_CLOSED: Final = ""


class Subscription:
    """One page's subscription to one topic."""

    def __init__(self, topic: str, queue_size: int) -> None:
        self.topic = topic
        self.dropped = False
        self._queue: asyncio.Queue[str] = asyncio.Queue(queue_size + 1)  # +1: room to close
        self._limit = queue_size
        self._closed = False

    def notify(self) -> bool:
        """Queue a change; False (and the subscription is closed) when the client is too far
        behind."""
        if self._closed:
            return False
        if self._queue.qsize() >= self._limit:
            self.dropped = True
            self.close()
            return False
        self._queue.put_nowait(self.topic)
        return True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(_CLOSED)

    async def next(self) -> bool:
        """Wait for a change, then take every change queued meanwhile (one message covers
        them all). False once the subscription is closed."""
        item = await self._queue.get()
        while item != _CLOSED and not self._queue.empty():
            item = self._queue.get_nowait()
        return item != _CLOSED

    def pending(self) -> int:
        return self._queue.qsize()


class Hub:
    """Subscriptions by topic, bounded in number (see the module docstring)."""

    def __init__(self, *, max_clients: int = 100, queue_size: int = 16) -> None:
        self.max_clients = max_clients
        self.queue_size = queue_size
        self._by_topic: dict[str, set[Subscription]] = defaultdict(set)
        self._count = 0
        self.dropped = 0  # clients dropped for falling behind, since start

    @property
    def clients(self) -> int:
        return self._count

    def subscribe(self, topic: str) -> Subscription | None:
        """A new subscription, or None when `max_clients` are connected."""
        if self._count >= self.max_clients:
            return None
        sub = Subscription(topic, self.queue_size)
        self._by_topic[topic].add(sub)
        self._count += 1
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._by_topic.get(sub.topic)
        if subs is not None and sub in subs:
            subs.discard(sub)
            self._count -= 1
            if not subs:
                del self._by_topic[sub.topic]
        sub.close()

    def publish(self, topics: Iterable[str]) -> None:
        """Tell every subscriber of `topics` that its page changed; never waits."""
        for topic in topics:
            for sub in list(self._by_topic.get(topic, ())):
                if not sub.notify():
                    self.dropped += 1
                    self.unsubscribe(sub)

    def close(self) -> None:
        """End every subscription (shutdown): their responses finish."""
        for subs in list(self._by_topic.values()):
            for sub in list(subs):
                self.unsubscribe(sub)
