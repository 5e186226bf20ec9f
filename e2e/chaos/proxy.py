"""A TCP proxy in front of the API server, so the chaos run can cut one process's connections
(its watches) without restarting anything: ``python -m e2e.chaos.proxy --upstream HOST:PORT
--port-file F [--port P]`` listens on loopback (port P or a free one, written to F), relays
bytes both ways (TLS passes through untouched), and closes every open connection on
SIGUSR1. It runs as its own process so relaying does not compete with the run's event loop.

SIGUSR2 stalls it (the fencing run's ``stall`` fault): nothing is relayed any more either way and
new connections are accepted but never connected, as a network path that silently drops every
packet looks to the process (a half-open connection: requests hang until their timeouts).
SIGHUP ends the stall the way such a path is finally noticed: every stalled connection is reset
(what it held is lost), and new ones are relayed again."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path

CHUNK = 1 << 16


async def _pump(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy: Proxy, generation: int
) -> None:
    try:
        while data := await reader.read(CHUNK):
            await proxy.flowing.wait()
            if proxy.generation != generation:
                return  # reset at the end of a stall: what was held is lost
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class Proxy:
    """Relays each accepted connection to the upstream address; `drop` closes them all;
    `stall` and `resume` black-hole them for a while (see the module docstring)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.open: set[asyncio.StreamWriter] = set()
        self.dropped = 0
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.generation = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        generation = self.generation
        self.open.add(writer)
        try:
            await self.flowing.wait()  # a stalled path connects nowhere
            if self.generation == generation:
                await self._relay(reader, writer, generation)
        finally:
            self.open.discard(writer)
            writer.close()

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            return  # the API server is down (a restart): the client retries
        self.open.add(up_writer)
        try:
            await asyncio.gather(
                _pump(reader, up_writer, self, generation),
                _pump(up_reader, writer, self, generation),
            )
        finally:
            self.open.discard(up_writer)

    def drop(self) -> None:
        for writer in list(self.open):
            transport = writer.transport
            transport.abort()  # RST, as a lost network path looks to the client
        self.dropped += len(self.open) // 2

    def stall(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.generation += 1
        self.drop()
        self.flowing.set()


async def serve(upstream: str, port_file: Path, port: int = 0) -> None:
    host, _, upstream_port = upstream.rpartition(":")
    proxy = Proxy(host, int(upstream_port))
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port)
    listening = server.sockets[0].getsockname()[1]
    port_file.write_text(str(listening))  # noqa: ASYNC240 - once, before serving
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, proxy.drop)
    loop.add_signal_handler(signal.SIGUSR2, proxy.stall)
    loop.add_signal_handler(signal.SIGHUP, proxy.resume)
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
