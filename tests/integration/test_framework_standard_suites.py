"""The frameworks' own standard tests, with their defaults, against the real Elasticsearch (issue 51).

LangChain: ``langchain_tests.integration_tests.RetrieversIntegrationTests`` with LangChain's own result-count
name, ``k`` (not told ours), and ``VectorStoreIntegrationTests`` (sync and async) on the drop-in store with
the suite's own embeddings (``DeterministicFakeEmbedding``: a LangChain ``Embeddings`` object, as users pass
one to ``ElasticsearchStore``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

from embeddings import HashingEmbedder
from storage import SearchClient, SearchSettings
from storage.integrations import close_client
from storage.integrations.langchain import HybridSearchRetriever, HybridSearchStore

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
