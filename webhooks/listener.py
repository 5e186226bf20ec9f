"""The webhook's HTTPS listener: TLS accepted by hand, so a hostile client is bounded before
aiohttp sees it.

aiohttp's ``TCPSite(ssl_context=...)`` hands the socket to asyncio, which starts a TLS
handshake for every accepted connection, keeps a 256 KiB read buffer for each, gives no hook
between accept and handshake, and takes the ``SSLContext`` once, when the server is created.
aiohttp then waits for a request's headers without a timer. Here a plain TCP server accepts,
and each connection is:

- closed at once when ``max_connections`` are already open (those keep working);
- wrapped in TLS with the context current at that moment (``context()``: a reloaded certificate
  is a new context, used by new connections; the old one is never modified), with a 32 KiB
  buffer (a TLS record is at most 16 KiB), and aborted if the opening or the closing handshake
  takes longer than ``header_timeout``;
- handed to aiohttp's request handler through ``_Guard``, which aborts it when a request's
  headers are not complete ``header_timeout`` seconds after its first byte arrived, or when it
  sits idle (no byte of a request) ``idle_timeout`` seconds after the handshake or the last
  response. The application tells the listener when a request's headers were read
  (``request_started``) and when it was answered (``request_finished``); the body has its own
  timer there.

``asyncio.sslproto.SSLProtocol`` is the class ``loop.create_server(ssl=...)`` and
``loop.start_tls`` use; it is subclassed only for its buffer size.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import structlog

__all__ = ["Listener", "ListenerLimits"]

log = structlog.get_logger("webhook")

_TLS_BUFFER: Final = 32 * 1024


class _LeanSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a read buffer of 32 KiB instead of 256 KiB per connection."""

    max_size = _TLS_BUFFER


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """Bounds on connections (settings of the same names)."""

    max_connections: int = 1000
    header_timeout: float = 10.0  # TLS handshake, and a request's headers from its first byte
    idle_timeout: float = 120.0  # no request at all (after the handshake or the last response)


Refused = Callable[[str], None]  # called with the reason of each connection closed early


class _Guard(asyncio.Protocol):
    """Between the TLS layer and aiohttp's handler: the connection's slot and its timers."""

    def __init__(self, listener: Listener, inner: asyncio.Protocol) -> None:
        self.listener, self.inner = listener, inner
        self.made = False
        self.released = False
        self.transport: asyncio.Transport | None = None
        self.busy = False  # a request's headers were read and it is not answered yet
        self.heard = False  # bytes of the next request arrived since the last answer
        self._timer: asyncio.TimerHandle | None = None

    # --- timers ---------------------------------------------------------------------------------

    def _arm(self, seconds: float, reason: str) -> None:
        self._disarm()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(seconds, self._expire, reason)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, reason: str) -> None:
        self._timer = None
        if self.transport is not None and not self.busy:
            self.listener.refused(reason)
            self.transport.abort()

    def started(self) -> None:
        self.busy = True
        self._disarm()

    def finished(self) -> None:
        self.busy, self.heard = False, False
        limits = self.listener.limits
        self._arm(limits.idle_timeout, "idle")

    # --- asyncio.Protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.made, self.transport = True, transport
        self.listener.guards[self.inner] = self
        self.inner.connection_made(transport)
        self._arm(self.listener.limits.idle_timeout, "idle")

    def data_received(self, data: bytes) -> None:
        if not self.busy and not self.heard and data:
            # The first byte of a request: its headers must follow within header_timeout.
            self.heard = True
            self._arm(self.listener.limits.header_timeout, "header_timeout")
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.transport = None
        self.listener.guards.pop(self.inner, None)
        self.release()
        if self.made:
            self.inner.connection_lost(exc)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.listener.open -= 1


class _Front(asyncio.Protocol):
    """The plain TCP protocol of an accepted socket: counts it, then puts TLS in its place."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        listener = self.listener
        if listener.open >= listener.limits.max_connections:
            listener.refused("connections")
            transport.abort()
            return
        listener.open += 1
        loop = asyncio.get_running_loop()
        guard = _Guard(listener, listener.handler_factory())
        handshake: asyncio.Future[None] = loop.create_future()
        # Ended without a handshake (timeout, garbage, the client left): the guard never saw
        # the connection, so it frees the slot here.
        handshake.add_done_callback(lambda _: None if guard.made else guard.release())
        tls = _LeanSSLProtocol(
            loop,
            guard,
            listener.context(),
            handshake,
            server_side=True,
            ssl_handshake_timeout=listener.limits.header_timeout,  # type: ignore[arg-type]
            # A client that never answers the closing handshake holds its slot no longer.
            ssl_shutdown_timeout=listener.limits.header_timeout,
        )
        transport.set_protocol(tls)
        tls.connection_made(transport)

    def data_received(self, data: bytes) -> None:  # never: the TLS protocol took the transport
        raise AssertionError("data before TLS")


class Listener:
    """A TCP server whose connections get TLS and aiohttp's handler, within `limits`."""

    def __init__(
        self,
        handler_factory: Callable[[], asyncio.Protocol],
        context: Callable[[], ssl.SSLContext],
        limits: ListenerLimits,
        refused: Refused = lambda _reason: None,
    ) -> None:
        self.handler_factory, self.context, self.limits = handler_factory, context, limits
        self.refused = refused
        self.open = 0  # connections holding a slot (handshaking or established)
        self.guards: dict[asyncio.Protocol, _Guard] = {}
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen; returns the bound port (useful with port 0)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Front(self), host, port, reuse_address=True, backlog=1024
        )
        return int(self._server.sockets[0].getsockname()[1])

    def request_started(self, handler: object) -> None:
        """The headers of a request on `handler`'s connection were read: stop its timer."""
        guard = self.guards.get(handler)  # type: ignore[call-overload]
        if guard is not None:
            guard.started()

    def request_finished(self, handler: object) -> None:
        """The request was answered: the connection may idle again."""
        guard = self.guards.get(handler)  # type: ignore[call-overload]
        if guard is not None:
            guard.finished()

    async def close(self) -> None:
        """Stop accepting; connections already open are left to aiohttp's shutdown."""
        if self._server is not None:
            self._server.close()
            self._server = None
