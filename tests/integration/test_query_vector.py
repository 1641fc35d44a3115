"""A query's own vector (made with the client's model by the caller, or by the framework's embedding a store was
built with): the kNN leg searches it instead of embedding the text; a vector from another model is refused,
never searched. Against the real Elasticsearch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from embeddings import HashingEmbedder
from storage import Document, InvalidQuery, SearchClient, SearchSettings
from storage.integrations.langchain import HybridSearchStore
from storage.integrations.llama_index import HybridSearchVectorStore

TEXTS = {
    "kiln": "The ceramic kiln reached its firing temperature in the winter trial.",
    "glaze": "A glaze recipe for stoneware, fired twice.",
    "cell": "Glioblastoma cells migrate along blood vessels.",
    "bond": "Treasury bond yields rose after the announcement.",
}


async def test_the_knn_leg_searches_the_given_vector_as_it_would_the_embedded_text(client: SearchClient) -> None:
    await client.index_documents([Document(id=i, text=t) for i, t in TEXTS.items()], refresh=True)
    query = "firing temperature of a ceramic kiln"
    vector = await client.embedder.embed_query(query)
    by_text = await client.search(query, mode="knn", limit=4)
    by_vector = await client.search("", mode="knn", query_vector=vector, limit=4)
    assert by_vector.ids == by_text.ids
    assert [h.similarity for h in by_vector.hits] == pytest.approx([h.similarity for h in by_text.hits])
    hybrid = await client.search("kiln", query_vector=vector, limit=4)  # BM25 on the words, kNN on the vector
    assert hybrid.hits[0].id == "kiln"
    assert set(hybrid.hits[0].ranks) == {"bm25", "knn"}
    with pytest.raises(InvalidQuery, match="query_vector has 3 dimensions; this client's model"):
        await client.search("", mode="knn", query_vector=[0.1, 0.2, 0.3])


def test_langchain_searches_by_a_vector_its_own_embedding_made_and_refuses_others(settings: SearchSettings) -> None:
    embedding = DeterministicFakeEmbedding(size=16)
    store = HybridSearchStore(index_name=settings.index, es_url=settings.url, embedding=embedding)
    ours = HybridSearchStore(index_name=settings.index, es_url=settings.url)  # our own embedder
    try:
        store.add_texts(list(TEXTS.values()), [{"topic": i} for i in TEXTS], ids=list(TEXTS))
        vector = embedding.embed_query(TEXTS["bond"])
        assert [d.id for d in store.similarity_search_by_vector(vector, k=1)] == ["bond"]
        scored = store.similarity_search_by_vector_with_relevance_scores(vector, k=2)
        assert scored[0][0].id == "bond"
        assert scored[0][1] == pytest.approx(1.0, abs=0.01)  # the same vector: similarity 1
        assert 0.0 <= scored[1][1] < scored[0][1]
        assert [d.id for d in store.similarity_search_by_vector(vector, k=4, filter={"topic": "kiln"})] == ["kiln"]
        with pytest.raises(InvalidQuery, match="embeds with its own model"):
            ours.similarity_search_by_vector(vector)
    finally:
        store.close()
        ours.close()


class _Hashing(BaseEmbedding):
    """A LlamaIndex embedding (the framework's own type) over the deterministic hashing embedder."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return HashingEmbedder(dimensions=64).embed_one(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_query_embedding(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


async def test_llama_index_searches_a_query_embedding_alone_when_its_embed_model_made_it(
    settings: SearchSettings,
) -> None:
    model = _Hashing()
    store = HybridSearchVectorStore(index_name=settings.index, es_url=settings.url, embed_model=model)
    ours = HybridSearchVectorStore(
        index_name=settings.index, es_url=settings.url, embedder=HashingEmbedder(dimensions=64)
    )
    try:
        await store.async_add([TextNode(id_=i, text=t) for i, t in TEXTS.items()])
        vector = model.get_query_embedding(TEXTS["glaze"])
        found = await store.aquery(VectorStoreQuery(query_embedding=vector, similarity_top_k=2))
        assert found.ids
        assert found.ids[0] == "glaze"
        assert found.similarities
        assert found.similarities[0] == pytest.approx(1.0, abs=0.01)
        with pytest.raises(InvalidQuery, match="hybrid and text_search need the text"):
            await store.aquery(
                VectorStoreQuery(query_embedding=vector, similarity_top_k=2, mode=VectorStoreQueryMode.HYBRID)
            )
        with pytest.raises(InvalidQuery, match="embeds with its own model"):
            await ours.aquery(VectorStoreQuery(query_embedding=vector, similarity_top_k=2))
    finally:
        await store.aclose()
        await ours.aclose()


class _GatedEmbedder(HashingEmbedder):
    """Embeds a query only once ``released`` is set (a slow model: what the BM25 leg must not wait for)."""

    def __init__(self, released: asyncio.Event, sent: list[str]) -> None:
        super().__init__(dimensions=64)
        self._released, self._sent = released, sent

    async def embed_query(self, text: str) -> list[float]:
        self._sent.append("embedding")
        async with asyncio.timeout(10):  # (never reached: the BM25 request releases it)
            await self._released.wait()
        return await super().embed_query(text)


async def test_the_knn_leg_starts_first_and_the_bm25_request_is_sent_while_the_query_is_embedded(
    settings: SearchSettings,
) -> None:
    released, sent = asyncio.Event(), []
    async with SearchClient.from_settings(settings, embedder=_GatedEmbedder(released, sent)) as client:
        await client.index_documents([Document(id=i, text=t) for i, t in TEXTS.items()], refresh=True)
        transport = client.elasticsearch.transport  # (shared by every options() copy of the client)
        perform = transport.perform_request

        async def recording(method: str, target: str, **kwargs: Any) -> Any:
            body = kwargs.get("body") or {}
            if target.endswith("/_search"):
                leg = "knn" if "knn" in body else "fetch" if "ids" in str(body.get("query")) else "bm25"
                sent.append(leg)
                if leg == "bm25":
                    released.set()  # the embedder answers only once the BM25 request has gone out
            return await perform(method, target, **kwargs)

        transport.perform_request = recording  # type: ignore[method-assign]
        response = await client.search("kiln temperature", limit=2)
        assert sent == ["embedding", "bm25", "knn", "fetch"]  # BM25 on the wire while the query was embedded
        assert not response.degraded
        assert response.hits[0].id == "kiln"

        sent.clear()  # a vector at hand: the kNN leg (the longer path) is the first request out
        vector = await HashingEmbedder(dimensions=64).embed_query("kiln temperature")
        response = await client.search("kiln temperature", query_vector=vector, limit=2)
        assert sent == ["knn", "bm25", "fetch"]
        assert list(response.legs) == ["bm25", "knn"]  # (reported in the usual order)
