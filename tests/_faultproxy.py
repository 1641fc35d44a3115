"""A small asyncio TCP fault proxy (there is no Toxiproxy or netem here) for the fault tests.

Modes: ``pass``; ``latency`` (delay each upstream→client chunk by ``latency_s``); ``blackhole`` (accept,
read, never answer); ``drip`` (forward the answer ``drip_bytes`` bytes every ``drip_every_s``: a server that
answers, but slower than any budget — a per-read timeout never fires); ``refuse`` (stop listening: connect is
refused); ``reset`` (accept, read the request, answer with a TCP RST); ``cut_response`` (forward the
request, then close after ``cut_after`` bytes of the response, for the next ``cut_times`` requests: a reset
in mid-body); ``inject`` (answer the next ``inject_times`` requests itself
with ``inject_status`` / ``inject_headers`` / ``inject_body`` — a 429, a 503, an HTML page, broken JSON —
then forward the rest to the real server); ``hang_matching`` (forward every request but one whose bytes hold
``hang_pattern``, e.g. ``b"/_bulk"``: that one, and the rest of its connection, is never answered — a node that
stops answering one kind of request, such as writes). ``requests`` counts HTTP requests seen from clients,
``hung`` the requests ``hang_matching`` held.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
from typing import Any

_REQUEST_LINE = re.compile(rb"(?:^|\r\n)(GET|POST|PUT|HEAD|DELETE) /")


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.mode = "pass"
        self.latency_s = 0.0
        self.drip_bytes = 1
        self.drip_every_s = 1.0
        self.cut_after = 16
        self.cut_times = 0
        self.inject_times = 0
        self.inject_status = 503
        self.inject_headers: dict[str, str] = {}
        self.inject_body = b""
        self.injected = 0
        self.hang_pattern = b""
        self.hung = 0
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

    async def set_mode(self, mode: str, **options: Any) -> None:
        for key, value in options.items():
            setattr(self, key, value)
        self.mode = mode
        self._abort_all()  # pooled connections must not bypass the new mode
        # Let the client (same event loop) read those resets before its next request: without a loop pass
        # it could pick an aborted pooled connection, which a real server would not have reset at that instant.
        await asyncio.sleep(0.01)
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
            if self.mode == "refuse":  # accepted while set_mode("refuse") was closing the listener: no bypass
                _rst(writer)
                return
            if self.mode in ("blackhole", "reset"):
                data = await reader.read(65536)
                self.requests += len(_REQUEST_LINE.findall(data))
                if self.mode == "reset":
                    _rst(writer)
                    return
                await asyncio.sleep(3600)
                return
            first = b""
            if self.mode == "inject":
                first = await self._answer_injected(reader, writer)
                if not first:
                    return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            self._writers.add(up_writer)
            if first:
                self.requests += 1
                up_writer.write(first)
            await asyncio.gather(self._pipe(reader, up_writer, True), self._pipe(up_reader, writer, False))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # The loop is shutting the handler down (a held blackhole, a drip): end quietly. A handler that ends
            # cancelled makes Python 3.11's stream callback log a CancelledError as an unhandled exception.
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer_injected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """Answer requests on this connection while injections remain; return the first one to forward."""
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return b""
            match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            request = head + (await reader.readexactly(int(match.group(1))) if match else b"")
            if self.inject_times <= 0:
                return request
            self.inject_times -= 1
            self.requests += 1
            self.injected += 1
            headers = {"content-type": "application/json", **self.inject_headers}
            lines = [f"HTTP/1.1 {self.inject_status} Injected"] + [f"{k}: {v}" for k, v in headers.items()]
            lines.append(f"content-length: {len(self.inject_body)}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + self.inject_body)
            await writer.drain()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        try:
            while data := await reader.read(65536):
                if upstream:
                    self.requests += len(_REQUEST_LINE.findall(data))
                    if self.mode == "hang_matching" and self.hang_pattern and self.hang_pattern in data:
                        self.hung += 1
                        await asyncio.sleep(3600)
                        return
                elif self.mode == "latency":
                    await asyncio.sleep(self.latency_s)
                elif self.mode == "drip":
                    for at in range(0, len(data), self.drip_bytes):
                        writer.write(data[at : at + self.drip_bytes])
                        await writer.drain()
                        await asyncio.sleep(self.drip_every_s)
                    continue
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
