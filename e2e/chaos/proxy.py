"""A TCP proxy in front of the API server, so the chaos run can cut one process's connections
(its watches) without restarting anything: ``python -m e2e.chaos.proxy --upstream HOST:PORT
--port-file F [--port P]`` listens on loopback (port P or a free one, written to F), relays
bytes both ways (TLS passes through untouched), and closes every open connection on
SIGUSR1. It runs as its own process so relaying does not compete with the run's event loop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

CHUNK = 1 << 16


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class Proxy:
    """Relays each accepted connection to the upstream address; `drop` closes them all."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.open: set[asyncio.StreamWriter] = set()
        self.dropped = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.close()  # the API server is down (a restart): the client retries
            return
        pair = {writer, up_writer}
        self.open |= pair
        try:
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        finally:
            self.open -= pair

    def drop(self) -> None:
        for writer in list(self.open):
            transport = writer.transport
            transport.abort()  # RST, as a lost network path looks to the client
        self.dropped += len(self.open) // 2


async def serve(upstream: str, port_file: Path, port: int = 0) -> None:
    host, _, upstream_port = upstream.rpartition(":")
    proxy = Proxy(host, int(upstream_port))
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    listening = server.sockets[0].getsockname()[1]
    port_file.write_text(str(listening))  # noqa: ASYNC240 - once, before serving
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, proxy.drop)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m e2e.chaos.proxy")
    parser.add_argument("--upstream", required=True, help="HOST:PORT of the API server")
    parser.add_argument("--port-file", required=True, type=Path, help="where to write our port")
    parser.add_argument("--port", type=int, default=0, help="listen here (default: any free port)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.upstream, args.port_file, args.port))


if __name__ == "__main__":
    main()
