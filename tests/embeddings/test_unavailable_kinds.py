"""How each HTTP provider (the OpenAI-compatible embedder and chat model, the rerank client) says it got no
answer: a ``ProviderUnavailable`` whose ``kind`` tells refused (nothing listens), timeout, and disconnected
(the server took the request and closed the connection without answering — a crashed server: llama.cpp's
died this way with SIGSEGV on a CPU its build did not fit) apart, and whose message names the address."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from embeddings import HttpReranker, OpenAIChat, OpenAIEmbedder, ProviderUnavailable

Call = Callable[[str, float], Awaitable[object]]


async def _embed(url: str, timeout_s: float) -> object:
    emb = OpenAIEmbedder(model="m", dimensions=4, base_url=f"{url}/v1", api_key="k", timeout_s=timeout_s)
    try:
        return await emb.embed_query("x")
    finally:
        await emb.aclose()


async def _chat(url: str, timeout_s: float) -> object:
    llm = OpenAIChat(model="m", base_url=f"{url}/v1", timeout_s=timeout_s)
    try:
        return await llm.complete([{"role": "user", "content": "hi"}])
    finally:
        await llm.aclose()


async def _rerank(url: str, timeout_s: float) -> object:
    reranker = HttpReranker(url, api="tei", timeout_s=timeout_s)
    try:
        return await reranker.rerank("q", ["a", "b"])
    finally:
        await reranker.aclose()


PROVIDERS: dict[str, Call] = {"embeddings": _embed, "chat": _chat, "rerank": _rerank}


@pytest.fixture
async def peer() -> AsyncIterator[tuple[str, list[str]]]:
    """A TCP server that reads a request and then does what ``behaviour[0]`` says: ``close`` (no answer, the
    connection closed: a crash) or ``hold`` (never answers)."""
    behaviour = ["close"]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(65536)
        if behaviour[0] == "hold":
            await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", behaviour
    server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_server_that_closes_the_connection_without_answering_is_unavailable_as_disconnected(
    peer: tuple[str, list[str]], provider: str
) -> None:
    url, _ = peer
    with pytest.raises(ProviderUnavailable, match="closed the connection without a whole answer") as info:
        await PROVIDERS[provider](url, 5.0)
    assert info.value.kind == "disconnected"
    assert url in str(info.value)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_nothing_listening_is_unavailable_as_refused(provider: str) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(ProviderUnavailable, match="refused the connection") as info:
        await PROVIDERS[provider](url, 5.0)
    assert info.value.kind == "refused"
    assert url in str(info.value)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_server_that_never_answers_is_unavailable_as_timeout(
    peer: tuple[str, list[str]], provider: str
) -> None:
    url, behaviour = peer
    behaviour[0] = "hold"
    with pytest.raises(ProviderUnavailable, match="timed out") as info:
        await PROVIDERS[provider](url, 0.2)
    assert info.value.kind == "timeout"
