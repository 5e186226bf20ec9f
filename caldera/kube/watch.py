"""The event stream of one WATCH request.

A watch is a GET with `watch=true` whose chunked body is one JSON event per line, for as long as
`timeoutSeconds` allows. `WatchStream` splits the byte stream on newlines itself (no line length
limit, linear in the stream size), decodes each complete line into a `WatchEvent` (the object's
model for ADDED/MODIFIED/DELETED/BOOKMARK, a `Status` for ERROR), and closes the response when the
`async with` block exits. A stream that ends mid-line was cut: the partial event is dropped and
`ApiConnectionError` raised, so no half object is ever delivered. A stream silent for longer than
the inactivity timeout is presumed dead and ends like a normal end of stream; the caller
re-watches from its last resourceVersion.

The stream does not build or send its request: `KubeClient.watch` hands it `open_stream`, which
sends the request (with the client's retries) when the `async with` block is entered.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, TypeVar

import aiohttp

from caldera.api.kinds import KindInfo
from caldera.api.meta import Status, WatchEvent
from caldera.kube.errors import ApiConnectionError
from caldera.kube.retry import connection_error

__all__ = ["WatchStream"]

T = TypeVar("T")


class WatchStream(Generic[T]):
    """The events of one WATCH request; see the module docstring and `KubeClient.watch`."""

    def __init__(
        self,
        open_stream: Callable[[], Awaitable[aiohttp.ClientResponse]],
        kind: KindInfo[T],
        path: str,
        inactivity_timeout: float,
        log: Any,
    ) -> None:
        self._open_stream = open_stream
        self._kind = kind
        self._path = path
        self._inactivity = inactivity_timeout
        self._log = log
        self._response: aiohttp.ClientResponse | None = None
        self._lines: collections.deque[bytes] = collections.deque()
        self._partial: list[bytes] = []  # pieces of the line being received
        self._done = False

    async def __aenter__(self) -> WatchStream[T]:
        await self._ensure_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __aiter__(self) -> WatchStream[T]:
        return self

    def close(self) -> None:
        """Close the response (and its connection); the stream yields nothing more."""
        self._done = True
        if self._response is not None:
            self._response.close()

    async def _ensure_open(self) -> aiohttp.ClientResponse:
        if self._response is None:
            self._response = await self._open_stream()
        return self._response

    async def __anext__(self) -> WatchEvent[T] | WatchEvent[Status]:
        while not self._lines:
            if self._done:
                raise StopAsyncIteration
            await self._receive()
        return self._kind.watch_decoder.decode(self._lines.popleft())

    async def _receive(self) -> None:
        """Read one chunk and split it into complete lines; end the stream on EOF or silence."""
        response = await self._ensure_open()
        try:
            async with asyncio.timeout(self._inactivity):
                chunk = await response.content.readany()
        except TimeoutError:
            self._log.warning(
                "watch silent for too long; ending it",
                path=self._path,
                seconds=self._inactivity,
            )
            self.close()
            return
        except (aiohttp.ClientError, OSError) as exc:
            self.close()
            raise connection_error(exc, "WATCH", self._path) from exc
        if not chunk:
            self.close()
            if any(self._partial):
                raise ApiConnectionError(
                    "watch stream ended in the middle of an event",
                    sent=True,
                    method="WATCH",
                    path=self._path,
                )
            return
        if b"\n" not in chunk:
            self._partial.append(chunk)
            return
        pieces = chunk.split(b"\n")
        first = b"".join([*self._partial, pieces[0]]) if self._partial else pieces[0]
        self._partial = [pieces[-1]] if pieces[-1] else []
        for line in (first, *pieces[1:-1]):
            if line.strip():
                self._lines.append(line)
