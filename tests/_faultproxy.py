"""A small asyncio TCP fault proxy (there is no Toxiproxy or netem here) for the fault tests.

Modes: ``pass``; ``latency`` (delay each upstream→client chunk by ``latency_s``); ``blackhole`` (accept,
read, never answer); ``refuse`` (stop listening: connect is refused); ``reset`` (accept, read the request,
answer with a TCP RST); ``cut_response`` (forward the request, then close after ``cut_after`` bytes of the
response, for the next ``cut_times`` requests). ``requests`` counts HTTP requests seen from clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct

_REQUEST_LINE = re.compile(rb"(?:^|\r\n)(GET|POST|PUT|HEAD|DELETE) /")


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode = "pass"
        self.latency_s = 0.0
        self.cut_after = 16
        self.cut_times = 0
        self.requests = 0
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        await self._stop_listening()
        self._abort_all()

    async def set_mode(self, mode: str, **options: float) -> None:
        for key, value in options.items():
            setattr(self, key, value)
        self.mode = mode
        self._abort_all()  # pooled connections must not bypass the new mode
        if mode == "refuse":
            await self._stop_listening()
        elif self._server is None:
            await self.start()

    async def _stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def _abort_all(self) -> None:
        for writer in list(self._writers):
            _rst(writer)
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            if self.mode in ("blackhole", "reset"):
                data = await reader.read(65536)
                self.requests += len(_REQUEST_LINE.findall(data))
                if self.mode == "reset":
                    _rst(writer)
                    return
                await asyncio.sleep(3600)
                return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            self._writers.add(up_writer)
            await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        try:
            while data := await reader.read(65536):
                if upstream:
                    self.requests += len(_REQUEST_LINE.findall(data))
                elif self.mode == "latency":
                    await asyncio.sleep(self.latency_s)
                elif self.mode == "cut_response" and self.cut_times > 0:
                    self.cut_times -= 1
                    writer.write(data[: int(self.cut_after)])
                    await writer.drain()
                    _rst(writer)
                    return
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()


def _rst(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
