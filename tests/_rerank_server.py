"""A rerank server on 127.0.0.1 for the tests: the Cohere (``/v1/rerank``, ``/v2/rerank``) and TEI
(``/rerank``) JSON, scoring each document by BM25 computed over the documents of the request (a real
relevance score, deterministic). Faults can be scripted per request: a status with headers and body, a
delay, or a transformation of the correct answer (wrong count, NaN, index out of range).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from ._scripted import Answer, serve_http

_WORD = re.compile(r"[a-z0-9]+")


def bm25_scores(query: str, documents: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """BM25 of ``query`` against each document, the IDF taken over ``documents``."""
    docs = [_WORD.findall(d.lower()) for d in documents]
    n = len(docs)
    avg = (sum(len(d) for d in docs) / n) if n else 0.0
    df = Counter(term for d in docs for term in set(d))
    terms = set(_WORD.findall(query.lower()))
    out = []
    for d in docs:
        tf = Counter(d)
        score = 0.0
        for t in terms:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                score += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / (avg or 1)))
        out.append(round(score, 6))
    return out


@dataclass
class RerankServer:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Scripted answers for the next requests: a (status, headers, body), or a function of the correct
    #: answer returning the body to send (200).
    faults: list[Answer | Callable[[Any], Any]] = field(default_factory=list)
    delay_s: float = 0.0

    def fail(self, status: int, body: object = b"", headers: dict[str, str] | None = None, times: int = 1) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        for _ in range(times):
            self.faults.append((status, {"content-type": "application/json", **(headers or {})}, raw))

    def garble(self, transform: Callable[[Any], Any], times: int = 1) -> None:
        self.faults += [transform] * times


def _answer(path: str, payload: dict[str, Any]) -> Any:
    if path.endswith("/v1/rerank") or path.endswith("/v2/rerank"):
        docs = [d if isinstance(d, str) else d.get("text", "") for d in payload["documents"]]
        scores = bm25_scores(payload["query"], docs)
        ranked = sorted(range(len(docs)), key=lambda i: -scores[i])[: payload.get("top_n") or len(docs)]
        return {
            "id": "test",
            "results": [{"index": i, "relevance_score": scores[i]} for i in ranked],
            "meta": {"billed_units": {"search_units": 1}},
        }
    scores = bm25_scores(payload["query"], payload["texts"])
    return [{"index": i, "score": scores[i]} for i in sorted(range(len(scores)), key=lambda i: -scores[i])]


@pytest.fixture
def rerank_server() -> Iterator[RerankServer]:
    with _serve() as server:
        yield server


@pytest.fixture(scope="session")
def rerank_url() -> Iterator[str]:
    """A healthy rerank server for the whole session (its base URL)."""
    with _serve() as server:
        yield server.url


@contextmanager
def _serve() -> Iterator[RerankServer]:
    server = RerankServer(url="")
    lock = threading.Lock()

    def answer(path: str, payload: dict[str, Any], auth: str | None) -> Answer:
        with lock:
            server.requests.append({"path": path, "body": payload, "auth": auth})
            fault = server.faults.pop(0) if server.faults else None
        if server.delay_s:
            time.sleep(server.delay_s)
        if isinstance(fault, tuple):
            return fault
        try:
            correct = _answer(path, payload)
        except (KeyError, TypeError):
            return 422, {}, b'{"error": "bad request"}'
        body = fault(correct) if fault is not None else correct
        return 200, {"content-type": "application/json"}, json.dumps(body, allow_nan=True).encode()

    with serve_http(answer) as port:
        server.url = f"http://127.0.0.1:{port}"
        yield server
