"""How the OpenAI provider turns every bad answer into a typed error (scripted server on 127.0.0.1)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from embeddings import (
    EmbeddingConfigError,
    EmbeddingResponseError,
    EmbeddingSettings,
    EmbeddingUnavailable,
    InvalidEmbedding,
    LocalEmbedder,
    OpenAIEmbedder,
    create_embedder,
)

from .conftest import ScriptedServer, embeddings_body

KEY = "sk-very-secret-key-123"


@pytest.fixture
async def openai_embedder(scripted_server: ScriptedServer) -> AsyncIterator[OpenAIEmbedder]:
    emb = OpenAIEmbedder(model="m", dimensions=4, base_url=scripted_server.url, api_key=KEY, timeout_s=1.0)
    yield emb
    await emb.aclose()


async def test_429_is_one_request_with_retry_after(
    openai_embedder: OpenAIEmbedder, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(429, {"error": {"message": "slow down"}}, {"retry-after": "2"})
    with pytest.raises(EmbeddingResponseError) as info:
        await openai_embedder.embed_documents(["a"])
    assert info.value.status == 429
    assert info.value.retry_after == 2.0
    assert info.value.transient
    assert len(scripted_server.requests) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(
    ("status", "body", "error", "match"),
    [
        (500, {"error": {"message": "boom"}}, EmbeddingResponseError, "500"),
        (400, {"error": {"message": "bad"}}, EmbeddingResponseError, "400"),
        (200, b"<html><body>proxy error</body></html>", InvalidEmbedding, "malformed"),
        (200, b"{not json", InvalidEmbedding, "malformed"),
        (200, {"data": []}, InvalidEmbedding, "expected 2 vectors, got 0"),
        (200, embeddings_body(1, 4), InvalidEmbedding, "expected 2 vectors, got 1"),
        (200, embeddings_body(2, 3), InvalidEmbedding, "3 dimensions, expected 4"),
        (200, embeddings_body(2, 4, float("nan")), InvalidEmbedding, "NaN"),
    ],
    ids=["500", "400", "html", "bad-json", "empty-data", "wrong-count", "wrong-dims", "nan"],
)
async def test_bad_answers_are_typed_errors_without_secrets(
    openai_embedder: OpenAIEmbedder,
    scripted_server: ScriptedServer,
    status: int,
    body: object,
    error: type[Exception],
    match: str,
) -> None:
    scripted_server.script(status, body, {"content-type": "text/html"} if isinstance(body, bytes) else None)
    with pytest.raises(error, match=match) as info:
        await openai_embedder.embed_documents(["a", "b"])
    assert KEY not in str(info.value)
    assert KEY not in repr(info.value)
    assert status >= 400 or not getattr(info.value, "transient", False)
    assert scripted_server.requests[0]["auth"] == f"Bearer {KEY}"  # it was sent, only to the server


async def test_unreachable_and_slow_servers_are_unavailable(scripted_server: ScriptedServer) -> None:
    refused = OpenAIEmbedder(model="m", dimensions=4, base_url="http://127.0.0.1:9/v1", api_key=KEY, timeout_s=1)
    with pytest.raises(EmbeddingUnavailable):
        await refused.embed_query("x")
    await refused.aclose()

    def slow(payload: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.5)
        return 200, {"content-type": "application/json"}, b"{}"

    scripted_server.default = slow
    emb = OpenAIEmbedder(model="m", dimensions=4, base_url=scripted_server.url, api_key=KEY, timeout_s=0.3)
    with pytest.raises(EmbeddingUnavailable, match="Timeout"):
        await emb.embed_query("x")
    await emb.aclose()


async def test_key_never_appears_in_repr(openai_embedder: OpenAIEmbedder) -> None:
    assert KEY not in repr(openai_embedder)
    assert KEY not in repr(EmbeddingSettings(provider="openai", api_key=KEY))


def test_settings_default_to_the_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("EMBEDDINGS_PROVIDER", "EMBEDDINGS_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert isinstance(create_embedder(), LocalEmbedder)


def test_settings_select_an_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDINGS_PROVIDER", "openai")
    monkeypatch.setenv("EMBEDDINGS_MODEL", "nomic-embed-text")
    monkeypatch.setenv("EMBEDDINGS_DIMENSIONS", "768")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "ollama")
    emb = create_embedder()
    assert isinstance(emb, OpenAIEmbedder)
    assert emb.dimensions == 768
    monkeypatch.delenv("EMBEDDINGS_DIMENSIONS")
    with pytest.raises(EmbeddingConfigError, match="EMBEDDINGS_DIMENSIONS"):
        create_embedder()
