"""A scripted HTTP server on 127.0.0.1 for error paths (an OpenAI-compatible or Elasticsearch-like peer)."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ScriptedServer:
    """An OpenAI-compatible endpoint whose next answers are scripted: (status, headers, body)."""

    url: str
    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    default: Callable[[dict[str, Any]], tuple[int, dict[str, str], bytes]] | None = None

    def script(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body, allow_nan=True).encode()
        self.answers.append((status, {"content-type": "application/json", **(headers or {})}, raw))

    def script_stream(self, events: list[object], *, cut: int | None = None) -> None:
        """A server-sent-events answer (``data: <json>`` per event; a str is sent as is, e.g. ``[DONE]``);
        ``cut``: only the first ``cut`` bytes are sent before the connection closes."""
        raw = b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)
        headers = {"content-type": "text/event-stream"}
        if cut is not None:
            headers["x-scripted-cut"] = str(cut)
        self.answers.append((200, headers, raw))


def chat_body(text: str | None, *, finish: str | None = "stop", model: str = "scripted") -> dict[str, Any]:
    """An OpenAI chat completion (``text=None``: a message without content)."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def chat_chunks(parts: list[str], *, finish: str | None = "stop", model: str = "scripted") -> list[object]:
    """The streamed form of an answer made of ``parts`` (then ``[DONE]``); ``finish=None``: no finish."""

    def chunk(delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]}

    events: list[object] = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": p}, None) for p in parts]
    if finish is not None:
        events.append(chunk({}, finish))
    events.append("[DONE]")
    return events


def embeddings_body(n: int, dims: int, value: float = 0.5) -> dict[str, Any]:
    vec = [value] + [0.0] * (dims - 1) if not math.isnan(value) else [value] * dims
    return {
        "object": "list",
        "model": "scripted",
        "data": [{"object": "embedding", "index": i, "embedding": vec} for i in range(n)],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


Answer = tuple[int, dict[str, str], bytes]


@contextmanager
def serve_http(answer: Callable[[str, dict[str, Any], str | None], Answer]) -> Iterator[int]:
    """A threaded HTTP server on 127.0.0.1 whose POSTs are answered by ``answer(path, json body,
    authorization header)``; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        #: Buffered: the status line, headers and body leave in one write when the handler returns (unbuffered,
        #: the headers go first and the body waits out the client's delayed ACK: 40 ms per answer).
        wbufsize = -1

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            status, headers, body = answer(
                self.path, json.loads(self.rfile.read(length) or b"{}"), self.headers.get("authorization")
            )
            # "x-scripted-cut: N": announce the whole body, send its first N bytes, close (a peer dying mid-answer).
            cut = headers.pop("x-scripted-cut", None)
            try:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body if cut is None else body[: int(cut)])
                if cut is not None:
                    self.wfile.flush()
                    self.close_connection = True
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer(url="")

    def answer(path: str, payload: dict[str, Any], auth: str | None) -> Answer:
        server.requests.append({"path": path, "body": payload, "auth": auth})
        if server.answers:
            return server.answers.pop(0)
        if server.default is not None:
            return server.default(payload)
        return 500, {}, b"no answer scripted"

    with serve_http(answer) as port:
        server.url = f"http://127.0.0.1:{port}/v1"
        yield server
