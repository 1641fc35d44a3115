"""The frameworks' own standard tests, with their defaults, against the real Elasticsearch (issue 51).

LangChain: ``langchain_tests.integration_tests.RetrieversIntegrationTests`` with LangChain's own result-count
name, ``k`` (not told ours), and ``VectorStoreIntegrationTests`` (sync and async) on the drop-in store with
the suite's own embeddings (``DeterministicFakeEmbedding``: a LangChain ``Embeddings`` object, as users pass
one to ``ElasticsearchStore``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests
from llama_index.core import Document as LlamaDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from embeddings import HashingEmbedder
from storage import InvalidQuery, SearchClient, SearchSettings
from storage.integrations import close_client
from storage.integrations.langchain import HybridSearchRetriever, HybridSearchStore
from storage.integrations.llama_index import HybridSearchVectorStore

from .test_framework_retrievers import QUERY, load_corpus


def _loaded_client(settings: SearchSettings) -> SearchClient:
    load_corpus(settings)
    return SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))


class TestLangChainRetrieverStandardSuite(RetrieversIntegrationTests):
    """One SearchClient (never entered: the retrievers run it on its own loop) shared by every retriever the
    suite builds; closed after each test."""

    @pytest.fixture(autouse=True)
    def _client(self, settings: SearchSettings) -> Iterator[None]:
        self.client = _loaded_client(settings)
        yield
        close_client(self.client)

    @property
    def retriever_constructor(self) -> type[HybridSearchRetriever]:
        return HybridSearchRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"client": self.client}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


def test_langchain_search_kwargs_as_tutorials_write_them(settings: SearchSettings) -> None:
    client = _loaded_client(settings)
    try:
        retriever = HybridSearchRetriever(client=client, search_kwargs={"k": 2, "filter": {"ticker": "MSFT"}})
        docs = retriever.invoke(QUERY)
        assert len(docs) == 2
        assert {d.metadata["ticker"] for d in docs} == {"MSFT"}
        assert len(retriever.invoke(QUERY, k=1)) == 1
    finally:
        close_client(client)


class TestLangChainVectorStoreStandardSuite(VectorStoreIntegrationTests):
    """The drop-in store, built as users build ``ElasticsearchStore`` (a URL, an index name, an embedding),
    on an index of its own per test."""

    @pytest.fixture
    def vectorstore(self, settings: SearchSettings) -> Iterator[VectorStore]:
        store = HybridSearchStore(index_name=settings.index, embedding=self.get_embeddings(), es_url=settings.url)
        yield store
        store.close()


def test_the_store_keeps_framework_metadata_exactly_and_filters_and_diversifies_by_it(settings: SearchSettings) -> None:
    store = HybridSearchStore(
        index_name=settings.index, embedding=VectorStoreIntegrationTests.get_embeddings(), es_url=settings.url
    )
    try:
        metadata = {"source": "a.txt", "page": 3, "score": 0.5, "tags": ["x", "y"], "nested": {"k": [1, None]}}
        ids = store.add_texts(
            ["apples and pears", "pears and plums", "plums"], metadatas=[metadata, {"source": "b.txt"}, {}]
        )
        (got,) = store.get_by_ids(ids[:1])
        assert got == Document(id=ids[0], page_content="apples and pears", metadata=metadata)  # as given
        found = store.similarity_search("pears", k=3, filter={"source": "b.txt"})
        assert [d.id for d in found] == [ids[1]]
        scored = store.similarity_search_with_score("apples and pears", k=1)
        assert scored[0][0].id == ids[0]
        assert scored[0][1] > 0
        relevance = store.similarity_search_with_relevance_scores("apples and pears", k=3)
        assert all(0.0 <= r <= 1.0 for _, r in relevance)
        mmr = store.max_marginal_relevance_search("pears", k=2, fetch_k=3, lambda_mult=0.5)
        assert len(mmr) == 2
        retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 1, "filter": {"source": "a.txt"}})
        assert [d.id for d in retriever.invoke("pears")] == [ids[0]]
        assert store.delete(ids) is True
        assert store.get_by_ids(ids) == []
    finally:
        store.close()


def test_the_store_shares_a_given_client_with_the_retrievers(settings: SearchSettings) -> None:
    client = _loaded_client(settings)
    try:
        store = HybridSearchStore(client=client)
        retriever = HybridSearchRetriever(client=client, k=2)
        ids = store.add_texts(["Zorblax quantum widget revenue"], ids=["zorblax"])
        assert ids == ["zorblax"]
        assert store.similarity_search("Zorblax quantum widget", k=1)[0].id == "zorblax"
        assert len(retriever.invoke(QUERY)) == 2
    finally:
        close_client(client)


async def test_a_langchain_elasticsearch_index_moves_into_the_store_in_one_call(
    settings: SearchSettings, es: AsyncElasticsearch
) -> None:
    old = f"{settings.index}-langchain"  # the shape ElasticsearchStore writes: text, metadata, vector
    await es.indices.create(
        index=old, mappings={"properties": {"text": {"type": "text"}, "vector": {"type": "dense_vector", "dims": 2}}}
    )
    rows = [("a", "Apple lowered its revenue guidance.", {"source": "aapl.pdf", "page": 3}), ("b", "", {"page": 1})]
    for doc_id, text, metadata in rows:
        await es.index(index=old, id=doc_id, document={"text": text, "metadata": metadata, "vector": [0.1, 0.2]})
    await es.indices.refresh(index=old)

    def move() -> None:
        store = HybridSearchStore(
            index_name=settings.index, embedding=VectorStoreIntegrationTests.get_embeddings(), es_url=settings.url
        )
        try:
            report = store.import_index(old, batch_size=1)
            assert report.indexed == ["a"]
            assert [(f.id, f.reason) for f in report.failed] == [("b", "invalid_document")]  # no text: said
            (doc,) = store.get_by_ids(["a"])
            assert doc.metadata == {"source": "aapl.pdf", "page": 3}
            assert store.similarity_search("revenue guidance", k=1, filter={"source": "aapl.pdf"})[0].id == "a"
        finally:
            store.close()

    await asyncio.to_thread(move)


# -- LlamaIndex: no shipped base class; the contract of VectorStoreIndex on the store ------------------------

LLAMA_DOCS = [
    ("d1", "Apple lowered its revenue guidance for the year.", {"ticker": "AAPL", "year": 2024}),
    ("d2", "Azure revenue grew thirty percent.", {"ticker": "MSFT", "year": 2023}),
    ("d3", "The weather service expects rain.", {"ticker": "WX", "year": 2024}),
]


def _llama_index(store: HybridSearchVectorStore) -> VectorStoreIndex:
    docs = [LlamaDocument(id_=i, text=t, metadata=m) for i, t, m in LLAMA_DOCS]
    context = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(docs, storage_context=context, embed_model=MockEmbedding(embed_dim=8))


def test_a_vector_store_index_on_the_store_retrieves_filters_and_deletes_as_on_elasticsearchstore(
    settings: SearchSettings,
) -> None:
    client = SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))
    try:
        store = HybridSearchVectorStore(client=client)  # shared with a retriever below
        index = _llama_index(store)
        hybrid = index.as_retriever(similarity_top_k=1, vector_store_query_mode="hybrid")
        (top,) = hybrid.retrieve("revenue guidance")
        assert top.node.ref_doc_id == "d1"
        assert top.node.metadata == {"ticker": "AAPL", "year": 2024}  # as it went in
        assert top.node.get_content() == LLAMA_DOCS[0][1]
        msft = MetadataFilters(filters=[MetadataFilter(key="ticker", value="MSFT")])
        filtered = index.as_retriever(similarity_top_k=3, vector_store_query_mode="hybrid", filters=msft)
        assert [n.node.ref_doc_id for n in filtered.retrieve("revenue")] == ["d2"]
        either = MetadataFilters(
            filters=[MetadataFilter(key="ticker", value="AAPL"), MetadataFilter(key="ticker", value="WX")],
            condition=FilterCondition.OR,
        )
        found = index.as_retriever(similarity_top_k=3, vector_store_query_mode="text_search", filters=either)
        assert {n.node.ref_doc_id for n in found.retrieve("revenue rain")} == {"d1", "d3"}
        assert len(index.as_retriever(similarity_top_k=2).retrieve("Azure revenue")) == 2  # default: kNN
        mmr = index.as_retriever(similarity_top_k=2, vector_store_query_mode="mmr").retrieve("revenue")
        assert len(mmr) == 2
        index.delete_ref_doc("d1")
        assert "d1" not in {n.node.ref_doc_id for n in hybrid.retrieve("revenue guidance")}
        again = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=8))
        assert (
            again.as_retriever(similarity_top_k=1, vector_store_query_mode="hybrid")
            .retrieve("Azure")[0]
            .node.ref_doc_id
            == "d2"
        )
        (node,) = store.get_nodes(filters=msft)
        assert node.get_content() == LLAMA_DOCS[1][1]
        store.delete_nodes([node.node_id])
        assert store.get_nodes(filters=msft) == []
        assert len(HybridSearchRetriever(client=client, limit=3).invoke("weather")) == 1  # the same client
        store.clear()
        assert store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="year", value="2024")])) == []
    finally:
        close_client(client)


async def test_the_llama_index_store_works_from_async_code_with_a_llama_index_embedding(
    settings: SearchSettings,
) -> None:
    store = HybridSearchVectorStore(
        index_name=settings.index, es_url=settings.url, embed_model=MockEmbedding(embed_dim=8)
    )
    try:
        nodes = [TextNode(id_=i, text=t, metadata=m) for i, t, m in LLAMA_DOCS]
        assert await store.async_add(nodes) == ["d1", "d2", "d3"]
        result = await store.aquery(
            VectorStoreQuery(query_str="rain", similarity_top_k=1, mode=VectorStoreQueryMode.HYBRID)
        )
        assert result.ids == ["d3"]
        assert result.nodes[0].metadata == {"ticker": "WX", "year": 2024}
        with pytest.raises(InvalidQuery, match="svm"):
            await store.aquery(VectorStoreQuery(query_str="rain", mode=VectorStoreQueryMode.SVM))
        await store.adelete_nodes(["d3"])
        assert [n.node_id for n in await store.aget_nodes(["d1", "d3"])] == ["d1"]
    finally:
        await store.aclose()
